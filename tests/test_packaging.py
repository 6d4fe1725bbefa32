"""The package as a wheel installs it: `lodex` (lodex/) with lodex.api, .search, .indexer, .encoders, .store and
.text (the layer folders) inside, importable from anywhere, and typed: mypy sees the Python API's result types and
refuses a wrong call."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
USE = """import lodex

with lodex.open("x") as index:
    reveal_type(index.search("q", 3).results[0].passages[0])
    reveal_type(lodex.Client("http://127.0.0.1:8765").documents().documents[0])
    index.search(3)
"""


@pytest.mark.slow
def test_a_wheel_holds_one_typed_lodex_package(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(REPO)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    site = tmp_path / "site"
    with zipfile.ZipFile(next(wheels.glob("lodex-*.whl"))) as wheel:
        names = set(wheel.namelist())
        wheel.extractall(site)
    assert {
        "lodex/__init__.py",
        "lodex/py.typed",
        "lodex/api/library.py",
        "lodex/search/results.py",
        "lodex/encoders/encoder.py",
        "lodex/encoders/data/calibration.txt",
        "lodex/indexer/readers/readers.py",
        "lodex/indexer/pdf/pdf_reader.py",
        "lodex/indexer/chunking/chunker.py",
        "lodex/store/errors.py",
        "lodex/text/terms.py",
    } <= names
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import lodex, lodex.api.library, lodex.store.errors; "
        "print(lodex.__file__, lodex.api.library.__file__, lodex.open.__module__)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(site)], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(site / "lodex" / "__init__.py"), str(site / "lodex" / "api" / "library.py"), "lodex.api.library"]
    (tmp_path / "use.py").write_text(USE)
    # lodex from the wheel alone (MYPYPATH); the libraries it imports are not analyzed (--no-site-packages: 17 s -> 3 s)
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental", "--no-site-packages", "--follow-imports=silent", "--ignore-missing-imports", "use.py"],
        cwd=tmp_path,
        env={"MYPYPATH": str(site), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert 'Revealed type is "lodex.search.results.Passage"' in checked.stdout, checked.stdout
    assert 'Revealed type is "lodex.api.models.DocumentOut"' in checked.stdout
    assert 'use.py:6: error: Argument 1 to "search" of "Application" has incompatible type "int"; expected "str"' in checked.stdout
