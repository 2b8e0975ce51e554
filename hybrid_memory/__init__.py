"""hybrid-memory: hybrid (vector + BM25 + tag) memory for agents.

``HybridMemory`` is the store; ``HybridRetriever`` is one retriever for both LangChain
and LlamaIndex.

Importing this package is light: the errors and the result types are loaded with it; every
other public name (the store, its settings, export and import, the retriever) is loaded
on first use, so that a command that only talks to another process (``hybrid-memory
--help``, a read on a path another process holds) loads neither Chroma, numpy, pydantic
nor a model, and importing the package does not import LangChain or LlamaIndex.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hybrid_memory._model.errors import (
    DuplicateIdError,
    EmbeddingError,
    EmbeddingMismatchError,
    HybridMemoryError,
    IndexFileError,
    InvalidInputError,
    MemoryNotFoundError,
    MissingDependencyError,
    StoreError,
    StoreNotFoundError,
)
from hybrid_memory._model.hosts import is_loopback
from hybrid_memory._model.results import Hit, Memory, SearchResult, StoreStats, TimeWindow
from hybrid_memory._model.write_outcomes import (
    AddResult,
    DeleteReport,
    SimilarMemory,
    WriteReport,
)

if TYPE_CHECKING:
    from hybrid_memory._memory.memory import HybridMemory
    from hybrid_memory._model.settings import HybridMemorySettings
    from hybrid_memory._retriever import HybridRetriever
    from hybrid_memory._transfer.transfer import (
        ImportReport,
        export_lines,
        export_memories,
        import_memories,
    )

__version__ = "0.1.0"

__all__ = [
    "AddResult",
    "DeleteReport",
    "DuplicateIdError",
    "EmbeddingError",
    "EmbeddingMismatchError",
    "Hit",
    "HybridMemory",
    "HybridMemoryError",
    "HybridMemorySettings",
    "HybridRetriever",
    "ImportReport",
    "IndexFileError",
    "InvalidInputError",
    "Memory",
    "MemoryNotFoundError",
    "MissingDependencyError",
    "SearchResult",
    "SimilarMemory",
    "StoreError",
    "StoreNotFoundError",
    "StoreStats",
    "TimeWindow",
    "WriteReport",
    "export_lines",
    "export_memories",
    "import_memories",
    "is_loopback",
]

#: The public names loaded on first use, and the private module each comes from.
_LAZY = {
    "HybridMemory": "hybrid_memory._memory.memory",
    "HybridMemorySettings": "hybrid_memory._model.settings",
    "HybridRetriever": "hybrid_memory._retriever",
    "ImportReport": "hybrid_memory._transfer.transfer",
    "export_lines": "hybrid_memory._transfer.transfer",
    "export_memories": "hybrid_memory._transfer.transfer",
    "import_memories": "hybrid_memory._transfer.transfer",
}
# The retriever keeps its module: LangChain serialises a retriever under its module path.
_OWN_MODULE = frozenset({"HybridRetriever"})


def _show_as_public(value: Any) -> None:
    # Public names show as ``hybrid_memory.X`` (in tracebacks, reprs, ``help()``,
    # pickles), not as the private module that defines them, as httpx does.
    value.__module__ = __name__


for _name in __all__:
    if _name not in _LAZY:
        _show_as_public(globals()[_name])
del _name


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hybrid_memory' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    if name not in _OWN_MODULE:
        _show_as_public(value)
        globals()[name] = value  # the next lookup does not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
