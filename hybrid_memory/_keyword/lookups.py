"""The keyword index's reads, each under the index's lock and in step with other
connections' writes: counts, filters, pages, lookups, BM25 and the tag leg's answers.
What :class:`~hybrid_memory._keyword.index.KeywordIndex` answers with; the work is done by
the in-memory parts (:class:`~hybrid_memory._keyword.mirrors.Mirrors`) and the reads of
its file (:class:`~hybrid_memory._keyword.reads.IndexReads`)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from hybrid_memory._keyword.bm25 import KeywordSearch
from hybrid_memory._keyword.memory_ids import MemoryIds
from hybrid_memory._keyword.mirrors import Mirrors
from hybrid_memory._keyword.postings import IntArray
from hybrid_memory._keyword.reads import IndexReads, Key
from hybrid_memory._keyword.tag_index import TagIndex, TagMatch
from hybrid_memory._keyword.writes import IndexRow, vector_of
from hybrid_memory._model.filters import Node

_T = TypeVar("_T")


class IndexLookups:
    """The reads of a :class:`~hybrid_memory._keyword.index.KeywordIndex` (its base)."""

    _lock: threading.RLock
    mirrors: Mirrors
    # Ids whose rows here are known to be out of date (see KeywordIndex.lagging).
    lagging: set[str]

    @property
    def reads(self) -> IndexReads:
        return self.mirrors.reads

    @property
    def ids_cache(self) -> MemoryIds:
        return self.mirrors.ids

    @property
    def tags(self) -> TagIndex:
        return self.mirrors.tags

    @property
    def keywords(self) -> KeywordSearch:
        return self.mirrors.keywords

    def _see_other_writers(self) -> None:
        """Before a read, under the lock: the in-memory parts in step with other
        connections' writes (once per search: :meth:`Mirrors.catch_up_unless_viewing`)."""
        self.mirrors.catch_up_unless_viewing()

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

    def rows_mark(self) -> str:
        """What the index's rows are, in brief: how many, and the highest row id ever
        given. Changes with every write of rows (ids are never reused), so that rows
        changed behind the store's back (a file restored, rows deleted by hand) show."""
        with self._lock:
            return self.reads.rows_mark()

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

    def long_texts(self, ids: Sequence[str], longer_than: int) -> tuple[dict[str, str], float]:
        """The texts of those of the memories ``ids`` longer than ``longer_than``
        characters, by id, and the mean length of all of them that exist (0 when none is
        longer: then not read). Short texts are not read out: for a search's hits in a
        store of short memories this is one query that returns nothing."""
        with self._lock:
            known = self._known_rowids(ids)
            unknown = [i for i in dict.fromkeys(ids) if i not in known]
            rows = list(known.values())
            found = self.reads.long_texts(rows, "rowid", longer_than) if rows else {}
            if unknown:
                found.update(self.reads.long_texts(unknown, "id", longer_than))
            if not found:
                return {}, 0.0
            total, count = self.reads.length_total(rows, "rowid") if rows else (0, 0)
            if unknown:
                more, extra = self.reads.length_total(unknown, "id")
                total, count = total + more, count + extra
            return found, total / max(count, 1)

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
