"""The tag leg's lookups in the derived index: which memories carry the tags a query
matched, how many of them each carries, and when it was made.

Without a filter (or with the filter already resolved to row ids) the answers come from
each tag's carrying rows held in memory (:class:`~hybrid_memory._keyword.tag_carriers.TagCarriers`),
read once and kept in step with writes; with a filter, from SQL.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Mapping, Sequence
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from hybrid_memory._keyword.memory_ids import MemoryIds
from hybrid_memory._keyword.postings import IntArray
from hybrid_memory._keyword.postings_file import KeptCarriers
from hybrid_memory._keyword.reads import chunks, row_test
from hybrid_memory._keyword.tag_carriers import TagCarriers
from hybrid_memory._keyword.writes import Batch
from hybrid_memory._model.filters import Node, to_sql


class TagMatch(NamedTuple):
    """A memory carrying matched tags, as the tag leg ranks it."""

    id: str
    matched: int  # how many of the asked tags it carries
    created_at: float
    row: int  # index row number: breaks ties, lower first


def tag_order(match: TagMatch) -> tuple[int, float, int]:
    """The tag leg's order: most matched tags first, then newest, then index row."""
    return (-match.matched, -match.created_at, match.row)


_UNRANKED = np.iinfo(np.int64).max  # the best rank of a carrier no other leg ranked
# Carriers read all at once by the first search that needs them when there are at most
# this many (~0.15 s: a read costs ~1.4 us a carrier); beyond, tag by tag as searches ask
# (a tag of 55,000 carriers: ~0.1 s). At 1,000,000 memories the 2.3 million carriers took
# that first search 3.3-8.3 s in one read.
_READ_ALL_UP_TO = 100_000


def _read_every(
    conn: sqlite3.Connection, carriers: TagCarriers, at_most: int, asked: Sequence[str] = ()
) -> bool:
    """Put every tag's carriers read on ``conn`` into ``carriers``, when there are at
    most ``at_most`` (counted only as far as it matters): whether they were read."""
    (total,) = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM memory_tags LIMIT ?)", (at_most + 1,)
    ).fetchone()
    if total > at_most:
        return False
    every = conn.execute("SELECT tag, rowid, created_at FROM memory_tags ORDER BY tag, rowid")
    for tag, rows in itertools.groupby(every, key=itemgetter(0)):
        _put(carriers, tag, list(rows), asked)
    carriers.held_all()
    return True


def _put(
    carriers: TagCarriers, tag: str, rows: Sequence[tuple[str, int, float]], asked: Sequence[str]
) -> None:
    """Hold ``tag``'s carriers ``rows`` (``(tag, row id, created_at)``, rows ascending),
    the other ``asked`` tags kept past capacity."""
    carriers.put(
        tag,
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=np.float64),
        keep=asked,
    )


