"""The systems, behind one small shape: hybrid-memory, Chroma alone, the peers."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from .constants import (
    CHROMA_DISK,
    CHROMA_LAYOUT,
    CHROMA_MEMORY,
    CHROMA_SYNC_CYCLE,
    FOREIGN_SYSTEMS,
    LANGCHAIN,
    LLAMAINDEX,
    OURS,
    OURS_DISK,
    OURS_MEMORY,
    K,
)
from .embedding import TableEmbedding


class System:
    """What the harness does to a system: ingest all, add one, search, close."""

    legs: tuple[str, ...] = ()
    filterable = False
    # Records between two of the store's own periodic persists, whose phase changes the
    # cost of a single add (CHROMA_SYNC_CYCLE); 0: none.
    write_cycle = 0

    def ingest(self, memories: list[dict[str, Any]]) -> None:
        raise NotImplementedError

    def add_one(self, memory: dict[str, Any]) -> None:
        raise NotImplementedError

    def search(self, query: str, where: dict[str, Any] | None = None) -> list[str]:
        raise NotImplementedError

    def found_by(self, memory: dict[str, Any]) -> dict[str, bool]:
        """Whether ``memory`` is in the top k for its own text (and, for hybrid-memory,
        whether each leg returns it)."""
        return {"top10": memory["id"] in self.search(memory["text"])}

    def miss_detail(self, memory: dict[str, Any]) -> dict[str, Any]:
        """Where ``memory``, missing from the top k for its own text, ranks among the
        first :data:`DEEP` (None: not there), to tell a lost vector hit from a fusion
        that ranks it low."""
        return {"probe": memory["id"], "rank": _rank(memory["id"], self.deep(memory["text"]))}

    def deep(self, query: str) -> list[str]:
        """The first :data:`DEEP` ids for ``query``."""
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError

    def library_seconds(self) -> float | None:
        """Seconds the last call spent inside the system when it runs in another
        process and times itself there (:mod:`_scale.foreign`); None: time the call."""
        return None

    def close(self) -> None:
        pass


DEEP = 100  # how far down a missed memory is looked for


def _rank(wanted: str, ids: list[str]) -> int | None:
    return ids.index(wanted) + 1 if wanted in ids else None


class _Items(Sequence[dict[str, Any]]):
    """``make(record)`` of each record, made when read."""

    def __init__(
        self, records: list[dict[str, Any]], make: Callable[[dict[str, Any]], dict[str, Any]]
    ) -> None:
        self._records = records
        self._make = make

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, i):  # type: ignore[no-untyped-def,override]
        if isinstance(i, slice):
            return [self._make(r) for r in self._records[i]]
        return self._make(self._records[i])


class Ours(System):
    legs = ("vector", "keyword", "tag")
    filterable = True

    def __init__(self, embedding: TableEmbedding, path: Path | None) -> None:
        from hybrid_memory import HybridMemory

        self.memory = HybridMemory(path=str(path) if path else None, embedding=embedding)
        self.write_cycle = CHROMA_SYNC_CYCLE if path else 0
        self.ids: dict[str, str] = {}  # the timed single adds: benchmark id -> store id

    @staticmethod
    def _item(memory: dict[str, Any]) -> dict[str, Any]:
        # No id: as an agent adds memories, the store assigns ids and skips exact
        # duplicates by content hash (that check is part of what is measured).
        return {
            "text": memory["text"],
            "tags": memory["tags"],
            "metadata": memory["metadata"],
            "created_at": datetime.fromisoformat(memory["created_at"]),
        }

    def ingest(self, memories: list[dict[str, Any]]) -> None:
        # One call with every memory, each item made from the benchmark's record when
        # the store reads it (as Chroma's batches are made below): a list of N item
        # dicts built here first would count the benchmark's copy in the store's RSS.
        # The ids the store assigned are not kept: only the timed single adds' are ever
        # looked up (found_by), and a map of every ingested memory's ids (~130 MB at a
        # million) counted the benchmark's bookkeeping in the store's RSS, which Chroma
        # alone, given the benchmark's own ids, never had.
        self.memory.add_many(_Items(memories, self._item))

    def add_one(self, memory: dict[str, Any]) -> None:
        item = self._item(memory)
        self.ids[memory["id"]] = self.memory.add(item.pop("text"), **item)

    def search(self, query: str, where: dict[str, Any] | None = None) -> list[str]:
        return [hit.id for hit in self.memory.search(query, k=K, filter=where)]

    def found_by(self, memory: dict[str, Any]) -> dict[str, bool]:
        wanted = self.ids[memory["id"]]
        found = {"top10": wanted in self.search(memory["text"])}
        # Each leg, whatever the fusion: restricted to this memory, every leg that has
        # indexed it must return it.
        hits = self.memory.search(
            memory["text"],
            k=K,
            filter={"probe": memory["metadata"]["probe"]},
            tags=memory["tags"][:1] or None,
        )
        ranks = next((h.ranks for h in hits if h.id == wanted), {})
        for leg in self.legs:
            if leg != "tag" or memory["tags"]:
                found[leg] = leg in ranks
        return found

    def miss_detail(self, memory: dict[str, Any]) -> dict[str, Any]:
        """Also each leg's rank of the memory, unfiltered, and the fused score of the
        memory and of the k-th hit."""
        wanted = self.ids[memory["id"]]
        hits = self.memory.search(memory["text"], k=DEEP)
        at = next((n for n, h in enumerate(hits) if h.id == wanted), None)
        return {
            "probe": memory["id"],
            "rank": None if at is None else at + 1,
            "leg_ranks": {} if at is None else dict(hits[at].ranks),
            "fused_score": None if at is None else hits[at].fused_score,
            "kth_fused_score": hits[K - 1].fused_score if len(hits) >= K else None,
        }

    def count(self) -> int:
        return self.memory.count()

    def close(self) -> None:
        self.memory.close()


class ChromaOnly(System):
    """Chroma's own add and vector query, given the vectors directly: the floor."""

    filterable = True

    def __init__(self, embedding: TableEmbedding, path: Path | None) -> None:
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False)
        self.write_cycle = CHROMA_SYNC_CYCLE if path else 0
        if path:
            self.client = chromadb.PersistentClient(path=str(path), settings=settings)
        else:
            self.client = chromadb.EphemeralClient(settings=settings)
        self.collection = self.client.create_collection(
            "bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
        )
        self.embedding = embedding
        self.batch = self.client.get_max_batch_size()

    @staticmethod
    def _metadata(memory: dict[str, Any]) -> dict[str, Any]:
        created = datetime.fromisoformat(memory["created_at"]).timestamp()
        return {**memory["metadata"], "tags": ",".join(memory["tags"]), "created_at": created}

    def _add(self, memories: list[dict[str, Any]]) -> None:
        texts = [m["text"] for m in memories]
        vectors = np.asarray(self.embedding.embed_documents(texts), dtype=np.float32)
        self.collection.add(
            ids=[m["id"] for m in memories],
            embeddings=vectors,
            documents=texts,
            metadatas=[self._metadata(m) for m in memories],
        )

    def ingest(self, memories: list[dict[str, Any]]) -> None:
        for start in range(0, len(memories), self.batch):
            self._add(memories[start : start + self.batch])

    def add_one(self, memory: dict[str, Any]) -> None:
        self._add([memory])

    def search(self, query: str, where: dict[str, Any] | None = None) -> list[str]:
        vector = self.embedding.embed_query(query)
        result = self.collection.query(
            query_embeddings=[vector], n_results=K, where=where, include=["documents", "metadatas"]
        )
        return result["ids"][0]

    def deep(self, query: str) -> list[str]:
        vector = self.embedding.embed_query(query)
        result = self.collection.query(query_embeddings=[vector], n_results=DEEP, include=[])
        return result["ids"][0]

    def count(self) -> int:
        return self.collection.count()


