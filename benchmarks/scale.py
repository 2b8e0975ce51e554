"""Speed at scale: hybrid-memory against Chroma and the peers' hybrid retrievers (issue 5).

Usage::

    python benchmarks/scale.py --n 10000 100000            # hybrid-memory + Chroma's own add
    python benchmarks/scale.py --n 10000 100000 --peers    # + LangChain and LlamaIndex
    python benchmarks/scale.py --n 100000 --model          # + the default embedding model
    python benchmarks/scale.py --n 2000 --queries 50       # the CI size (no timing checks)
    python benchmarks/scale.py --n 10000 --json            # one JSON document on stdout

What it does, per N:

1. Builds N distinct memories from real sentences: LoCoMo dialogue turns and Cranfield
   abstract sentences from ``../shared/data`` (``--data``), recombined by a seeded
   generator into one to three sentences each, with tags (speakers, topics) and
   metadata (user, source, session, importance) like a real agent store, and creation
   times spread over two years. The same seed gives the same store, and the first
   10,000 memories of the 100,000 store are the 10,000 store.
2. Embeds everything once with a fixed, cheap, deterministic embedding
   (:class:`HashingEmbedding`: hashed words and character trigrams, 384 dimensions,
   L2-normalised) and hands every system a lookup table of those vectors, so what is
   timed is the engine, not a model. Time spent inside embedding calls is measured and
   subtracted anyway.
3. Measures every system in a fresh subprocess, one after the other (never in
   parallel), so peak resident memory is the system's own and nothing is warm:

   - bulk ingest: one call with all N memories (Chroma: its maximal batches);
     memories/s excluding embedding calls; peak RSS of the process and its growth
     over the baseline taken after imports and data loading (the kernel's high-water
     mark is reset at the baseline through ``/proc/self/clear_refs``);
   - add one memory to the store of N (``--adds`` times, peers ``--peer-adds``): the
     ``add`` call plus whatever the next search still has to do before the memory is
     searchable (an index built lazily on the next search, say), taken as first
     search minus an immediate repeat of it (the same settling is added to the ingest);
     every added memory is checked to come back in the top 10 for its own text and,
     for hybrid-memory, from each leg (a search filtered to that one memory, so the
     fusion cannot hide a leg's miss);
   - search: ``--queries`` distinct real questions (LoCoMo and Cranfield, interleaved;
     five more as untimed warm-up), k = 10, each asked once so no query or result cache
     helps; the time spent embedding the query is subtracted. hybrid-memory and Chroma
     also run the same queries restricted to one user's memories (a metadata filter).

Systems: ``hybrid-memory`` on disk (``HybridMemory(path=...)``, the default embedded
use) and in memory (``HybridMemory()``), given no ids (the store assigns them and skips
exact duplicates, as when an agent adds memories); Chroma's own ``collection.add`` of the same
ids, vectors, documents and metadata on disk and in memory (vector search only, the
floor under any Chroma-based store); with ``--peers`` LangChain ``EnsembleRetriever``
(rank_bm25 ``BM25Retriever`` + Chroma) and LlamaIndex ``QueryFusionRetriever`` (bm25s
``BM25Retriever`` + Chroma vector index) from :mod:`hybrid_memory_eval.peers`, both
in memory (Chroma's ephemeral client), both indexing ``"<tags>: <text>"``. LangChain's
``Chroma.add_texts`` sends one batch, which Chroma refuses above its maximal batch size
(5,461): the LangChain peer's ingest then falls back to adds of that size, each
rebuilding BM25 over all records so far, as its user would have to (the JSON says how
many calls it took).

``--model`` separately measures the default embedding model (all-MiniLM-L6-v2 on
onnxruntime, as hybrid-memory runs it, CPU): throughput at the store's embedding batch size,
single-query latency, and end-to-end search on the largest on-disk store with the query
embedded by the model (documents keep the cheap vectors: same dimension, same cost for
the engine), first asked and repeated (the query-embedding cache).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))
DIM = 384
K = 10
SEED = 20240501
WARMUP_QUERIES = 5
FILTER_USERS = 50

OURS_DISK = "ours-disk"
OURS_MEMORY = "ours-memory"
CHROMA_DISK = "chroma-disk"
CHROMA_MEMORY = "chroma-memory"
CHROMA_LAYOUT = "chroma-disk-layout"  # only when asked for with --systems
LANGCHAIN = "langchain"
LLAMAINDEX = "llamaindex"
MODEL = "model"

LABELS = {
    OURS_DISK: "hybrid-memory (disk)",
    OURS_MEMORY: "hybrid-memory (memory)",
    CHROMA_DISK: "Chroma add+query (disk)",
    CHROMA_MEMORY: "Chroma add+query (memory)",
    CHROMA_LAYOUT: "Chroma add+query, hybrid-memory's metadata layout (disk)",
    LANGCHAIN: "LangChain Ensemble (memory)",
    LLAMAINDEX: "LlamaIndex Fusion (memory)",
}
OURS = (OURS_DISK, OURS_MEMORY)
PEER_SYSTEMS = (LANGCHAIN, LLAMAINDEX)


# --- the cheap embedding -------------------------------------------------------------

_WORD = re.compile(r"[a-z0-9]+")


class HashingEmbedding:
    """A fixed, deterministic, cheap embedding: signed feature hashing, L2-normalised.

    Each word contributes itself (weight 1) and its character trigrams, with ``<`` and
    ``>`` marking the word's ends (weight 0.5 each), hashed with CRC-32 into ``dim``
    buckets with a hash-derived sign. Texts that share words or word pieces get close
    vectors, so the vector leg's neighbourhoods are shaped like a real model's, at a
    few microseconds per text. Implements the Embedder protocol (``name``,
    ``embed_documents``, ``embed_query``) and is callable on a list of texts.
    """

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.name = f"hashing-words-char3-{dim}"
        self._features: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _word(self, word: str) -> tuple[np.ndarray, np.ndarray]:
        found = self._features.get(word)
        if found is None:
            marked = f"<{word}>"
            pieces = [f"w:{word}"] + [marked[i : i + 3] for i in range(len(marked) - 2)]
            hashes = np.array([zlib.crc32(p.encode()) for p in pieces], dtype=np.uint64)
            index = (hashes % self.dim).astype(np.intp)
            sign = np.where((hashes >> np.uint64(31)) & np.uint64(1), -1.0, 1.0)
            weight = np.full(len(pieces), 0.5)
            weight[0] = 1.0
            found = (index, sign * weight)
            self._features[word] = found
        return found

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            features = [self._word(w) for w in _WORD.findall(text.lower())]
            if features:
                index = np.concatenate([f[0] for f in features])
                weight = np.concatenate([f[1] for f in features])
                out[row] = np.bincount(index, weights=weight, minlength=self.dim)
        norms = np.linalg.norm(out, axis=1)
        empty = norms == 0
        out[empty, 0] = 1.0  # a zero vector has no cosine; give empty texts a fixed one
        norms[empty] = 1.0
        out /= norms[:, None]
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


class TableEmbedding:
    """The cheap embedding with every benchmark text looked up instead of computed.

    Unknown texts fall back to ``fallback`` (the cheap embedding, or the real model for
    ``--model``). ``seconds`` accumulates the wall time spent inside embedding calls, so
    the harness can subtract it from the timings of the calls that made them.
    """

    def __init__(
        self,
        texts: Sequence[str],
        matrix: np.ndarray,
        fallback: Callable[[list[str]], np.ndarray],
        name: str,
    ) -> None:
        self._row = {text: i for i, text in enumerate(texts)}
        self._matrix = matrix
        self._fallback = fallback
        self.name = name
        self.seconds = 0.0
        self.fallback_texts = 0

    def _array(self, texts: list[str]) -> np.ndarray:
        rows = [self._row.get(t, -1) for t in texts]
        out = self._matrix[np.array(rows, dtype=np.intp)] if texts else self._matrix[:0]
        missing = [i for i, r in enumerate(rows) if r < 0]
        if missing:
            self.fallback_texts += len(missing)
            out[missing] = self._fallback([texts[i] for i in missing])
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self._array(list(texts)).tolist()
        finally:
            self.seconds += time.perf_counter() - start

    def embed_query(self, text: str) -> list[float]:
        start = time.perf_counter()
        try:
            return self._array([text])[0].tolist()
        finally:
            self.seconds += time.perf_counter() - start

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


# --- the data ------------------------------------------------------------------------

TOPIC_TAGS = (
    "preference", "fact", "event", "plan", "todo", "important", "work", "family",
    "health", "travel", "hobby", "research", "reading", "project", "idea", "reminder",
)  # fmt: skip


# Topic tags of Cranfield sentences (phrase found in the sentence -> tag), so that tag
# frequencies look like a real store's: each on a few percent of the memories.
CRANFIELD_TAGS = (
    ("boundary layer", "boundary layer"), ("heat transfer", "heat transfer"),
    ("supersonic", "supersonic"), ("hypersonic", "hypersonic"), ("shock", "shock waves"),
    ("wing", "wings"), ("buckling", "structures"), ("shell", "structures"),
    ("turbulen", "turbulence"), ("laminar", "laminar flow"), ("nozzle", "nozzles"),
    ("flutter", "aeroelasticity"), ("experiment", "experiments"), ("cylinder", "cylinders"),
)  # fmt: skip


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_sources(data: Path) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """Sentence pools (LoCoMo turns by conversation, Cranfield sentences by abstract)."""
    pools: dict[str, list[dict[str, Any]]] = {}
    for row in _read_jsonl(data / "locomo" / "corpus.jsonl"):
        conversation = row.get("metadata", {}).get("conversation", "locomo")
        pools.setdefault(f"locomo:{conversation}", []).append(
            {
                "text": row["text"].strip(),
                "tags": [t.lower() for t in row.get("tags", [])],
                "session": row.get("metadata", {}).get("session", 0),
            }
        )
    cranfield = []
    for row in _read_jsonl(data / "cranfield" / "corpus.jsonl"):
        sentences = [s.strip(" .") for s in row["text"].split(" . ")]
        for sentence in sentences:
            if len(sentence.split()) >= 4:
                tags = [tag for phrase, tag in CRANFIELD_TAGS if phrase in sentence]
                cranfield.append({"text": sentence + ".", "tags": tags, "session": 0})
    pools["cranfield"] = cranfield
    queries: list[str] = []
    seen: set[str] = set()
    locomo_q = [q["text"] for q in _read_jsonl(data / "locomo" / "queries.jsonl")]
    cranfield_q = [q["text"] for q in _read_jsonl(data / "cranfield" / "queries.jsonl")]
    # Interleave about 3:1 (the collections' sizes) so any prefix mixes both styles.
    ci = 0
    for i, q in enumerate(locomo_q):
        for text in [q] + ([cranfield_q[ci]] if i % 3 == 2 and ci < len(cranfield_q) else []):
            if text not in seen:
                seen.add(text)
                queries.append(text)
        if i % 3 == 2:
            ci += 1
    for text in cranfield_q[ci:]:
        if text not in seen:
            seen.add(text)
            queries.append(text)
    return pools, queries


def generate_memories(
    pools: dict[str, list[dict[str, Any]]], count: int, seed: int = SEED
) -> list[dict[str, Any]]:
    """``count`` distinct memories, deterministic for a seed; a prefix of a longer run."""
    rng = random.Random(seed)
    names = sorted(pools)
    # Half conversation (each LoCoMo conversation by its size), half document notes.
    locomo = sum(len(pools[n]) for n in names if n != "cranfield")
    weights = [0.5 if n == "cranfield" else 0.5 * len(pools[n]) / locomo for n in names]
    start = datetime(2023, 1, 1, tzinfo=timezone.utc)
    span = timedelta(days=730).total_seconds()
    seen: set[str] = set()
    memories: list[dict[str, Any]] = []
    # Creation times grow with the index (a store fills over time) on a fixed scale,
    # so the prefix property holds for every N.
    step = span / 200_000
    while len(memories) < count:
        pool_name = rng.choices(names, weights)[0]
        pool = pools[pool_name]
        parts = rng.choices((1, 2, 3), (0.4, 0.5, 0.1))[0]
        picked = [pool[rng.randrange(len(pool))] for _ in range(parts)]
        text = " ".join(p["text"] for p in picked)
        if text in seen:
            continue
        seen.add(text)
        i = len(memories)
        tags = sorted({t for p in picked for t in p["tags"]})
        tags += rng.sample(TOPIC_TAGS, rng.choices((0, 1, 2), (0.3, 0.5, 0.2))[0])
        source = "cranfield" if pool_name == "cranfield" else "locomo"
        memories.append(
            {
                "id": f"mem-{i:07d}",
                "text": text,
                "tags": tags,
                "metadata": {
                    "user": f"user-{rng.randrange(FILTER_USERS):02d}",
                    "source": source,
                    "conversation": pool_name.split(":", 1)[-1],
                    "session": int(picked[0]["session"]),
                    "importance": round(rng.random(), 2),
                },
                "created_at": (
                    start + timedelta(seconds=(i % 200_000) * step + rng.random() * step)
                ).isoformat(),
            }
        )
    return memories


def peer_text_of(memory: dict[str, Any]) -> str:
    from hybrid_memory_eval import PeerRecord, peer_text

    return peer_text(PeerRecord(memory["id"], memory["text"], tuple(memory["tags"])))


def prepare(
    data: Path, n: int, adds: int, queries: int, workdir: Path, peers: bool = True
) -> dict[str, Any]:
    """Write the store, the extra memories, the queries and their vectors for one N (the
    peers' texts, "<tags>: <text>", are embedded only when ``peers`` run: at a million
    memories that is a million more)."""
    pools, all_queries = load_sources(data)
    need = WARMUP_QUERIES + queries
    if len(all_queries) < need:
        raise SystemExit(f"only {len(all_queries)} distinct queries, asked for {need}")
    memories = generate_memories(pools, n + adds)
    store, extra = memories[:n], memories[n:]
    for i, memory in enumerate(extra):
        memory["id"] = f"new-{i:04d}"
        # A metadata value no other memory has, so that a filtered search can check
        # each leg separately, whatever the fusion makes of the ranks.
        memory["metadata"]["probe"] = memory["id"]
    chosen = all_queries[:need]
    embedder = HashingEmbedding()
    start = time.perf_counter()
    texts = [m["text"] for m in memories]
    vectors = embedder.embed_array(texts + chosen)
    peer_vectors = None
    if peers:
        peer_vectors = embedder.embed_array([peer_text_of(m) for m in memories] + chosen)
    embed_seconds = time.perf_counter() - start
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "data.json").write_text(
        json.dumps(
            {
                "store": store,
                "extra": extra,
                "warmup": chosen[:WARMUP_QUERIES],
                "queries": chosen[WARMUP_QUERIES:],
                "embedding": embedder.name,
            }
        ),
        encoding="utf-8",
    )
    np.save(workdir / "vectors.npy", vectors)
    if peer_vectors is not None:
        np.save(workdir / "peer_vectors.npy", peer_vectors)
    embedded = len(vectors) + (0 if peer_vectors is None else len(peer_vectors))
    return {
        "embedding": embedder.name,
        "cheap_embedding_texts_per_s": round(embedded / embed_seconds),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
        "distinct_tags": len({t for m in store for t in m["tags"]}),
    }


def load_prepared(workdir: Path, peer: bool) -> tuple[dict[str, Any], np.ndarray, list[str]]:
    """The prepared data, the vectors a system needs, and the text of each vector's row
    (the peers index "<tags>: <text>")."""
    data = json.loads((workdir / "data.json").read_text(encoding="utf-8"))
    memories = data["store"] + data["extra"]
    queries = data["warmup"] + data["queries"]
    if peer:
        keys = [peer_text_of(m) for m in memories] + queries
        return data, np.load(workdir / "peer_vectors.npy"), keys
    return data, np.load(workdir / "vectors.npy"), [m["text"] for m in memories] + queries


# --- measuring -----------------------------------------------------------------------


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Rss:
    """Resident memory of this process: current, and peak since the last reset."""

    def __init__(self) -> None:
        self.resettable = False

    def reset_peak(self) -> None:
        try:  # Linux >= 4.0: "5" resets the peak-RSS high-water mark (VmHWM)
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            self.resettable = True
        except OSError:
            self.resettable = False

    @staticmethod
    def current_mb() -> float:
        kb = _status_kb("VmRSS")
        return round((kb or 0) / 1024, 1)

    @staticmethod
    def peak_mb() -> float:
        kb = _status_kb("VmHWM")
        if kb is None:
            import resource

            kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return round(kb / 1024, 1)


def _percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(values),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(pick(0.95), 3),
        "mean": round(statistics.fmean(ordered), 3),
        "max": round(ordered[-1], 3),
    }


def _dir_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return round(total / 2**20, 1)


# --- the systems, behind one small shape ----------------------------------------------


class System:
    """What the harness does to a system: ingest all, add one, search, close."""

    legs: tuple[str, ...] = ()
    filterable = False

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

    def count(self) -> int:
        raise NotImplementedError

    def close(self) -> None:
        pass


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
        self.ids: dict[str, str] = {}  # benchmark id -> the id the store assigned

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
        assigned = self.memory.add_many(_Items(memories, self._item))
        self.ids.update(zip((m["id"] for m in memories), assigned, strict=True))

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
    from hybrid_memory_eval import langchain_ensemble, llama_index_fusion

    if name == LANGCHAIN:
        return PeerSystem(embedding, langchain_ensemble)
    if name == LLAMAINDEX:
        return PeerSystem(embedding, llama_index_fusion)
    raise SystemExit(f"unknown system {name!r}")


def _import_system(name: str) -> None:
    """Import a system's libraries before the memory baseline (imports are not the store)."""
    import chromadb  # noqa: F401

    if name in OURS:
        import hybrid_memory  # noqa: F401
    elif name == LANGCHAIN:
        import langchain_chroma  # noqa: F401
        import langchain_classic.retrievers  # noqa: F401
        import langchain_community.retrievers  # noqa: F401
    elif name == LLAMAINDEX:
        import llama_index.core
        import llama_index.retrievers.bm25
        import llama_index.vector_stores.chroma  # noqa: F401


