"""Query embeddings kept in a bounded LRU, so a repeated query is embedded once, and
where a new one is embedded: beside the keyword leg, or at once when it is fast."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from concurrent.futures import Executor, Future

from hybrid_memory._embedding.embedders import Embedder
from hybrid_memory._embedding.vectors import Vector


class QueryCache:
    """A bounded LRU of query embeddings, so a repeated query is embedded once; and
    where a new query is embedded (:meth:`embedding`)."""

    # A query embedding typically faster than this (seconds) is made in the searching
    # thread: handing it to a worker costs more than running it beside the keyword leg
    # wins back. A model's is worth the hand-off (docs/performance-history.md).
    INLINE_BELOW = 0.0005

    def __init__(self, embedder: Embedder, size: int) -> None:
        self.embedder = embedder
        self.size = size
        self._cache: OrderedDict[str, Vector] = OrderedDict()
        self._lock = threading.Lock()
        # How long this embedder's query embeddings take, a moving average (seconds);
        # None until one was made.
        self.typical_seconds: float | None = None

    def embedding(self, text: str, pool: Executor) -> Future[Vector]:
        """:meth:`embed` as a future, to wait for after other work: run in ``pool``,
        beside that work, unless this embedder's query embeddings are known to be
        faster than :attr:`INLINE_BELOW`; then run here, at once (its error, if any,
        raised by ``result()`` all the same)."""
        typical = self.typical_seconds
        if typical is None or typical >= self.INLINE_BELOW:
            return pool.submit(self.embed, text)
        done: Future[Vector] = Future()
        try:
            done.set_result(self.embed(text))
        except Exception as exc:  # the caller's result() raises it
            done.set_exception(exc)
        return done

    def cached(self, text: str) -> Vector | None:
        """The vector of a query embedded before, if the cache still has it."""
        with self._lock:
            hit = self._cache.get(text)
            if hit is not None:
                self._cache.move_to_end(text)
            return hit

    def embed(self, text: str) -> Vector:
        hit = self.cached(text)
        if hit is not None:
            return hit
        start = time.perf_counter()
        vector = self.embedder.embed_query(text)
        took = time.perf_counter() - start
        typical = self.typical_seconds  # a race between threads only blurs the average
        self.typical_seconds = took if typical is None else 0.8 * typical + 0.2 * took
        if self.size:
            with self._lock:
                self._cache[text] = vector
                if len(self._cache) > self.size:
                    self._cache.popitem(last=False)
        return vector
