"""Importing lancedb without the eager half second of its REST namespace client, which lodex never calls."""

import importlib.abc
import importlib.machinery
import sys
import threading
from types import ModuleType
from typing import Any

# lancedb 0.40 imports `lance_namespace`, whose `__init__` imports the generated REST client package, whose own
# `__init__` imports every API module: ~300 pydantic `validate_call` methods built at import, ~0.5 s of a cold
# `lodex search`'s 1.8 s on a 2-core Xeon. The client's models (which lance_namespace re-exports) are imported as
# before; only the package's own `__init__` waits until something asks the package for a name it lacks
# (`from lance_namespace_urllib3_client import ApiClient`), and then runs in full. Pylance made the same change
# upstream (lance-format/lance#9273); lancedb has not.
CLIENT = "lance_namespace_urllib3_client"
_finder_lock = threading.Lock()


class _DeferredInit(importlib.abc.Loader):
    """Runs a package's `__init__` on the first missing attribute instead of at import; submodules load as usual."""

    def __init__(self, real: importlib.abc.Loader) -> None:
        self.real = real

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.real.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        lock = threading.RLock()

        def __getattr__(name: str) -> Any:
            with lock:
                if module.__dict__.pop("__getattr__", None) is not None:
                    self.real.exec_module(module)  # SourceFileLoader has it
            return module.__dict__[name] if name in module.__dict__ else object.__getattribute__(module, name)

        setattr(module, "__getattr__", __getattr__)  # noqa: B010 - PEP 562: asked for names it lacks (mypy refuses assigning a module method)


class _ClientFinder(importlib.abc.MetaPathFinder):
    """Finds the REST client package as the path finder would, with its `__init__` deferred."""

    def find_spec(self, fullname: str, path: Any, target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != CLIENT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _DeferredInit(spec.loader)
        return spec


def import_lancedb() -> ModuleType:
    """The lancedb module, imported (once per process) with the REST client's package `__init__` deferred."""
    if "lancedb" not in sys.modules:
        with _finder_lock:
            if CLIENT not in sys.modules and not any(isinstance(f, _ClientFinder) for f in sys.meta_path):
                sys.meta_path.insert(0, _ClientFinder())
    import lancedb as module

    return module