def _timed_search(
    system: System, embedding: TableEmbedding, query: str, where: dict[str, Any] | None = None
) -> tuple[float, float, list[str]]:
    """(wall ms, ms excluding the embedding calls made inside, ids) of one search."""
    before = embedding.seconds
    start = time.perf_counter()
    ids = system.search(query, where)
    wall = time.perf_counter() - start
    return wall * 1e3, (wall - (embedding.seconds - before)) * 1e3, ids


# Where hybrid-memory's search spends its time: (label, module, class, method). Timed
# by wrapping those methods for one more pass over the queries, after the timed ones
# (the wrappers cost a little; the figures explain the total, they do not replace it).
SEARCH_STAGES = (
    ("total", "hybrid_memory._search", "Searcher", "search"),
    ("vector leg (Chroma query)", "hybrid_memory._legs", "VectorLeg", "rank"),
    (
        "feedback vectors (Chroma get)",
        "hybrid_memory._collection",
        "ChromaCollection",
        "vectors_by_id",
    ),
    ("keyword leg", "hybrid_memory._legs", "KeywordLeg", "rank"),
    ("tag leg", "hybrid_memory._legs", "TagLeg", "rank"),
    ("relevance scores", "hybrid_memory._search", "Searcher", "relevance"),
    ("hits read from the index", "hybrid_memory._search", "Searcher", "memories"),
)


