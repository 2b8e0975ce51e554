"""BM25 keyword search over the derived index: query words, their FTS5 terms, and the
ranking over in-memory postings kept in step with the SQLite tables.

FTS5 ranks with Okapi BM25 (k1 = 1.2, b = 0.75; Robertson & Zaragoza 2009) and stems
with Porter by default. Ranking itself runs over :class:`~hybrid_memory._keyword.postings.Postings`,
numpy arrays built from FTS5's own tokens on the first search and kept in step with
every write (and with other connections' writes, see
:class:`~hybrid_memory._keyword.index.KeywordIndex`): the same BM25 scores without
a ``bm25()`` call per matching row. Query words that FTS5 reads as phrases (several
tokens, as with the trigram tokenizer) are ranked by FTS5 itself, and so are the
searches made while the postings of an index file opened with memories in it are built
on a thread of their own (seconds at 50,000 memories: a new process answers at once).
That thread also reads what another part asks for from the same snapshot
(:class:`ReadBeside`: the tags' carriers), taken with the postings.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import re
import sqlite3
import threading
import unicodedata
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import numpy as np

from hybrid_memory._keyword import postings_file
from hybrid_memory._keyword.file import EPOCH_KEY, IndexDamaged
from hybrid_memory._keyword.porter import DEFAULT_TOKENIZER, plain_term
from hybrid_memory._keyword.postings import FloatArray, IntArray, Postings
from hybrid_memory._keyword.postings_file import KeptCarriers, MappedPostings, PostingsFileError
from hybrid_memory._keyword.reads import IndexReads, MemoryIds
from hybrid_memory._keyword.tokens import parse_tokens, tokens_sql
from hybrid_memory._keyword.writes import Batch, fts_text, take_new_tokens
from hybrid_memory._model.filters import Node, to_sql
from hybrid_memory._process.exit import join_at_exit

log = logging.getLogger("hybrid_memory")

_KEPT_WORDS = 50_000  # query words whose FTS5 terms are remembered
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

# Dropped from keyword *queries* only: they match most memories and drown the terms
# that carry the question. Memories keep them, so phrase-like evidence survives.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t
    don didn doesn isn wasn aren weren
    """.split()  # noqa: SIM905 - a word list reads better as prose
)

# Words as FTS5's unicode61 tokenizer sees them: letters, numbers and private use,
# with the combining accents inside a word (remove_diacritics folds "0\u03010" into
# "00"). Erring towards longer words is safe: FTS5 splits a quoted word into a phrase.
_WORD_CHARS = r"\w\ue000-\uf8ff\U000f0000-\U0010fffd"
_TOKEN = re.compile(rf"[{_WORD_CHARS}][{_WORD_CHARS}\u0300-\u036f]*", re.UNICODE)


