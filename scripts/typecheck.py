"""The type check (`make test`): mypy over the package as `lodex.*`, the names every module imports. The layer
folders install under lodex by setuptools' package-dir mapping, which an editable install serves through an import
hook that mypy and IDEs cannot follow (every `lodex.*` import was `Any` to them); this script lays the package out as
it installs — build/typecheck/lodex with links to lodex/'s files and the layer folders — and runs mypy on it, so a call
across packages is checked against the real signature. Point an IDE's extra paths at build/typecheck
(and typings/, stubs for the untyped libraries) for the same."""

import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FARM = ROOT / "build" / "typecheck"
LAYERS = ("api", "search", "indexer", "encoders", "store", "text")


def lay_out() -> None:
    """build/typecheck/lodex: lodex/'s own files and the layer folders, as links (made anew each run)."""
    package = FARM / "lodex"
    shutil.rmtree(FARM, ignore_errors=True)
    package.mkdir(parents=True)
    for path in (ROOT / "lodex").iterdir():
        if path.suffix in (".py", ".typed"):
            (package / path.name).symlink_to(os.path.relpath(path, package))
    for layer in LAYERS:
        (package / layer).symlink_to(os.path.relpath(ROOT / layer, package), target_is_directory=True)


if __name__ == "__main__":
    lay_out()
    from mypy import api

    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"), *sys.argv[1:]])
    sys.stdout.write(out.replace(str(FARM / "lodex") + "/", "").replace("build/typecheck/lodex/", ""))
    sys.stderr.write(err)
    sys.exit(status)
