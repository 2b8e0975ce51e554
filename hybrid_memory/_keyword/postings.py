"""In-memory BM25 postings: the keyword leg's top k without calling SQL per match.

SQLite FTS5 finds the memories a query matches quickly, but ranks them by calling its
``bm25()`` function once per matching row, a cost that grows with the store. The same
scores over numpy arrays (one weighted ``bincount``, a partial sort of one term's rows
and a pass over the totals) do not loop over matches in Python. Over a store of
:data:`~hybrid_memory._keyword.scoring_kernel.LOAD_FROM_ROWS` memories or more, compiled
loops (numba, :mod:`~hybrid_memory._keyword.scoring_kernel`) compute the same floats in
one pass over the postings instead of ~12; numpy stays where numba cannot be imported.

The arrays are derived state twice removed: built from the FTS5 index's own tokens
(so stemming and folding are exactly the configured tokenizer's) and kept in step
with it by :class:`~hybrid_memory._keyword.bm25.KeywordSearch`. Nothing here does I/O:
:func:`tokens_sql` is the query that reads tokens out of FTS5, :func:`parse_tokens`
turns its one value into :class:`Tokens`.

Scores are Okapi BM25 exactly as FTS5 computes them: :mod:`~hybrid_memory._keyword.bm25_scores`.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable, Iterator, Sequence
from itertools import compress
from types import ModuleType
from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword import scoring_kernel
from hybrid_memory._keyword.bm25_scores import K1 as K1
from hybrid_memory._keyword.bm25_scores import B as B
from hybrid_memory._keyword.bm25_scores import FloatArray, IntArray, bm25_factors, bm25_idf
from hybrid_memory._keyword.bm25_scores import best_first as best_first
from hybrid_memory._keyword.bm25_scores import bm25_term_scores as bm25_term_scores

# Row ids in the postings are 32-bit: a posting is then 10 bytes (row id, tf, its row's
# length: _LENGTH_CAP) instead of 14, the largest structure of the index (43 million
# postings at a million memories: 430 MB instead of 602). The per-row arrays (lengths, live
# mask), indexed by row id, already keep row ids far below this bound in practice.
_ROW = np.int32
_ROW_CODE = "i"
_MAX_ROW = int(np.iinfo(_ROW).max)
# Each row's memory id, kept beside its row so that ranked rows are named without SQL
# (a SQLite lookup of 100 rows costs ~0.4 ms, a tenth of a search): 32 bytes, which a
# generated id (uuid4 hex) fills; an id that does not fit waits in a dict.
_ID = np.dtype("S32")
# The other way, memory id → row: each named id's hash, sorted, with its row; the ids
# named since the last merge wait in a dict of at most this share of the rows (or
# _MERGE_MIN), so that merging (a sort of every row) stays a small cost per id.
_MERGE_SHARE = 32
_MERGE_MIN = 4096
_FEW_TOKENS = 256  # a batch with at most these tokens is added without numpy
# The compiled loops' top totals a query's rows this many at a time (64 KB of totals,
# which stay in the processor's cache). At 1,000,000 memories, 200 benchmark questions
# with the cache emptied first, the scoring and clearing loops alone: p50 1.04-1.15 ms
# with 4,096-16,384 rows a block, 1.43 with 131,072 (docs/performance.md).
_BLOCK = 8_192
# Each posting also keeps its row's length (tokens), for the compiled top: read beside
# the posting's row id and tf, where the per-row lengths (4 MB at a million rows, out of
# the processor's caches once a search's Chroma query has run) were read at scattered
# places, a cache miss for most postings. 2 bytes a posting (uint16); a length of
# _LENGTH_CAP tokens or more is kept as _LENGTH_CAP, and the loop reads that row's length
# from the per-row array instead. At 1,000,000 memories, the benchmark's 200 questions
# with the caches emptied first: the loops' p50 ~1.7 -> ~1.2 ms (docs/performance.md).
_LENGTH_CAP = 65_535
_LENGTH_CODE = "H"


def _address(values: np.ndarray) -> int:
    """Where ``values``' data starts in memory (for the compiled loops)."""
    address: int = values.__array_interface__["data"][0]
    return address


