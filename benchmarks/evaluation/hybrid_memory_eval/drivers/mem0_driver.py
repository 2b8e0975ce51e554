"""mem0 (``mem0ai``) as an evaluation peer: its ``Memory`` on a Chroma store, ``infer=False``.

Runs in the peer's own virtual environment (``hybrid-memory peers install mem0``) and
speaks the protocol of ``_protocol.py`` on stdin/stdout. Standard library and mem0 only.

What it does, through mem0's Python API:

- ``Memory.from_config({"vector_store": {"provider": "chroma", "config":
  {"collection_name": ..., "path": <temp dir>}}, "history_db_path": <temp dir>})``: a
  local Chroma store (mem0's Chroma adapter, which opens a persistent client on the
  path), everything else mem0's defaults. The temporary directory is deleted on close.
- The embedding model: mem0's configured embedder object (``Memory.embedding_model``)
  is replaced by a :class:`~mem0.embeddings.base.EmbeddingBase` that looks up the
  all-MiniLM-L6-v2 vectors the harness sent with each text (a text without one fails
  loudly). mem0 is built with its default OpenAI embedder/LLM classes and a placeholder
  key; neither is ever called (no network): the embedder is replaced before the first
  add, and ``infer=False`` never calls the LLM.
- ``add``: one ``Memory.add([{"role": "user", "content": text}], user_id="eval",
  metadata={"record_id": id}, infer=False)`` per record: with ``infer=False`` mem0
  stores the message text as given (no LLM rewriting, no merging); our id rides in the
  metadata, since mem0 assigns its own UUIDs.
- ``add_one`` (the scale benchmark's single add): the same ``Memory.add`` call; fields
  named in ``filter_fields`` are kept in the metadata beside our id.
- ``search``: ``Memory.search(query, top_k=k, filters={"user_id": "eval"})`` (a filter
  of the scale benchmark's, ``{"user": ...}``, added to those filters) with mem0's
  defaults otherwise: ``threshold=0.1`` (on the semantic score, ``1 / (1 + L2 distance)``
  from its Chroma adapter, so never reached by unit vectors), ``rerank=False``, an
  over-fetch of ``max(4k, 60)`` candidates.

What mem0's search is on this store: mem0 2.x scores semantic + BM25 + entity boosts,
but its Chroma adapter has no keyword search (mem0 logs a warning that hybrid scoring is
disabled), and entity boosts need spaCy and entities linked by the LLM pipeline
(``infer=True``); so here mem0 ranks by the dense vectors alone, as its Chroma users get.

Telemetry is off (``MEM0_TELEMETRY=False``) and mem0's home directory (``MEM0_DIR``) is
the temporary directory, so nothing is written outside it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from _protocol import Vectors, serve

USER = "eval"


class Mem0Backend:
    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="hybrid-memory-peer-mem0-")
        # Before mem0 is imported: it reads both at import time.
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = self._dir
        # The default OpenAI embedder and LLM classes need a key to be built; neither is
        # called (the embedder is replaced below, infer=False never calls the LLM).
        os.environ.setdefault("OPENAI_API_KEY", "unused-by-the-evaluation")
        self.vectors = Vectors()
        vectors = self.vectors
        try:
            # The peer library lives in this virtual environment only, not in
            # hybrid-memory's (hence no static import: hybrid-memory's dependency check
            # reads its sources).
            mem0 = importlib.import_module("mem0")
            embedding_base = importlib.import_module("mem0.embeddings.base").EmbeddingBase

            class LookupEmbedding(embedding_base):  # type: ignore[misc, valid-type]
                """The harness's all-MiniLM-L6-v2 vectors, by text."""

                def embed(self, text: Any, memory_action: Any = None) -> list[float]:
                    return vectors.get(text)

                def embed_batch(self, texts: Any, memory_action: Any = "add") -> list[list[float]]:
                    return [vectors.get(t) for t in texts]

            self.memory = mem0.Memory.from_config(
                {
                    "vector_store": {
                        "provider": "chroma",
                        "config": {
                            "collection_name": f"eval-{uuid.uuid4().hex[:12]}",
                            "path": os.path.join(self._dir, "chroma"),
                        },
                    },
                    "history_db_path": os.path.join(self._dir, "history.db"),
                }
            )
            self.memory.embedding_model = LookupEmbedding()
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            raise
        self.info = {
            "library": "mem0ai",
            "version": version("mem0ai"),
            "store": f"chroma {version('chromadb')}",
            "search": "Memory.search(query, top_k=k) defaults: threshold 0.1, no rerank",
        }

    def add(self, records: Sequence[dict[str, Any]], filter_fields: Sequence[str] = ()) -> None:
        for record in records:
            text = record["text"]
            self.vectors.put(text, record["vector"])
            # Fields to filter on ride in mem0's metadata beside our id, as a mem0 user
            # stores them (mem0 copies metadata into its Chroma records).
            kept = {f: record["metadata"][f] for f in filter_fields if f in record["metadata"]}
            result = self.memory.add(
                [{"role": "user", "content": text}],
                user_id=USER,
                metadata={**kept, "record_id": record["id"]},
                infer=False,
            )
            added = result.get("results", []) if isinstance(result, dict) else []
            if len(added) != 1 or added[0].get("memory") != text:
                raise RuntimeError(
                    f"mem0 did not store record {record['id']!r} as given: {result!r}"
                )
            self.vectors.forget(text)  # stored; a query may bring the same text again
        self.vectors.check()

    def add_one(self, record: dict[str, Any], filter_fields: Sequence[str] = ()) -> None:
        """mem0's add is one memory a call already: the same call."""
        self.add([record], filter_fields)

    def search(
        self, query: str, vector: list[float], k: int, where: dict[str, Any] | None = None
    ) -> list[str]:
        # mem0 strips the query before embedding it: the vector belongs to that text.
        self.vectors.put(query.strip(), vector)
        try:
            # A metadata filter goes beside the user id, as mem0's search takes it (its
            # Chroma adapter turns both into one Chroma ``where``).
            filters = {**(where or {}), "user_id": USER}
            found = self.memory.search(query, top_k=k, filters=filters)
        finally:
            self.vectors.forget(query.strip())
        self.vectors.check()
        ids: list[str] = []
        for hit in found["results"]:
            record_id = (hit.get("metadata") or {}).get("record_id")
            if record_id is None:
                raise RuntimeError(f"mem0 returned a memory without our record id: {hit!r}")
            ids.append(str(record_id))
        return ids

    def close(self) -> None:
        try:
            self.memory.close()
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(serve(Mem0Backend))
