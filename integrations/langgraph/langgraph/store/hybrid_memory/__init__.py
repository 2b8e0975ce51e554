"""LangGraph store backed by hybrid-memory (vector + BM25 + tag search).

::

    from langgraph.store.hybrid_memory import HybridMemoryStore

    store = HybridMemoryStore(path="./memory")
    graph = builder.compile(store=store)
"""

from langgraph.store.hybrid_memory._async_store import AsyncHybridMemoryStore
from langgraph.store.hybrid_memory.store import HybridIndexConfig, HybridMemoryStore

__all__ = ["AsyncHybridMemoryStore", "HybridIndexConfig", "HybridMemoryStore"]
