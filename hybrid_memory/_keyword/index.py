"""The derived keyword index: BM25 over SQLite FTS5, plus the tag and metadata tables
the keyword and tag legs filter with.

Derived state (docs/architecture.md, "The one rule of state"): every row here can be
rebuilt from the Chroma collection, and :class:`~hybrid_memory._memory.memory.HybridMemory`
checks it against the collection on open. :class:`KeywordIndex` is the front the store
uses; the work is done by its parts:

- :mod:`~hybrid_memory._keyword.file`: the SQLite file, schema, damage, checkpoints;
- :mod:`~hybrid_memory._keyword.writes`: one batch of rows as one statement;
- :mod:`~hybrid_memory._keyword.reads`: counts, filters, pages, lookups;
- :mod:`~hybrid_memory._keyword.bm25` (over :mod:`~hybrid_memory._keyword.postings`): BM25;
- :mod:`~hybrid_memory._keyword.tag_index` (over
  :mod:`~hybrid_memory._keyword.tag_carriers`): tag matches.

The front holds the one lock, runs each write as one transaction, and keeps the
in-memory parts (postings, tag carriers, remembered counts and ids) in step with every
write, this connection's and other connections' (``PRAGMA data_version``).
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import wait
from typing import Any, TypeVar

import numpy as np

from hybrid_memory._keyword.bm25 import KeywordSearch
from hybrid_memory._keyword.file import IndexFile, rollback
from hybrid_memory._keyword.postings import IntArray
from hybrid_memory._keyword.reads import IndexReads, Key, MemoryIds, rowids_of, updated_at_of
from hybrid_memory._keyword.tag_index import TagIndex, TagMatch
from hybrid_memory._keyword.writes import (
    ROW_TABLES,
    Batch,
    IndexRow,
    batch_json,
    delete_rows,
    next_rowid,
    vector_bytes,
    vector_of,
    write_batch,
)
from hybrid_memory._model.filters import Node

_T = TypeVar("_T")


class _Transaction:
    """An index write under way (:meth:`KeywordIndex._transaction`): its connection,
    whether to roll it back (nothing to write after all), and what the in-memory parts
    do once it is committed."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.abandoned = False
        self.follow: Callable[[], None] = lambda: None


class _View(threading.local):
    """Whether this thread is inside :meth:`KeywordIndex.one_view`."""

    open = False