def _row_ids(found: array[int]) -> npt.NDArray[np.int32]:
    """A term's row ids, as stored (the one place that knows their width)."""
    return np.frombuffer(found, dtype=_ROW)


class Tokens(NamedTuple):
    """The tokens of some rows, per term: ``sizes[i]`` occurrences of ``terms[i]``, whose
    row ids are the next ``sizes[i]`` entries of ``docs`` (one per occurrence)."""

    terms: list[str]
    sizes: IntArray
    docs: IntArray


def tokens_sql(vocabulary: str) -> str:
    """The tokens in an fts5vocab 'instance' table as one JSON text, ``[[term, …], "size,
    …", "row,row,…"]``: the flat form of :class:`Tokens`. One value, so SQLite does all
    the work in a single step, during which it releases the GIL, and Python parses two
    number lists instead of one per term."""
    return (
        "SELECT json_array(json_group_array(term), group_concat(n), group_concat(rows)) "
        f"FROM (SELECT term, COUNT(*) AS n, group_concat(doc) AS rows FROM {vocabulary} "
        "GROUP BY term)"
    )


def parse_tokens(text: str) -> Tokens:
    """:func:`tokens_sql`'s value as :class:`Tokens`."""
    terms, sizes, docs = json.loads(text)
    if not terms:
        empty = np.zeros(0, dtype=np.int64)
        return Tokens([], empty, empty)
    return Tokens(
        terms,
        np.fromstring(sizes, dtype=np.int64, sep=","),
        np.fromstring(docs, dtype=np.int64, sep=","),
    )


def term_frequencies(sizes: IntArray, docs: IntArray) -> tuple[IntArray, IntArray, IntArray]:
    """From tokens in their flat form (:class:`Tokens`: one row id per occurrence, in
    FTS5's instance order or any other) to ``(term index, row id, tf)`` per distinct
    (term, row), sorted by term then row: one sort for the whole batch, however many terms."""
    if not int(sizes.sum()):
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    term = np.repeat(np.arange(len(sizes), dtype=np.int64), sizes)
    same_term = term[1:] == term[:-1]
    if not np.all(~same_term | (docs[1:] >= docs[:-1])):  # FTS5's order needs no sort
        order = np.lexsort((docs, term))
        term, docs = term[order], docs[order]
    first = np.ones(len(docs), dtype=bool)
    first[1:] = (term[1:] != term[:-1]) | (docs[1:] != docs[:-1])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, len(docs)))
    return term[starts], docs[starts], counts


