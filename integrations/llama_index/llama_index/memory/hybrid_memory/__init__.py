"""LlamaIndex memory block backed by hybrid-memory (vector + BM25 + tag search).

Example::

    from llama_index.core.memory import Memory
    from llama_index.memory.hybrid_memory import HybridMemoryBlock

    memory = Memory.from_defaults(memory_blocks=[HybridMemoryBlock(path="./memory")])
"""

from llama_index.memory.hybrid_memory.base import DEFAULT_LINE_FORMAT, HybridMemoryBlock

__all__ = ["DEFAULT_LINE_FORMAT", "HybridMemoryBlock"]