class ChromaWithLayout(ChromaOnly):
    """Chroma's own add and query of the records as hybrid-memory stores them: tags as
    one JSON string and both times. Tells how much of hybrid-memory's ingest is Chroma
    storing more per memory than the baseline above (which joins the tags with commas
    and keeps one time)."""

    @staticmethod
    def _metadata(memory: dict[str, Any]) -> dict[str, Any]:
        created = datetime.fromisoformat(memory["created_at"]).timestamp()
        meta: dict[str, Any] = dict(memory["metadata"])
        if memory["tags"]:
            meta["hm:tags"] = json.dumps(memory["tags"], ensure_ascii=False)
        meta["hm:created_at"] = created
        meta["hm:updated_at"] = created
        return meta


class PeerSystem(System):
    def __init__(self, embedding: TableEmbedding, factory: Callable[[Any], Any]) -> None:
        self.factory = factory
        self.embedding = embedding
        self.peer = factory(embedding)
        self.added = 0
        self.ingest_calls = 1
        self.failed_attempt_s = 0.0

    @staticmethod
    def _record(memory: dict[str, Any]) -> Any:
        from hybrid_memory_eval import PeerRecord

        return PeerRecord(memory["id"], memory["text"], tuple(memory["tags"]), memory["metadata"])

    def ingest(self, memories: list[dict[str, Any]]) -> None:
        records = [self._record(m) for m in memories]
        start = time.perf_counter()
        try:
            self.peer.add(records)
        except Exception as exc:
            # LangChain's Chroma.add_texts sends one batch, which Chroma refuses above
            # its maximal batch size: a user must then add in chunks (each rebuilding
            # BM25). Start over on a fresh peer and do exactly that.
            if "max batch size" not in str(exc):
                raise
            import chromadb

            self.failed_attempt_s = time.perf_counter() - start  # not counted
            chunk = chromadb.EphemeralClient().get_max_batch_size()
            self.peer.close()
            self.peer = self.factory(self.embedding)
            self.ingest_calls = 0
            for start in range(0, len(records), chunk):
                self.peer.add(records[start : start + chunk])
                self.ingest_calls += 1
        self.added += len(memories)

    def add_one(self, memory: dict[str, Any]) -> None:
        self.peer.add([self._record(memory)])
        self.added += 1

    def search(self, query: str, where: dict[str, Any] | None = None) -> list[str]:
        if where is not None:
            raise ValueError("peers take no filter")
        return self.peer.search(query, K)

    def deep(self, query: str) -> list[str]:
        return self.peer.search(query, DEEP)

    def count(self) -> int:
        return self.added

    def close(self) -> None:
        self.peer.close()