def query_words(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """The distinct words of a query, stopwords dropped unless nothing else is left."""
    return list(_words(text, drop_stopwords))


@functools.lru_cache(maxsize=4096)
def _words(text: str, drop_stopwords: bool) -> tuple[str, ...]:
    # Kept: a search asks for the words of its query and of each hit's text (relevance)
    # several times, and the same hits come back across searches.
    # No case folding here: FTS5 folds each quoted word with the same tokenizer as the
    # indexed text, whereas str.casefold() differs from it ("Straße" -> "strasse").
    distinct: dict[str, str] = {}
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        distinct.setdefault(token.casefold(), token)
    tokens = list(distinct.values())
    if drop_stopwords:
        content = [t for t in tokens if t.casefold() not in STOPWORDS]
        tokens = content or tokens  # a query of only stopwords still searches them
    return tuple(tokens)


def match_expression(words: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression for query words: ``"w1" OR "w2" …``, every word quoted as
    an FTS5 string, so no character of user text can reach FTS5's query syntax (``AND``,
    ``NEAR``, ``*``, ``:``, ``"``, parentheses…). None for no words."""
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)


_Read = TypeVar("_Read")


class ReadBeside(Protocol[_Read]):
    """Another in-memory part that a reopened index file reads from the snapshot its
    postings are built from, on their thread, and holds with them: brought in step with
    the rows written since as the postings are (rows ``gone``, rows above ``high`` new).
    (:class:`~hybrid_memory._keyword.tag_index.TagIndex`: the tags' carriers.)"""

    def read_beside(self, conn: sqlite3.Connection) -> _Read: ...

    def adopt(self, read: _Read, gone: Sequence[int], high: int) -> None: ...

    def to_keep(self) -> KeptCarriers | None: ...

    def from_kept(self, kept: KeptCarriers) -> _Read: ...


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
        self._path = path  # an index file: postings are built aside (see _ready_postings)
        self._aside: threading.Thread | None = None
        # What the build aside gave: the postings and what ``beside`` read with them.
        self._built: tuple[Postings, Any] | BaseException | None = None
        self._beside = beside
        self._reads = reads
        self._ids = ids
        # Tokenizers that turn a word into several tokens (trigram) make every query word
        # a phrase: FTS5 ranks those, and no postings are kept.
        self._postings_rank = not tokenizer.split()[0].lower().startswith("trigram")
        self._word_terms: dict[str, tuple[str, ...]] = {}
        # The default tokenizer's term of a plain ASCII word is computed here, not asked
        # of FTS5 (hybrid_memory._keyword.porter); any other word or tokenizer asks FTS5.
        self._plain_term: Callable[[str], str | None] | None = (
            plain_term if tokenizer.split() == DEFAULT_TOKENIZER.split() else None
        )
        # The ranking arrays; None: built by the next search. An empty index has nothing
        # to build from: they start empty and follow every write, so a store filled from
        # scratch has them when its first search comes.
        self.postings: Postings | None = Postings() if self._postings_rank and empty else None
        self._tried_file = False  # the postings kept beside the file were looked for

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
        postings = self._ready_postings()
        if postings is None:  # being built aside: FTS5 ranks (the same BM25 scores)
            return self.search_fts(words, limit, where)
        single = [t[0] for t in terms if t]
        try:
            if within is None and where is not None:
                rows, scores = self._best_passing(*postings.scores(single), limit, where)
            else:
                rows, scores = postings.top(single, limit, within)
        except PostingsFileError as exc:
            self._drop_file(exc)
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
            kept = set(postings.holding_all(terms, rows).tolist())
        except PostingsFileError as exc:
            self._drop_file(exc)
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
            each = postings.holding_each(terms, rows).T.tolist()  # a row of flags per memory
        except PostingsFileError as exc:
            self._drop_file(exc)
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
        FTS5 table tokenises the words, but for the plain words of the default tokenizer;
        remembered for the next queries)."""
        missing = [w for w in words if w not in self._word_terms]
        if missing and len(self._word_terms) > _KEPT_WORDS:
            self._word_terms.clear()
        if missing and self._plain_term is not None:
            rest = []
            for word in missing:
                term = self._plain_term(word)
                if term is None:
                    rest.append(word)
                else:
                    self._word_terms[word] = (term,)
            missing = rest
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

    # --- the postings, in step with the tables ------------------------------------------

    def _ready_postings(self) -> Postings | None:
        """The postings, built from the FTS5 index when there are none yet (once per
        open store, in time proportional to the store). An index file's are built on a
        thread with a connection of its own, from one snapshot of the file; None until
        they are, and then the rows written since the snapshot are brought in as
        another connection's writes are (row ids only grow)."""
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

    def _drop_file(self, cause: PostingsFileError) -> None:
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
            postings.save(postings_file.path_for(path), epoch, carriers)
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
                self._built = (postings, self._read_beside(conn))
            finally:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
        except BaseException as exc:  # handed to the next search, which repairs damage
            self._built = (
                exc
                if isinstance(exc, sqlite3.DatabaseError)
                else IndexDamaged(f"the keyword index's postings could not be built: {exc}")
            )

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
        self.postings = Postings() if self._postings_rank else None  # empty, as the index

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
    """Postings of every row, from FTS5's own tokens (``temp.memory_terms``)."""
    postings = Postings()
    tokens = conn.execute(tokens_sql("temp.memory_terms")).fetchone()[0]
    rowids = np.array([r[0] for r in conn.execute("SELECT rowid FROM memories")], dtype=np.int64)
    try:
        postings.add(rowids, parse_tokens(tokens))
        named = conn.execute("SELECT rowid, id FROM memories")
        while page := named.fetchmany(_NAMING_PAGE):  # a page of ids in memory at a time
            postings.name([r for r, _ in page], [i for _, i in page])
    except ValueError as exc:  # the FTS rows and the memories disagree
        raise IndexDamaged(f"the keyword index's tables disagree: {exc}") from exc
    return postings
