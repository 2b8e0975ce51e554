"""Shared fixtures: a cheap deterministic embedding, real stores, a real Chroma server."""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

SHARED_DATA = Path(
    os.environ.get("HYBRID_MEMORY_SHARED_DATA")
    or Path(__file__).resolve().parents[2] / "shared" / "data"
)


__all__ = ["SHARED_DATA", "HashEmbedding", "SeededEmbedding"]


class HashEmbedding:
    """Hashed bag-of-words vectors: words that overlap give similar vectors.

    Deterministic and instant, so engine tests run without loading a model; the
    tests that are about the real model use it explicitly. ``calls`` counts the
    texts embedded, to check when the engine (re-)embeds.
    """

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension
        self.calls = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls += len(texts)
        out = []
        for text in texts:
            vector = [0.0] * self.dimension
            for word in text.lower().split():
                digest = hashlib.blake2b(word.strip(".,?!").encode(), digest_size=8).digest()
                vector[int.from_bytes(digest[:4], "little") % self.dimension] += 1.0
            norm = math.sqrt(sum(v * v for v in vector)) or 1.0
            out.append([v / norm for v in vector])
        return out


class SeededEmbedding:
    """A random unit vector per distinct text, seeded by the text: deterministic, spread
    like real embeddings, and a memory's own text finds it at similarity 1. (Hashed
    bag-of-words vectors of texts sharing most words tie at one distance, a degenerate
    case where Chroma's HNSW graph loses recall; tests that look memories up by their
    own vector among thousands use this.)

    The tests' own, so that the core's tests need nothing from ``benchmarks``; the load
    benchmarks keep theirs (``benchmarks/seeded_embedding.py``), which no test shares a
    store with."""

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension

    def __call__(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension)
            out.append((vector / np.linalg.norm(vector)).tolist())
        return out


@pytest.fixture
def hash_embedding() -> HashEmbedding:
    return HashEmbedding()


@pytest.fixture
def memory(hash_embedding: HashEmbedding) -> Iterator[object]:
    """An in-memory store with the cheap embedding."""
    from hybrid_memory import HybridMemory

    store = HybridMemory(embedding=hash_embedding, embedding_name="test-hash-64")
    yield store
    store.close()


@pytest.fixture
def store_and_collection(hash_embedding: HashEmbedding) -> Iterator[tuple[Any, Any]]:
    """An in-memory store and its Chroma collection as a plain ``chromadb`` client sees
    it: to read what the store wrote to Chroma, or to write behind the store's back as
    another process or tool would."""
    import chromadb

    from hybrid_memory import HybridMemory

    client = chromadb.EphemeralClient()  # one in-memory Chroma per process: the store's
    name = f"raw-{uuid.uuid4().hex[:12]}"
    store = HybridMemory(
        client=client, collection=name, embedding=hash_embedding, embedding_name="test-hash-64"
    )
    try:
        yield store, client.get_collection(name)
    finally:
        store.close()
        # Records first: Chroma 1.5 otherwise keeps their array-metadata index entries,
        # which a later collection's $contains can match.
        collection = client.get_collection(name)
        while ids := collection.get(limit=1000, include=[])["ids"]:
            collection.delete(ids=ids)
        client.delete_collection(name)


@pytest.fixture
def filter_paths(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set, for one test, the thresholds that choose how a search applies a filter: a
    filter passing at most ``narrow_filter`` memories is resolved once in the index
    (else each leg applies it), and the vector leg compares at most ``exact_search``
    resolved memories with the query one by one (else asks Chroma among them). Tests
    that every path gives the same answer are about those internals: this fixture is
    the one place the suite reaches them (rename here when they move)."""

    def set_paths(*, narrow_filter: int | None = None, exact_search: int | None = None) -> None:
        from hybrid_memory._search import legs as legs
        from hybrid_memory._store.collection import ChromaCollection

        if narrow_filter is not None:
            monkeypatch.setattr(legs.Scope, "NARROW", narrow_filter)
        if exact_search is not None:
            monkeypatch.setattr(ChromaCollection, "compare_all", exact_search)

    return set_paths


def indexed(store: Any) -> list[Any]:
    """The memories the store's keyword index holds, read as they are: ``list_memories``
    answers from the index, and through a view whose sync interval never falls due it
    does so without first checking the collection (which would repair what a test is
    looking at)."""
    return list(store.with_settings(sync_interval=1e9).list_memories())


def index_ids(store: Any) -> set[str]:
    """The ids the store's keyword index holds (see :func:`indexed`)."""
    return {m.id for m in indexed(store)}


def chroma_ids(path: Path, collection: str = "hybrid_memory") -> set[str]:
    """The ids in a store's Chroma collection, read by a plain ``chromadb`` client on
    the store's path."""
    import chromadb

    got = chromadb.PersistentClient(path=str(path)).get_collection(collection).get(include=[])
    return set(got["ids"])


def write_collection(
    folder: Path,
    corpus: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    qrels: dict[str, str],
) -> Path:
    """A collection in the shared evaluation format (``../shared/data/README.md``):
    ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv`` with one relevant memory per
    query, grade 1."""
    import json

    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    rows = "".join(f"{q}\t{d}\t1\n" for q, d in qrels.items())
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + rows)
    return folder


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Chroma server (``chroma run``) on 127.0.0.1, stopped after the session."""
    chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    if not Path(chroma).exists():
        pytest.fail("the chroma CLI is missing: pip install chromadb installs it")
    port = _free_port()
    data = tmp_path_factory.mktemp("chroma-server")
    log = open(data / "server.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [chroma, "run", "--path", str(data / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import chromadb

        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                break
            except Exception:
                if process.poll() is not None or time.monotonic() > deadline:
                    log.flush()
                    output = (data / "server.log").read_text(errors="replace")[-2000:]
                    pytest.fail(f"chroma server did not start on {url}:\n{output}")
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "fault: fault injection (kill -9, damaged files, a server restarted); a short form "
        "runs by default, HYBRID_MEMORY_FAULT_ROUNDS=20 runs the long one",
    )
    config.addinivalue_line(
        "markers",
        "load: processes x threads on one Chroma server (benchmarks/shared_load.py); a short "
        "form runs by default, HYBRID_MEMORY_LOAD_SECONDS=60 runs a longer one",
    )


class ChromaServer:
    """A ``chroma run`` process on 127.0.0.1 that a test stops and starts again (same
    port, same data directory)."""

    def __init__(self, data: Path, port: int | None = None) -> None:
        self.data = data
        self.port = port or _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 60) -> ChromaServer:
        chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
        log = open(self.data / "server.log", "ab")  # noqa: SIM115 - the process keeps it
        self.process = subprocess.Popen(
            [
                chroma,
                "run",
                "--path",
                str(self.data / "db"),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        )
        log.close()
        import chromadb

        deadline = time.monotonic() + timeout
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=self.port).heartbeat()
                return self
            except Exception:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    output = (self.data / "server.log").read_text(errors="replace")[-2000:]
                    self.stop()
                    pytest.fail(f"chroma server did not start on {self.url}:\n{output}")
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
