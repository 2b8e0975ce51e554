"""mem0 and mcp-memory-service in the scale benchmark, each run from its own virtual
environment by the evaluation's drivers (:mod:`hybrid_memory_eval.foreign`).

The harness process keeps the vectors (the same table every system gets) and sends each
text's vector with it; the driver replaces the library's embedding model with a lookup of
those vectors, so no model runs in the peer. What is timed is the library's call, measured
inside the driver (``"s"`` in each reply): the pipe and the JSON around it are not the
library's cost and are left out, which favours the peers slightly. The resident memory is
the driver process's (where the store lives), read from its ``/proc/self/status``.

- mem0 (``mem0ai``, ``infer=False``, its Chroma vector store on disk): an add is
  ``Memory.add`` per memory (mem0 has no batch add that keeps each memory's metadata); a
  search is ``Memory.search(query, top_k=k)``, dense vectors only on Chroma (mem0's
  Chroma adapter has no keyword search); a filtered search adds ``{"user": ...}`` to its
  filters, which its adapter passes to Chroma as a ``where``.
- mcp-memory-service (sqlite-vec): the ingest is ``store_batch`` (256 a request), a
  single add is ``store(memory)`` as its ``store_memory`` tool calls it (with its
  default semantic-duplicate check); a search is its hybrid ``search_memories(mode=
  "hybrid")``; a filtered search is its tag filter on a tag ``user:<id>`` stored with
  each memory (its only metadata filter), which it applies after fetching ``5 * k``
  hybrid hits.
"""

from __future__ import annotations

from typing import Any

from .constants import CHROMA_SYNC_CYCLE, MEM0, K
from .embedding import TableEmbedding
from .systems import DEEP, System

#: The metadata a filtered search restricts to (one user's memories, as for the others).
FILTER_FIELDS = ("user",)


class ForeignSystem(System):
    """A memory service driven in its own venv, behind the harness's :class:`System`."""

    filterable = True

    def __init__(self, name: str, embedding: TableEmbedding) -> None:
        from hybrid_memory_eval.foreign import foreign_peer

        self.name = name
        self.peer = foreign_peer(name)(embedding)
        self.peer.filter_fields = FILTER_FIELDS
        self.info: dict[str, Any] = dict(self.peer.info)
        # mem0 writes through a persistent Chroma client, whose single add costs more the
        # further it is into its persist cycle (see worker.run_worker).
        self.write_cycle = CHROMA_SYNC_CYCLE if name == MEM0 else 0
        self.added = 0
        self.refused: list[dict[str, Any]] = []  # single adds the library declined

    @staticmethod
    def _record(memory: dict[str, Any]) -> Any:
        from hybrid_memory_eval import PeerRecord

        return PeerRecord(memory["id"], memory["text"], tuple(memory["tags"]), memory["metadata"])

    def library_seconds(self) -> float | None:
        return self.peer.last_seconds

    def ingest(self, memories: list[dict[str, Any]]) -> None:
        self.peer.add([self._record(m) for m in memories])
        self.added += len(memories)

    def add_one(self, memory: dict[str, Any]) -> None:
        reply = self.peer.add_one(self._record(memory))
        if reply.get("stored") is False:
            self.refused.append({"id": memory["id"], "message": reply.get("message")})
        else:
            self.added += 1

    def search(self, query: str, where: dict[str, Any] | None = None) -> list[str]:
        return self.peer.search(query, K, where)

    def deep(self, query: str) -> list[str]:
        return self.peer.search(query, DEEP)

    def count(self) -> int:
        return self.added

    def rss(self, reset: bool = False) -> dict[str, Any]:
        """The driver process's resident memory (``current_mb``, ``peak_mb``)."""
        return self.peer.rss(reset)

    def close(self) -> None:
        self.peer.close()
