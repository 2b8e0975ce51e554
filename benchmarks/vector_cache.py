"""A disk cache of embedding vectors for the quality studies, keyed by model and text.

Sweeps over fusion settings run the same corpus through the model again and again;
on a shared 2-core machine that costs minutes per run. This wraps the default model
(or any hybrid-memory Embedder) and keeps every vector it computes in one SQLite file,
``~/.cache/hybrid-memory/vectors.sqlite`` (``HYBRID_MEMORY_VECTOR_CACHE`` to move it),
keyed by ``sha1(model name NUL text)``. Cached vectors are the model's own, bit for bit.

    from benchmarks.vector_cache import CachedEmbedding
    embedding = CachedEmbedding()                 # all-MiniLM-L6-v2, cached on disk
    HybridMemory(embedding=embedding)             # or evaluate(..., embedding=embedding)
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np

DEFAULT_PATH = Path.home() / ".cache" / "hybrid-memory" / "vectors.sqlite"


class CachedEmbedding:
    """``embed_documents`` / ``embed_query`` through a disk cache (LangChain-style)."""

    def __init__(self, embedder: Any = None, path: str | Path | None = None) -> None:
        if embedder is None:
            from hybrid_memory.testing import sentence_transformers_embedder

            embedder = sentence_transformers_embedder()
        self._embedder = embedder
        self.model_name = str(getattr(embedder, "model_name", embedder.name))
        self.name = embedder.name
        target = Path(path or os.environ.get("HYBRID_MEMORY_VECTOR_CACHE") or DEFAULT_PATH)
        target.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(target), check_same_thread=False)
        self._conn.execute("CREATE TABLE IF NOT EXISTS v (key TEXT PRIMARY KEY, vec BLOB)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def _key(self, text: str) -> str:
        return hashlib.sha1(f"{self.name}\0{text}".encode()).hexdigest()

    def matrix(self, texts: list[str]) -> np.ndarray:
        """The vectors of ``texts`` as a float32 matrix, computing only the missing ones."""
        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, blob in self._conn.execute(
                    f"SELECT key, vec FROM v WHERE key IN ({marks})", chunk
                ):
                    found[key] = np.frombuffer(blob, dtype=np.float32)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        self.hits += len(texts) - len(missing)
        self.misses += len(missing)
        if missing:
            computed = np.asarray(self._embedder.embed_documents(missing), dtype=np.float32)
            rows = [(self._key(t), v.tobytes()) for t, v in zip(missing, computed, strict=True)]
            with self._lock:
                self._conn.executemany("INSERT OR REPLACE INTO v VALUES (?, ?)", rows)
                self._conn.commit()
            for (key, _), vector in zip(rows, computed, strict=True):
                found[key] = vector
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([found[k] for k in keys])

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.matrix(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.matrix([text])[0].tolist()
