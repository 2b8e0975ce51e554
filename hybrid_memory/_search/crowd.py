"""Words that nearly every memory carries say nothing about a hit's relevance.

In a namespace of memories about Alice, "alice" is in all of them: a question "what does
alice drink?" then has a keyword coverage of one half with every memory, and a cosine of
0.4-0.6 with every memory (the name weighs much in a short sentence's vector), so every
memory scored about 0.5 whatever it said. A query word found in more than half of the
memories of the store (or namespace) is a *crowd word*: BM25's classic inverse document
frequency, log((N - n + 0.5) / (n + 0.5)), is negative past that share, the word being
evidence against relevance rather than for it.

The relevance (:mod:`hybrid_memory._search.relevance`) is then read from the query
without its crowd words: the keyword coverage counts its other words only, and the
vector evidence is the cosine of each hit with the embedding of the query without them
(one more query embedding, kept in the query cache; the hits' vectors are the stored
ones). A query made only of crowd words keeps them all: it asks for the crowd itself.
Only the scores change: the order of the hits is the fused one, as before.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from hybrid_memory._embedding.query_cache import QueryCache
from hybrid_memory._keyword.bm25 import query_words
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import EmbeddingError
from hybrid_memory._model.results import Memory

#: A query word found in more than this share of the memories is a crowd word.
CROWD_SHARE = 0.5
# Fewer memories than this make no crowd: one memory holds every word it has.
_LEAST_CROWD = 4


def without_crowd(
    text: str,
    memories: Sequence[Memory],
    cosines: Mapping[str, float],
    index: KeywordIndex,
    queries: QueryCache,
    vectors: Callable[[list[str]], Mapping[str, npt.ArrayLike]],
    *,
    drop_stopwords: bool,
) -> tuple[str, Mapping[str, float]]:
    """The query ``text`` without its crowd words and each of ``memories``' cosine with
    it, from their stored ``vectors`` (``cosines`` holds those with the whole query:
    returned as they are when the query has no crowd word, or its embedding fails, or no
    cosine was known: a search in fallback mode). A memory without a stored vector keeps
    its cosine with the whole query."""
    if not memories or index.count() < _LEAST_CROWD:
        return text, cosines
    asked = query_words(text, drop_stopwords=drop_stopwords)
    crowd = index.common_words(asked, CROWD_SHARE)
    if not crowd or len(crowd) == len(asked):
        return text, cosines
    folded = {word.casefold() for word in crowd}
    rest = "".join(w for w in re.split(r"(\W+)", text) if w.casefold() not in folded)
    if not cosines:
        return rest, cosines
    try:
        query = np.asarray(queries.embed(rest), dtype=np.float64)
    except EmbeddingError:
        return rest, cosines
    stored = vectors([m.id for m in memories])
    out: dict[str, float] = {}
    for memory in memories:
        vector = stored.get(memory.id)
        if vector is None:
            if memory.id in cosines:
                out[memory.id] = cosines[memory.id]
            continue
        row = np.asarray(vector, dtype=np.float64).ravel()
        norm = float(np.linalg.norm(row) * np.linalg.norm(query))
        if norm > 0:
            out[memory.id] = float(row @ query) / norm
    return rest, out
