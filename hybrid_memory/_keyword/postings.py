"""In-memory BM25 postings: the keyword leg's top k without calling SQL per match.

SQLite FTS5 finds the memories a query matches quickly, but ranks them by calling its
``bm25()`` function once per matching row, a cost that grows with the store. The same
scores over numpy arrays (one weighted ``bincount``, a partial sort of one term's rows
and a pass over the totals) do not loop over matches in Python; over a large store the
compiled loops of :mod:`~hybrid_memory._keyword.compiled_top` compute the same floats in
one pass.

A term's postings are in up to two parts, rows ascending across both: those of a
postings file mapped from disk (:mod:`~hybrid_memory._keyword.postings_file`, what an
earlier process wrote) and those added since, held in growing arrays. The arrays are
derived state twice removed: built from the FTS5 index's own tokens (so stemming and
folding are exactly the configured tokenizer's) and kept in step with it by
:class:`~hybrid_memory._keyword.bm25.KeywordSearch`. Nothing here does SQL.

Scores are Okapi BM25 exactly as FTS5 computes them: :mod:`~hybrid_memory._keyword.bm25_scores`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence

import numpy as np
import numpy.typing as npt

from hybrid_memory._keyword import compiled_top, numpy_top, postings_file, scoring_kernel
from hybrid_memory._keyword.bm25_scores import FloatArray, IntArray
from hybrid_memory._keyword.postings_file import MappedPostings, TermLists
from hybrid_memory._keyword.ranked_postings import Scratch
from hybrid_memory._keyword.row_names import RowNames
from hybrid_memory._keyword.tokens import Tokens, term_frequencies

# Row ids in the postings are 32-bit: a posting is then 10 bytes (row id, tf, its row's
# length) instead of 14, the largest structure of the index.
_ROW = np.int32
_ROW_CODE = "i"
_MAX_ROW = int(np.iinfo(_ROW).max)
_FEW_TOKENS = 256  # a batch with at most these tokens is added without numpy
_LENGTH_CODE = "H"  # each posting's row length, capped at postings_file.LENGTH_CAP
_COMPACT_SHARE = 4  # removed rows' postings are dropped past this share of the live


class Postings:
    """Term → (row ids, term frequencies), document lengths and a live mask.

    Row ids only grow: :meth:`add` refuses an id not above every id seen, so a removed
    row (kept as a tombstone until the next compaction) can never come back to life
    with another row's postings. Not thread-safe: the owner serialises calls."""

    def __init__(self, base: MappedPostings | None = None) -> None:
        self._base = base
        self._rowids: dict[str, array[int]] = {}  # the postings added since the base
        self._tfs: dict[str, array[float]] = {}
        self._lengths: dict[str, array[int]] = {}  # each posting's row length, capped
        self.names = RowNames(base)
        self._length = np.array(base.per_row.length) if base else np.zeros(0, np.float32)
        self._live = np.array(base.per_row.live) if base else np.zeros(0, dtype=bool)
        self.high = base.high if base else 0  # the largest row id ever added
        self._live_count = int(self._live.sum())
        self._live_tokens = float(self._length[self._live].astype(np.float64).sum())
        self._dead = 0  # removed rows whose postings are still in the lists
        self.scratch = Scratch()

    @classmethod
    def built(cls, rows: IntArray, terms: Iterable[tuple[str, IntArray, IntArray]]) -> Postings:
        """Postings of ``rows`` (every row, ascending) from each term's rows (ascending,
        each once) and term frequencies, a term at a time."""
        postings = cls()
        if not len(rows):
            return postings
        counts = np.zeros(int(rows[-1]) + 1, dtype=np.float64)
        for term, held, tf in terms:
            counts[held] += tf
            postings._rowids[term] = array(_ROW_CODE, held.astype(_ROW).tobytes())
            postings._tfs[term] = array("f", tf.astype(np.float32).tobytes())
        postings._take(rows, counts[rows])
        for term, found in postings._rowids.items():
            capped = np.minimum(counts[np.frombuffer(found, dtype=_ROW)], postings_file.LENGTH_CAP)
            postings._lengths[term] = array(_LENGTH_CODE, capped.astype(np.uint16).tobytes())
        return postings

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
        term_of, doc, tf = term_frequencies(tokens.sizes, tokens.docs)
        position = np.searchsorted(rows, doc)
        if len(doc) and (
            int(position.max()) >= len(rows) or not np.array_equal(rows[position], doc)
        ):
            raise ValueError("a term occurs in a row that is not among the new rows")
        lengths = np.bincount(position, weights=tf, minlength=len(rows))
        self._take(rows, lengths.astype(np.float64, copy=False))
        bounds = np.searchsorted(term_of, np.arange(len(tokens.terms) + 1))
        doc_bytes = doc.astype(_ROW).tobytes()
        tf_bytes = tf.astype(np.float32).tobytes()
        capped = np.minimum(lengths[position], postings_file.LENGTH_CAP)
        length_bytes = capped.astype(np.uint16).tobytes()
        for t, term in enumerate(tokens.terms):
            a, b = int(bounds[t]), int(bounds[t + 1])
            if a < b:
                found = self._rowids.get(term)
                if found is None:
                    found = self._new_term(term)
                found.frombytes(doc_bytes[4 * a : 4 * b])
                self._tfs[term].frombytes(tf_bytes[4 * a : 4 * b])
                self._lengths[term].frombytes(length_bytes[2 * a : 2 * b])

    def _add_few(self, rows: IntArray, tokens: Tokens) -> None:
        """:meth:`add` of a few tokens (a memory's, or a few memories'), counted in
        Python: numpy's fixed cost per call was most of the work there."""
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
            cap = postings_file.LENGTH_CAP
            self._lengths[term].extend([min(lengths[doc], cap) for doc in order])

    def _new_term(self, term: str) -> array[int]:
        """Empty postings for ``term``: its row ids (returned), tfs and row lengths."""
        self._tfs[term] = array("f")
        self._lengths[term] = array(_LENGTH_CODE)
        found = self._rowids[term] = array(_ROW_CODE)
        return found

    def _take(self, rows: IntArray, lengths: FloatArray) -> None:
        """The new ``rows`` (ascending) with their token counts: live, and counted. (The
        compiled loops load at the first search of a store past their size, not while a
        bulk add fills it, so that their memory does not stack on the ingest's peak.)"""
        self._grow(int(rows[-1]) + 1)
        self._length[rows] = lengths
        self._live[rows] = True
        self._live_count += len(rows)
        self._live_tokens += float(lengths.sum())
        self.high = int(rows[-1])

    def name(self, rows: Sequence[int], ids: Sequence[str]) -> None:
        """Keep the memory id of each of ``rows`` (added already), for :meth:`ids_of`."""
        if len(rows) != len(ids):
            raise ValueError(f"{len(rows)} rows but {len(ids)} ids")
        if any(not 0 <= row <= self.high for row in rows):
            raise ValueError(f"a row of {list(rows)[:5]} is not in the postings")
        self.names.name(rows, ids, self._live)

    def remove(self, rowids: Iterable[int]) -> int:
        """Tombstone rows; returns how many were live. Compacts the lists once tombstones
        outnumber a quarter of the live rows."""
        rows = np.fromiter((r for r in rowids if 0 <= r < len(self._live)), dtype=np.int64)
        rows = np.unique(rows)
        rows = rows[self._live[rows]] if len(rows) else rows
        if not len(rows):
            return 0
        self._live[rows] = False
        if self.names.long_ids:
            self.names.forget(rows.tolist())
        self._live_count -= len(rows)
        self._live_tokens -= float(self._length[rows].astype(np.float64).sum())
        self._dead += len(rows)
        if self._dead > max(1_000, self._live_count // _COMPACT_SHARE):
            self.compact()
        return len(rows)

    def compact(self) -> None:
        """Drop the postings of removed rows (a mapped base's are copied in first)."""
        terms = self.terms()
        kept = {term: self.live_lists(term) for term in terms}
        self._base = None
        self._rowids, self._tfs, self._lengths = {}, {}, {}
        for term, lists in kept.items():
            if lists is not None:
                self._rowids[term] = array(_ROW_CODE, lists.rows.astype(_ROW).tobytes())
                self._tfs[term] = array("f", lists.tfs.tobytes())
                self._lengths[term] = array(_LENGTH_CODE, lists.lengths.tobytes())
        self._dead = 0

    def _grow(self, size: int) -> None:
        if size <= len(self._live):
            return
        capacity = max(size, 2 * len(self._live), 1024)
        length = np.zeros(capacity, dtype=np.float32)
        live = np.zeros(capacity, dtype=bool)
        length[: len(self._length)] = self._length
        live[: len(self._live)] = self._live
        self._length, self._live = length, live
        self.names.grow(capacity)

    @property
    def mapped(self) -> bool:
        """Whether part of the postings is mapped from a file."""
        return self._base is not None

    def unsaved(self) -> int:
        """How many live rows the mapped file lacks, and removed rows it still holds:
        what writing the postings out again would bring the next process."""
        base = self._base
        if base is None:
            return self._live_count + self._dead
        return int(self._live[base.high + 1 :].sum()) + self._dead

    # --- a term's postings --------------------------------------------------------

    def terms(self) -> list[str]:
        """Every term some row held (removed rows' too, until compacted), sorted."""
        return sorted({*self._rowids, *self._base_terms()})

    def _base_terms(self) -> Iterator[str]:
        if self._base is not None:
            for term, _ in self._base.each_term():
                yield term

    def parts(self, term: str) -> list[TermLists]:
        """``term``'s postings, removed rows included: the mapped part, then the part
        added since (rows ascending across them)."""
        found = [] if self._base is None else [self._base.lists(term)]
        tail = self._rowids.get(term)
        if tail is not None:
            found.append(
                TermLists(
                    np.frombuffer(tail, dtype=_ROW),
                    np.frombuffer(self._tfs[term], dtype=np.float32),
                    np.frombuffer(self._lengths[term], dtype=np.uint16),
                )
            )
        return [p for p in found if p is not None and len(p.rows)]

    def live_lists(self, term: str) -> TermLists | None:
        """``term``'s postings of live rows, in one part (a copy)."""
        parts = self.parts(term)
        if not parts:
            return None
        rows = np.concatenate([p.rows for p in parts])
        keep = self._live[rows]
        if not keep.any():
            return None
        tfs = np.concatenate([p.tfs for p in parts])
        lengths = np.concatenate([p.lengths for p in parts])
        return TermLists(rows[keep], tfs[keep], lengths[keep])

    def live_rows(self, term: str) -> npt.NDArray[np.int32]:
        """``term``'s live rows, ascending."""
        parts = self.parts(term)
        if not parts:
            return np.zeros(0, dtype=_ROW)
        rows = parts[0].rows if len(parts) == 1 else np.concatenate([p.rows for p in parts])
        return rows[self._live[rows]] if self._dead else rows

    # --- reads --------------------------------------------------------------------

    def __len__(self) -> int:
        return self._live_count

    @property
    def live(self) -> npt.NDArray[np.bool_]:
        """Whether each row id is live (read only)."""
        return self._live

    @property
    def length(self) -> npt.NDArray[np.float32]:
        """Each row's length in tokens."""
        return self._length

    @property
    def dead(self) -> int:
        return self._dead

    def avgdl(self) -> float:
        return self._live_tokens / self._live_count

    def each_term(self) -> Iterator[tuple[str, IntArray, npt.NDArray[np.float32]]]:
        """Every term with its live postings: ``(term, row ids ascending, tfs)``."""
        for term in self.terms():
            lists = self.live_lists(term)
            if lists is not None:
                yield term, lists.rows.astype(np.int64), lists.tfs

    def ids_of(self, rows: Sequence[int]) -> dict[int, str]:
        """The memory ids :meth:`name` kept for those of ``rows`` that are live."""
        if not len(rows) or not self._live_count:
            return {}
        return self.names.ids_of(rows, self._live)

    def rows_of(self, ids: Sequence[str]) -> dict[str, int]:
        """The live row of each of ``ids`` that :meth:`name` named."""
        return self.names.rows_of(ids, self._live) if ids else {}

    def live_rowids(self) -> IntArray:
        return np.flatnonzero(self._live).astype(np.int64)

    def scores(self, terms: Sequence[str]) -> tuple[IntArray, FloatArray]:
        """Every live row matching any of ``terms``, with its BM25 score:
        ``(row ids ascending, scores)``."""
        loops = scoring_kernel.want(self._live_count)
        if loops is not None:
            return compiled_top.scores(self, loops, terms)
        return numpy_top.scores(self, terms)

    def top(
        self, terms: Sequence[str], limit: int, within: IntArray | None = None
    ) -> tuple[IntArray, FloatArray]:
        """``best_first(*scores(terms), limit)``, restricted to the rows ``within`` when
        given, without sorting every matched row (:func:`numpy_top.top`)."""
        loops = scoring_kernel.want(self._live_count)
        if loops is not None:
            return compiled_top.top(self, loops, terms, limit, within)
        return numpy_top.top(self, terms, limit, within)
