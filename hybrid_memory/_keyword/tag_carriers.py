"""Tag carriers in memory: the tag leg's counts without a SQL lookup per memory.

The tag leg asks, on every search, which memories carry the tags the query matched:
each tag's newest carriers, and how many of the tags each of the other legs' hits
carries. In SQL that is an index probe per (memory, tag) pair; against a sorted array
of each tag's carriers it is one ``searchsorted``.

:class:`TagCarriers` keeps, for the tags asked for recently (for every tag, when they
fit), the row ids of their carriers (ascending) and those memories' creation times. It
is derived state: filled from the index's ``memory_tags`` table and kept in step with it
by :class:`~hybrid_memory._keyword.tag_index.TagIndex`, through this connection's writes and
the rows other connections wrote. Nothing here does I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword.bm25_scores import FloatArray, IntArray
from hybrid_memory._keyword.postings_file import KeptCarriers

BoolArray = npt.NDArray[np.bool_]
RowArray = npt.NDArray[np.int32]
_T = TypeVar("_T", bound=np.generic)

# Carrier entries kept over all tags, least recently asked tags dropped first: 8 bytes
# each (a row id and its place in the tag's time order), beside 8 bytes per row for its
# creation time, which every tag it carries shares. A million memories with two or three
# tags each hold ~2.2 million: they all fit, so no search has to read a tag's carriers
# again (a common tag's: 0.1-0.3 s at a million).
CAPACITY = 8_000_000
_ROW = np.int32  # row ids, as the postings keep them (their bound holds for the index)
_MAX_ROW = int(np.iinfo(_ROW).max)


def _as_rows(rows: npt.ArrayLike) -> RowArray:
    """Row ids as the carriers hold them; a row id beyond their width is refused."""
    values = np.asarray(rows, dtype=np.int64)
    if len(values) and (int(values.min()) < 0 or int(values.max()) > _MAX_ROW):
        raise ValueError(f"row ids must be in [0, {_MAX_ROW}]")
    return values.astype(_ROW)


class _Tag:
    """One tag's carriers: row ids ascending and (once made: when a write starts the tag,
    when it is read, or by the first search asking) their positions oldest first, by
    the creation times the owner keeps per row (``times``).

    The arrays keep room to grow: carriers above every held row (new memories) are
    written in place, and when they are also the newest (a memory just stored) their
    positions go at the end of the time order. Copying every carrier of a common tag on
    each add cost a time that grows with the store.

    The time order is held as runs, each oldest first (``_runs``: where each starts). A
    batch older than the last run's newest carrier (an import of old memories, a fill
    whose times wrap) starts a run of its own, and runs are merged two at a time so that
    each holds more than twice the next (a handful, each carrier merged a few times
    over a store's life). A tag's newest carriers are the newest of the runs' tails;
    the whole order (a filtered search's) merges them all (merging them for every
    search's newest instead cost the first 1.2-2.5 ms for 45,000 carriers, more than a
    sort). Before, such a batch let the order go (no search had used it) or was merged
    into it (one had): the first search naming a tag after a fill whose times wrapped
    sorted all its carriers (~1.4 ms for 45,000 at a million memories, for each tag a
    question names), and a merge per tag and batch cost a time growing with the store."""

    __slots__ = ("_oldest", "_rows", "_runs", "_size")

    def __init__(
        self, rows: RowArray, oldest: RowArray | None = None, runs: Sequence[int] = (0,)
    ) -> None:
        self._rows = rows
        self._size = len(rows)
        self._oldest = oldest  # positions oldest first (its first _size); None: not made
        self._runs = list(runs)  # where each time-ordered run of _oldest starts: 0, ...

    @classmethod
    def ordered(cls, rows: RowArray, times: FloatArray) -> _Tag:
        """A tag of ``rows`` with its time order made at once (cheap for the few rows a
        write starts a tag with; appends then keep it: see :meth:`append`)."""
        return cls(rows, np.lexsort((rows, times[rows])).astype(_ROW))

    @property
    def rows(self) -> RowArray:
        return self._rows[: self._size]

    def order(self, times: FloatArray) -> RowArray:
        """The positions of the rows oldest first, by their creation times ``times``
        (made the first time; its runs merged into one whenever there are several).
        Ties in time: the lower row first, so that read backwards the later row comes
        first (as SQLite reads a (tag, created_at) index backwards, which the SQL form of
        this leg does)."""
        if self._oldest is None:
            rows = self.rows
            self._oldest = np.lexsort((rows, times[rows])).astype(_ROW)
        while len(self._runs) > 1:
            self._merge_last(times)
        return self._oldest[: self._size]

    def newest(self, times: FloatArray, limit: int) -> RowArray:
        """The positions of the ``limit`` newest rows, newest first (:meth:`order` read
        backwards), from the runs' tails when the order is held in several."""
        if self._oldest is None or len(self._runs) == 1:
            return self.order(times)[::-1][:limit]
        ends = [*self._runs[1:], self._size]
        tails = np.concatenate(
            [
                self._oldest[max(start, end - limit) : end]
                for start, end in zip(self._runs, ends, strict=True)
            ]
        )
        rows = self._rows[tails]
        return tails[np.lexsort((rows, times[rows]))[::-1][:limit]]

    def without(self, keep: BoolArray) -> _Tag:
        """This tag without the rows where ``keep`` (one flag per row) is False, its time
        order kept (the rest keep their order and runs: no sort)."""
        if self._oldest is None:
            return _Tag(self.rows[keep])
        oldest = self._oldest[: self._size]
        in_order = keep[oldest]
        renumbered = np.cumsum(keep) - 1  # each kept row's position among those kept
        kept_before = np.concatenate([[0], np.cumsum(in_order)])  # at each place in order
        left = int(kept_before[-1])
        starts = {int(kept_before[start]) for start in self._runs[1:]}
        runs = [0, *sorted(start for start in starts if 0 < start < left)]  # none empty
        return _Tag(self.rows[keep], renumbered[oldest[in_order]].astype(_ROW), runs)

    def append(self, rows: RowArray, times: FloatArray) -> None:
        """Add carriers above every held row (``rows`` ascending, their times in
        ``times`` already). The time order, when made, is kept: new carriers newer than
        every one of the last run go at its end; older ones start a run of their own."""
        held, added = self._size, len(rows)
        room = held + added + (held >> 3) + 16  # an eighth more: amortised copies
        if held + added > len(self._rows):
            self._rows = _with_room(self._rows, held, room)
        if self._oldest is not None and held + added > len(self._oldest):
            self._oldest = _with_room(self._oldest, held, room)
        self._rows[held : held + added] = rows
        self._size = held + added
        if self._oldest is None:
            return
        created = times[rows]
        order = np.lexsort((rows, created))  # the new ones, oldest first
        self._oldest[held : held + added] = held + order
        last = self._oldest[held - 1] if held else None
        if last is None or created[order[0]] >= times[self._rows[last]]:
            return  # newer than every carrier of the last run: it goes on
        self._settle(times, upto=held)
        self._runs.append(held)
        self._settle(times)

    def _settle(self, times: FloatArray, upto: int | None = None) -> None:
        """Merge the last two runs (of the order's first ``upto``) while the last is at
        least half the one before: each run stays more than twice the next."""
        end = self._size if upto is None else upto
        while len(self._runs) > 1 and 2 * (end - self._runs[-1]) >= (
            self._runs[-1] - self._runs[-2]
        ):
            self._merge_last(times, end)

    def _merge_last(self, times: FloatArray, end: int | None = None) -> None:
        """Merge the last two runs (ending at ``end``) into one. The later run's rows are
        above the earlier's (appended after them), so among equal times they go after."""
        assert self._oldest is not None
        end = self._size if end is None else end
        start, later = self._runs[-2], self._runs.pop()
        earlier, after = self._oldest[start:later], self._oldest[later:end]
        at = np.searchsorted(times[self._rows[earlier]], times[self._rows[after]], side="right")
        self._oldest[start:end] = np.insert(earlier, at, after)

    def positions(self, rows: RowArray) -> tuple[IntArray, BoolArray]:
        """Where each of ``rows`` sits in this tag's rows, and whether it is there."""
        held = self.rows
        at = np.searchsorted(held, rows)
        found = at < len(held)
        found[found] = held[at[found]] == rows[found]
        return at, found


_NONE = _Tag(np.zeros(0, dtype=_ROW))  # a tag that no memory carries


def _with_room(values: npt.NDArray[_T], used: int, size: int) -> npt.NDArray[_T]:
    """``values[:used]`` copied into a new array of ``size`` entries."""
    grown = np.empty(size, dtype=values.dtype)
    grown[:used] = values[:used]
    return grown


class TagCarriers:
    """Carriers of recently asked tags, ``capacity`` entries at most (least recently
    asked tags dropped first).

    When :attr:`complete`, every tag's carriers are held: a tag not held has none, and
    rows written carrying a tag not held yet start it. That holds from the start for an
    index opened empty (every row comes through :meth:`add` or :meth:`add_rows`), and
    after the owner read every tag (:meth:`put` ... :meth:`held_all`); it ends when a
    tag has to go for room, and at :meth:`clear`."""

    def __init__(self, capacity: int = CAPACITY, *, complete: bool = False) -> None:
        self.capacity = capacity
        self.complete = complete
        self._tags: OrderedDict[str, _Tag] = OrderedDict()
        self._size = 0
        self._times = np.zeros(0, dtype=np.float64)  # each held row's creation time

    def export(self) -> KeptCarriers | None:
        """Every tag's carriers, to keep beside the index (None unless :attr:`complete`)."""
        if not self.complete:
            return None
        tags = sorted(self._tags)
        held = [self._tags[t] for t in tags]
        return KeptCarriers(
            tags, [h.rows for h in held], [h.order(self._times) for h in held], self._times
        )

    @classmethod
    def from_kept(cls, kept: KeptCarriers, capacity: int = CAPACITY) -> TagCarriers:
        """Every tag's carriers as :meth:`export` gave them (the arrays may be views of
        a mapped file: a tag's arrays are copied before anything is written to them)."""
        carriers = cls(capacity, complete=True)
        carriers._times = np.array(kept.times, dtype=np.float64)
        for tag, rows, oldest in zip(kept.tags, kept.rows, kept.oldest, strict=True):
            carriers._tags[tag] = _Tag(rows, oldest)
            carriers._size += len(rows)
        carriers._make_room(set())
        return carriers

    def __contains__(self, tag: str) -> bool:
        return tag in self._tags

    def __len__(self) -> int:
        """How many tags are held."""
        return len(self._tags)

    def missing(self, tags: Iterable[str]) -> list[str]:
        """Those of ``tags`` not held (to be read with :meth:`put`); none when complete."""
        if self.complete:
            return []
        return [t for t in dict.fromkeys(tags) if t not in self._tags]

    def put(
        self, tag: str, rows: npt.ArrayLike, created: npt.ArrayLike, keep: Iterable[str] = ()
    ) -> None:
        """Hold ``tag``'s carriers: row ids ascending, with their creation times. Over
        capacity, the least recently asked tags go, except ``tag`` and those in ``keep``
        (the other tags a search is about to read: they stay even past capacity)."""
        held = _as_rows(rows)
        self._set_times(held, np.asarray(created, dtype=np.float64))
        self._drop(tag)
        # The time order made now rather than by the first search that asks for the tag's
        # newest: at 1,000,000 memories a tag with 55,000 carriers took that search 4-6 ms
        # longer. (A tag that rows written here start gets its order at its start, kept
        # while carriers come in time order: :meth:`_Tag.append`.)
        self._tags[tag] = _Tag.ordered(held, self._times)
        self._size += len(held)
        self._make_room({tag, *keep})

    def held_all(self) -> None:
        """The owner :meth:`put` every tag that has carriers: the rest have none."""
        if self._size <= self.capacity:
            self.complete = True

    def _make_room(self, kept: set[str]) -> None:
        if self._size <= self.capacity:
            return
        self.complete = False
        for old in [t for t in self._tags if t not in kept]:
            if self._size <= self.capacity:
                break
            self._drop(old)

    def _set_times(self, rows: RowArray, created: FloatArray) -> None:
        if not len(rows):
            return
        top, held = int(rows.max()) + 1, len(self._times)
        if top > held:  # rows never set are never read: no need to zero them
            self._times = _with_room(self._times, held, max(top, held + (held >> 2)))
        self._times[rows] = created

    def _drop(self, tag: str) -> None:
        held = self._tags.pop(tag, None)
        if held is not None:
            self._size -= len(held.rows)

    def _held(self, tag: str) -> _Tag:
        held = self._tags.get(tag)
        if held is None:
            if self.complete:
                return _NONE
            raise KeyError(tag)
        self._tags.move_to_end(tag)
        return held

    def newest(
        self, tag: str, limit: int, within: IntArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """The ``limit`` newest carriers of a held ``tag`` (among the row ids ``within``,
        when given): row ids and creation times, newest first."""
        held = self._held(tag)
        if within is None:
            order = held.newest(self._times, limit)
        else:
            order = held.order(self._times)[::-1]
            order = order[np.isin(held.rows[order], within, assume_unique=True)]
        rows = held.rows[order[:limit]].astype(np.int64)
        return rows, self._times[rows]

    def counts(self, rows: IntArray, tags: Sequence[str]) -> tuple[IntArray, FloatArray]:
        """For each of ``rows``: how many of the held ``tags`` it carries, and its
        creation time (0.0 for rows carrying none)."""
        rows = np.asarray(rows, dtype=np.int64)
        matched = np.zeros(len(rows), dtype=np.int64)
        created = np.zeros(len(rows), dtype=np.float64)
        inside = (rows >= 0) & (rows <= _MAX_ROW)
        asked = np.where(inside, rows, 0).astype(_ROW)  # searched at the carriers' width
        for tag in dict.fromkeys(tags):
            matched += self._held(tag).positions(asked)[1] & inside
        carrying = matched > 0
        created[carrying] = self._times[rows[carrying]]
        return matched, created

    def add(
        self, rows: Sequence[int], tags: Sequence[Iterable[str]], created: Sequence[float]
    ) -> None:
        """New index rows (``rows[i]`` carries ``tags[i]``, made at ``created[i]``) into
        the held tags they carry (every tag, when complete)."""
        self.add_rows(
            (row, tag, when)
            for row, row_tags, when in zip(rows, tags, created, strict=True)
            for tag in row_tags
        )

    def add_rows(self, carried: Iterable[tuple[int, str, float]]) -> None:
        """:meth:`add` from ``(row, tag, created)`` triples; rows already held are
        kept once."""
        new: dict[str, tuple[list[int], list[float]]] = {}
        held_tags, complete = self._tags, self.complete
        for row, tag, when in carried:
            if complete or tag in held_tags:
                entry = new.setdefault(tag, ([], []))
                entry[0].append(row)
                entry[1].append(when)
        for tag, (added, times) in new.items():
            rows = _as_rows(added)
            self._set_times(rows, np.asarray(times, dtype=np.float64))
            held = self._tags.get(tag)
            if held is None:  # complete: a tag nobody carried yet
                held = self._tags[tag] = _Tag.ordered(np.unique(rows), self._times)
                self._size += len(held.rows)
                continue
            before = len(held.rows)
            if (not before or int(rows.min()) > int(held.rows[-1])) and bool(
                (np.diff(rows) > 0).all()
            ):
                held.append(rows, self._times)
            else:  # among the held rows, or repeated: sorted and kept once
                held = self._tags[tag] = _Tag(np.unique(np.concatenate([held.rows, rows])))
            self._size += len(held.rows) - before
        if new:
            self._make_room(set(new))

    def remove(self, rows: Sequence[int]) -> None:
        """Index rows gone (deleted, or replaced by an update's new row)."""
        if not len(rows):
            return
        every = np.unique(np.asarray(rows, dtype=np.int64))
        gone: RowArray = every[(every >= 0) & (every <= _MAX_ROW)].astype(_ROW)
        for tag, held in list(self._tags.items()):
            at, found = held.positions(gone)
            if found.any():
                keep = np.ones(len(held.rows), dtype=bool)
                keep[at[found]] = False
                # Its time order kept: sorted again, a common tag's cost the next search
                # 4-6 ms at 1,000,000 memories after every update or delete.
                self._tags[tag] = held.without(keep)
                self._size -= int(found.sum())

    def clear(self) -> None:
        self._tags.clear()
        self._size = 0
        self._times = np.zeros(0, dtype=np.float64)
        self.complete = False
