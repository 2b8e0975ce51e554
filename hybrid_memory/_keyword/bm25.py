"""The keyword leg's ranking: BM25 over the index's postings, for the words of a question
as the index's own tokenizer makes them.

Okapi BM25 as SQLite FTS5 computes it (k1 = 1.2, b = 0.75; Robertson & Zaragoza 2009,
:mod:`~hybrid_memory._keyword.bm25_scores`), over numpy postings
(:class:`~hybrid_memory._keyword.postings.Postings`, kept by
:class:`~hybrid_memory._keyword.postings_keeper.PostingsKeeper`): the same scores as FTS5's
``bm25()`` without a call per matching row. FTS5 ranks itself the words it reads as
phrases (several tokens, as with the trigram tokenizer), and the searches made while the
postings are being built.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hybrid_memory._keyword.damage import IndexDamaged
from hybrid_memory._keyword.memory_ids import MemoryIds
from hybrid_memory._keyword.numpy_top import holding_all, holding_each
from hybrid_memory._keyword.postings import FloatArray, IntArray, Postings
from hybrid_memory._keyword.postings_file import PostingsFileError
from hybrid_memory._keyword.postings_keeper import PostingsKeeper, ReadBeside

# Where the search, the legs and the studies have imported a question's words from.
from hybrid_memory._keyword.query_words import _TOKEN as _TOKEN
from hybrid_memory._keyword.query_words import STOPWORDS as STOPWORDS
from hybrid_memory._keyword.query_words import match_expression as match_expression
from hybrid_memory._keyword.query_words import query_words as query_words
from hybrid_memory._keyword.reads import IndexReads
from hybrid_memory._model.filters import Node, to_sql

_KEPT_WORDS = 50_000  # query words whose FTS5 terms are remembered


class KeywordSearch:
    """The keyword leg's ranking. Runs under the caller's lock, after the caller brought
    the index in step with other connections' writes."""

    def __init__(
        self,
        conn: sqlite3.Connection,
        tokenizer: str,
        reads: IndexReads,
        ids: MemoryIds,
        *,
        empty: bool,
        path: str | None = None,
        beside: ReadBeside[Any] | None = None,
    ) -> None:
        self._conn = conn
        self._reads = reads
        self._ids = ids
        # Tokenizers that turn a word into several tokens (trigram) make every query word
        # a phrase: FTS5 ranks those, and no postings are kept.
        self._postings_rank = not tokenizer.split()[0].lower().startswith("trigram")
        self._word_terms: dict[str, tuple[str, ...]] = {}
        self.keeper = PostingsKeeper(
            conn, reads, ids, rank=self._postings_rank, empty=empty, path=path, beside=beside
        )

    @property
    def postings(self) -> Postings | None:
        """The postings, when ready (see :class:`PostingsKeeper`)."""
        return self.keeper.postings

    @postings.setter
    def postings(self, postings: Postings | None) -> None:
        self.keeper.postings = postings

    # --- ranking ------------------------------------------------------------------------

    def search(
        self,
        text: str,
        limit: int,
        where: Node | None,
        *,
        within: IntArray | None,
        drop_stopwords: bool,
        max_df: float,
        total: Callable[[], int],
    ) -> list[tuple[str, float]]:
        """:meth:`~hybrid_memory._keyword.index.KeywordIndex.search`; ``total``: how many
        memories the index holds, asked for only when ``max_df`` needs it."""
        words = query_words(text, drop_stopwords=drop_stopwords)
        if max_df < 1.0 and len(words) > 1:
            common = self.common_words(words, max_df, total())
            words = [w for w in words if w not in common] or words
        if not words:
            return []
        terms = self._single_terms(words) if self._postings_rank else None
        if terms is None:
            return self.search_fts(words, limit, where)
        postings = self.keeper.ready()
        if postings is None:  # being built aside: FTS5 ranks (the same BM25 scores)
            return self.search_fts(words, limit, where)
        single = [t[0] for t in terms if t]
        try:
            if within is None and where is not None:
                rows, scores = self._best_passing(*postings.scores(single), limit, where)
            else:
                rows, scores = postings.top(single, limit, within)
        except PostingsFileError as exc:
            self.keeper.drop_file(exc)
            return self.search_fts(words, limit, where)
        ids = self._ids.ids_of(rows.tolist())
        if len(ids) < len(rows):
            raise IndexDamaged("ranked rows are missing from the memories table")
        return [(ids[r], float(v)) for r, v in zip(rows.tolist(), scores, strict=True)]

    def _best_passing(
        self, rows: IntArray, scores: FloatArray, limit: int, where: Node
    ) -> tuple[IntArray, FloatArray]:
        """The ``limit`` best of the scored rows that pass the filter: candidates are
        checked best first in growing batches, so a broad filter costs one query and a
        narrow one a few."""
        order = np.lexsort((rows, -scores))
        rows, scores = rows[order], scores[order]
        kept: list[int] = []
        start, step = 0, max(4 * limit, 256)
        while start < len(rows) and len(kept) < limit:
            batch = rows[start : start + step]
            passing = self._reads.passing("rowid", batch.tolist(), where)
            kept.extend(start + i for i, r in enumerate(batch.tolist()) if r in passing)
            start += step
            step *= 2
        chosen = np.array(kept[:limit], dtype=np.int64)
        return rows[chosen], scores[chosen]

    def search_fts(
        self, words: Sequence[str], limit: int, where: Node | None
    ) -> list[tuple[str, float]]:
        """FTS5's own ranking (its ``bm25()``): for query words it reads as phrases."""
        expression = match_expression(words)
        if expression is None:
            return []
        sql, params = to_sql(where)
        query = (
            "SELECT m.id, -bm25(memories_fts) AS score FROM memories_fts "
            "JOIN memories m ON m.rowid = memories_fts.rowid WHERE memories_fts MATCH ?"
            + (f" AND {sql}" if sql else "")
            + " ORDER BY bm25(memories_fts), m.rowid LIMIT ?"
        )
        return [
            (r[0], float(r[1])) for r in self._conn.execute(query, [expression, *params, limit])
        ]

    def holding_every(self, words: Sequence[str], rowids: dict[str, int]) -> list[str] | None:
        """Those of the memories ``rowids`` (id → row id) whose text holds every one of
        ``words`` (each word's terms as the index's tokenizer makes them); None when the
        postings cannot tell (not built yet, or a tokenizer without them)."""
        postings = self.postings
        if postings is None or not self._postings_rank:
            return None
        terms = sorted({t for word_terms in self.terms_of(words) for t in word_terms})
        rows = np.fromiter(rowids.values(), dtype=np.int64, count=len(rowids))
        try:
            kept = set(holding_all(postings, terms, rows).tolist())
        except PostingsFileError as exc:
            self.keeper.drop_file(exc)
            return None
        return [memory_id for memory_id, row in rowids.items() if row in kept]

    def terms_held(
        self, terms: Sequence[str], rowids: dict[str, int]
    ) -> dict[str, set[str]] | None:
        """Which of ``terms`` each of the memories ``rowids`` (id → row id) holds in its
        indexed text, read from the postings (a binary search per term); None when the
        postings cannot tell (not built yet, or a tokenizer without them)."""
        postings = self.postings
        if postings is None or not self._postings_rank:
            return None
        rows = np.fromiter(rowids.values(), dtype=np.int64, count=len(rowids))
        try:
            each = holding_each(postings, terms, rows).T.tolist()  # a row of flags per memory
        except PostingsFileError as exc:
            self.keeper.drop_file(exc)
            return None
        return {
            memory_id: {term for term, holds in zip(terms, flags, strict=True) if holds}
            for memory_id, flags in zip(rowids, each, strict=True)
        }

    def common_words(self, words: Sequence[str], max_df: float, total: int) -> set[str]:
        """The words whose indexed term (as the index's own tokenizer stems it) occurs in
        more than ``max_df`` of the ``total`` memories."""
        if total == 0:
            return set()
        terms = self.terms_of(words)
        distinct = sorted({t for word_terms in terms for t in word_terms})
        if not distinct:
            return set()
        marks = ", ".join("?" * len(distinct))
        frequency = dict(
            self._conn.execute(
                f"SELECT term, doc FROM memories_vocab WHERE term IN ({marks})", distinct
            ).fetchall()
        )
        limit = max_df * total
        return {
            word
            for word, word_terms in zip(words, terms, strict=True)
            if any(frequency.get(t, 0) > limit for t in word_terms)
        }

    def _single_terms(self, words: Sequence[str]) -> list[tuple[str, ...]] | None:
        """Each word's FTS5 terms; None when some word is several tokens (FTS5 reads
        it as a phrase, the postings cannot)."""
        out = self.terms_of(words)
        return None if any(len(t) > 1 for t in out) else out

    def terms_of(self, words: Sequence[str]) -> list[tuple[str, ...]]:
        """Each word's FTS5 terms, as the index's own tokenizer makes them (a scratch
        FTS5 table tokenises the words; remembered for the next queries)."""
        missing = [w for w in words if w not in self._word_terms]
        if missing and len(self._word_terms) > _KEPT_WORDS:
            self._word_terms.clear()
        if missing:
            c = self._conn
            # One statement, into a contentless table emptied by 'delete-all': a row at a
            # time into a table with content, emptied by DELETE, took 3x as long (~1 ms
            # for the dozen new words of the first search after an add).
            c.execute(
                "INSERT INTO temp.query_words(rowid, word) SELECT key, value FROM json_each(?)",
                [json.dumps(missing, ensure_ascii=False)],
            )
            try:
                found = c.execute(
                    "SELECT doc, term FROM temp.query_terms ORDER BY doc, offset"
                ).fetchall()
            finally:
                c.execute("INSERT INTO temp.query_words(query_words) VALUES ('delete-all')")
            terms: dict[int, list[str]] = {}
            for doc, term in found:
                terms.setdefault(doc, []).append(term)
            for i, word in enumerate(missing):
                self._word_terms[word] = tuple(terms.get(i, ()))
        return [self._word_terms[w] for w in words]
