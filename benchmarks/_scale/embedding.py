"""The cheap embeddings: a deterministic hashing embedding and a lookup table of its
vectors, so that what is timed is the engine, not a model."""

from __future__ import annotations

import re
import time
import zlib
from collections.abc import Callable, Sequence

import numpy as np

from .constants import DIM

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