def search_stages(system: System, queries: list[str]) -> dict[str, float]:
    """Mean ms per search spent in each of :data:`SEARCH_STAGES` over ``queries``."""
    import importlib

    spent = dict.fromkeys((label for label, *_ in SEARCH_STAGES), 0.0)
    originals = []
    for label, module, cls_name, method in SEARCH_STAGES:
        cls = getattr(importlib.import_module(module), cls_name)
        original = getattr(cls, method)
        originals.append((cls, method, original))

        def timed(*args: Any, _f: Any = original, _label: str = label, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - start

        setattr(cls, method, timed)
    try:
        for query in queries:
            system.search(query)
    finally:
        for cls, method, original in originals:
            setattr(cls, method, original)
    out = {label: round(seconds / len(queries) * 1e3, 3) for label, seconds in spent.items()}
    out["rest (fusion, orchestration)"] = round(
        out["total"] - sum(v for k, v in out.items() if k != "total"), 3
    )
    return out


def run_worker(name: str, workdir: Path, adds: int) -> dict[str, Any]:
    """Measure one system on the prepared data, in this (fresh) process."""
    data, matrix, keys = load_prepared(workdir, peer=name in PEER_SYSTEMS)
    embedding = TableEmbedding(keys, matrix, HashingEmbedding().embed_array, name=data["embedding"])
    store, extra = data["store"], data["extra"][:adds]
    warmup, queries = data["warmup"], data["queries"]
    _import_system(name)
    rss = Rss()
    scratch = Path(tempfile.mkdtemp(prefix=f"scale-{name}-"))
    result: dict[str, Any] = {"system": name, "label": LABELS[name], "n": len(store)}
    # Other work on the machine distorts every figure: keep the evidence with them.
    result["load_average_start"] = round(os.getloadavg()[0], 2)
    try:
        gc.collect()
        baseline = Rss.current_mb()
        rss.reset_peak()

        start = time.perf_counter()
        system = build_system(name, embedding, scratch)
        result["open_s"] = round(time.perf_counter() - start, 3)

        embedding.seconds = 0.0
        start = time.perf_counter()
        system.ingest(store)
        ingest_wall = time.perf_counter() - start
        embed_seconds = embedding.seconds
        # Work deferred to the first search (LlamaIndex builds its BM25 index there)
        # belongs to the ingest: first search minus an immediate repeat of it.
        first, _, _ = _timed_search(system, embedding, warmup[0])
        again, _, _ = _timed_search(system, embedding, warmup[0])
        settle = max(0.0, first - again) / 1e3
        wasted = getattr(system, "failed_attempt_s", 0.0)
        ingest_engine = ingest_wall - wasted - embed_seconds + settle
        result["ingest"] = {
            "calls": getattr(system, "ingest_calls", 1),
            "failed_attempt_s": round(wasted, 3),
            "wall_s": round(ingest_wall, 3),
            "embedding_calls_s": round(embed_seconds, 3),
            "first_search_settle_s": round(settle, 3),
            "engine_s": round(ingest_engine, 3),
            "rate_per_s": round(len(store) / ingest_engine, 1),
            "peak_rss_mb": Rss.peak_mb(),
        }
        result["count_after_ingest"] = system.count()

        for query in warmup:
            system.search(query)
            if system.filterable:
                system.search(query, {"user": "user-00"})

        # add one: the call, plus whatever the next search still has to do for it
        add_ms, settle_ms, total_ms = [], [], []
        found: dict[str, int] = {}
        applicable: dict[str, int] = {}  # the tag leg: only memories that have tags
        for memory in extra:
            start = time.perf_counter()
            system.add_one(memory)
            add = (time.perf_counter() - start) * 1e3
            first, _, _ = _timed_search(system, embedding, memory["text"])
            again, _, _ = _timed_search(system, embedding, memory["text"])
            settle = max(0.0, first - again)
            add_ms.append(add)
            settle_ms.append(settle)
            total_ms.append(add + settle)
            for leg, ok in system.found_by(memory).items():
                found[leg] = found.get(leg, 0) + int(ok)
                applicable[leg] = applicable.get(leg, 0) + 1
        result["add_one_ms"] = _percentiles(total_ms)
        result["add_call_ms"] = _percentiles(add_ms)
        result["add_settle_ms"] = _percentiles(settle_ms)
        result["searchable_after_add"] = {leg: f"{c}/{applicable[leg]}" for leg, c in found.items()}

        wall_ms, engine_ms = [], []
        for query in queries:
            wall, engine, _ = _timed_search(system, embedding, query)
            wall_ms.append(wall)
            engine_ms.append(engine)
        result["search_ms"] = _percentiles(engine_ms)
        result["search_wall_ms"] = _percentiles(wall_ms)
        if isinstance(system, Ours):
            result["search_stages_ms"] = search_stages(system, queries)
        if system.filterable:
            filtered = []
            for i, query in enumerate(queries):
                where = {"user": f"user-{i % FILTER_USERS:02d}"}
                filtered.append(_timed_search(system, embedding, query, where)[1])
            result["search_filtered_ms"] = _percentiles(filtered)
        result["count"] = system.count()
        peak = Rss.peak_mb()
        result["rss_mb"] = {
            "baseline": baseline,
            "peak": peak,
            "growth": round(peak - baseline, 1),
            "peak_reset_at_baseline": rss.resettable,
        }
        result["embedding_fallback_texts"] = embedding.fallback_texts
        result["load_average_end"] = round(os.getloadavg()[0], 2)
        system.close()
        if name in (OURS_DISK, CHROMA_DISK, CHROMA_LAYOUT):
            result["disk_mb"] = _dir_mb(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


# --- the default embedding model (--model) --------------------------------------------


def run_model_worker(
    workdir: Path, batch_size: int | None, backend: str = "onnxruntime"
) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from hybrid_memory._embeddings import MiniLMEmbedder, SentenceTransformerEmbedder
    from hybrid_memory._settings import HybridMemorySettings

    settings = HybridMemorySettings()
    batch = batch_size or settings.embedding_batch_size
    models: dict[int, MiniLMEmbedder | SentenceTransformerEmbedder] = {}

    def new_model(size: int) -> MiniLMEmbedder | SentenceTransformerEmbedder:
        if backend == "sentence-transformers":  # the backend before onnxruntime, same files
            return SentenceTransformerEmbedder(batch_size=size)
        return MiniLMEmbedder(size, settings.cache_dir)

    data, matrix, keys = load_prepared(workdir, peer=False)
    texts = [m["text"] for m in data["store"][:1024]]

    def encode(batch_texts: list[str], size: int = batch) -> np.ndarray:
        # One embedder per batch size (they share the cached graph), as the store runs it.
        if size not in models:
            models[size] = new_model(size)
        return models[size].embed_matrix(batch_texts)

    load_start = round(os.getloadavg()[0], 2)
    encode(texts[:batch])  # warm-up (loads the model)
    start = time.perf_counter()
    encode(texts)
    throughput = len(texts) / (time.perf_counter() - start)
    single = []
    for query in data["warmup"] + data["queries"][:50]:
        start = time.perf_counter()
        encode([query], 1)
        single.append((time.perf_counter() - start) * 1e3)
    result: dict[str, Any] = {
        "model": settings.embedding_model,
        "device": "cpu",
        "backend": backend,
        "batch_size": batch,
        "texts": len(texts),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
        "texts_per_s": round(throughput, 1),
        "query_embed_ms": _percentiles(single[5:]),
        "load_average_start": load_start,
        "load_average_end": round(os.getloadavg()[0], 2),
    }

    # End to end: the on-disk store at N, documents with the cheap vectors (same
    # dimension, so the engine's cost is the same), every query embedded by the model.
    if matrix.shape[1] != encode(["dimension"]).shape[1]:
        result["end_to_end"] = "skipped: model dimension differs from the cheap embedding"
        return result
    embedding = TableEmbedding(
        keys[: len(keys) - len(data["warmup"]) - len(data["queries"])],
        matrix,
        encode,
        name=settings.embedding_model,
    )
    scratch = Path(tempfile.mkdtemp(prefix="scale-model-"))
    try:
        system = Ours(embedding, scratch / "store")
        system.ingest(data["store"])
        for query in data["warmup"]:
            system.search(query)
        first, repeat = [], []
        for query in data["queries"]:
            start = time.perf_counter()
            system.search(query)
            first.append((time.perf_counter() - start) * 1e3)
        embedded_before = embedding.fallback_texts
        for query in data["queries"]:
            start = time.perf_counter()
            system.search(query)
            repeat.append((time.perf_counter() - start) * 1e3)
        repeat_embedded = embedding.fallback_texts - embedded_before
        system.close()
        result["end_to_end"] = {
            "n": len(data["store"]),
            "store": "disk",
            "search_ms": _percentiles(first),
            "repeated_query_ms": _percentiles(repeat),
            # how many repeated queries reached the model (0: the query cache served all)
            "repeated_queries_embedded": repeat_embedded,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


# --- orchestration -------------------------------------------------------------------


def _child(args: list[str], timeout: float | None) -> dict[str, Any]:
    """Run this script as a worker in a fresh interpreter and return its JSON result."""
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("ANONYMIZED_TELEMETRY", "False")
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as out:
        out_path = Path(out.name)
    try:
        proc = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), *args, "--out", str(out_path)],
            env=env,
            timeout=timeout,
            stdout=sys.stderr,  # worker chatter never pollutes --json on stdout
        )
        if proc.returncode != 0:
            return {"error": f"worker exited with {proc.returncode}"}
        return json.loads(out_path.read_text(encoding="utf-8"))
    except subprocess.TimeoutExpired:
        return {"error": f"worker timed out after {timeout} s"}
    finally:
        out_path.unlink(missing_ok=True)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def _get(result: dict[str, Any] | None, *path: str) -> Any:
    value: Any = result
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def compare(systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ratios ours/theirs from one run (time ratios: < 1 means hybrid-memory is faster)."""
    ratios: dict[str, Any] = {}
    for ours in OURS:
        if ours not in systems or "error" in systems[ours]:
            continue
        mine = systems[ours]
        chroma = CHROMA_DISK if ours == OURS_DISK else CHROMA_MEMORY
        if chroma in systems:
            ratios[f"{ours}/{chroma}"] = {
                "ingest_time": _ratio(
                    _get(mine, "ingest", "engine_s"), _get(systems[chroma], "ingest", "engine_s")
                ),
                "search_p50": _ratio(
                    _get(mine, "search_ms", "p50"), _get(systems[chroma], "search_ms", "p50")
                ),
            }
        if ours == OURS_DISK and CHROMA_LAYOUT in systems:
            ratios[f"{ours}/{CHROMA_LAYOUT}"] = {
                "ingest_time": _ratio(
                    _get(mine, "ingest", "engine_s"),
                    _get(systems[CHROMA_LAYOUT], "ingest", "engine_s"),
                ),
            }
        for peer in PEER_SYSTEMS:
            if peer not in systems or "error" in systems[peer]:
                continue
            theirs = systems[peer]
            ratios[f"{ours}/{peer}"] = {
                "ingest_time": _ratio(
                    _get(mine, "ingest", "engine_s"), _get(theirs, "ingest", "engine_s")
                ),
                "add_one_p50": _ratio(
                    _get(mine, "add_one_ms", "p50"), _get(theirs, "add_one_ms", "p50")
                ),
                "search_p50": _ratio(
                    _get(mine, "search_ms", "p50"), _get(theirs, "search_ms", "p50")
                ),
                "search_p95": _ratio(
                    _get(mine, "search_ms", "p95"), _get(theirs, "search_ms", "p95")
                ),
                "peak_rss_growth": _ratio(
                    _get(mine, "rss_mb", "growth"), _get(theirs, "rss_mb", "growth")
                ),
            }
    return ratios


def ingest_rounds(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Ingest over repeated rounds: each system's time per round and, for hybrid-memory
    against Chroma, the ratio within each round (the two ran one after the other) and
    its median. Chroma's own add alone moves by several percent between processes."""
    names = [n for n in rounds[0] if all(n in r and "error" not in r[n] for r in rounds)]
    engine_s = {n: [_get(r[n], "ingest", "engine_s") for r in rounds] for n in names}
    pairs: dict[str, Any] = {}
    for ours, chroma in ((OURS_DISK, CHROMA_DISK), (OURS_MEMORY, CHROMA_MEMORY)):
        for theirs in (chroma, CHROMA_LAYOUT) if ours == OURS_DISK else (chroma,):
            if ours in engine_s and theirs in engine_s:
                each = [_ratio(a, b) for a, b in zip(engine_s[ours], engine_s[theirs], strict=True)]
                known = [v for v in each if v is not None]
                median = round(statistics.median(known), 3) if known else None
                pairs[f"{ours}/{theirs}"] = {"each": each, "median": median}
    return {"rounds": len(rounds), "engine_s": engine_s, "ingest_time": pairs}


def targets(
    systems: dict[str, dict[str, Any]],
    ratios: dict[str, Any],
    rounds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Issue 5's targets, checked (reported, never asserted)."""
    mine = systems.get(OURS_DISK) or {}
    out: dict[str, Any] = {}

    def check(name: str, value: Any, ok: Callable[[Any], bool], goal: str) -> None:
        out[name] = {
            "value": value,
            "goal": goal,
            "met": None if value is None else bool(ok(value)),
        }

    check("search_p50_ms", _get(mine, "search_ms", "p50"), lambda v: v <= 10, "<= 10")
    check("search_p95_ms", _get(mine, "search_ms", "p95"), lambda v: v <= 30, "<= 30")
    check("add_one_p50_ms", _get(mine, "add_one_ms", "p50"), lambda v: v <= 15, "<= 15")
    pair = f"{OURS_DISK}/{CHROMA_DISK}"
    check(
        "ingest_time_vs_chroma",
        _get(rounds, "ingest_time", pair, "median")
        if rounds
        else _get(ratios, pair, "ingest_time"),
        lambda v: v <= 1.2,
        "<= 1.2" + (f" (median of {rounds['rounds']} rounds)" if rounds else ""),
    )
    lc = _get(ratios, f"{OURS_DISK}/{LANGCHAIN}", "search_p50")
    check("search_vs_langchain", lc, lambda v: v <= 0.1, "<= 0.1 (10x faster)")
    li = _get(ratios, f"{OURS_DISK}/{LLAMAINDEX}", "search_p50")
    check("search_vs_llamaindex", li, lambda v: v <= 1.0, "<= 1.0")
    return out


def _commit() -> str | None:
    """The checkout's commit (with ``+dirty`` when the engine has local changes)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "hybrid_memory"],
            cwd=REPO,
            capture_output=True,
            text=True,
        ).stdout.strip()
    except OSError:
        return None
    return (head + ("+dirty" if dirty else "")) or None


def _versions() -> dict[str, str]:
    found = {}
    for package in (
        "hybrid-memory", "chromadb", "langchain-core", "langchain-community",
        "langchain-classic", "langchain-chroma", "rank-bm25", "llama-index-core",
        "llama-index-retrievers-bm25", "llama-index-vector-stores-chroma", "bm25s",
        "onnxruntime", "tokenizers", "numpy",
    ):  # fmt: skip
        with contextlib.suppress(importlib_metadata.PackageNotFoundError):
            found[package] = importlib_metadata.version(package)
    return found


# --- the report ----------------------------------------------------------------------


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) < 0.1 and value:
            return f"{value:.{digits + 2}f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    out = [line, "  ".join("-" * w for w in widths)]
    for row in rows:
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(out)


def render(report: dict[str, Any]) -> str:
    lines = [
        f"hybrid-memory scale benchmark, {report['date']}, commit {report.get('commit')}, "
        f"{report['machine']['cpus']} CPUs, Python {report['machine']['python']}",
        f"embedding: {report['config']['embedding']} (precomputed lookup; time in embedding "
        f"calls subtracted); k = {K}; {report['config']['queries']} distinct queries",
    ]
    loads = [
        v
        for block in report["results"]
        for r in block["systems"].values()
        for v in (r.get("load_average_start"), r.get("load_average_end"))
        if v is not None
    ]
    if loads and max(loads) > 1.5 * (report["machine"]["cpus"] or 1):
        lines.append(
            f"WARNING: the machine was busy (1-minute load average up to {max(loads):.1f} on "
            f"{report['machine']['cpus']} CPUs): timings are inflated and noisy"
        )
    lines.append("")
    for block in report["results"]:
        lines.append(
            f"N = {block['n']:,}  ({block['data']['mean_chars']} chars/memory on "
            f"average, {block['data']['distinct_tags']} distinct tags)"
        )
        headers = [
            "system",
            "ingest/s",
            "ingest s",
            "add-one p50 ms",
            "search p50 ms",
            "p95 ms",
            "filtered p50",
            "peak RSS MB",
            "RSS growth MB",
            "searchable",
        ]
        rows = []
        for name, r in block["systems"].items():
            if "error" in r:
                rows.append([LABELS[name], r["error"], *[""] * (len(headers) - 2)])
                continue
            rows.append(
                [
                    r["label"],
                    _fmt(_get(r, "ingest", "rate_per_s"), 0),
                    _fmt(_get(r, "ingest", "engine_s"), 2),
                    _fmt(_get(r, "add_one_ms", "p50"), 2),
                    _fmt(_get(r, "search_ms", "p50"), 2),
                    _fmt(_get(r, "search_ms", "p95"), 2),
                    _fmt(_get(r, "search_filtered_ms", "p50"), 2),
                    _fmt(_get(r, "rss_mb", "peak"), 0),
                    _fmt(_get(r, "rss_mb", "growth"), 0),
                    " ".join(f"{k}={v}" for k, v in r.get("searchable_after_add", {}).items()),
                ]
            )
        lines.append(_table(headers, rows))
        if block["ratios"]:
            lines.append("")
            lines.append("ratios ours/theirs (time: < 1 = hybrid-memory faster)")
            rheaders = [
                "pair",
                "ingest time",
                "add-one p50",
                "search p50",
                "search p95",
                "RSS growth",
            ]
            rrows = [
                [
                    pair,
                    _fmt_ratio(v.get("ingest_time")),
                    _fmt_ratio(v.get("add_one_p50")),
                    _fmt_ratio(v.get("search_p50")),
                    _fmt_ratio(v.get("search_p95")),
                    _fmt_ratio(v.get("peak_rss_growth")),
                ]
                for pair, v in block["ratios"].items()
            ]
            lines.append(_table(rheaders, rrows))
        repeated = block.get("ingest_rounds")
        if repeated:
            lines.append("")
            lines.append(
                f"ingest over {repeated['rounds']} rounds (every system once per round, "
                "each in its own process): seconds per round, and ratios within a round"
            )
            for name, times in repeated["engine_s"].items():
                lines.append(f"  {name:<28} " + "  ".join(_fmt(t, 2) for t in times))
            for pair, v in repeated["ingest_time"].items():
                lines.append(
                    f"  {pair:<28} "
                    + "  ".join(_fmt_ratio(t) for t in v["each"])
                    + f"   median {_fmt_ratio(v['median'])}"
                )
        lines.append("")
        lines.append("targets (issue 5, hybrid-memory on disk; reported, not asserted)")
        for name, t in block["targets"].items():
            mark = {True: "met", False: "NOT met", None: "n/a"}[t["met"]]
            lines.append(f"  {name:<24} {_fmt(t['value'], 3):>10}  goal {t['goal']:<22} {mark}")
        lines.append("")
    model = report.get("model")
    if model:
        lines.append("default embedding model")
        if "error" in model:
            lines.append(f"  {model['error']}")
        else:
            lines.append(
                f"  {model['model']} on {model['device']} ({model['backend']}): "
                f"{model['texts_per_s']:.1f} texts/s at batch {model['batch_size']} "
                f"({model['mean_chars']} chars/text); one query "
                f"p50 {model['query_embed_ms']['p50']:.1f} ms (load average "
                f"{model['load_average_start']}-{model['load_average_end']})"
            )
            e2e = model.get("end_to_end")
            if isinstance(e2e, dict):
                lines.append(
                    f"  end to end at N = {e2e['n']:,} ({e2e['store']}): search incl. query "
                    f"embedding p50 {e2e['search_ms']['p50']:.1f} ms, p95 "
                    f"{e2e['search_ms']['p95']:.1f} ms; repeated query p50 "
                    f"{e2e['repeated_query_ms']['p50']:.2f} ms ("
                    f"{e2e['repeated_queries_embedded']} of them re-embedded)"
                )
            elif e2e:
                lines.append(f"  end to end: {e2e}")
    return "\n".join(lines)


# --- main ----------------------------------------------------------------------------


def _log(message: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--n",
        type=int,
        nargs="+",
        default=[10_000, 100_000],
        help="store sizes (default: 10000 100000)",
    )
    parser.add_argument(
        "--queries", type=int, default=200, help="distinct timed queries (default 200; at most 980)"
    )
    parser.add_argument("--adds", type=int, default=20, help="timed single adds (default 20)")
    parser.add_argument(
        "--peer-adds",
        type=int,
        default=5,
        help="timed single adds for the peers, each a full BM25 rebuild (default 5)",
    )
    parser.add_argument(
        "--peers",
        action="store_true",
        help="also measure the LangChain and LlamaIndex hybrid retrievers",
    )
    parser.add_argument(
        "--model",
        action="store_true",
        help="also measure the default embedding model and end-to-end search",
    )
    parser.add_argument(
        "--model-batch-size",
        type=int,
        default=None,
        help="batch size for --model (default: the store's setting)",
    )
    parser.add_argument(
        "--model-backend",
        choices=("onnxruntime", "sentence-transformers"),
        default="onnxruntime",
        help="what runs the default model for --model: onnxruntime (the default backend) "
        "or sentence-transformers (the backend before it; needs that extra), to compare "
        "them on the same texts",
    )
    parser.add_argument(
        "--systems",
        nargs="+",
        choices=list(LABELS),
        default=None,
        help="measure only these systems",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run every system this many times per N, alternating, and report ingest per "
        "round and the median ratio against Chroma (the tables show the first round)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"evaluation data directory (default {DEFAULT_DATA})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds allowed per system and N (default: no limit)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.worker:
        if args.worker == MODEL:
            result = run_model_worker(args.workdir, args.model_batch_size, args.model_backend)
        else:
            result = run_worker(args.worker, args.workdir, args.adds)
        args.out.write_text(json.dumps(result), encoding="utf-8")
        return 0

    if not (args.data / "locomo" / "corpus.jsonl").exists():
        parser.error(f"no evaluation data in {args.data} (pass --data)")
    if args.rounds < 1:
        parser.error(f"--rounds: expected an integer >= 1, got {args.rounds}")
    systems = args.systems or [OURS_DISK, OURS_MEMORY, CHROMA_DISK, CHROMA_MEMORY] + (
        list(PEER_SYSTEMS) if args.peers else []
    )
    adds = max(args.adds, args.peer_adds)
    report: dict[str, Any] = {
        "benchmark": "hybrid-memory scale (issue 5)",
        "command": " ".join([Path(sys.argv[0]).name, *(argv or sys.argv[1:])]),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "versions": _versions(),
        "commit": _commit(),
        "config": {
            "n": args.n,
            "queries": args.queries,
            "warmup_queries": WARMUP_QUERIES,
            "k": K,
            "adds": args.adds,
            "rounds": args.rounds,
            "peer_adds": args.peer_adds,
            "seed": SEED,
            "embedding": HashingEmbedding().name,
            "systems": systems,
        },
        "results": [],
        "model": None,
    }
    with tempfile.TemporaryDirectory(prefix="scale-data-") as tmp:
        last_workdir = None
        for n in args.n:
            workdir = Path(tmp) / f"n{n}"
            _log(f"N={n}: generating data")
            data_info = prepare(
                args.data, n, adds, args.queries, workdir,
                peers=any(name in PEER_SYSTEMS for name in systems),
            )
            last_workdir = workdir
            rounds: list[dict[str, dict[str, Any]]] = []
            for round_number in range(1, args.rounds + 1):
                results: dict[str, dict[str, Any]] = {}
                where = f"N={n}" + (f", round {round_number}" if args.rounds > 1 else "")
                for name in systems:
                    count = args.peer_adds if name in PEER_SYSTEMS else args.adds
                    _log(f"{where}: {LABELS[name]}")
                    started = time.perf_counter()
                    results[name] = _child(
                        ["--worker", name, "--workdir", str(workdir), "--adds", str(count)],
                        args.timeout,
                    )
                    _log(
                        f"{where}: {LABELS[name]} done in {time.perf_counter() - started:.0f} s"
                        + (f" ({results[name]['error']})" if "error" in results[name] else "")
                    )
                rounds.append(results)
            results = rounds[0]
            ratios = compare(results)
            repeated = ingest_rounds(rounds) if args.rounds > 1 else None
            block = {
                "n": n,
                "data": data_info,
                "systems": results,
                "ratios": ratios,
                "targets": targets(results, ratios, repeated),
            }
            if repeated:
                block["ingest_rounds"] = repeated
            report["results"].append(block)
        if args.model and last_workdir is not None:
            _log("default embedding model")
            extra = (
                ["--model-batch-size", str(args.model_batch_size)]
                if (args.model_batch_size)
                else []
            )
            extra += ["--model-backend", args.model_backend]
            report["model"] = _child(
                ["--worker", MODEL, "--workdir", str(last_workdir), *extra], args.timeout
            )
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(render(report))
    failed = [
        name for block in report["results"] for name, r in block["systems"].items() if "error" in r
    ]
    if report["model"] and "error" in report["model"]:
        failed.append(MODEL)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
