"""Memory ids of index rows and back, remembered for the rows searches rank (named by
the postings when they can, read from the ``memories`` table otherwise)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Mapping, Sequence

from hybrid_memory._keyword.postings import Postings
from hybrid_memory._keyword.reads import rowids_of

_KEPT_IDS = 200_000  # row ids → memory ids kept for ranked rows


class MemoryIds:
    """Memory ids of index rows and back, remembered for the rows searches rank.

    A row id is never given to another memory (row ids are never reused), so a row's id
    stays true until the postings are rebuilt from scratch, which empties this
    (:meth:`clear`). An update gives a memory a new row id, so the other direction
    forgets the memories each write touches (:meth:`written`), and all of them when another
    connection wrote (:meth:`clear_rowids`)."""

    def __init__(
        self, conn: sqlite3.Connection, postings: Callable[[], Postings | None] = lambda: None
    ) -> None:
        self._conn = conn
        self._postings = postings  # the keyword leg's postings, which name their rows
        self._ids: dict[int, str] = {}
        self._rows: dict[str, int] = {}

    def ids_of(self, rowids: list[int]) -> dict[int, str]:
        """The memory id of each of ``rowids`` still indexed: remembered, else named by
        the postings, else read."""
        known = self._ids
        found = {r: known[r] for r in rowids if r in known}
        missing = [r for r in rowids if r not in found]
        if missing:
            postings = self._postings()
            named = {} if postings is None else postings.ids_of(missing)
            if len(named) < len(missing):
                read = self._conn.execute(
                    "SELECT rowid, id FROM memories "
                    "WHERE rowid IN (SELECT value FROM json_each(?))",
                    [json.dumps([r for r in missing if r not in named])],
                )
                named.update(read.fetchall())
            self._remember(named)
            found.update(named)
        return found

    def rowids_of(self, ids: Sequence[str], *, read: bool = True) -> dict[str, int]:
        """:func:`rowids_of`: remembered, else from the postings, else (unless not
        ``read``) read."""
        known = self._rows
        found = {i: known[i] for i in ids if i in known}
        missing = [i for i in ids if i not in found]
        if missing:
            postings = self._postings()
            held = {} if postings is None else postings.rows_of(missing)
            if read and len(held) < len(missing):
                held.update(rowids_of(self._conn, [i for i in missing if i not in held]))
            self._remember({row: memory_id for memory_id, row in held.items()})
            found.update(held)
        return found

    def _remember(self, found: Mapping[int, str]) -> None:
        """Keep ``{row id: memory id}`` pairs, in both directions: the rows that searches
        rank are asked for again and again, and a dict answers fastest."""
        if len(self._ids) + len(found) > _KEPT_IDS:
            self._ids.clear()
            self._rows.clear()
        self._ids.update(found)
        self._rows.update((memory_id, row) for row, memory_id in found.items())

    def written(self, ids: Iterable[str]) -> None:
        for memory_id in ids:
            self._rows.pop(memory_id, None)

    def clear_rowids(self) -> None:
        self._rows.clear()

    def clear(self) -> None:
        self._ids.clear()
        self._rows.clear()
