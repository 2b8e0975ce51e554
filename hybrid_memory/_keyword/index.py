"""The derived keyword index: BM25 over SQLite FTS5, plus the tag and metadata tables
the keyword and tag legs filter with.

Derived state (docs/architecture.md, "The one rule of state"): every row here can be
rebuilt from the Chroma collection, and the store checks it against the collection on
open. :class:`KeywordIndex` is the front the store uses: it holds the one lock and runs
each write as one transaction; its reads are :class:`~hybrid_memory._keyword.lookups.IndexLookups`,
its in-memory parts (counts, ids, postings, tags' carriers) have one owner,
:class:`~hybrid_memory._keyword.mirrors.Mirrors`, kept in step with every write, this
connection's and other connections' (``PRAGMA data_version``), and the file is
:class:`~hybrid_memory._keyword.file.IndexFile`.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from concurrent.futures import wait
from typing import Any, TypeVar

import numpy as np

from hybrid_memory._keyword.damage import rollback
from hybrid_memory._keyword.file import IndexFile
from hybrid_memory._keyword.lookups import IndexLookups
from hybrid_memory._keyword.mirrors import Mirrors
from hybrid_memory._keyword.reads import rowids_of, updated_at_of
from hybrid_memory._keyword.writes import (
    ROW_TABLES,
    Batch,
    IndexRow,
    batch_json,
    delete_rows,
    next_rowid,
    vector_bytes,
    write_batch,
)

_T = TypeVar("_T")


class _Transaction:
    """An index write under way (:meth:`KeywordIndex._transaction`): its connection,
    whether to roll it back (nothing to write after all), and what the in-memory parts
    do once it is committed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.abandoned = False
        self.follow: Callable[[], None] = lambda: None


