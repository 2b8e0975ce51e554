"""The keyword postings of one index, and what keeps them in step with its rows.

The postings come, in this order of preference, from: the file an earlier process left
beside the index file (:mod:`~hybrid_memory._keyword.postings_file`: mapped, in step at
once with the few rows written since), the index's own writes when it starts empty (they
follow every write from the first), or FTS5's tokens read on a thread of their own from
one snapshot of the file (seconds at a large store: searches meanwhile rank through
FTS5). The same thread reads what another part asks for from that snapshot
(:class:`ReadBeside`: the tags' carriers), which is also kept in the file with them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from hybrid_memory._keyword import postings_file
from hybrid_memory._keyword.damage import IndexDamaged
from hybrid_memory._keyword.memory_ids import MemoryIds
from hybrid_memory._keyword.postings import Postings
from hybrid_memory._keyword.postings_file import (
    KeptCarriers,
    MappedPostings,
    PerRow,
    PostingsFileError,
    TermLists,
)
from hybrid_memory._keyword.reads import IndexReads, all_rowids
from hybrid_memory._keyword.schema import EPOCH_KEY
from hybrid_memory._keyword.tokens import parse_tokens
from hybrid_memory._keyword.writes import Batch, fts_text, take_new_tokens
from hybrid_memory._process.exit import join_at_exit

log = logging.getLogger("hybrid_memory")

# An index of at least this many memories leaves its postings beside its file when it
# closes (below, building them takes a new process less than a search's worth of time).
SAVE_FROM_ROWS = 5_000
# The postings kept beside the file are used when at most this many rows were written
# since (each read and tokenised when they are mapped); more, and they are built again.
_CATCH_UP_ROWS = 20_000
# They are written again when this many rows (or a tenth) are not in them, or removed.
_RESAVE_ROWS = 5_000
_ROWS_CHECKED = 1_000  # the last rows whose ids are compared with the kept postings
_NAMING_PAGE = 50_000  # rows whose ids are read at a time when postings are built

_Read = TypeVar("_Read")


class ReadBeside(Protocol[_Read]):
    """Another in-memory part held with the postings: read from the snapshot they are
    built from (on their thread), or from the file they are kept in, and brought in step
    with the rows written since as they are (rows ``gone``, rows above ``high`` new).
    (:class:`~hybrid_memory._keyword.tag_index.TagIndex`: the tags' carriers.)"""

    def read_beside(self, conn: sqlite3.Connection) -> _Read: ...

    def adopt(self, read: _Read, gone: Sequence[int], high: int) -> None: ...

    def to_keep(self) -> KeptCarriers | None: ...

    def from_kept(self, kept: KeptCarriers) -> _Read: ...

    def keep_read(self, read: _Read | None) -> KeptCarriers | None: ...


class PostingsKeeper:
    """The postings of one index (:attr:`postings`, None until ready), kept in step with
    its rows. Runs under the index's lock, on its connection."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        reads: IndexReads,
        ids: MemoryIds,
        *,
        rank: bool,
        empty: bool,
        path: str | None,
        beside: ReadBeside[Any] | None,
    ) -> None:
        self._conn = conn
        self._reads = reads
        self._ids = ids
        self._rank = rank  # False: a tokenizer whose words are phrases keeps no postings
        self._path = path
        self._beside = beside
        self._aside: threading.Thread | None = None
        # What the build aside gave: the postings and what ``beside`` read with them.
        self._built: tuple[Postings, Any] | BaseException | None = None
        self._tried_file = False  # the postings kept beside the file were looked for
        # An empty index has nothing to build from: its postings start empty and follow
        # every write, so a store filled from scratch has them at its first search.
        self.postings: Postings | None = Postings() if rank and empty else None

    def ready(self) -> Postings | None:
        """The postings, when there are none yet mapped from the file kept beside the
        index, else built from the FTS5 index (once per open store, in time proportional
        to the store). An index file's are built on a thread with a connection of its
        own, from one snapshot of the file; None until they are, and then the rows
        written since the snapshot are brought in as another connection's writes are
        (row ids only grow)."""
        if self.postings is not None:
            return self.postings
        if self._path is None:
            self._ids.clear()
            self.postings = _build_postings(self._conn)
            return self.postings
        if not self._tried_file:
            self._tried_file = True
            if self._map_file(self._path) is not None:
                return self.postings
        built, self._built = self._built, None
        if isinstance(built, BaseException):
            raise built
        if built is not None:
            self._ids.clear()
            self.postings, read = built
            seen = self.other_writers_wrote()
            if seen is not None:
                if self._beside is not None:
                    self._beside.adopt(read, *seen)
                return self.postings
            # Rows were renumbered under the snapshot: build again.
        if self._aside is None or not self._aside.is_alive():
            self._aside = threading.Thread(
                target=self._build_aside, name="hybrid-memory-postings", daemon=True
            )
            self._aside.start()
            join_at_exit(self._aside)  # numpy's C++ must not meet the exit (see _exit)
        return None

    def _map_file(self, path: str) -> Postings | None:
        """The postings an earlier process left beside the index file (mapped, not read),
        brought in step with the rows written since: None (and nothing kept) when there
        is no such file, it is not this file's, or too much was written since."""
        epoch = self._reads.state(EPOCH_KEY)
        if epoch is None:
            return None
        try:
            mapped = MappedPostings(postings_file.path_for(path), epoch)
        except (OSError, PostingsFileError):
            return None
        postings = Postings(mapped)
        newer = self._reads.rows_above(postings.high)
        if newer > _CATCH_UP_ROWS or not self._same_rows(postings):
            return None
        self._ids.clear()
        self.postings = postings
        try:
            seen = self.other_writers_wrote()
        except (ValueError, PostingsFileError):
            seen = None
        if seen is None:
            self.postings = None
            return None
        kept = mapped.carriers()
        if kept is not None and self._beside is not None:
            self._beside.adopt(self._beside.from_kept(kept), *seen)
        return postings

    def drop_file(self, cause: PostingsFileError) -> None:
        """The mapped postings turned out damaged (a term's list out of order): dropped,
        and the file removed, so that they are built again from the index file."""
        log.warning("the keyword postings kept beside %s are damaged: %s", self._path, cause)
        self.postings = None
        if self._path is not None:
            with contextlib.suppress(OSError):
                os.unlink(postings_file.path_for(self._path))

    def _same_rows(self, postings: Postings) -> bool:
        """Whether the rows the postings name last are the index's, under the same ids
        (a file restored from a backup may have given row ids the postings hold to
        other memories)."""
        rows = self._reads.last_rows(postings.high, _ROWS_CHECKED)
        return postings.ids_of([r for r, _ in rows]) == dict(rows)

    def worth_saving(self) -> bool:
        """Whether the postings are worth leaving beside the index file for the next
        process to map: the index is large, and a good share of its postings is not in
        the file yet."""
        postings = self.postings
        if postings is None or self._path is None or len(postings) < SAVE_FROM_ROWS:
            return False
        return not postings.mapped or postings.unsaved() > min(_RESAVE_ROWS, len(postings) // 10)

    def save(self, epoch: str) -> None:
        """Write the postings beside the index file (:meth:`worth_saving`), stamped with
        the file's ``epoch``. Under the lock, caught up with other connections' writes. A
        failure (no room) leaves the next process to build them as before."""
        postings, path = self.postings, self._path
        if postings is None or path is None or not self.worth_saving():
            return
        try:
            carriers = None if self._beside is None else self._beside.to_keep()
            _write(postings, postings_file.path_for(path), epoch, carriers)
        except (OSError, ValueError) as exc:
            log.warning("the keyword postings were not kept beside %s: %s", path, exc)

    def _build_aside(self) -> None:
        try:
            assert self._path is not None
            conn = sqlite3.connect(self._path, check_same_thread=False, isolation_level=None)
            try:
                conn.execute(
                    "CREATE VIRTUAL TABLE temp.memory_terms "
                    "USING fts5vocab('main', 'memories_fts', 'instance')"
                )
                conn.execute("BEGIN")  # one snapshot for the tokens and the rows
                postings = _build_postings(conn)
                read = self._read_beside(conn)
                epoch = IndexReads(conn).state(EPOCH_KEY)
                conn.execute("COMMIT")
                self._keep_built(postings, read, epoch)
                self._built = (postings, read)
            finally:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        except BaseException as exc:  # handed to the next search, which repairs damage
            self._built = (
                exc
                if isinstance(exc, sqlite3.DatabaseError)
                else IndexDamaged(f"the keyword index's postings could not be built: {exc}")
            )

    def _keep_built(self, postings: Postings, read: Any, epoch: str | None) -> None:
        """Postings just built aside, kept beside the index file at once (before the
        searches take them): the next process maps them, whether or not this one
        closes cleanly."""
        if self._path is None or epoch is None or len(postings) < SAVE_FROM_ROWS:
            return
        carriers = None if self._beside is None else self._beside.keep_read(read)
        try:
            _write(postings, postings_file.path_for(self._path), epoch, carriers)
        except (OSError, ValueError) as exc:
            log.warning("the keyword postings were not kept beside %s: %s", self._path, exc)

    def _read_beside(self, conn: sqlite3.Connection) -> Any:
        """What ``beside`` reads from the postings' snapshot, None when it could not: it
        spares searches reads of their own, and they make them when it is missing (only
        damage to the file, a :class:`sqlite3.DatabaseError`, goes on to the search)."""
        if self._beside is None:
            return None
        try:
            return self._beside.read_beside(conn)
        except sqlite3.DatabaseError:
            raise
        except Exception:
            return None

    def written(self, batch: Batch, tokens: str | None) -> None:
        """Bring the postings in step with a committed batch: replaced rows out, the new
        ones in, from the batch's ``tokens``. Should that fail, the postings are dropped
        and rebuilt by the next search: the write itself stands."""
        if tokens is None or self.postings is None:
            return
        try:
            self.postings.remove(batch.replaced)
            rowids = np.arange(batch.base, batch.base + len(batch.rows), dtype=np.int64)
            self.postings.add(rowids, parse_tokens(tokens))
            self.postings.name(rowids.tolist(), [r.id for r in batch.rows])
        except Exception:
            self.postings = None

    def deleted(self, rowids: Sequence[int]) -> None:
        """Rows deleted in the caller's open transaction."""
        if self.postings is not None:
            self.postings.remove(rowids)

    def cleared(self) -> None:
        self.postings = Postings() if self._rank else None  # empty, as the index

    def other_writers_wrote(self) -> tuple[list[int], int] | None:
        """After other connections wrote: vanished rows out of the postings, new rows in.
        Returns the rows gone and the highest row id held before (the rows above it are
        new), or None when there are no postings (or they must be rebuilt, because rows
        were renumbered behind this connection's back)."""
        postings = self.postings
        if postings is None:
            return None
        present = self._reads.rowids()
        known = postings.live_rowids()
        gone = np.setdiff1d(known, present, assume_unique=True).tolist()
        postings.remove(gone)
        new = np.setdiff1d(present, known, assume_unique=True)
        high = postings.high
        if len(new) and int(new.min()) <= high:
            self.postings = None
            return None
        if len(new):
            rows = self._conn.execute(
                "SELECT rowid, text, id FROM memories WHERE rowid > ?", (high,)
            ).fetchall()
            self._add_rows(rows)
        return gone, high

    def _add_rows(self, rows: Sequence[tuple[int, str, str]]) -> None:
        """Add rows ``(row id, text, memory id)`` to the postings, tokenised by a scratch
        FTS5 table with the index's own tokenizer."""
        if self.postings is None or not rows:
            return
        self._conn.executemany(
            "INSERT INTO temp.new_texts(rowid, text) VALUES (?, ?)",
            [(rowid, fts_text(text)) for rowid, text, _ in rows],
        )
        tokens = parse_tokens(take_new_tokens(self._conn))
        rowids = [r for r, _, _ in rows]
        self.postings.add(np.array(rowids, dtype=np.int64), tokens)
        self.postings.name(rowids, [memory_id for _, _, memory_id in rows])


def _build_postings(conn: sqlite3.Connection) -> Postings:
    """Postings of every row, from FTS5's own tokens (``temp.memory_terms``), a term at
    a time: what is held beside the postings while they are built is one term's tokens,
    not all of them at once."""
    rowids = all_rowids(conn)
    terms = conn.execute(
        "SELECT term, group_concat(doc) FROM temp.memory_terms GROUP BY term ORDER BY term"
    )
    try:
        postings = Postings.built(rowids, _term_rows(rowids, terms))
        named = conn.execute("SELECT rowid, id FROM memories")
        while page := named.fetchmany(_NAMING_PAGE):  # a page of ids in memory at a time
            postings.name([r for r, _ in page], [i for _, i in page])
    except ValueError as exc:  # the FTS rows and the memories disagree
        raise IndexDamaged(f"the keyword index's tables disagree: {exc}") from exc
    return postings


def _term_rows(
    rows: np.ndarray, terms: Iterable[tuple[str, str]]
) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """Each term's rows (ascending, each once) and term frequencies, from its tokens'
    rows as ``group_concat(doc)`` gives them (one per occurrence, ascending). ValueError
    when a term's rows are not among ``rows`` (every row, ascending)."""
    if not len(rows):
        return
    if int(rows[0]) <= 0 or int(rows[-1]) > np.iinfo(np.int32).max:
        raise ValueError("row ids out of the postings' range")
    known = np.zeros(int(rows[-1]) + 1, dtype=bool)
    known[rows] = True
    for term, text in terms:
        docs = np.fromstring(text, dtype=np.int64, sep=",")
        if not len(docs):
            continue
        first = np.ones(len(docs), dtype=bool)
        first[1:] = docs[1:] != docs[:-1]
        held = docs[first]
        inside = int(held[0]) > 0 and int(held[-1]) < len(known)
        if not inside or not known[held].all() or bool((held[1:] <= held[:-1]).any()):
            raise ValueError("a term occurs in a row that is not in the index")
        yield term, held, np.diff(np.append(np.flatnonzero(first), len(docs)))


def _write(postings: Postings, path: str, epoch: str, carriers: KeptCarriers | None) -> None:
    """Write the live postings (and the tags' ``carriers``) to ``path``
    (:mod:`~hybrid_memory._keyword.postings_file`) for the next process to map."""
    size = postings.high + 1

    def terms() -> Iterator[tuple[str, TermLists]]:
        for term in postings.terms():
            lists = postings.live_lists(term)
            if lists is not None:
                yield term, lists

    postings.names.grow(size)
    rows = PerRow(postings.length[:size], postings.live[:size], postings.names.ids[:size])
    postings_file.write(path, epoch, terms, rows, postings.names.long_ids, carriers)
