"""A cheap deterministic embedding for load and fault tests: a random unit vector per
distinct text, seeded by the text, for benchmarks/shared_load.py and fleet_start.py. The
tests keep their own copy (tests/conftest.py), so the core's tests do not depend on the
benchmarks."""

from __future__ import annotations

import hashlib

import numpy as np


class SeededEmbedding:
    """A random unit vector per distinct text, seeded by the text: deterministic, spread
    like real embeddings, and a memory's own text finds it at similarity 1. (Hashed
    bag-of-words vectors of texts sharing most words tie at one distance, a degenerate
    case where Chroma's HNSW graph loses recall; tests that look memories up by their
    own vector among thousands use this.)"""

    def __init__(self, dimension: int = 64) -> None:
        self.dimension = dimension

    def __call__(self, texts: list[str]) -> list[list[float]]:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            vector = np.random.default_rng(seed).standard_normal(self.dimension)
            out.append((vector / np.linalg.norm(vector)).tolist())
        return out
