"""Reading the derived index's rows: counts, filters, pages, lookups by id or hash.

Every method runs under the caller's lock (:class:`~hybrid_memory._keyword.index.KeywordIndex`
takes it), on the index's one connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, Literal

import numpy as np

from hybrid_memory._keyword.postings import IntArray
from hybrid_memory._keyword.schema import text_count
from hybrid_memory._keyword.writes import IndexRow
from hybrid_memory._model.filters import (
    RESERVED_FIELDS,
    TAGS_FIELD,
    Condition,
    Node,
    fields_of,
    matches,
    to_sql,
)

_CHUNK = 500  # SQLite host parameters per statement stay well under its limit
_KEPT_COUNTS = 256  # filtered counts kept between writes
_KEPT_IDS = 200_000  # row ids → memory ids kept for ranked rows
# What rows are looked up by: their id, or their row id (the table's own key: one
# b-tree lookup instead of two, a third less time for a search's few rows).
Key = Literal["id", "rowid"]


def chunks(values: Sequence[Any]) -> Iterator[tuple[list[Any], str]]:
    """``values`` in slices small enough for one statement, each with its ``?, ?, …``."""
    for start in range(0, len(values), _CHUNK):
        chunk = list(values[start : start + _CHUNK])
        yield chunk, ", ".join("?" * len(chunk))


def row_test(where: Node) -> Callable[[str, str, float, float], bool]:
    """``where`` as a test of a ``memories`` row: its metadata and tags columns (JSON
    text), creation and update times. The columns the filter does not test are not
    decoded. :func:`~hybrid_memory._model.filters.matches` is held to the same results as the
    filter's SQL and Chroma forms by the filters' parity tests."""
    fields = fields_of(where)
    with_tags, with_metadata = TAGS_FIELD in fields, bool(fields - RESERVED_FIELDS)

    def passes(metadata: str, tags: str, created: float, updated: float) -> bool:
        return matches(
            where,
            json.loads(metadata) if with_metadata else {},
            json.loads(tags) if with_tags else (),
            created,
            updated,
        )

    return passes


def rowids_of(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, int]:
    """The current row id of each of ``ids`` that is indexed."""
    found: dict[str, int] = {}
    for chunk, marks in chunks(ids):
        found.update(
            conn.execute(f"SELECT id, rowid FROM memories WHERE id IN ({marks})", chunk).fetchall()
        )
    return found


def all_rowids(conn: sqlite3.Connection) -> IntArray:
    """Every row id of ``memories``, ascending."""
    (text,) = conn.execute("SELECT group_concat(rowid) FROM memories").fetchone()
    if not text:
        return np.zeros(0, dtype=np.int64)
    # In the order of whichever index SQLite reads them from (a covering index is
    # smaller than the table): sorted here.
    return np.sort(np.fromstring(text, dtype=np.int64, sep=","))


class IndexReads:
    """Queries over the ``memories`` table and its metadata, filtered by a parsed filter
    (:func:`~hybrid_memory._model.filters.to_sql`)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        # Counts by filter statement (no filter: "") since the last write: search asks
        # for them every time, and COUNT(*) scans the table or the filter's rows.
        self._counts: dict[tuple[str, tuple[Any, ...]], int] = {}

    def clear_counts(self) -> None:
        """A write happened: every kept count may be wrong."""
        self._counts.clear()

    def count(self, where: Node | None) -> int:
        sql, params = to_sql(where)
        key = (sql, tuple(params))  # the statement decides the count
        known = self._counts.get(key)
        if known is not None:
            return known
        if isinstance(where, Condition) and where.field == TAGS_FIELD and where.op == "$contains":
            # One tag: its rows in memory_tags (one per memory, deleted with it) are the
            # count, read off the (tag, rowid) key; the general form looks every one of
            # them up in ``memories`` (0.7 ms against ~40 ms for a tag on 5,000 memories).
            query, params = "SELECT COUNT(*) FROM memory_tags WHERE tag = ?", [where.value]
        else:
            query = "SELECT COUNT(*) FROM memories m" + (f" WHERE {sql}" if sql else "")
        total = int(self._conn.execute(query, params).fetchone()[0])
        if len(self._counts) >= _KEPT_COUNTS:
            self._counts.clear()
        self._counts[key] = total
        return total

    def passing(self, key: str, values: list[Any], where: Node | None) -> set[Any]:
        """The ``key`` (``id`` or ``rowid``) of the rows among ``values`` that pass
        ``where``, checked in Python on just those rows: the filter's SQL form has
        SQLite first collect every memory passing each of its conditions, a cost that
        grows with the store, not with the few rows asked about."""
        query = (
            f"SELECT {key}, tags, metadata, created_at, updated_at FROM memories "
            f"WHERE {key} IN (SELECT value FROM json_each(?))"
        )
        rows = self._conn.execute(query, [json.dumps(values)])
        if where is None:
            return {r[0] for r in rows}
        passes = row_test(where)
        return {
            value
            for value, tags, metadata, created, updated in rows
            if passes(metadata, tags, created, updated)
        }

    def ids(self) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT id FROM memories")}

    def rowids(self) -> IntArray:
        """Every row id in the index, ascending (one value from SQLite, parsed by numpy:
        a million rows read one tuple at a time took ~0.4 s)."""
        return all_rowids(self._conn)

    def state(self, key: str) -> str | None:
        """A value of the state table (read in the caller's view)."""
        row = self._conn.execute("SELECT value FROM index_state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def rows_above(self, row: int) -> int:
        """How many rows have a row id above ``row``."""
        (count,) = self._conn.execute(
            "SELECT COUNT(*) FROM memories WHERE rowid > ?", (row,)
        ).fetchone()
        return int(count)

    def last_rows(self, upto: int, count: int) -> list[tuple[int, str]]:
        """The ``count`` highest rows up to row id ``upto``: ``(row id, memory id)``."""
        return self._conn.execute(
            "SELECT rowid, id FROM memories WHERE rowid <= ? ORDER BY rowid DESC LIMIT ?",
            (upto, count),
        ).fetchall()

    def rows_mark(self) -> str:
        count = text_count(self._conn)  # one per memory (the file's open checks so)
        used = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'memories'"
        ).fetchone()
        return f"{count}:{used[0] if used else 0}"

    def newest_update(self) -> float | None:
        value = self._conn.execute("SELECT MAX(updated_at) FROM memories").fetchone()[0]
        return None if value is None else float(value)

    def single_valued(self, fields: Iterable[str]) -> list[str]:
        """Of ``fields``, those some memory holds and none holds as a list."""
        out: list[str] = []
        query = "SELECT 1 FROM memory_meta WHERE key = ? AND kind = ? AND in_array = ? LIMIT 1"
        for name in fields:

            def held(in_array: int, name: str = name) -> bool:
                return any(
                    self._conn.execute(query, (name, kind, in_array)).fetchone() for kind in "bns"
                )

            if held(0) and not held(1):
                out.append(name)
        return out

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """For each content hash already stored, one memory id that has it."""
        out: dict[str, str] = {}
        for chunk, marks in chunks(hashes):
            for content_hash, memory_id in self._conn.execute(
                f"SELECT content_hash, MIN(id) FROM memories WHERE content_hash IN ({marks}) "
                "GROUP BY content_hash",
                chunk,
            ):
                out[content_hash] = memory_id
        return out

    def all_tags(self) -> list[str]:
        """Every tag in use, sorted. A skip-scan: one index seek per distinct tag, where
        ``SELECT DISTINCT`` would walk every tag row."""
        return [
            r[0]
            for r in self._conn.execute(
                "WITH RECURSIVE t(tag) AS (SELECT MIN(tag) FROM memory_tags UNION ALL "
                "SELECT (SELECT MIN(tag) FROM memory_tags WHERE tag > t.tag) FROM t "
                "WHERE t.tag IS NOT NULL) SELECT tag FROM t WHERE tag IS NOT NULL"
            )
        ]

    def page(
        self, where: Node | None, limit: int | None, offset: int, *, newest_first: bool = False
    ) -> list[str]:
        """The ids of the memories passing ``where``, oldest first (``created_at``, then
        ``id``, so that the order is the same in every process; the reverse with
        ``newest_first``), ``offset`` skipped and at most ``limit`` (None: all). The
        index ``memories_created`` on ``(created_at, id)`` gives either order without a
        sort: a page near either end reads its rows and the ones skipped, no more."""
        sql, params = to_sql(where)
        order = "DESC" if newest_first else "ASC"
        query = (
            "SELECT m.id FROM memories m"
            + (f" WHERE {sql}" if sql else "")
            + f" ORDER BY m.created_at {order}, m.id {order} LIMIT ? OFFSET ?"
        )
        rows = self._conn.execute(query, [*params, -1 if limit is None else limit, offset])
        return [r[0] for r in rows.fetchall()]

    def narrow(self, where: Node | None, cap: int) -> tuple[IntArray, list[str]] | None:
        """The row ids and ids of the memories passing ``where``, when there are at most
        ``cap`` of them (None otherwise)."""
        sql, params = to_sql(where)
        query = "SELECT m.rowid, m.id FROM memories m" + (f" WHERE {sql}" if sql else "")
        rows = self._conn.execute(query + " LIMIT ?", [*params, cap + 1]).fetchall()
        if len(rows) > cap:
            return None
        return np.array([r[0] for r in rows], dtype=np.int64), [r[1] for r in rows]

    def created_at(self, ids: Sequence[str]) -> dict[str, float]:
        out: dict[str, float] = {}
        for chunk, marks in chunks(ids):
            out.update(
                self._conn.execute(
                    f"SELECT id, created_at FROM memories WHERE id IN ({marks})", chunk
                ).fetchall()
            )
        return out

    def updated_at(self, ids: Sequence[str]) -> dict[str, float]:
        return updated_at_of(self._conn, ids)

    def stamps_after(self, since: float) -> list[float]:
        query = "SELECT DISTINCT updated_at FROM memories WHERE updated_at > ?"
        return [row[0] for row in self._conn.execute(query, (since,))]

    def superseding(self, key: str, ids: Sequence[str]) -> dict[str, str]:
        """For those of ``ids`` that some memory names in its metadata ``key`` (a single
        string: :mod:`hybrid_memory._search.supersession`), the newest such memory's id."""
        # Most stores have no such memory: one look at the index says so (~6 us at
        # 100,000 memories) where the search by value of a search's ~250 candidates
        # costs ~100 us.
        if not ids or (
            self._conn.execute(
                "SELECT 1 FROM memory_meta WHERE key = ? AND kind = 's' AND in_array = 0 LIMIT 1",
                [key],
            ).fetchone()
            is None
        ):
            return {}
        out: dict[str, tuple[float, str]] = {}
        for chunk, marks in chunks(ids):
            for older, newer, created in self._conn.execute(
                "SELECT m.value, r.id, r.created_at FROM memory_meta m "
                "JOIN memories r ON r.rowid = m.rowid "
                f"WHERE m.key = ? AND m.kind = 's' AND m.in_array = 0 AND m.value IN ({marks})",
                [key, *chunk],
            ):
                if older == newer:
                    continue
                best = out.get(older)
                if best is None or (created, newer) > best:
                    out[older] = (created, newer)
        return {older: newer for older, (_, newer) in out.items()}

    def texts(self, keys: Sequence[str] | Sequence[int], by: Key = "id") -> dict[str, str]:
        """The texts of the memories that exist among ``keys`` (ids, or row ids with
        ``by="rowid"``), by id."""
        out: dict[str, str] = {}
        for chunk, marks in chunks(keys):
            out.update(
                self._conn.execute(f"SELECT id, text FROM memories WHERE {by} IN ({marks})", chunk)
            )
        return out

    def long_texts(
        self, keys: Sequence[str] | Sequence[int], by: Key, longer_than: int
    ) -> dict[str, str]:
        """The texts longer than ``longer_than`` characters among the memories ``keys``
        (ids, or row ids with ``by="rowid"``), by id: the others never leave SQLite."""
        out: dict[str, str] = {}
        for chunk, marks in chunks(keys):
            out.update(
                self._conn.execute(
                    f"SELECT id, text FROM memories WHERE {by} IN ({marks}) AND length(text) > ?",
                    [*chunk, longer_than],
                )
            )
        return out

    def length_total(self, keys: Sequence[str] | Sequence[int], by: Key) -> tuple[int, int]:
        """The summed length in characters of the texts of the memories ``keys``, and how
        many of them exist."""
        total, count = 0, 0
        for chunk, marks in chunks(keys):
            row = self._conn.execute(
                f"SELECT total(length(text)), count(*) FROM memories WHERE {by} IN ({marks})",
                chunk,
            ).fetchone()
            total, count = total + int(row[0]), count + int(row[1])
        return total, count

    def texts_and_tags(self, ids: Sequence[str]) -> list[tuple[str, int, float, str, list[str]]]:
        """``(id, row, created_at, text, tags)`` of the memories ``ids`` that exist."""
        out: list[tuple[str, int, float, str, list[str]]] = []
        for chunk, marks in chunks(ids):
            for r in self._conn.execute(
                f"SELECT id, rowid, created_at, text, tags FROM memories WHERE id IN ({marks})",
                chunk,
            ):
                out.append((r[0], int(r[1]), float(r[2]), r[3], json.loads(r[4])))
        return out

    def vectors(self, rowids: list[int]) -> dict[int, bytes]:
        """The kept vector blobs of those of ``rowids`` that have one."""
        return dict(
            self._conn.execute(
                "SELECT rowid, vector FROM memory_vectors"
                " WHERE rowid IN (SELECT value FROM json_each(?))",
                [json.dumps(rowids)],
            ).fetchall()
        )

    def rows(self, keys: Sequence[str] | Sequence[int], by: Key = "id") -> dict[str, IndexRow]:
        """The rows that exist among ``keys`` (ids, or row ids with ``by="rowid"``), by id."""
        out: dict[str, IndexRow] = {}
        for chunk, marks in chunks(keys):
            for r in self._conn.execute(
                "SELECT id, text, tags, metadata, content_hash, created_at, updated_at "
                f"FROM memories WHERE {by} IN ({marks})",
                chunk,
            ):
                out[r[0]] = IndexRow(
                    r[0], r[1], tuple(json.loads(r[2])), json.loads(r[3]), r[4], r[5], r[6]
                )
        return out


def updated_at_of(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, float]:
    """``{id: updated_at}`` of the memories ``ids`` that exist."""
    out: dict[str, float] = {}
    for chunk, marks in chunks(ids):
        out.update(
            conn.execute(f"SELECT id, updated_at FROM memories WHERE id IN ({marks})", chunk)
        )
    return out
