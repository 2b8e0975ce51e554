"""Every kind of embedding the engine accepts, as real framework objects."""

from __future__ import annotations

import threading
import time

import chromadb
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from hybrid_memory import EmbeddingError, HybridMemory, InvalidInputError
from hybrid_memory._embedding.query_cache import QueryCache

from ..conftest import HashEmbedding


class ChromaHashFunction(EmbeddingFunction[Documents]):
    """A Chroma embedding function (the protocol: ``__call__(self, input)``)."""

    def __init__(self) -> None:
        self.hashed = HashEmbedding(32)

    def __call__(self, input: Documents) -> Embeddings:
        import numpy as np

        return [np.asarray(v, dtype=np.float32) for v in self.hashed(list(input))]

    @staticmethod
    def name() -> str:
        return "test-chroma-hash"


def langchain_embedding() -> object:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    return DeterministicFakeEmbedding(size=24)


def llama_index_embedding() -> object:
    from llama_index.core.embeddings import MockEmbedding

    return MockEmbedding(embed_dim=16)


@pytest.mark.parametrize(
    ("make", "dimension"),
    [
        (langchain_embedding, 24),
        (llama_index_embedding, 16),
        (ChromaHashFunction, 32),
        (lambda: HashEmbedding(8), 8),
    ],
    ids=["langchain", "llama-index", "chroma-function", "callable"],
)
def test_each_kind_of_embedding_stores_and_searches(make: object, dimension: int) -> None:
    embedding = make()  # type: ignore[operator]
    with HybridMemory(embedding=embedding) as store:
        store.add_many(["the cat sat on the mat", "quarterly revenue grew"], allow_duplicates=True)
        assert len(store.embedder.embed_query("anything")) == dimension
        hits = store.search("revenue", alpha=0.5)
        assert hits and hits[0].text == "quarterly revenue grew"
        assert "vector" in hits[0].ranks


def test_the_chroma_function_name_is_recorded() -> None:
    client = chromadb.EphemeralClient()
    with HybridMemory(client=client, collection="ef-name", embedding=ChromaHashFunction()) as s:
        s.add("x marks the spot")
    assert client.get_collection("ef-name").metadata["hm:embedding"] == "chroma:test-chroma-hash"


def test_broken_embeddings_are_clear_errors_and_store_nothing() -> None:
    def wrong_count(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]]

    def not_finite(texts: list[str]) -> list[list[float]]:
        return [[float("nan"), 1.0] for _ in texts]

    for function, message in [(wrong_count, "shape"), (not_finite, "NaN")]:
        with HybridMemory(embedding=function) as store:
            with pytest.raises(EmbeddingError, match=message):
                store.add_many(["one", "two"])
            assert store.count() == 0
    with pytest.raises(InvalidInputError, match=r"^embedding"):
        HybridMemory(embedding="all-MiniLM-L6-v2")


class TimedQueries:
    """A LangChain-style embedding that records the thread each query is embedded in,
    each query taking ``seconds`` (a sleep: a model's call releases the GIL too)."""

    def __init__(self, seconds: float) -> None:
        self.hashed = HashEmbedding(16)
        self.seconds = seconds
        self.threads: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.hashed(texts)

    def embed_query(self, text: str) -> list[float]:
        self.threads.append(threading.current_thread().name)
        if self.seconds:
            time.sleep(self.seconds)
        return self.hashed([text])[0]


@pytest.mark.parametrize(
    ("seconds", "beside"), [(0.0, False), (0.01, True)], ids=["instant", "model-like"]
)
def test_a_fast_query_embedding_is_made_at_once_a_slow_one_beside_the_keyword_leg(
    monkeypatch: pytest.MonkeyPatch, seconds: float, beside: bool
) -> None:
    # A margin for a busy machine: the instant one takes microseconds, the other 10 ms.
    monkeypatch.setattr(QueryCache, "INLINE_BELOW", 0.002)
    embedding = TimedQueries(seconds)
    store = HybridMemory(embedding=embedding, embedding_name="test-timed-16")
    try:
        words = ["anchor", "bollard", "cargo", "derrick", "ensign", "funnel"]
        store.add_many([{"text": f"the harbour crane and its {w}"} for w in words])
        # Each question a word of one memory alone: a word most memories hold would be
        # left out of the relevance, which embeds the question once more without it.
        results = [store.search(w, k=3) for w in words[:5]]
        here = threading.current_thread().name
        # Nothing is known of the embedding at first: a worker makes it.
        assert embedding.threads[0] != here
        assert len(embedding.threads) == 5  # one per new question
        assert [name != here for name in embedding.threads[1:]] == [beside] * 4
        for word, result in zip(words, results, strict=False):
            assert not result.fallback_mode
            assert result[0].text == f"the harbour crane and its {word}"
            assert result[0].ranks.keys() >= {"vector", "keyword"}
    finally:
        store.close()
