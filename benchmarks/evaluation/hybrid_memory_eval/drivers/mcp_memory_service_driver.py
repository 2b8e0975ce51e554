"""mcp-memory-service as an evaluation peer: its sqlite-vec storage class, its hybrid search.

Runs in the peer's own virtual environment (``hybrid-memory peers install
mcp-memory-service``) and speaks the protocol of ``_protocol.py`` on stdin/stdout.
Standard library and mcp-memory-service only. Driven through the Python API of its local
backend, ``mcp_memory_service.storage.sqlite_vec.SqliteVecMemoryStorage``, not over MCP:

- A fresh database file in a temporary directory (deleted on close); ``initialize()``
  with the package's defaults.
- The embedding model: the storage object's ``embedding_model`` is replaced, after
  ``initialize()``, by an object with the same ``encode(texts, convert_to_numpy)``
  method that looks up the all-MiniLM-L6-v2 vectors the harness sent (its own default
  model is all-MiniLM-L6-v2 too, 384 dimensions). Without its ML extra installed the
  package starts on its hash-embedding fallback, which is replaced before anything is
  stored; a text without a vector fails the request (the library logs and swallows
  embedder errors, so the driver checks for misses after every call). Its in-process
  embedding cache is switched off so no vector made before the swap can be served.
- ``add``: ``store_batch([Memory(content=text, content_hash=generate_content_hash(text),
  metadata={"record_id": id})])``, the storage class's batch write (one transaction,
  batched embedding; exact-content dedup only; the semantic dedup of single ``store()``
  calls is not part of it). No tags: peers index the text alone (the package then tags
  a memory ``untagged``, which its search does not use).
- ``search``: ``search_memories(query=query, mode="hybrid", limit=k)``: its hybrid
  search (``retrieve_hybrid``: FTS5 bm25 with its trigram tokenizer, every query word of
  3+ characters OR-ed, and sqlite-vec cosine KNN, ``2k`` candidates from each, fused by
  its default ``weighted_average`` with keyword weight 0.3 and semantic weight 0.7, the
  bm25 score mapped to ``x / (1 + x)``). Every search setting is the package's default
  (the driver clears every ``MCP_*`` variable, then points ``MCP_MEMORY_BASE_DIR``, the
  package's home for backups and archives, at the temporary directory).

For the scale benchmark: ``add_one`` is the package's single add, ``store(memory)``
(what its ``store_memory`` tool calls); fields named in ``filter_fields`` are stored as
tags ``"field:value"``, and a search with a filter asks ``search_memories(...,
tags=["field:value"])``, the package's own filter (it over-fetches ``5 * limit`` hybrid
hits, then keeps those with the tag).

mcp-memory-service keys a memory by the hash of its lower-cased, stripped text, so two
records with the same text are one memory: a hit on it answers every record id with that
text, in the order they were added (other peers return such records side by side too).
"""

from __future__ import annotations

import asyncio
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from _protocol import Vectors, serve


def filter_tags(metadata: dict[str, Any], fields: Sequence[str]) -> list[str]:
    """The tags that stand for metadata fields: ``"field:value"`` for each field named."""
    return [f"{field}:{metadata[field]}" for field in fields if field in metadata]


class LookupModel:
    """Stands in for the package's embedding model: vectors by text."""

    embedding_dimension = 384

    def __init__(self, vectors: Vectors) -> None:
        self._vectors = vectors

    def encode(self, texts: Sequence[str], convert_to_numpy: bool = False, **_: Any) -> Any:
        found = [self._vectors.get(text) for text in texts]
        if convert_to_numpy:
            import numpy  # installed with the package

            return numpy.asarray(found, dtype=numpy.float32)
        return found