class KeywordIndex(IndexLookups):
    """The derived index of one collection. ``path=None`` keeps it in memory. One
    connection serves all threads, guarded by a lock; each call is one transaction."""

    def __init__(
        self,
        path: str | None,
        tokenizer: str,
        *,
        page_size: int | None = None,
        keep_vectors: bool = True,
    ) -> None:
        self.path = path
        # Whether writes keep a copy of their vectors (:meth:`vectors`).
        self._keep_vectors = keep_vectors
        self.file = IndexFile(path, tokenizer, page_size=page_size)
        self._lock = self.file.lock
        # Ids whose rows here are known to be out of date: the collection took a write of
        # theirs whose index half found no room on disk (IndexSync.index_lags). Their
        # rows are not read from here (nor their content hashes) until a reconcile
        # rewrote them: the collection answers for them meanwhile.
        self.lagging: set[str] = set()
        self.mirrors = Mirrors(self.file)

    def reset(self, cause: BaseException) -> None:
        """After ``cause`` (a damage error, :func:`is_damage`) from this index: reopen the
        file, starting it over empty when it is still damaged (another process may have
        rebuilt it meanwhile). The caller refills it from the collection."""
        with self._lock:
            self.file.reset(cause)
            self.mirrors = Mirrors(self.file)

    def close(self) -> None:
        """Close the file, leaving the postings beside it for the next process when a
        good share of them is not there yet."""
        with contextlib.suppress(sqlite3.Error):
            if self.keywords.keeper.worth_saving():
                epoch = self.file.epoch()  # a write: not under the lock (see IndexFile.writing)
                with self._lock:
                    self.mirrors.catch_up()
                    self.keywords.keeper.save(epoch)
        self.file.close()

    def get_state(self, key: str) -> str | None:
        return self.file.get_state(key)

    def set_state(self, key: str, value: str) -> None:
        self.file.set_state(key, value)

    # --- writes -------------------------------------------------------------------------

    def upsert(self, rows: Sequence[IndexRow], vectors: np.ndarray | None = None) -> None:
        """Insert or replace memories by id, in one transaction. A replaced memory gets
        a new row id (row ids are never reused). ``vectors``: the rows' vectors (one row
        each, in order), kept in half precision for :meth:`vectors`."""
        with self.upserting(rows, vectors, overlap=False):
            pass

    @contextlib.contextmanager
    def upserting(
        self,
        rows: Sequence[IndexRow],
        vectors: np.ndarray | None = None,
        *,
        overlap: bool = True,
    ) -> Iterator[None]:
        """:meth:`upsert` ``rows`` around the body: the rows are written in an open
        transaction, committed when the body returns and rolled back when it raises, and
        the in-memory parts follow only once committed.

        With ``overlap``, the write runs in the index's worker thread while the body
        runs: one SQL statement, during which SQLite releases the GIL, so it costs
        nothing extra beside a Chroma write (which holds the GIL). The body must not use
        this index (other threads wait for the lock until the commit)."""
        if not rows:
            yield
            return
        if not self._keep_vectors:
            vectors = None
        latest, payload, kept_vectors, width = _prepared(rows, vectors)
        with self._transaction() as tx:
            c = tx.conn
            batch = self._batch(c, latest, payload, kept_vectors, width)
            if overlap:
                started = threading.Event()
                future = self.file.worker().submit(write_batch, c, batch, started)
                started.wait()  # the statement is under way: the body may take the GIL
                try:
                    yield
                finally:
                    wait([future])  # the connection is free again, either way
                tokens = future.result()
            else:
                tokens = write_batch(c, batch)
                yield
            tx.follow = lambda: self._committed(self.mirrors.written, batch, tokens)

    def copy_in(
        self, read: Callable[[], Sequence[IndexRow] | None], *, changed_only: bool = False
    ) -> int | None:
        """Upsert the rows ``read()`` returns (a page of the collection's records), read
        inside the write transaction: how many (None when ``read()`` returned None: no
        page was left). ``changed_only``: only the rows whose ``updated_at`` differs
        from the index's (or that it lacks).

        Every writer writes the index after the collection (an add holds the index's
        write lock around its collection write, an update and a delete take it after
        theirs), so while the lock is held here no write can come between the read and
        the copy: a memory deleted or updated meanwhile is removed or rewritten after
        the copy, not brought back (or back to its old text) by it."""
        with self._transaction() as tx:
            rows = read()
            if rows and changed_only:
                held = updated_at_of(tx.conn, [r.id for r in rows])
                rows = [r for r in rows if held.get(r.id) != r.updated_at]
                if not rows:
                    tx.abandoned = True
                    return 0
            if not rows:
                tx.abandoned = True
                return None if rows is None else 0
            latest, payload, kept_vectors, width = _prepared(rows, None)
            batch = self._batch(tx.conn, latest, payload, kept_vectors, width)
            tokens = write_batch(tx.conn, batch)
            tx.follow = lambda: self._committed(self.mirrors.written, batch, tokens)
        return len(rows)

    @contextlib.contextmanager
    def _transaction(
        self, *, on_failure: Callable[[], None] | None = None
    ) -> Iterator[_Transaction]:
        """One write of the index, the same steps for each: under the file's write lock,
        ``BEGIN IMMEDIATE`` (no other connection can commit until this one ends), the
        remembered counts dropped and the in-memory parts caught up with other
        connections' writes; the body writes on ``tx.conn``. Committed when the body
        returns (rolled back if it set ``tx.abandoned``) and then ``tx.follow`` runs:
        the in-memory parts take the write in, still under the lock. When the body
        raises, ``on_failure`` runs and the transaction is rolled back."""
        with self.file.writing() as c:
            c.execute("BEGIN IMMEDIATE")
            self.reads.clear_counts()
            tx = _Transaction(c)
            try:
                self.mirrors.catch_up()
                yield tx
                c.execute("ROLLBACK" if tx.abandoned else "COMMIT")
            except BaseException:
                if on_failure is not None:
                    on_failure()
                rollback(c)
                raise
            if not tx.abandoned:
                tx.follow()

    def _batch(
        self,
        c: sqlite3.Connection,
        latest: list[IndexRow],
        payload: tuple[str, str] | None,
        kept_vectors: bytes | None,
        width: int,
    ) -> Batch:
        """The write of ``latest`` (distinct ids), in the open transaction."""
        return Batch(
            latest,
            payload,
            list(rowids_of(c, [r.id for r in latest]).values()),
            next_rowid(c),
            self.keywords.postings is not None,
            kept_vectors,
            width,
        )

    def _committed(self, follow: Callable[..., None], *args: Any) -> None:
        """After a write's commit: the in-memory parts take it in."""
        follow(*args)
        self.file.committed()

    def one_view(self) -> contextlib.AbstractContextManager[None]:
        """The reads of the body (one search, in this thread) see other connections'
        writes as of its start (:meth:`Mirrors.one_view`)."""
        return self.mirrors.one_view(self._lock)

    def delete(
        self,
        ids: Iterable[str],
        *,
        unless: Callable[[list[str]], Collection[str]] | None = None,
    ) -> int:
        """Remove memories by id; returns how many were removed.

        ``unless``: which of the ids present must stay, asked inside the write
        transaction, while no other connection can commit a write. A reconcile passes
        the collection's answer: a writer commits its index rows only after the
        collection took them, so an id the collection lacks at that moment is not
        being written by anyone (what it lacked at an earlier read may have been)."""

        with self._transaction(on_failure=self.mirrors.delete_failed) as tx:
            found = rowids_of(tx.conn, list(ids))
            if unless is not None and found:
                kept = unless(list(found))
                found = {i: row for i, row in found.items() if i not in kept}
            rowids = list(found.values())
            delete_rows(tx.conn, rowids)
            self.mirrors.deleting(rowids)
            tx.follow = lambda: self._committed(self.mirrors.removed, found, rowids)
        return len(rowids)

    def clear(self) -> None:
        with self.file.writing() as c:
            for table in ROW_TABLES:
                c.execute(f"DELETE FROM {table}")
            # The postings kept beside the file are no longer its rows'.
            self.file.start_epoch(c)
            self.mirrors.cleared()
            self.file.committed()


def _prepared(
    rows: Sequence[IndexRow], vectors: np.ndarray | None
) -> tuple[list[IndexRow], tuple[str, str] | None, bytes | None, int]:
    """What a write of ``rows`` needs before its transaction: the last of each id (a
    repeated id: the last wins), their JSON payload, and their vectors' bytes and width."""
    last = {r.id: position for position, r in enumerate(rows)}
    latest = [rows[position] for position in last.values()]
    kept = None if vectors is None else vector_bytes(np.asarray(vectors)[list(last.values())])
    kept_vectors, width = kept or (None, 0)
    return latest, batch_json(latest), kept_vectors, width
