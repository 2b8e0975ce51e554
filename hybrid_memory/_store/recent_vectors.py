"""The vectors of this process's latest writes, compared exactly beside Chroma's index.

Chroma's vector search is approximate (HNSW): in a large store it can miss a memory just
added even when asked with that memory's own vector (Chroma alone, at a million
memories, missed one of 20 such memories in its own top 10). An agent that stores a
fact and asks for it back must get it, so the vector leg also compares the query with
the last :data:`KEPT` memories this process wrote, one matrix-vector product, and ranks
those that reach its cut among the collection's hits (:meth:`RecentVectors.nearest`).

Derived state of this process only; nothing here does I/O. Memories other processes
wrote are compared exactly only when they are among the keyword leg's top (the feedback
memories, :func:`hybrid_memory._search.legs.with_checked`), as a memory asked for by its own
text is; otherwise Chroma's index alone finds them.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

# Latest writes compared exactly. The comparison reads the whole matrix, which a search
# finds out of the CPU caches (Chroma's query ran in between), so every search pays for
# each one kept (docs/performance-history.md).
KEPT = 256


class RecentVectors:
    """The unit vectors of the last ``kept`` memories written, by id (a memory written
    again keeps its latest vector). Thread-safe: writes and searches run in different
    threads."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._lock = threading.Lock()
        self._ids: list[str | None] = []  # the id in each slot (None: forgotten)
        self._slots: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), dtype=np.float32)
        self._used = np.zeros(0, dtype=bool)  # whether each slot holds a memory
        self._next = 0  # the slot written next once every slot is used

    def __len__(self) -> int:
        return len(self._slots)

    def count_of(self, ids: Iterable[str]) -> int:
        """How many of ``ids`` are kept."""
        slots = self._slots
        return sum(1 for memory_id in ids if memory_id in slots)

    def add(self, ids: Sequence[str], vectors: npt.ArrayLike) -> None:
        """Keep the vectors just written for ``ids`` (one row each), the oldest kept
        ones making room. Rows that are not finite or have no length are not kept: no
        cosine can be taken with them."""
        if not self.kept or not len(ids):
            return
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or len(matrix) != len(ids):
            raise ValueError(f"{len(ids)} ids but vectors of shape {matrix.shape}")
        norms = np.linalg.norm(matrix, axis=1)
        usable = np.isfinite(norms) & (norms > 0)
        start = max(0, len(ids) - self.kept)  # only the last ``kept`` can stay
        with self._lock:
            if self._matrix.shape[1] != matrix.shape[1]:
                self._reset(matrix.shape[1])
            for row in range(start, len(ids)):
                if usable[row]:
                    self._put(ids[row], matrix[row] / norms[row])
                else:
                    self._forget(ids[row])

    def forget(self, ids: Iterable[str]) -> None:
        """Memories deleted: no longer compared."""
        with self._lock:
            for memory_id in ids:
                self._forget(memory_id)

    def clear(self) -> None:
        with self._lock:
            self._reset(0)

    def nearest(
        self, query: npt.ArrayLike, floor: float, limit: int | None = None
    ) -> dict[str, float]:
        """The kept memories whose cosine similarity with ``query`` is at least
        ``floor`` (the ``limit`` most similar of them, when given): ``{id: cosine}``,
        most similar first."""
        q = np.asarray(query, dtype=np.float32).ravel()
        length = float(np.linalg.norm(q))
        if not np.isfinite(length) or length == 0.0:
            return {}
        with self._lock:
            if not self._slots or self._matrix.shape[1] != len(q):
                return {}
            used = len(self._ids)
            similarity = (self._matrix[:used] @ q) / length
            similarity[~self._used[:used]] = -np.inf  # forgotten slots
            chosen = np.flatnonzero(similarity >= floor)
            if limit is not None and len(chosen) > limit:
                # Only the best are wanted: a dict of every kept memory above a low
                # floor costs a search more than the cut.
                chosen = chosen[np.argpartition(-similarity[chosen], max(0, limit - 1))[:limit]]
            chosen = chosen[np.argsort(-similarity[chosen], kind="stable")]
            return {
                memory_id: float(similarity[slot])
                for slot in chosen.tolist()
                if (memory_id := self._ids[slot]) is not None
            }

    # --- under the lock ------------------------------------------------------------------

    def _reset(self, dim: int) -> None:
        self._ids, self._slots, self._next = [], {}, 0
        self._matrix = np.zeros((0, dim), dtype=np.float32)
        self._used = np.zeros(0, dtype=bool)

    def _put(self, memory_id: str, unit: npt.NDArray[np.float32]) -> None:
        slot = self._slots.get(memory_id)
        if slot is None:
            if len(self._ids) < self.kept:  # room left: the next slot, growing the matrix
                slot = len(self._ids)
                self._ids.append(None)
                if slot == len(self._matrix):
                    grown = np.zeros(
                        (min(self.kept, max(16, 2 * slot)), self._matrix.shape[1]), np.float32
                    )
                    grown[:slot] = self._matrix[:slot]
                    self._matrix = grown
                    used = np.zeros(len(grown), dtype=bool)
                    used[:slot] = self._used[:slot]
                    self._used = used
            else:  # full: the oldest slot goes
                slot = self._next
                self._next = (slot + 1) % self.kept
                gone = self._ids[slot]
                if gone is not None:
                    del self._slots[gone]
            self._ids[slot] = memory_id
            self._slots[memory_id] = slot
        self._matrix[slot] = unit
        self._used[slot] = True

    def _forget(self, memory_id: str) -> None:
        slot = self._slots.pop(memory_id, None)
        if slot is not None:
            self._ids[slot] = None
            self._matrix[slot] = 0.0
            self._used[slot] = False