class McpMemoryServiceBackend:
    def __init__(self) -> None:
        # The package's own defaults whatever the caller's environment says, and its
        # home (backups, archives), which it creates on import, in the temporary directory.
        for name in [n for n in os.environ if n.startswith(("MCP_", "mcpMemory"))]:
            del os.environ[name]
        self._dir = tempfile.mkdtemp(prefix="hybrid-memory-peer-mms-")
        os.environ["MCP_MEMORY_BASE_DIR"] = self._dir
        self._loop = asyncio.new_event_loop()
        try:
            # The peer library lives in this virtual environment only, not in
            # hybrid-memory's (hence no static import: hybrid-memory's dependency check
            # reads its sources).
            sqlite_vec = importlib.import_module("mcp_memory_service.storage.sqlite_vec")
            self._memory_class = importlib.import_module("mcp_memory_service.models.memory").Memory
            self._content_hash = importlib.import_module(
                "mcp_memory_service.utils.hashing"
            ).generate_content_hash
            self.storage = sqlite_vec.SqliteVecMemoryStorage(os.path.join(self._dir, "memory.db"))
            self._loop.run_until_complete(self.storage.initialize())
            self.vectors = Vectors()
            self.storage.embedding_model = LookupModel(self.vectors)
            self.storage.embedding_dimension = LookupModel.embedding_dimension
            self.storage.embedding_backend_degraded = False  # the vectors are the model's
            self.storage.enable_cache = False
        except BaseException:
            self._loop.close()
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self._ids: dict[str, list[str]] = {}  # content hash -> our record ids
        config = importlib.import_module("mcp_memory_service.config")
        self.info = {
            "library": "mcp-memory-service",
            "version": version("mcp-memory-service"),
            "store": f"sqlite-vec {version('sqlite-vec')}",
            "search": (
                f"search_memories(mode='hybrid'): {config.MCP_HYBRID_FUSION_METHOD}, "
                f"keyword {config.MCP_HYBRID_KEYWORD_WEIGHT} / "
                f"semantic {config.MCP_HYBRID_SEMANTIC_WEIGHT}"
            ),
        }

    def _memory(self, record: dict[str, Any], filter_fields: Sequence[str]) -> Any:
        text = record["text"]
        return self._memory_class(
            content=text,
            content_hash=self._content_hash(text),
            metadata={"record_id": str(record["id"])},
            tags=filter_tags(record["metadata"], filter_fields),
        )

    def add(self, records: Sequence[dict[str, Any]], filter_fields: Sequence[str] = ()) -> None:
        memories = []
        for record in records:
            text = record["text"]
            self.vectors.put(text, record["vector"])
            content_hash = self._content_hash(text)
            ids = self._ids.setdefault(content_hash, [])
            ids.append(str(record["id"]))
            if len(ids) == 1:
                memories.append(self._memory(record, filter_fields))
        results = self._loop.run_until_complete(self.storage.store_batch(memories))
        self.vectors.check()
        failed = [
            (m.metadata["record_id"], r[1])
            for m, r in zip(memories, results, strict=True)
            if not r[0]
        ]
        if failed:
            raise RuntimeError(
                f"mcp-memory-service stored {len(memories) - len(failed)} of {len(memories)} "
                f"memories; first failure: record {failed[0][0]!r}: {failed[0][1]}"
            )
        for record in records:
            self.vectors.forget(record["text"])

    def add_one(self, record: dict[str, Any], filter_fields: Sequence[str] = ()) -> dict[str, Any]:
        """The package's single add, ``store(memory)``, as its ``store_memory`` tool calls
        it (with its defaults: an exact-duplicate check and, when its configuration turns
        it on, a semantic one). Answers whether it stored the memory and what it said."""
        text = record["text"]
        self.vectors.put(text, record["vector"])
        memory = self._memory(record, filter_fields)
        try:
            stored, message = self._loop.run_until_complete(self.storage.store(memory))
        finally:
            self.vectors.forget(text)
        self.vectors.check()
        if stored:
            self._ids.setdefault(memory.content_hash, []).append(str(record["id"]))
        return {"stored": bool(stored), "message": str(message)}

    def search(
        self, query: str, vector: list[float], k: int, where: dict[str, Any] | None = None
    ) -> list[str]:
        self.vectors.put(query, vector)
        try:
            # A filter is the package's tag filter: memories stored with the tag
            # "field:value" (``filter_fields``), the only metadata its search filters on.
            tags = filter_tags(where or {}, list(where or {})) or None
            found = self._loop.run_until_complete(
                self.storage.search_memories(query=query, mode="hybrid", limit=k, tags=tags)
            )
        finally:
            self.vectors.forget(query)
        self.vectors.check()
        if found.get("error"):
            raise RuntimeError(f"mcp-memory-service search failed: {found['error']}")
        ids: list[str] = []
        for memory in found["memories"]:
            ids.extend(self._ids[memory["content_hash"]])
        return ids[:k]

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self.storage.close())
        finally:
            self._loop.close()
            shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(serve(McpMemoryServiceBackend))
