"""LangChain's own standard retriever suite (langchain-tests) run against HybridRetriever.

All four standard tests apply as written: ``k`` as a constructor parameter and as
an ``invoke`` keyword, and ``invoke`` / ``ainvoke`` returning Documents. The suite
builds a retriever per test from ``retriever_constructor_params``; they share one
real store (Chroma + SQLite keyword index) filled once for the class.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_tests.integration_tests import RetrieversIntegrationTests

from hybrid_memory import HybridMemory
from hybrid_memory._retriever import HybridRetriever

DIM = 64


def hashed_bow(texts: list[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding (as in test_retriever.py)."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIM
        vector[0] = 0.1
        for word in re.findall(r"\w+", text.casefold()):
            vector[1 + zlib.crc32(word.encode()) % (DIM - 1)] += 1.0
        norm = math.sqrt(sum(x * x for x in vector))
        vectors.append([x / norm for x in vector])
    return vectors


class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    store: HybridMemory

    @pytest.fixture(autouse=True, scope="class")
    def _store(
        self, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[None]:
        store = HybridMemory(path=str(tmp_path_factory.mktemp("standard")), embedding=hashed_bow)
        store.add_many(
            [
                "LangChain retrievers return documents for a query",
                "A retriever may be backed by a vector store",
                "BM25 ranks documents by keyword overlap",
                "Reciprocal rank fusion merges several rankings",
                "Chroma stores embeddings and metadata",
            ]
        )
        request.cls.store = store
        yield
        store.close()

    @property
    def retriever_constructor(self) -> type[HybridRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"memory": self.store}

    @property
    def retriever_query_example(self) -> str:
        return "how does a retriever rank documents?"
