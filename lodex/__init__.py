"""lodex: local semantic search for folders of long documents. The Python API: `lodex.open(data_dir)` searches and
reads an index in this process, `lodex.Client(url, key)` a running `lodex serve`, with the same methods (`LodexAPI`)
and types.
Its names load on first use, so that `import lodex.api.cli` (the `lodex` command) stays quick."""

from importlib import import_module as _import_module
from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lodex.api.application import Application as Index
    from lodex.api.http.client import Client, RemoteError
    from lodex.api.library import open
    from lodex.api.models import DocumentListOut as DocumentPage
    from lodex.api.models import DocumentOut as Document
    from lodex.api.models import IndexStatus
    from lodex.api.models import TextOut as TextWindow
    from lodex.api.protocol import LodexAPI
    from lodex.search.results import DocumentHit, Passage, SearchResponse
    from lodex.store.errors import LodexError

# public name → (module, its name there)
_NAMES = {
    "Client": ("lodex.api.http.client", "Client"),
    "RemoteError": ("lodex.api.http.client", "RemoteError"),
    "Index": ("lodex.api.application", "Application"),
    "open": ("lodex.api.library", "open"),
    "LodexAPI": ("lodex.api.protocol", "LodexAPI"),
    "Document": ("lodex.api.models", "DocumentOut"),
    "DocumentPage": ("lodex.api.models", "DocumentListOut"),
    "IndexStatus": ("lodex.api.models", "IndexStatus"),
    "TextWindow": ("lodex.api.models", "TextOut"),
    "SearchResponse": ("lodex.search.results", "SearchResponse"),
    "DocumentHit": ("lodex.search.results", "DocumentHit"),
    "Passage": ("lodex.search.results", "Passage"),
    "LodexError": ("lodex.store.errors", "LodexError"),
}

try:
    __version__ = _metadata.version("lodex")
except _metadata.PackageNotFoundError:  # a checkout on sys.path, not installed
    __version__ = "0.0.0+unknown"

__all__ = sorted([*_NAMES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _NAMES:
        module, attr = _NAMES[name]
        value = getattr(_import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'lodex' has no attribute {name!r}")
