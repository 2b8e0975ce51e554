"""Pure relevance math: a score in [0, 1] per hit that users can threshold, in the fused
order.

The fused RRF value (:mod:`hybrid_memory._search.fusion`) orders hits well but says nothing
absolute: a memory ranked first everywhere scores 1/61 whether it answers the query
word for word or is the only memory there is. Thresholds ("keep hits above 0.3", "no
relevant memory") need evidence that does not depend on the other memories, so each
hit's *evidence* is read from the two content legs' absolute measures:

    vector evidence   = the cosine similarity of the query and the memory, clamped to
                        [0, 1] (0 when the vector leg did not return the memory, or the
                        query could not be embedded);
    keyword coverage  = the share of the query's keyword words (the words the keyword
                        leg searches: stopwords dropped unless nothing else is left)
                        that occur in the memory, each word compared as the keyword
                        index's own tokenizer stems and folds it;
    evidence          = max(vector evidence, keyword coverage).

The maximum, because either leg alone is evidence enough: a paraphrase has a high
cosine and no shared word, an exact name or code a full coverage and a middling
cosine. Tags are not evidence of text relevance and do not count.

The relevance is then made monotone along the fused order:

    relevance(hit_i) = min(evidence(hit_1), …, evidence(hit_i))

so the hits' order is exactly the fused order (relevance never increases down the
list), a hit never claims more than the evidence of every hit ranked above it, and a
hit's relevance does not depend on how many hits were asked for. A near-exact match
ranked first scores close to 1; an unrelated memory scores its (low) cosine, also
when it is the only memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet


def keyword_coverage(query_terms: Sequence[tuple[str, ...]], text_terms: AbstractSet[str]) -> float:
    """The share of the query's words found in a memory: ``query_terms`` holds each
    distinct query word's index terms (one for a stemming tokenizer, several for a
    trigram one, where the word counts as found when all of them are), ``text_terms`` the
    memory's. 0.0 for a query without words."""
    words = [terms for terms in query_terms if terms]
    if not words:
        return 0.0
    found = sum(1 for terms in words if all(t in text_terms for t in terms))
    return found / len(words)


def evidence(cosine: float | None, coverage: float) -> float:
    """One hit's evidence of relevance in [0, 1]: the larger of its cosine similarity
    (clamped to [0, 1]; None when the vector leg did not return it) and its keyword
    coverage."""
    vector = 0.0 if cosine is None else min(1.0, max(0.0, cosine))
    return max(vector, min(1.0, max(0.0, coverage)))


def monotone_relevance(evidences: Iterable[float]) -> list[float]:
    """Each hit's relevance, given the evidences of the hits in fused order: the running
    minimum, so the scores never increase down the list."""
    out: list[float] = []
    lowest = 1.0
    for value in evidences:
        lowest = min(lowest, value)
        out.append(lowest)
    return out
