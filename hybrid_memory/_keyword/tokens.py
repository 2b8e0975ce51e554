"""A batch of rows' tokens as FTS5 gives them, and the (term, row, tf) triples they make.

Pure: :func:`tokens_sql` is the query that reads tokens out of an FTS5 ``fts5vocab``
'instance' table as one value, :func:`parse_tokens` turns that value into
:class:`Tokens`, and :func:`term_frequencies` counts them.
"""

from __future__ import annotations

import json
from typing import NamedTuple

import numpy as np

from hybrid_memory._keyword.bm25_scores import IntArray


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
