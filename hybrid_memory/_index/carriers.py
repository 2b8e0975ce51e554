"""Tag carriers in memory: the tag leg's counts without a SQL lookup per memory.

The tag leg asks, on every search, which memories carry the tags the query matched:
each tag's newest carriers, and how many of the tags each of the other legs' hits
carries. In SQL that is an index probe per (memory, tag) pair; against a sorted array
of each tag's carriers it is one ``searchsorted``.

:class:`TagCarriers` keeps, for the tags asked for recently, the row ids of their
carriers (ascending) and those memories' creation times. It is derived state: filled
from the index's ``memory_tags`` table and kept in step with it by
:class:`~hybrid_memory._index.tags.TagIndex`, which empties it whenever another
connection wrote. Nothing here does I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from hybrid_memory._index.postings import FloatArray, IntArray

BoolArray = npt.NDArray[np.bool_]
_T = TypeVar("_T", bound=np.generic)

CAPACITY = 2_000_000  # carrier entries kept over all tags (16 bytes each); least recent go first


class _Tag:
    """One tag's carriers: row ids ascending, their creation times, and (once asked
    for) their positions oldest first.

    The arrays keep room to grow: carriers above every held row (new memories) are
    written in place, and when they are also the newest (a memory just stored) their
    positions go at the end of the time order. Copying every carrier of a common tag on
    each add cost a time that grows with the store."""

    __slots__ = ("_created", "_oldest", "_rows", "_size")

    def __init__(self, rows: IntArray, created: FloatArray) -> None:
        self._rows = rows
        self._created = created
        self._size = len(rows)
        self._oldest: IntArray | None = None  # positions oldest first (its first _size)

    @property
    def rows(self) -> IntArray:
        return self._rows[: self._size]

    @property
    def created(self) -> FloatArray:
        return self._created[: self._size]

    def newest_first(self) -> IntArray:
        # Ties in time: the later row first (as SQLite reads a (tag, created_at) index
        # backwards, which the SQL form of this leg does).
        if self._oldest is None:
            self._oldest = np.lexsort((self.rows, self.created))
        return self._oldest[: self._size][::-1]

    def append(self, rows: IntArray, created: FloatArray) -> None:
        """Add carriers above every held row (``rows`` ascending)."""
        held, added = self._size, len(rows)
        room = held + added + (held >> 3) + 16  # an eighth more: amortised copies
        if held + added > len(self._rows):
            self._rows = _with_room(self._rows, held, room)
            self._created = _with_room(self._created, held, room)
        if self._oldest is not None and held + added > len(self._oldest):
            self._oldest = _with_room(self._oldest, held, room)
        self._rows[held : held + added] = rows
        self._created[held : held + added] = created
        self._size = held + added
        if self._oldest is None:
            return
        order = held + np.lexsort((rows, created))  # the new positions, oldest first
        times = self._created[order]
        if not held or times[0] >= self._created[self._oldest[held - 1]]:
            self._oldest[held : held + added] = order  # newer than every held carrier
            return
        # Among the held ones by time; a new row, above every held one, comes after
        # those of equal time.
        oldest = self._oldest[:held]
        at = np.searchsorted(self._created[oldest], times, side="right")
        self._oldest = np.insert(oldest, at, order)

    def positions(self, rows: IntArray) -> tuple[IntArray, BoolArray]:
        """Where each of ``rows`` sits in this tag's rows, and whether it is there."""
        held = self.rows
        at = np.searchsorted(held, rows)
        found = at < len(held)
        found[found] = held[at[found]] == rows[found]
        return at, found


def _with_room(values: npt.NDArray[_T], used: int, size: int) -> npt.NDArray[_T]:
    """``values[:used]`` copied into a new array of ``size`` entries."""
    grown = np.empty(size, dtype=values.dtype)
    grown[:used] = values[:used]
    return grown