class Postings:
    """Term → (row ids, term frequencies), document lengths and a live mask.

    Row ids only grow: :meth:`add` refuses an id not above every id seen, so a
    removed row (kept as a tombstone until the next compaction) can never come back
    to life with another row's postings. Not thread-safe: the owner serialises calls.
    """

    def __init__(self) -> None:
        self._rowids: dict[str, array[int]] = {}
        self._tfs: dict[str, array[float]] = {}
        self._lengths: dict[str, array[int]] = {}  # each posting's row length, capped
        self._length = np.zeros(0, dtype=np.float32)
        self._live = np.zeros(0, dtype=bool)
        self._ids = np.zeros(0, dtype=_ID)  # b"" where no id was given (ids are not empty)
        self._other_ids: dict[int, str] = {}  # the ids that do not fit ``_ids``
        self._hashes = np.zeros(0, dtype=np.int64)  # hash(id) of named rows, ascending
        self._hashed_rows = np.zeros(0, dtype=np.int64)  # the row of each of those
        self._recent: dict[str, int] = {}  # named since the last merge
        self._live_count = 0
        self._live_tokens = 0.0
        self._dead = 0  # removed rows whose postings are still in the arrays
        self.high = 0  # the largest row id ever added
        # The compiled loops' totals for scores() and top(within=...), one per row id:
        # all zeros between searches (each search clears the rows it scored), so that no
        # search allocates and zeroes a store-long array. ``_totals_dirty``: a search was
        # cut short before clearing.
        self._totals = np.zeros(0, dtype=np.float64)
        self._totals_dirty = False
        self._block = np.zeros(0, dtype=np.float64)  # the compiled top's (_best_rows), zeros

    # --- writes -------------------------------------------------------------------

    def add(self, rows: IntArray, tokens: Tokens) -> None:
        """Add the new ``rows`` with their ``tokens``. Every row id must be above
        :attr:`high`; a row without tokens is still a row (it counts in N, as in FTS5)."""
        rows = np.unique(np.asarray(rows, dtype=np.int64))
        if not len(rows):
            return
        if int(rows[0]) <= self.high:
            raise ValueError(f"row ids must grow: got {int(rows[0])}, already have {self.high}")
        if int(rows[-1]) > _MAX_ROW:
            raise ValueError(f"row id {int(rows[-1])} is above the postings' {_MAX_ROW}")
        if len(tokens.docs) <= _FEW_TOKENS:
            self._add_few(rows, tokens)
            return
        terms = tokens.terms
        term_of, doc, tf = term_frequencies(tokens.sizes, tokens.docs)
        position = np.searchsorted(rows, doc)
        if len(doc) and (
            int(position.max()) >= len(rows) or not np.array_equal(rows[position], doc)
        ):
            raise ValueError("a term occurs in a row that is not among the new rows")
        lengths = np.bincount(position, weights=tf, minlength=len(rows))
        self._take(rows, lengths.astype(np.float64, copy=False))
        bounds = np.searchsorted(term_of, np.arange(len(terms) + 1))
        doc_bytes = doc.astype(_ROW).tobytes()
        tf_bytes = tf.astype(np.float32).tobytes()
        length_bytes = np.minimum(lengths[position], _LENGTH_CAP).astype(np.uint16).tobytes()
        for t, term in enumerate(terms):
            a, b = int(bounds[t]), int(bounds[t + 1])
            if a == b:
                continue
            found = self._rowids.get(term)
            if found is None:
                found = self._new_term(term)
            found.frombytes(doc_bytes[4 * a : 4 * b])
            self._tfs[term].frombytes(tf_bytes[4 * a : 4 * b])
            self._lengths[term].frombytes(length_bytes[2 * a : 2 * b])

    def _add_few(self, rows: IntArray, tokens: Tokens) -> None:
        """:meth:`add` of a few tokens (a memory's, or a few memories'), counted in
        Python: numpy's fixed cost per call was most of the work there (one memory added
        to a store of 100,000: ~0.5 -> ~0.35 ms)."""
        docs = tokens.docs.tolist()
        lengths = dict.fromkeys(rows.tolist(), 0)  # in row order
        if not lengths.keys() >= set(docs):
            raise ValueError("a term occurs in a row that is not among the new rows")
        per_term: list[tuple[str, dict[int, int]]] = []
        at = 0
        for term, size in zip(tokens.terms, tokens.sizes.tolist(), strict=True):
            if not size:
                continue
            counts: dict[int, int] = {}
            if len(lengths) == 1:  # one memory: every token is in its row
                counts[docs[at]] = size
            else:
                for doc in docs[at : at + size]:
                    counts[doc] = counts.get(doc, 0) + 1
            for doc, tf in counts.items():
                lengths[doc] += tf
            at += size
            per_term.append((term, counts))
        self._take(rows, np.fromiter(lengths.values(), dtype=np.float64, count=len(lengths)))
        for term, counts in per_term:
            found = self._rowids.get(term)
            if found is None:
                found = self._new_term(term)
            order = sorted(counts)
            found.extend(order)
            self._tfs[term].extend([counts[doc] for doc in order])
            self._lengths[term].extend([min(lengths[doc], _LENGTH_CAP) for doc in order])

    def _new_term(self, term: str) -> array[int]:
        """Empty postings for ``term``: its row ids (returned), tfs and row lengths."""
        self._tfs[term] = array("f")
        self._lengths[term] = array(_LENGTH_CODE)
        found = self._rowids[term] = array(_ROW_CODE)
        return found

    def _take(self, rows: IntArray, lengths: FloatArray) -> None:
        """The new ``rows`` (ascending) with their token counts: live, and counted."""
        self._grow(int(rows[-1]) + 1)
        self._length[rows] = lengths
        self._live[rows] = True
        self._live_count += len(rows)
        self._live_tokens += float(lengths.sum())
        self.high = int(rows[-1])
        # No scoring_kernel.want() here: the compiled loops start loading at the first
        # search of a store past the size (scores, top), not while a bulk add fills it,
        # so that numba's ~160 MB do not stack on the ingest's own peak (issue 44).

    def name(self, rows: Sequence[int], ids: Sequence[str]) -> None:
        """Keep the memory id of each of ``rows`` (added already), for :meth:`ids_of`."""
        if len(rows) != len(ids):
            raise ValueError(f"{len(rows)} rows but {len(ids)} ids")
        fitting_rows: list[int] = []
        fitting: list[bytes] = []
        for row, memory_id in zip(rows, ids, strict=True):
            if not 0 <= row <= self.high:
                raise ValueError(f"row {row} is not in the postings")
            encoded = memory_id.encode("utf-8", "surrogatepass")
            # numpy drops an S value's trailing NUL bytes: such an id would come back short
            if len(encoded) <= _ID.itemsize and not encoded.endswith(b"\0"):
                fitting_rows.append(row)
                fitting.append(encoded)
            else:
                self._other_ids[row] = memory_id
        if fitting_rows:
            self._ids[np.array(fitting_rows, dtype=np.int64)] = np.array(fitting, dtype=_ID)
        self._recent.update(zip(ids, rows, strict=True))
        if len(self._recent) > max(_MERGE_MIN, self._live_count // _MERGE_SHARE):
            self._merge_recent()

    def _merge_recent(self) -> None:
        """Move the ids named lately into the sorted hashes, dropping removed rows."""
        recent = self._recent
        hashes = np.concatenate(
            [self._hashes, np.fromiter(map(hash, recent), dtype=np.int64, count=len(recent))]
        )
        rows = np.concatenate(
            [self._hashed_rows, np.fromiter(recent.values(), dtype=np.int64, count=len(recent))]
        )
        keep = self._live[rows]
        hashes, rows = hashes[keep], rows[keep]
        order = np.argsort(hashes, kind="stable")
        self._hashes, self._hashed_rows = hashes[order], rows[order]
        self._recent = {}

    def remove(self, rowids: Iterable[int]) -> int:
        """Tombstone rows; returns how many were live. Compacts the arrays once
        tombstones outnumber a quarter of the live rows."""
        rows = np.fromiter((r for r in rowids if 0 <= r < len(self._live)), dtype=np.int64)
        rows = np.unique(rows)
        rows = rows[self._live[rows]] if len(rows) else rows
        if not len(rows):
            return 0
        self._live[rows] = False
        for row in rows.tolist() if self._other_ids else ():
            self._other_ids.pop(row, None)
        self._live_count -= len(rows)
        self._live_tokens -= float(self._length[rows].astype(np.float64).sum())
        self._dead += len(rows)
        if self._dead > max(1_000, self._live_count // 4):
            self.compact()
        return len(rows)

    def compact(self) -> None:
        """Drop the postings of removed rows."""
        for term in list(self._rowids):
            ids = _row_ids(self._rowids[term])
            keep = self._live[ids]
            if keep.all():
                continue
            if not keep.any():
                del self._rowids[term], self._tfs[term], self._lengths[term]
                continue
            tfs = np.frombuffer(self._tfs[term], dtype=np.float32)
            lengths = np.frombuffer(self._lengths[term], dtype=np.uint16)
            self._rowids[term] = array(_ROW_CODE, ids[keep].tobytes())
            self._tfs[term] = array("f", tfs[keep].tobytes())
            self._lengths[term] = array(_LENGTH_CODE, lengths[keep].tobytes())
        self._dead = 0

    def _grow(self, size: int) -> None:
        if size <= len(self._live):
            return
        capacity = max(size, 2 * len(self._live), 1024)
        length = np.zeros(capacity, dtype=np.float32)
        live = np.zeros(capacity, dtype=bool)
        ids = np.zeros(capacity, dtype=_ID)  # untouched pages stay unallocated
        length[: len(self._length)] = self._length
        live[: len(self._live)] = self._live
        ids[: len(self._ids)] = self._ids
        self._length, self._live, self._ids = length, live, ids

    # --- reads --------------------------------------------------------------------

    def __len__(self) -> int:
        return self._live_count

    def each_term(self) -> Iterator[tuple[str, IntArray, npt.NDArray[np.float32]]]:
        """Every term with its live postings: ``(term, row ids ascending, tfs)``."""
        for term, found in self._rowids.items():
            rows = _row_ids(found).astype(np.int64)
            tfs = np.frombuffer(self._tfs[term], dtype=np.float32)
            keep = self._live[rows]
            if keep.any():
                yield term, rows[keep], tfs[keep]

    def ids_of(self, rows: Sequence[int]) -> dict[int, str]:
        """The memory ids :meth:`name` kept for those of ``rows`` that are live."""
        if not len(rows) or not self._live_count:
            return {}
        at = np.asarray(rows, dtype=np.int64)
        inside = (at >= 0) & (at < len(self._live))
        at = np.where(inside, at, 0)
        live = (inside & self._live[at]).tolist()
        other = self._other_ids
        found: dict[int, str] = {}
        for row, name, ok in zip(rows, self._ids[at].tolist(), live, strict=True):
            if not ok:
                continue
            if name:
                found[row] = name.decode("utf-8", "surrogatepass")
            elif row in other:
                found[row] = other[row]
        return found

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """The live row of each of ``ids`` that :meth:`name` named."""
        live, recent = self._live, self._recent
        found: dict[str, int] = {}
        rest = list(ids)
        if recent:
            rest = []
            for memory_id in ids:
                row = recent.get(memory_id)
                if row is not None and live[row]:
                    found[memory_id] = row
                else:
                    rest.append(memory_id)
        if not rest or not len(self._hashes):
            return found
        hashes = np.fromiter(map(hash, rest), dtype=np.int64, count=len(rest))
        starts = np.searchsorted(self._hashes, hashes, "left")
        ends = np.searchsorted(self._hashes, hashes, "right")
        # The common case at once: one row has the hash, and its name is the id (an id
        # that the array's width cuts or strips of trailing NULs cannot be one of its names).
        encoded = [memory_id.encode("utf-8", "surrogatepass") for memory_id in rest]
        names = np.array(encoded, dtype=_ID)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        rows = self._hashed_rows[np.minimum(starts, len(self._hashes) - 1)]
        named = (
            ((ends - starts) == 1)
            & (np.char.str_len(names) == lengths)
            & live[rows]
            & (self._ids[rows] == names)
        )
        found.update(zip(compress(rest, named), compress(rows.tolist(), named), strict=True))
        for at in np.flatnonzero(~named).tolist():  # a collision, a long id, or not named
            for row in self._hashed_rows[starts[at] : ends[at]].tolist():
                if live[row] and self._name_of(row) == rest[at]:
                    found[rest[at]] = row
                    break
        return found

    def _name_of(self, row: int) -> str | None:
        name = bytes(self._ids[row])
        if name:
            return name.decode("utf-8", "surrogatepass")
        return self._other_ids.get(row)

    def live_rowids(self) -> IntArray:
        return np.flatnonzero(self._live).astype(np.int64)

    def scores(self, terms: Sequence[str]) -> tuple[IntArray, FloatArray]:
        """Every live row matching any of ``terms``, with its BM25 score:
        ``(row ids ascending, scores)``."""
        loops = scoring_kernel.want(self._live_count)
        if loops is not None:
            return self._compiled_scores(loops, terms)
        matched = self._matched(terms)
        if matched is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        rows, totals, _ = matched
        # The matched rows, found through a boolean mask: scanning it is faster than
        # scanning the float totals for non-zeros (every score is positive anyway).
        mask = np.zeros(len(totals), dtype=bool)
        mask[rows] = True
        matched_rows = np.flatnonzero(mask)
        return matched_rows, totals[matched_rows]

    def top(
        self, terms: Sequence[str], limit: int, within: IntArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """``best_first(*scores(terms), limit)``, restricted to the rows ``within`` when
        given, without sorting every matched row: only candidates are ranked.

        The cut: one term's rows are distinct, so when a term matches at least
        ``limit`` rows, the ``limit``-th best total among them is at most the
        ``limit``-th best of all; every row totalling at least that is a candidate
        (the best rows and their ties among them). The shortest such list gives it
        cheapest, and the rarest term's rows mostly total the most. The candidates are
        read off the totals (as long as the highest matched row) in one pass,
        ascending: at 100,000 memories this took ``top`` from 0.43 to 0.21 ms a question
        against a partial sort of every matched posting's total (a million: the keyword
        leg p50 4.1 -> 2.5 ms, ``benchmarks/keyword_leg.py``).
        """
        loops = scoring_kernel.want(self._live_count)
        if loops is not None:
            return self._compiled_top(loops, terms, limit, within)
        matched = self._matched(terms)
        if matched is None or limit <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        rows, totals, _ = matched
        if within is not None:
            candidates = np.unique(np.asarray(within, dtype=np.int64))
            candidates = candidates[(candidates >= 0) & (candidates < len(totals))]
            candidates = candidates[totals[candidates] > 0.0]
        else:
            shortest = self._shortest_list(terms, limit)
            if shortest is None:  # every term matches fewer rows: few candidates
                candidates = np.unique(rows).astype(np.int64)
            else:
                among = totals[shortest]
                floor = np.partition(among, len(among) - limit)[len(among) - limit]
                candidates = np.flatnonzero(totals >= floor)  # floor > 0: matched rows
        return best_first(candidates, totals[candidates], limit)

    # --- the same, through the compiled loops (scoring_kernel) ---------------------------

    def _compiled_top(
        self, loops: ModuleType, terms: Sequence[str], limit: int, within: IntArray | None
    ) -> tuple[IntArray, FloatArray]:
        """:meth:`top` through the compiled loops, the same rows and floats: a block of
        rows at a time (:meth:`_best_rows`), or, ``within`` given, those rows' totals read
        off the kept array of totals (which :meth:`scores` uses too)."""
        if within is None:
            return self._best_rows(loops, terms, limit)
        lists = self._compiled_totals(loops, terms) if limit > 0 else []
        if not lists:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        totals = self._totals
        candidates = np.unique(np.asarray(within, dtype=np.int64))
        candidates = candidates[(candidates >= 0) & (candidates < len(totals))]
        scores = totals[candidates]
        keep = scores > 0.0
        self._clear_totals(loops, lists)
        return best_first(candidates[keep], scores[keep], limit)

    def _best_rows(
        self, loops: ModuleType, terms: Sequence[str], limit: int
    ) -> tuple[IntArray, FloatArray]:
        """:meth:`top` without ``within`` through the compiled loops, a block of rows at a
        time (:func:`~hybrid_memory._keyword._scoring_loops.best_rows`): the same rows and
        floats, without a store-long array of totals."""
        empty = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        if not self._live_count or not terms or limit <= 0:
            return empty
        scored = list(self._live_terms(loops, terms))
        if not scored:
            return empty
        sizes = np.array([len(rows) for _, rows, _, _ in scored], dtype=np.int64)
        out_rows = np.empty(min(limit, int(sizes.sum())), dtype=np.int64)
        out_scores = np.empty(len(out_rows), dtype=np.float64)
        if len(self._block) != _BLOCK:
            self._block = np.zeros(_BLOCK, dtype=np.float64)
        per_length, constant, _ = scored[0][3]  # the same for every term (avgdl)
        # The loops read the postings where they are (``scored`` and ``self._lengths``
        # keep them alive, and the index's lock unchanged, until they return).
        size = loops.best_rows(
            np.array([_address(rows) for _, rows, _, _ in scored], dtype=np.int64),
            np.array([_address(tfs) for _, _, tfs, _ in scored], dtype=np.int64),
            np.array(
                [self._lengths[term].buffer_info()[0] for term, _, _, _ in scored], dtype=np.int64
            ),
            _LENGTH_CAP,
            sizes,
            np.array([weight for _, _, _, (_, _, weight) in scored]),
            self._length,
            self._live,
            bool(self._dead),
            per_length,
            constant,
            self._block,
            out_rows,
            out_scores,
        )
        rows_found, scores_found = out_rows[:size], out_scores[:size]
        order = np.lexsort((rows_found, -scores_found))
        return rows_found[order], scores_found[order]

    def _compiled_scores(
        self, loops: ModuleType, terms: Sequence[str]
    ) -> tuple[IntArray, FloatArray]:
        """:meth:`scores` through the compiled loops."""
        lists = self._compiled_totals(loops, terms)
        if not lists:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        matched_rows = np.flatnonzero(self._totals[: self.high + 1])
        scores = self._totals[matched_rows]
        self._clear_totals(loops, lists)
        return matched_rows, scores

    def _compiled_totals(
        self, loops: ModuleType, terms: Sequence[str]
    ) -> list[npt.NDArray[np.int32]]:
        """Score the live postings of ``terms`` into ``_totals``, in the numpy path's
        order (term by term, each term's rows ascending); returns the postings lists
        scored (row ids, dead ones included), which the caller clears again."""
        if not self._live_count or not terms:
            return []
        if len(self._totals) <= self.high:
            self._totals = np.zeros(len(self._live), dtype=np.float64)
        elif self._totals_dirty:  # a search was interrupted between scoring and clearing
            self._totals.fill(0.0)
        totals, length, live, only_live = self._totals, self._length, self._live, bool(self._dead)
        lists: list[npt.NDArray[np.int32]] = []
        self._totals_dirty = True
        for _, rows, tfs, (per_length, constant, weight) in self._live_terms(loops, terms):
            loops.add_term_scores(
                totals, rows, tfs, length, live, only_live, per_length, constant, weight
            )
            lists.append(rows)
        if not lists:
            self._totals_dirty = False
        return lists

    def _live_terms(
        self, loops: ModuleType, terms: Sequence[str]
    ) -> Iterator[
        tuple[str, npt.NDArray[np.int32], npt.NDArray[np.float32], tuple[float, float, float]]
    ]:
        """Each of ``terms`` (in order, repeats kept) that some live row holds: the term,
        its postings (row ids, removed ones included; tfs) and its BM25 factors
        (:func:`~hybrid_memory._keyword.bm25_scores.bm25_factors`), for the compiled loops."""
        avgdl = self._live_tokens / self._live_count
        live, only_live = self._live, bool(self._dead)
        for term in terms:
            found = self._rowids.get(term)
            if found is None:
                continue
            rows = _row_ids(found)
            matching = loops.count_live(rows, live) if only_live else len(rows)
            if matching:
                tfs = np.frombuffer(self._tfs[term], dtype=np.float32)
                yield term, rows, tfs, bm25_factors(avgdl, bm25_idf(matching, self._live_count))

    def _clear_totals(self, loops: ModuleType, lists: list[npt.NDArray[np.int32]]) -> None:
        for rows in lists:
            loops.clear(self._totals, rows)
        self._totals_dirty = False

    def _shortest_list(self, terms: Sequence[str], at_least: int) -> npt.NDArray[np.int32] | None:
        """The live row ids of the term of ``terms`` matching the fewest rows, of those
        matching at least ``at_least`` (None when no term does)."""
        shortest: npt.NDArray[np.int32] | None = None
        for term in terms:
            found = self._rowids.get(term)
            if found is None or len(found) < at_least:
                continue
            if shortest is None or len(found) < len(shortest):
                shortest = _row_ids(found)
        if shortest is not None and self._dead:
            shortest = shortest[self._live[shortest]]
            if len(shortest) < at_least:  # a rare case: a cut from all matched rows
                return None
        return shortest

    def _matched(
        self, terms: Sequence[str]
    ) -> tuple[npt.NDArray[np.int32], FloatArray, int] | None:
        """The live postings of ``terms``: their row ids (one per posting), the BM25
        total of every row id up to the highest matched (0.0 where none matched), and how
        many postings lists they came from; None when nothing matches."""
        if not self._live_count or not terms:
            return None
        avgdl = self._live_tokens / self._live_count
        parts_rows: list[npt.NDArray[np.int32]] = []
        parts_tfs: list[npt.NDArray[np.float32]] = []
        idfs: list[float] = []
        for term in terms:
            found = self._rowids.get(term)
            if found is None:
                continue
            rows = _row_ids(found)
            tfs = np.frombuffer(self._tfs[term], dtype=np.float32)
            if self._dead:
                keep = self._live[rows]
                rows, tfs = rows[keep], tfs[keep]
            if not len(rows):
                continue
            parts_rows.append(rows)
            parts_tfs.append(tfs)
            idfs.append(bm25_idf(len(rows), self._live_count))
        if not parts_rows:
            return None
        # Every term's postings scored in one pass, each with its term's idf: the floats
        # of scoring them term by term, in a handful of numpy calls rather than ~10 a
        # term (a ten-term question at 100,000 memories: 0.55 -> 0.48 ms).
        rows = np.concatenate(parts_rows)
        idf = np.repeat(np.array(idfs), [len(part) for part in parts_rows])
        scores = bm25_term_scores(np.concatenate(parts_tfs), self._length[rows], avgdl, idf)
        totals = np.bincount(rows, weights=scores).astype(
            np.float64,
            copy=False,  # already float64: no copy of a store-long array
        )
        return rows, totals, len(parts_rows)

    def holding_each(self, terms: Sequence[str], rows: IntArray) -> npt.NDArray[np.bool_]:
        """Whether each of ``rows`` (live) holds each of ``terms``: a boolean array of
        ``len(terms)`` by ``len(rows)`` (a row not live holds none). A binary search per
        term, as :meth:`holding_all`, the rows checked once for all terms."""
        rows = np.asarray(rows, dtype=np.int64)
        held = np.zeros((len(terms), len(rows)), dtype=bool)
        live = self._live_among(rows)
        asked = rows[live]
        if len(asked):
            for position, term in enumerate(terms):
                held[position, live] = self._holds(term, asked)
        return held

    def holding_all(self, terms: Sequence[str], rows: IntArray) -> IntArray:
        """Those of ``rows`` (live) that hold every one of ``terms``. Each term's row ids
        are in ascending order (they only grow, and compaction keeps their order), so
        this is a binary search per term, whatever the size of the store."""
        rows = np.asarray(rows, dtype=np.int64)
        rows = rows[self._live_among(rows)]
        for term in terms:
            if not len(rows):
                break
            rows = rows[self._holds(term, rows)]
        return rows

    def _live_among(self, rows: IntArray) -> npt.NDArray[np.bool_]:
        """Whether each of ``rows`` is a live row (one out of range is not)."""
        live = (rows >= 0) & (rows < len(self._live))
        live[live] = self._live[rows[live]]
        return live

    def _holds(self, term: str, rows: IntArray) -> npt.NDArray[np.bool_]:
        """Whether each of ``rows`` (in range) is among ``term``'s row ids."""
        found = self._rowids.get(term)
        if found is None:
            return np.zeros(len(rows), dtype=bool)
        having = _row_ids(found)
        # Searched at the postings' width: given wider rows, searchsorted would first
        # copy the whole postings list to their width (46 us for 200,000 postings, 4 at
        # the same width). Rows in range fit it.
        at = np.minimum(np.searchsorted(having, rows.astype(_ROW)), len(having) - 1)
        return np.asarray(having[at] == rows)
