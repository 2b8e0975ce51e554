"""Each hit's relevance, read from the keyword index and the stored vectors: the I/O
around :mod:`hybrid_memory._search.relevance`'s pure math, with the query's crowd words
left out first (:mod:`hybrid_memory._search.crowd`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy.typing as npt

from hybrid_memory._embedding.query_cache import QueryCache
from hybrid_memory._keyword.bm25 import query_words
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.results import Memory
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._search.crowd import without_crowd
from hybrid_memory._search.relevance import evidence, keyword_coverage, monotone_relevance


def hit_relevance(
    text: str,
    memories: Sequence[Memory],
    cosines: Mapping[str, float],
    index: KeywordIndex,
    queries: QueryCache,
    vectors: Callable[[list[str]], Mapping[str, npt.ArrayLike]],
    s: HybridMemorySettings,
) -> list[float]:
    """Each memory's relevance in [0, 1], the memories in fused order
    (:mod:`hybrid_memory._search.relevance`): its cosine or its keyword coverage, whichever
    is larger, made non-increasing down the list, with the words of the query ``text``
    that nearly every memory holds left out of both (``cosines`` are the memories' with
    the whole query). Words are compared as the keyword index tokenizes them, so coverage
    agrees with what the keyword leg matches. ``vectors`` reads the memories' stored
    vectors (for their cosine with the query without its crowd words)."""
    if not memories:
        return []
    text, cosines = without_crowd(
        text, memories, cosines, index, queries, vectors, drop_stopwords=s.drop_stopwords
    )
    asked = query_words(text, drop_stopwords=s.drop_stopwords)
    query_terms = index.terms(asked)
    wanted = sorted({t for terms in query_terms for t in terms})
    # Which query terms each memory holds, from the keyword index's postings (what
    # the keyword leg matched); a memory they cannot tell about (being built, or a
    # hit the index lacks) is tokenised here instead. Tokenising every hit's words
    # took 2.9 ms of a search with no word remembered at 100,000 memories (now 1.2).
    if not wanted:  # no words to cover: coverage 0 for every memory
        held: dict[str, set[str]] = {m.id: set() for m in memories}
    else:
        held = index.terms_held(wanted, [m.id for m in memories])
    untold = [m for m in memories if m.id not in held]
    if untold:
        texts = {m.id: query_words(m.text, drop_stopwords=False) for m in untold}
        distinct = list(dict.fromkeys(w for words in texts.values() for w in words))
        terms = dict(zip(distinct, index.terms(distinct), strict=True))
        for memory_id, words in texts.items():
            held[memory_id] = {t for w in words for t in terms[w]}
    evidences = [
        evidence(cosines.get(m.id), keyword_coverage(query_terms, held[m.id])) for m in memories
    ]
    return monotone_relevance(evidences)