class KeywordIndex:
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
        self._view = _View()
        # Ids whose rows here are known to be out of date: the collection took a write of
        # theirs whose index half found no room on disk (IndexSync.index_lags). Their
        # rows are not read from here (nor their content hashes) until a reconcile
        # rewrote them: the collection answers for them meanwhile.
        self.lagging: set[str] = set()
        self._start_parts()

    def _start_parts(self) -> None:
        """The in-memory parts over the (re)opened file, empty."""
        conn, file = self.file.conn, self.file
        self.reads = IndexReads(conn)
        self.ids_cache = MemoryIds(conn, lambda: self.keywords.postings)
        self.tags = TagIndex(conn, self.ids_cache, empty=file.opened_empty)
        self.keywords = KeywordSearch(
            conn,
            file.tokenizer,
            self.reads,
            self.ids_cache,
            empty=file.opened_empty,
            path=file.path,
            beside=self.tags,  # a reopened file's carriers are read with its postings
        )
        self._data_version = file.data_version()

    def reset(self, cause: BaseException) -> None:
        """After ``cause`` (a damage error, :func:`is_damage`) from this index: reopen the
        file, starting it over empty when it is still damaged (another process may have
        rebuilt it meanwhile). The caller refills it from the collection."""
        with self._lock:
            self.file.reset(cause)
            self._start_parts()

    def close(self) -> None:
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
            tx.follow = lambda: self._follow(batch, tokens)

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
            tx.follow = lambda: self._follow(batch, tokens)
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
                self._catch_up()
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

    def _follow(self, batch: Batch, tokens: str | None) -> None:
        """After a write's commit: the in-memory parts take it in."""
        self.keywords.written(batch, tokens)
        self.ids_cache.written(r.id for r in batch.rows)
        self.tags.written(batch)
        self.file.committed()

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

        def forget_postings() -> None:
            self.keywords.postings = None  # rebuilt by the next search

        with self._transaction(on_failure=forget_postings) as tx:
            found = rowids_of(tx.conn, list(ids))
            if unless is not None and found:
                kept = unless(list(found))
                found = {i: row for i, row in found.items() if i not in kept}
            rowids = list(found.values())
            delete_rows(tx.conn, rowids)
            self.keywords.deleted(rowids)
            tx.follow = lambda: self._removed(found, rowids)
        return len(rowids)

    def _removed(self, found: Mapping[str, int], rowids: list[int]) -> None:
        """After a delete's commit: the in-memory parts let the rows go."""
        self.ids_cache.written(found)
        self.tags.removed(rowids)
        self.file.committed()

    def clear(self) -> None:
        with self.file.writing() as c:
            self.reads.clear_counts()
            for table in ROW_TABLES:
                c.execute(f"DELETE FROM {table}")
            self.keywords.cleared()
            self.tags.carriers.clear()
            self.ids_cache.clear_rowids()
            self.file.committed()

    @contextlib.contextmanager
    def one_view(self) -> Iterator[None]:
        """The reads of the body (one search, in this thread) see other connections'
        writes as of its start: looking for them (a PRAGMA, ~30 us) is done once, not in
        each of a search's seven or so calls. This connection's own writes show at once,
        as ever."""
        view = self._view
        if view.open:
            yield
            return
        with self._lock:
            self._catch_up()
        view.open = True
        try:
            yield
        finally:
            view.open = False

    def _see_other_writers(self) -> None:
        """Before a read, under the lock: :meth:`_catch_up`, unless this thread is
        inside :meth:`one_view`, which did it at its start."""
        if not self._view.open:
            self._catch_up()

    def _catch_up(self) -> None:
        """Bring the in-memory parts in step with rows other connections wrote (another
        process sharing this index file). Under the lock."""
        version = self.file.data_version()
        if version == self._data_version:
            return
        self._data_version = version
        self.reads.clear_counts()
        self.ids_cache.clear_rowids()
        seen = self.keywords.other_writers_wrote()
        if seen is None:
            self.tags.carriers.clear()  # read again when next asked for
        else:
            self.tags.other_writers_wrote(*seen)

    # --- reads --------------------------------------------------------------------------

    def count(self, where: Node | None = None) -> int:
        """Memories passing ``where``. Counts are kept between writes: search asks for
        them every time, and COUNT(*) scans the table or the filter's rows."""
        with self._lock:
            self._see_other_writers()  # another connection's write changes the counts
            postings = self.keywords.postings
            if where is None and postings is not None:
                # Every row, with or without tokens, is one live row of the postings,
                # which follow every write: no COUNT(*) scan after each write (7-15 ms
                # of the first search after an add at 100,000 memories, 10x at 1M).
                return len(postings)
            return self.reads.count(where)

    def passing(self, ids: Sequence[str], where: Node | None) -> set[str]:
        """Which of ``ids`` are indexed and pass ``where``. Without a filter, those this
        connection knows the rows of are indexed (as of the search's view): only the
        others are read (a hundred ids read took ~0.3 ms of a search)."""
        with self._lock:
            if where is None:
                known = self._known_rowids(ids)
                rest = [i for i in ids if i not in known]
                return set(known).union(self.reads.passing("id", rest, None) if rest else ())
            return self.reads.passing("id", list(ids), where)

    def ids(self) -> set[str]:
        with self._lock:
            return self.reads.ids()

    def ids_by_hash(self, hashes: Sequence[str]) -> dict[str, str]:
        """For each content hash already stored, one memory id that has it."""
        with self._lock:
            found = self.reads.ids_by_hash(hashes)
        if self.lagging:
            found = {h: i for h, i in found.items() if i not in self.lagging}
        return found

    def updated_at(self, ids: Sequence[str]) -> dict[str, float]:
        """``{id: updated_at}`` of the memories ``ids`` that the index holds."""
        with self._lock:
            return self.reads.updated_at(ids)

    def stamps_after(self, since: float) -> list[float]:
        """Each distinct ``updated_at`` after ``since`` that the index holds."""
        with self._lock:
            return self.reads.stamps_after(since)

    def watermark(self) -> float | None:
        """The newest ``updated_at`` indexed: where catching up with the collection starts."""
        with self._lock:
            return self.reads.newest_update()

    def single_valued(self, fields: Iterable[str]) -> list[str]:
        """Of ``fields``, those some memory holds and none holds as a list."""
        with self._lock:
            return self.reads.single_valued(fields)

    def all_tags(self) -> list[str]:
        """Every tag in use, sorted."""
        with self._lock:
            return self.reads.all_tags()

    def page(
        self, where: Node | None, limit: int | None, offset: int, *, newest_first: bool = False
    ) -> list[str]:
        """The ids of the memories passing ``where``, oldest first (``created_at``, then
        ``id``; newest first with ``newest_first``), ``offset`` skipped and at most
        ``limit`` (None: all)."""
        with self._lock:
            self._see_other_writers()
            return self.reads.page(where, limit, offset, newest_first=newest_first)

    def within(self, where: Node | None, cap: int) -> tuple[IntArray, list[str]] | None:
        """The row ids and ids of the memories passing ``where``, when there are at most
        ``cap`` of them (None otherwise): a narrow filter resolved once, for every leg."""
        with self._lock:
            return self.reads.narrow(where, cap)

    def created_at(self, ids: Sequence[str]) -> dict[str, float]:
        """Creation times (epoch seconds) by id, for recency decay."""
        with self._lock:
            return self.reads.created_at(ids)

    def superseding(self, key: str, ids: Sequence[str]) -> dict[str, str]:
        """For those of ``ids`` that an indexed memory supersedes (names in its metadata
        ``key``), the newest such memory's id: ``{older: newer}``."""
        with self._lock:
            found = self.reads.superseding(key, ids)
        if self.lagging:
            found = {o: n for o, n in found.items() if n not in self.lagging}
        return found

    def rows(self, ids: Sequence[str]) -> dict[str, IndexRow]:
        """Index rows by id (for ids present)."""
        with self._lock:
            found = self._by_row_first(ids, self.reads.rows)
        for memory_id in self.lagging & found.keys():
            del found[memory_id]
        return found

    def vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors kept for those of ``ids`` that have one (half precision, read as
        single): those this store's writes gave the index. A memory another process
        wrote, or one refilled from the collection, has none here."""
        with self._lock:
            self._see_other_writers()
            rowids = self.ids_cache.rowids_of(ids)
            kept = self.reads.vectors(list(rowids.values()))
            return {i: vector_of(kept[r]) for i, r in rowids.items() if r in kept}

    def holding_every(self, words: Sequence[str], ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` whose text may hold every one of ``words``: exactly those
        whose indexed terms include each word's terms when the in-memory postings can
        tell, else all of ``ids`` that exist. A first cut, for callers that then read the
        texts: it never drops a memory holding the words."""
        with self._lock:
            self._see_other_writers()
            rowids = self.ids_cache.rowids_of(ids)
            held = self.keywords.holding_every(words, rowids)
            kept = rowids.keys() if held is None else set(held)
            return [i for i in dict.fromkeys(ids) if i in kept]  # in the order given

    def lacking_tags(self, tags: Sequence[str], ids: Sequence[str]) -> list[str]:
        """Those of ``ids`` (indexed) that do not carry every one of ``tags``, in the
        order given (distinct)."""
        with self._lock:
            self._see_other_writers()
            return self.tags.lacking(tags, self.ids_cache.rowids_of(list(dict.fromkeys(ids))))

    def terms_held(self, terms: Sequence[str], ids: Sequence[str]) -> dict[str, set[str]]:
        """Which of ``terms`` (index terms, as :meth:`terms` makes them) each of the
        memories ``ids`` holds in its indexed text, for those the in-memory postings can
        tell about (none while they are being built, or with a tokenizer without them;
        not an id the index lacks): ``{id: terms held}``."""
        with self._lock:
            self._see_other_writers()
            held = self.keywords.terms_held(terms, self.ids_cache.rowids_of(ids))
            return {} if held is None else held

    def texts(self, ids: Sequence[str]) -> dict[str, str]:
        """The texts of the memories ``ids`` that exist, by id."""
        with self._lock:
            return self._by_row_first(ids, self.reads.texts)

    def _known_rowids(self, ids: Sequence[str]) -> dict[str, int]:
        """The row ids of those of ``ids`` this connection already knows (remembered, or
        named by the postings), current as of now: reading by row id is cheaper. An id
        whose row another connection replaced between this and the read is simply not
        found by row id; callers read the ids not found by id."""
        self._see_other_writers()
        return self.ids_cache.rowids_of(ids, read=False)

    def _by_row_first(
        self, ids: Sequence[str], read: Callable[[Sequence[Any], Key], dict[str, _T]]
    ) -> dict[str, _T]:
        """``read`` (an :class:`IndexReads` lookup) of the memories ``ids`` that exist:
        by the row ids this connection knows (:meth:`_known_rowids`), then by id for the
        rest (unknown, or replaced meanwhile)."""
        known = self._known_rowids(ids)
        found = read(list(known.values()), "rowid") if known else {}
        missing = [i for i in dict.fromkeys(ids) if i not in found]
        if missing:
            found.update(read(missing, "id"))
        return found

    def texts_and_tags(self, ids: Sequence[str]) -> list[tuple[str, int, float, str, list[str]]]:
        """``(id, row, created_at, text, tags)`` of the memories ``ids`` that exist (for
        the tag leg, which also counts the tags a memory's text names)."""
        with self._lock:
            return self.reads.texts_and_tags(ids)

    def search(
        self,
        text: str,
        limit: int,
        where: Node | None = None,
        *,
        within: IntArray | None = None,
        drop_stopwords: bool = True,
        max_df: float = 1.0,
    ) -> list[tuple[str, float]]:
        """The ``limit`` best BM25 matches for free text among memories passing ``where``:
        ``[(id, bm25 score)]``, best first (equal scores oldest row first), scores
        positive. ``within``: the row ids passing ``where``, when already known
        (:meth:`within`).

        Query words found in more than ``max_df`` of all memories are left out (unless
        that would leave none): they weigh little in BM25 and match the most rows."""
        with self._lock:
            self._see_other_writers()
            return self.keywords.search(
                text,
                limit,
                where,
                within=within,
                drop_stopwords=drop_stopwords,
                max_df=max_df,
                total=lambda: self.reads.count(None),
            )

    def terms(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's terms as the index's own tokenizer makes them (folded, stemmed;
        several for a trigram tokenizer): what a memory's words are compared by."""
        if not words:
            return []
        with self._lock:
            return self.keywords.terms_of(words)

    def common_words(self, words: Sequence[str], share: float) -> set[str]:
        """Those of ``words`` whose terms (as the index's tokenizer makes them) occur in
        more than ``share`` of the memories the index holds."""
        if not words:
            return set()
        with self._lock:
            self._see_other_writers()
            return self.keywords.common_words(words, share, self.count())

    def tag_carriers(
        self,
        tags: Sequence[str],
        limit: int,
        where: Node | None = None,
        among: Sequence[str] | None = None,
        *,
        within: IntArray | None = None,
    ) -> list[TagMatch]:
        """Memories carrying any of ``tags`` (and passing ``where``), most matched tags
        first, then newest first, then lower index row (so that carriers read in separate
        calls merge in exactly the order one call would give).

        With ``among``, only those ids are considered. Without it, each tag contributes
        its ``limit`` newest carriers: a common tag can sit on a large share of the
        store, and counting all its carriers on every search would grow with the store.
        (Carriers found by the other legs are asked for through ``among``, so none of
        those is missed.) ``within``: the row ids passing ``where``, when already known
        (:meth:`within`); carriers are then checked against them instead of the
        filter's SQL, which SQLite evaluates afresh for every tag."""
        if not tags or (among is not None and not among):
            return []
        with self._lock:
            self._see_other_writers()
            return self.tags.matches(tags, limit, where, among, within)

    def tag_ranking(
        self,
        tags: Sequence[str],
        depth: int,
        ranks: Mapping[str, int],
        named: Sequence[TagMatch] = (),
        exclude: str | None = None,
        *,
        within: IntArray | None = None,
    ) -> dict[str, int]:
        """The tag leg's ranking of a search without a filter, or with its filter
        resolved to the row ids ``within`` (:meth:`within`), in one call:
        ``{id: matched tags}``, best first
        (:meth:`~hybrid_memory._keyword.tag_index.TagIndex.ranking`).
        The same order as :meth:`tag_carriers`' newest carriers and carriers ``among``
        the ranked ids, merged and ordered by matched count, best rank, newest, row."""
        if not tags or depth <= 0:
            return {}
        with self._lock:
            self._see_other_writers()
            return self.tags.ranking(tags, depth, ranks, named, exclude, within)


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
