"""The package's size rules, checked: no module over MAX_MODULE_LINES lines and no function (nested ones counted in
their own right) over MAX_FUNCTION_LINES, but for the few exceptions listed here, each with its reason.

usage: python scripts/check_sizes.py    (exit 1 and one line per breach; `make test` runs it)
"""

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("api", "indexer", "search", "encoders", "store", "text", "lodex")
MAX_MODULE_LINES = 300
MAX_FUNCTION_LINES = 60
# "path" (a module) or "path:qualified.name" (a function) -> why it may stay larger
ALLOWED: dict[str, str] = {}


def oversized(root: Path = ROOT) -> dict[str, str]:
    """Every module and function over its limit, "path" or "path:qualified.name" -> what it measures."""
    found = {}
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*.py")):
            name = path.relative_to(root).as_posix()
            source = path.read_text(encoding="utf-8")
            lines = source.count("\n")
            if lines > MAX_MODULE_LINES:
                found[name] = f"{lines} lines (at most {MAX_MODULE_LINES})"
            found |= {
                f"{name}:{qualified}": f"{length} lines (at most {MAX_FUNCTION_LINES})"
                for qualified, length in _functions(ast.parse(source))
                if length > MAX_FUNCTION_LINES
            }
    return found


def breaches(root: Path = ROOT) -> list[str]:
    """One line per module or function over its limit and not in ALLOWED, and per ALLOWED entry no longer over it."""
    found = oversized(root)
    return [f"{key}: {what}" for key, what in found.items() if key not in ALLOWED] + [
        f"{key}: listed in ALLOWED but within the limits now: take it off the list" for key in ALLOWED if key not in found
    ]


def _functions(tree: ast.AST, prefix: str = "") -> list[tuple[str, int]]:
    """(qualified name, lines) of every function and method in `tree`, nested ones too."""
    out = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            qualified = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                out.append((qualified, (node.end_lineno or node.lineno) - node.lineno + 1))
            out += _functions(node, qualified + ".")
        else:
            out += _functions(node, prefix)
    return out


def main() -> int:
    found = breaches()
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