class TagCarriers:
    """Carriers of recently asked tags, ``capacity`` entries at most (least recently
    asked tags dropped first)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._tags: OrderedDict[str, _Tag] = OrderedDict()
        self._size = 0

    def __contains__(self, tag: str) -> bool:
        return tag in self._tags

    def __len__(self) -> int:
        """How many tags are held."""
        return len(self._tags)

    def missing(self, tags: Iterable[str]) -> list[str]:
        """Those of ``tags`` not held (to be read with :meth:`put`)."""
        return [t for t in dict.fromkeys(tags) if t not in self._tags]

    def put(self, tag: str, rows: IntArray, created: FloatArray, keep: Iterable[str] = ()) -> None:
        """Hold ``tag``'s carriers: row ids ascending, with their creation times. Over
        capacity, the least recently asked tags go, except ``tag`` and those in ``keep``
        (the other tags a search is about to read: they stay even past capacity)."""
        self._drop(tag)
        self._tags[tag] = _Tag(rows, created)
        self._size += len(rows)
        if self._size > self.capacity:
            kept = {tag, *keep}
            for old in [t for t in self._tags if t not in kept]:
                if self._size <= self.capacity:
                    break
                self._drop(old)

    def _drop(self, tag: str) -> None:
        held = self._tags.pop(tag, None)
        if held is not None:
            self._size -= len(held.rows)

    def _held(self, tag: str) -> _Tag:
        self._tags.move_to_end(tag)
        return self._tags[tag]

    def newest(
        self, tag: str, limit: int, within: IntArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """The ``limit`` newest carriers of a held ``tag`` (among the row ids ``within``,
        when given): row ids and creation times, newest first."""
        held = self._held(tag)
        order = held.newest_first()
        if within is not None:
            order = order[np.isin(held.rows[order], within, assume_unique=True)]
        order = order[:limit]
        return held.rows[order], held.created[order]

    def counts(self, rows: IntArray, tags: Sequence[str]) -> tuple[IntArray, FloatArray]:
        """For each of ``rows``: how many of the held ``tags`` it carries, and its
        creation time (0.0 for rows carrying none)."""
        matched = np.zeros(len(rows), dtype=np.int64)
        created = np.zeros(len(rows), dtype=np.float64)
        for tag in dict.fromkeys(tags):
            held = self._held(tag)
            at, found = held.positions(rows)
            matched += found
            created[found] = held.created[at[found]]
        return matched, created

    def add(
        self, rows: Sequence[int], tags: Sequence[Iterable[str]], created: Sequence[float]
    ) -> None:
        """New index rows (``rows[i]`` carries ``tags[i]``, made at ``created[i]``) into
        the held tags they carry."""
        self.add_rows(
            (row, tag, when)
            for row, row_tags, when in zip(rows, tags, created, strict=True)
            for tag in row_tags
        )

    def add_rows(self, carried: Iterable[tuple[int, str, float]]) -> None:
        """:meth:`add` from ``(row, tag, created)`` triples; rows already held are
        kept once."""
        new: dict[str, tuple[list[int], list[float]]] = {}
        for row, tag, when in carried:
            if tag in self._tags:
                entry = new.setdefault(tag, ([], []))
                entry[0].append(row)
                entry[1].append(when)
        for tag, (added, times) in new.items():
            held = self._tags[tag]
            before = len(held.rows)
            rows = np.asarray(added, dtype=np.int64)
            created = np.asarray(times, dtype=np.float64)
            if (not before or rows.min() > held.rows[-1]) and (np.diff(rows) > 0).all():
                held.append(rows, created)
            else:  # among the held rows, or repeated: sorted and kept once
                merged, first = np.unique(np.concatenate([held.rows, rows]), return_index=True)
                held = self._tags[tag] = _Tag(
                    merged, np.concatenate([held.created, created])[first]
                )
            self._size += len(held.rows) - before

    def remove(self, rows: Sequence[int]) -> None:
        """Index rows gone (deleted, or replaced by an update's new row)."""
        if not len(rows):
            return
        gone = np.unique(np.asarray(rows, dtype=np.int64))
        for tag, held in list(self._tags.items()):
            at, found = held.positions(gone)
            if found.any():
                keep = np.ones(len(held.rows), dtype=bool)
                keep[at[found]] = False
                self._tags[tag] = _Tag(held.rows[keep], held.created[keep])
                self._size -= int(found.sum())

    def clear(self) -> None:
        self._tags.clear()
        self._size = 0
