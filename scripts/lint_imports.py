"""The layer check (`make test`): import-linter over lodex.api, lodex.search, lodex.indexer, lodex.encoders,
lodex.store and lodex.text. Those are folders of the checkout mapped into the regular package `lodex` (lodex/, the
Python API), and grimp takes a subpackage as a root only below a namespace package: told here to take them, it reads
each folder as its layer."""

import sys

from grimp.adaptors.packagefinder import ImportLibPackageFinder
from importlinter.cli import lint_imports_command

ImportLibPackageFinder._has_a_non_namespace_parent = lambda self, spec: False  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(lint_imports_command())