def build_system(name: str, embedding: TableEmbedding, scratch: Path) -> System:
    if name == OURS_DISK:
        return Ours(embedding, scratch / "store")
    if name == OURS_MEMORY:
        return Ours(embedding, None)
    if name == CHROMA_DISK:
        return ChromaOnly(embedding, scratch / "chroma")
    if name == CHROMA_MEMORY:
        return ChromaOnly(embedding, None)
    if name == CHROMA_LAYOUT:
        return ChromaWithLayout(embedding, scratch / "chroma")
    if name in FOREIGN_SYSTEMS:
        from .foreign import ForeignSystem

        return ForeignSystem(name, embedding)
    from hybrid_memory_eval import langchain_ensemble, llama_index_fusion

    if name == LANGCHAIN:
        return PeerSystem(embedding, langchain_ensemble)
    if name == LLAMAINDEX:
        return PeerSystem(embedding, llama_index_fusion)
    raise SystemExit(f"unknown system {name!r}")


def import_system(name: str) -> None:
    """Import a system's libraries before the memory baseline (imports are not the store)."""
    import chromadb  # noqa: F401

    if name in OURS:
        import hybrid_memory  # noqa: F401
    elif name == LANGCHAIN:
        import langchain_chroma  # noqa: F401
        import langchain_classic.retrievers  # noqa: F401
        import langchain_community.retrievers  # noqa: F401
    elif name in FOREIGN_SYSTEMS:
        import hybrid_memory_eval.foreign  # noqa: F401
    elif name == LLAMAINDEX:
        import llama_index.core
        import llama_index.retrievers.bm25
        import llama_index.vector_stores.chroma  # noqa: F401
