"""The common part of every embedder made here: texts embedded in batches, each batch's
vectors checked, a model's failure turned into :class:`EmbeddingError`."""

from __future__ import annotations

from typing import Any

import numpy as np

from hybrid_memory._embedding.vectors import Matrix, Vector, checked_matrix
from hybrid_memory._model.errors import EmbeddingError


class BatchingEmbedder:
    """Common batching and validation around a ``texts -> vectors`` function."""

    def __init__(self, name: str, batch_size: int) -> None:
        self.name = name
        self.batch_size = batch_size

    def _embed(self, texts: list[str], *, query: bool) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError

    def embed_matrix(self, texts: list[str]) -> Matrix:
        """Document vectors as one float32 matrix, one row per text, in batches."""
        batches = [
            self._call(texts[start : start + self.batch_size], query=False)
            for start in range(0, len(texts), self.batch_size)
        ]
        return np.concatenate(batches) if batches else np.zeros((0, 0), dtype=np.float32)

    def embed_documents(self, texts: list[str]) -> list[Vector]:
        return self.embed_matrix(texts).tolist()

    def embed_query(self, text: str) -> Vector:
        return self._call([text], query=True)[0].tolist()

    def _call(self, texts: list[str], *, query: bool) -> Matrix:
        try:
            raw = self._embed(texts, query=query)
        except EmbeddingError:
            raise
        except Exception as exc:
            raise EmbeddingError(f"embedding model {self.name!r} failed: {exc}") from exc
        return checked_matrix(raw, len(texts), f"embedding model {self.name!r}")
