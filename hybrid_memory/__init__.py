"""hybrid-memory: hybrid (vector + BM25 + tag) memory for agents.

``HybridMemory`` is the store; ``HybridRetriever`` (loaded on first use, so importing
this package does not import LangChain or LlamaIndex) is one retriever for both
LangChain and LlamaIndex.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from hybrid_memory._memory.memory import HybridMemory
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
)
from hybrid_memory._model.hosts import is_loopback
from hybrid_memory._model.results import Hit, Memory, SearchResult, StoreStats, TimeWindow
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.write_outcomes import AddResult, DeleteReport, WriteReport
from hybrid_memory._transfer.transfer import (
    ImportReport,
    export_lines,
    export_memories,
    import_memories,
)

if TYPE_CHECKING:
    from hybrid_memory._retriever import HybridRetriever

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
    "StoreError",
    "StoreStats",
    "TimeWindow",
    "WriteReport",
    "export_lines",
    "export_memories",
    "import_memories",
    "is_loopback",
]


# Public names show as ``hybrid_memory.X`` (in tracebacks, reprs, ``help()``, pickles),
# not as the private module that defines them, as httpx does. Not HybridRetriever: it is
# loaded lazily, and LangChain serialises a retriever under its module path.
for _name in __all__:
    if _name != "HybridRetriever":
        globals()[_name].__module__ = __name__
del _name


def __getattr__(name: str) -> Any:
    # The retriever imports LangChain and LlamaIndex (seconds); load it only when asked for.
    if name == "HybridRetriever":
        from hybrid_memory._retriever import HybridRetriever

        return HybridRetriever
    raise AttributeError(f"module 'hybrid_memory' has no attribute {name!r}")
