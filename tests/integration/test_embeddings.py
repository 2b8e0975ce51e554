"""Every kind of embedding the engine accepts, as real framework objects."""

from __future__ import annotations

import chromadb
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from hybrid_memory import EmbeddingError, HybridMemory, InvalidInputError

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
