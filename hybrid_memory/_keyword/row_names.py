"""Each index row's memory id, held beside the postings, and the way back from an id to
its row: ranked rows are named, and memories looked up by id, without SQL (a SQLite
lookup of 100 rows costs ~0.4 ms, a tenth of a search).

A row's id is kept in 32 bytes, which a generated id (uuid4 hex) fills; an id that does
not fit waits in a dict. From ids to rows: the ids of a mapped postings file are sorted
there (:class:`~hybrid_memory._keyword.postings_file.MappedPostings`), those named since
in a dict, merged into sorted arrays of their own once the dict holds a share of the
rows, so that each lookup is a binary search or a dict hit whatever the store's size.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword.postings_file import ID, MappedPostings

_MERGE_SHARE = 32  # the dict of recent ids stays within this share of the live rows
_MERGE_MIN = 4096


def encode(memory_id: str) -> bytes | None:
    """``memory_id`` as the 32 bytes a row keeps, None when it does not fit (numpy drops
    an S value's trailing NUL bytes: such an id would come back short)."""
    encoded = memory_id.encode("utf-8", "surrogatepass")
    if len(encoded) <= ID.itemsize and not encoded.endswith(b"\0"):
        return encoded
    return None


class RowNames:
    """Row id -> memory id and back, for rows up to :attr:`capacity`. Not thread-safe:
    the owner serialises calls, and says which rows are live."""

    def __init__(self, base: MappedPostings | None = None) -> None:
        self._base = base
        self._ids = np.zeros(0, dtype=ID) if base is None else np.array(base.per_row.ids)
        self._long: dict[int, str] = {} if base is None else dict(base.other_ids)
        self._long_rows = {memory_id: row for row, memory_id in self._long.items()}
        self._recent: dict[str, int] = {}  # named since the last merge
        self._sorted_ids = np.zeros(0, dtype=ID)  # merged from _recent, ascending
        self._sorted_rows = np.zeros(0, dtype=np.int64)

    @property
    def ids(self) -> npt.NDArray[np.bytes_]:
        """The 32-byte ids by row (b"": none kept there)."""
        return self._ids

    @property
    def long_ids(self) -> dict[int, str]:
        return self._long

    def grow(self, capacity: int) -> None:
        if capacity > len(self._ids):
            grown = np.zeros(capacity, dtype=ID)  # untouched pages stay unallocated
            grown[: len(self._ids)] = self._ids
            self._ids = grown

    def name(self, rows: Sequence[int], ids: Sequence[str], live: npt.NDArray[np.bool_]) -> None:
        """Keep the memory id of each of ``rows`` (``live``: which rows are live now)."""
        fitting_rows: list[int] = []
        fitting: list[bytes] = []
        for row, memory_id in zip(rows, ids, strict=True):
            encoded = encode(memory_id)
            if encoded is None:
                self._long[row] = memory_id
                self._long_rows[memory_id] = row
            else:
                fitting_rows.append(row)
                fitting.append(encoded)
        if fitting_rows:
            self._ids[np.array(fitting_rows, dtype=np.int64)] = np.array(fitting, dtype=ID)
        self._recent.update(zip(ids, rows, strict=True))
        if len(self._recent) > max(_MERGE_MIN, len(live) // _MERGE_SHARE):
            self._merge_recent(live)

    def forget(self, rows: Sequence[int]) -> None:
        """Rows removed: their long ids need not be kept."""
        for row in rows:
            memory_id = self._long.pop(row, None)
            if memory_id is not None and self._long_rows.get(memory_id) == row:
                del self._long_rows[memory_id]

    def _merge_recent(self, live: npt.NDArray[np.bool_]) -> None:
        """Move the ids named lately (those that fit) into the sorted arrays, leaving out
        rows no longer live (an id then has one live row there at most)."""
        fitting = {i: r for i, r in self._recent.items() if encode(i) is not None}
        names = np.array([encode(i) for i in fitting], dtype=ID)
        rows = np.fromiter(fitting.values(), dtype=np.int64, count=len(fitting))
        names = np.concatenate([self._sorted_ids, names])
        rows = np.concatenate([self._sorted_rows, rows])
        named = live[rows] & (self._ids[rows] == names)
        names, rows = names[named], rows[named]
        order = np.argsort(names, kind="stable")
        self._sorted_ids, self._sorted_rows = names[order], rows[order]
        self._recent = {}

    def ids_of(self, rows: Sequence[int], live: npt.NDArray[np.bool_]) -> dict[int, str]:
        """The memory id of each of ``rows`` that is live and named."""
        at = np.asarray(rows, dtype=np.int64)
        inside = (at >= 0) & (at < len(live))
        at = np.where(inside, at, 0)
        alive = (inside & live[at]).tolist()
        found: dict[int, str] = {}
        for row, name, ok in zip(rows, self._ids[at].tolist(), alive, strict=True):
            if not ok:
                continue
            if name:
                found[row] = name.decode("utf-8", "surrogatepass")
            elif row in self._long:
                found[row] = self._long[row]
        return found

    def rows_of(self, ids: Sequence[str], live: npt.NDArray[np.bool_]) -> dict[str, int]:
        """The live row of each of ``ids`` that was named."""
        found: dict[str, int] = {}
        rest: list[str] = []
        for memory_id in ids:
            row = self._recent.get(memory_id)
            if row is None:
                row = self._long_rows.get(memory_id)
            if row is not None and 0 <= row < len(live) and live[row]:
                found[memory_id] = row
            else:
                rest.append(memory_id)
        fitting = [(i, e) for i in rest if (e := encode(i)) is not None]
        if not fitting or not len(live):
            return found
        names = np.array([e for _, e in fitting], dtype=ID)
        candidates = [self._lookup(self._sorted_ids, self._sorted_rows, names)]
        if self._base is not None:
            candidates.append(self._base.row_of(names))
        for rows in candidates:
            inside = (rows >= 0) & (rows < len(live))
            ok = inside & live[np.where(inside, rows, 0)]
            ok &= self._ids[np.where(ok, rows, 0)] == names  # named so still
            for (memory_id, _), row, hit in zip(fitting, rows.tolist(), ok.tolist(), strict=True):
                if hit and memory_id not in found:
                    found[memory_id] = row
        return found

    @staticmethod
    def _lookup(
        sorted_ids: npt.NDArray[np.bytes_],
        sorted_rows: npt.NDArray[np.int64],
        names: npt.NDArray[np.bytes_],
    ) -> npt.NDArray[np.int64]:
        if not len(sorted_ids):
            return np.full(len(names), -1, dtype=np.int64)
        at = np.minimum(np.searchsorted(sorted_ids, names), len(sorted_ids) - 1)
        return np.where(sorted_ids[at] == names, sorted_rows[at], -1)