class TagIndex:
    """Tag lookups over ``memory_tags``. Runs under the caller's lock, after the caller
    brought the index in step with other connections' writes."""

    def __init__(self, conn: sqlite3.Connection, ids: MemoryIds, *, empty: bool = False) -> None:
        self._conn = conn
        self._ids = ids
        # The carriers of recently matched tags (of every tag, from the start, when the
        # index was opened ``empty``: a store filled in this process never reads them),
        # kept in step with this connection's writes and other connections'.
        self.carriers = TagCarriers(complete=empty)

    def matches(
        self,
        tags: Sequence[str],
        limit: int,
        where: Node | None,
        among: Sequence[str] | None,
        within: IntArray | None,
    ) -> list[TagMatch]:
        """:meth:`~hybrid_memory._keyword.index.KeywordIndex.tag_carriers`."""
        if among is not None:
            ids = list(dict.fromkeys(among))
            if where is None or within is not None:
                found = self._counts_in_memory(ids, tags, within)
            else:
                found = self._counts_by_sql(ids, tags, where)
        elif where is None or within is not None:
            found = self._newest_in_memory(tags, limit, within)
        else:
            found = self._newest_by_sql(tags, limit, where)
        found.sort(key=tag_order)
        return found[:limit]

    def ranking(
        self,
        tags: Sequence[str],
        depth: int,
        ranks: Mapping[str, int],
        named: Sequence[TagMatch],
        exclude: str | None,
        within: IntArray | None,
    ) -> dict[str, int]:
        """The tag leg's whole ranking from the carriers held in memory, for a search
        without a filter or with its filter resolved to the row ids ``within``.

        The candidates are each tag's ``depth`` newest carriers (of ``within``) and the
        memories ``ranks`` names (id → its best rank in the other legs) that carry any
        of ``tags``; ``named`` overrides the matched count (and time) of those whose
        text names asked tags. Ordered by matched count, then best rank, then newest,
        then lower index row: the first ``depth`` as ``{id: matched}``, ``exclude`` left
        out. One pass over arrays: building a match per candidate, twice, and sorting
        them made the tag leg 1.07 ms of a search at 100,000 memories (now ~0.7)."""
        self._load_carriers(tags)
        known = self._ids.rowids_of(list(ranks))
        ranked = np.fromiter(known.values(), dtype=np.int64, count=len(known))
        rank = np.fromiter((ranks[i] for i in known), dtype=np.int64, count=len(known))
        newest = [self.carriers.newest(tag, depth, within)[0] for tag in dict.fromkeys(tags)]
        rows = np.concatenate([ranked, *newest])
        best = np.concatenate([rank, np.full(len(rows) - len(ranked), _UNRANKED)])
        by_row = np.lexsort((best, rows))  # each row's best rank first among its copies
        rows, best = rows[by_row], best[by_row]
        first = np.ones(len(rows), dtype=bool)
        first[1:] = rows[1:] != rows[:-1]
        rows, best = rows[first], best[first]
        matched, created = self.carriers.counts(rows, tags)
        if within is not None:
            matched[~np.isin(rows, within)] = 0
        if named:
            at = np.searchsorted(rows, [m.row for m in named]).clip(max=len(rows) - 1)
            present = rows[at] == np.array([m.row for m in named], dtype=np.int64)
            matched[at[present]] = np.array([m.matched for m in named])[present]
            created[at[present]] = np.array([m.created_at for m in named])[present]
        keep = matched > 0
        if exclude is not None:
            gone = self._ids.rowids_of([exclude]).get(exclude)
            if gone is not None:
                keep &= rows != gone
        rows, best, matched, created = rows[keep], best[keep], matched[keep], created[keep]
        top = np.lexsort((rows, -created, best, -matched))[:depth]
        chosen, counts = rows[top].tolist(), matched[top].tolist()
        ids = self._ids.ids_of(chosen)
        return {ids[r]: count for r, count in zip(chosen, counts, strict=True) if r in ids}

    def lacking(self, tags: Sequence[str], rowids: Mapping[str, int]) -> list[str]:
        """Those of the memories ``rowids`` (id → row id) that do not carry every one of
        ``tags``, in the order given."""
        if not rowids:
            return []
        self._load_carriers(tags)
        rows = np.fromiter(rowids.values(), dtype=np.int64, count=len(rowids))
        matched = self.carriers.counts(rows, tags)[0].tolist()
        wanted = len(dict.fromkeys(tags))
        return [i for i, count in zip(rowids, matched, strict=True) if count < wanted]

    # --- from the carriers held in memory ---------------------------------------------

    def _load_carriers(self, tags: Sequence[str]) -> None:
        """Read the carriers of those of ``tags`` not held yet: when none are held and
        there are few (:data:`_READ_ALL_UP_TO`, and within half the capacity), all of them
        in one pass (one tag at a time, a search would meet a read for each tag it is the
        first to match), else tag by tag (one search reading millions would stall)."""
        missing = self.carriers.missing(tags)
        if not missing:
            return
        if not self.carriers:
            at_most = min(_READ_ALL_UP_TO, self.carriers.capacity // 2)
            if _read_every(self._conn, self.carriers, at_most, tags):
                missing = self.carriers.missing(missing)  # none, unless they did not fit
        for tag in missing:
            _put(
                self.carriers,
                tag,
                self._conn.execute(
                    "SELECT tag, rowid, created_at FROM memory_tags WHERE tag = ? ORDER BY rowid",
                    (tag,),
                ).fetchall(),
                tags,
            )

    def read_beside(self, conn: sqlite3.Connection) -> TagCarriers | None:
        """Every tag's carriers, read on ``conn``: the snapshot a reopened index builds its
        postings from, on their thread (:class:`~hybrid_memory._keyword.bm25.KeywordSearch`),
        to be held with them (:meth:`adopt`). None when they do not fit in half the capacity
        (searches then read each tag as they first ask for it). Read so, at 1,000,000
        memories the first search naming a tag took 76-367 ms instead of 5-10."""
        carriers = TagCarriers(self.carriers.capacity)
        if not _read_every(conn, carriers, self.carriers.capacity // 2):
            return None
        return carriers if carriers.complete else None

    def to_keep(self) -> KeptCarriers | None:
        """Every tag's carriers, to keep beside the index file with the postings."""
        return self.carriers.export()

    def keep_read(self, carriers: TagCarriers | None) -> KeptCarriers | None:
        """Carriers :meth:`read_beside` read, to keep beside the index file."""
        return None if carriers is None else carriers.export()

    def from_kept(self, kept: KeptCarriers) -> TagCarriers:
        """Carriers kept beside the index file (:meth:`to_keep`), to :meth:`adopt`."""
        return TagCarriers.from_kept(kept, self.carriers.capacity)

    def adopt(self, carriers: TagCarriers | None, gone: Sequence[int], high: int) -> None:
        """Hold ``carriers`` (:meth:`read_beside`, from a snapshot whose highest row was
        ``high``) in step with the rows written since: ``gone`` out, those above ``high``
        in. Those held now stay when they are every tag's already."""
        if carriers is None or self.carriers.complete:
            return
        self.carriers = carriers
        self.other_writers_wrote(gone, high)

    def _newest_in_memory(
        self, tags: Sequence[str], limit: int, within: IntArray | None
    ) -> list[TagMatch]:
        """Each tag's ``limit`` newest carriers (among the row ids ``within``), with how
        many of ``tags`` each carries."""
        self._load_carriers(tags)
        newest: dict[int, float] = {}
        for tag in tags:
            rows, created = self.carriers.newest(tag, limit, within)
            newest.update(zip(rows.tolist(), created.tolist(), strict=True))
        rowids = list(newest)
        counts = self.carriers.counts(np.array(rowids, dtype=np.int64), tags)[0].tolist()
        ids = self._ids.ids_of(rowids)
        return [
            TagMatch(ids[r], count, newest[r], r)
            for r, count in zip(rowids, counts, strict=True)
            if r in ids
        ]

    def _counts_in_memory(
        self, ids: Sequence[str], tags: Sequence[str], within: IntArray | None
    ) -> list[TagMatch]:
        """How many of ``tags`` each of the memories ``ids`` (of the row ids ``within``)
        carries, those carrying none left out."""
        self._load_carriers(tags)
        rowids = self._ids.rowids_of(ids)
        rows = np.fromiter(rowids.values(), dtype=np.int64, count=len(rowids))
        matched, created = self.carriers.counts(rows, tags)
        if within is not None:
            matched[~np.isin(rows, within)] = 0
        return [
            TagMatch(memory_id, count, when, row)
            for (memory_id, row), count, when in zip(
                rowids.items(), matched.tolist(), created.tolist(), strict=True
            )
            if count
        ]

    # --- from SQL, with a filter ------------------------------------------------------

    def _newest_by_sql(self, tags: Sequence[str], limit: int, where: Node) -> list[TagMatch]:
        """Each tag's ``limit`` newest carriers passing ``where``, with how many of
        ``tags`` each carries (counted in one more query only when there are several)."""
        sql, params = to_sql(where)
        newest = (
            "SELECT t.rowid, m.id, t.created_at FROM memory_tags t "
            "JOIN memories m ON m.rowid = t.rowid WHERE t.tag = ?"
            + (f" AND {sql}" if sql else "")
            + " ORDER BY t.created_at DESC LIMIT ?"
        )
        found: dict[int, tuple[str, float]] = {}
        for tag in tags:
            for rowid, memory_id, created in self._conn.execute(newest, [tag, *params, limit]):
                found[rowid] = (memory_id, created)
        if len(tags) == 1:
            counts = dict.fromkeys(found, 1)
        else:
            # These rows passed ``where`` just now, under the same lock: counting their
            # tags needs no second pass through the filter.
            marks = ", ".join("?" * len(tags))
            counts = dict(
                self._conn.execute(
                    f"SELECT rowid, COUNT(*) FROM memory_tags WHERE tag IN ({marks}) "
                    "AND rowid IN (SELECT value FROM json_each(?)) GROUP BY rowid",
                    [*tags, json.dumps(list(found))],
                )
            )
        return [
            TagMatch(memory_id, int(counts[rowid]), float(created), rowid)
            for rowid, (memory_id, created) in found.items()
        ]

    def _counts_by_sql(
        self, ids: Sequence[str], tags: Sequence[str], where: Node
    ) -> list[TagMatch]:
        """How many of ``tags`` each of the memories ``ids`` carries (those carrying none,
        or failing ``where``, left out).

        SQLite starts from the given rows (CROSS JOIN fixes the join order) and looks
        each (row, tag) pair up in an index, instead of scanning every carrier of a
        common tag. ``where`` is checked here, in Python, on those few carriers: its SQL
        form (:func:`~hybrid_memory._model.filters.to_sql`) has SQLite first collect every
        memory passing the filter, a cost that grows with the store."""
        tag_marks = ", ".join("?" * len(tags))
        passes = row_test(where)
        out: list[TagMatch] = []
        for chunk, marks in chunks(ids):
            query = (
                "SELECT m.id, COUNT(*), t.created_at, m.rowid, m.metadata, m.tags, m.updated_at "
                f"FROM memories m CROSS JOIN memory_tags t ON t.rowid = m.rowid "
                f"AND t.tag IN ({tag_marks}) WHERE m.id IN ({marks}) GROUP BY m.rowid"
            )
            for r in self._conn.execute(query, [*tags, *chunk]):
                if passes(r[4], r[5], float(r[2]), float(r[6])):
                    out.append(TagMatch(r[0], int(r[1]), float(r[2]), int(r[3])))
        return out

    # --- in step with the tables --------------------------------------------------------

    def written(self, batch: Batch) -> None:
        """A committed batch: the rows it replaced out, its rows into the held tags."""
        self.removed(batch.replaced)
        try:
            self.carriers.add(
                batch.rowids(), [r.tags for r in batch.rows], [r.created_at for r in batch.rows]
            )
        except Exception:
            self.carriers.clear()  # read again when next asked for

    def removed(self, rowids: Sequence[int]) -> None:
        """Rows gone from the index (deleted, or replaced by an update's new row)."""
        try:
            self.carriers.remove(rowids)
        except Exception:
            self.carriers.clear()  # read again when next asked for

    def other_writers_wrote(self, gone: Sequence[int], high: int) -> None:
        """After other connections wrote: rows ``gone`` out, those above ``high`` in."""
        if not self.carriers and not self.carriers.complete:
            return
        try:
            self.carriers.remove(gone)
            self.carriers.add_rows(
                self._conn.execute(
                    "SELECT rowid, tag, created_at FROM memory_tags WHERE rowid > ?", (high,)
                ).fetchall()
            )
        except Exception:
            self.carriers.clear()  # read again when next asked for
