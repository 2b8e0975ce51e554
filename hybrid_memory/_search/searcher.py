"""One search, as a straight line (docs/architecture.md, "the search path"):

scope the filter → embed the query (in a worker, unless it is fast) ∥ [keyword leg →
the long hits' read shares → weights (adaptive alpha) → the feedback memories: the
keyword leg's top] → pseudo-relevance feedback → vector leg → tag leg → weighted
Reciprocal Rank Fusion (score-aware per leg when ``keyword_score_lift`` /
``vector_score_lift`` say so; long keyword hits by their read share) →
recency decay → time favour → superseded memories demoted → the top ``k`` as hits,
within a token budget.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass

import numpy as np

from hybrid_memory._embedding.query_cache import QueryCache
from hybrid_memory._embedding.vectors import Vector
from hybrid_memory._keyword.bm25 import query_words
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import EmbeddingError
from hybrid_memory._model.filters import Node
from hybrid_memory._model.near_duplicates import NearDuplicateRule
from hybrid_memory._model.records import SUPERSEDES_KEY, to_memory
from hybrid_memory._model.results import KEYWORD, TAG, VECTOR, Memory, SearchResult, TimeWindow
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._search.collapse import ReusingVectors, as_hits, choose
from hybrid_memory._search.feedback import length_scaled_weight, rocchio
from hybrid_memory._search.fusion import (
    adaptive_alpha,
    leg_weights,
    order_by_score,
    reciprocal_rank_fusion,
    score_lifts,
)
from hybrid_memory._search.hit_relevance import hit_relevance
from hybrid_memory._search.legs import (
    KeywordLeg,
    Scope,
    TagLeg,
    VectorLeg,
    best_ranks,
    with_checked,
)
from hybrid_memory._search.long_memories import by_share, feedback_weight
from hybrid_memory._search.recency import age_in_days, decay_factor
from hybrid_memory._search.supersession import chain_depths, demote_superseded
from hybrid_memory._search.time_scope import favour_times
from hybrid_memory._search.token_budget import within_budget
from hybrid_memory._store.collection import ChromaCollection
from hybrid_memory._store.recent_vectors import RecentVectors


@dataclass(frozen=True, slots=True)
class Query:
    """A validated search: free text, or a stored memory's text and vector (``related``,
    which excludes that memory from its own results)."""

    text: str
    tags: tuple[str, ...]  # matched in the text, or given
    k: int
    node: Node | None
    now: float
    vector: Vector | None = None
    alpha: float | None = None
    max_tokens: int | None = None
    exclude: str | None = None
    # A named time (hybrid_memory._search.time_scope): the window whose memories score higher,
    # the order preferred ("newest"/"oldest"), and what the result reports.
    boost_window: tuple[float | None, float | None] | None = None
    order: str | None = None
    time_window: TimeWindow | None = None
    mmr: float = 0.0  # the diversity weight of maximal marginal relevance (0: none)


class Searcher:
    """Runs searches over one collection and its keyword index."""

    def __init__(
        self,
        collection: ChromaCollection,
        index: KeywordIndex,
        queries: QueryCache,
        pool: Executor,
        recent: RecentVectors,
    ) -> None:
        self._collection = collection
        self._index = index
        self._queries = queries
        self._pool = pool
        self._recent = recent

    def search(
        self, query: Query, s: HybridMemorySettings, *, warming: str | None = None
    ) -> SearchResult:
        """``warming``: why the keyword index cannot rank yet (it is being filled; see
        :class:`~hybrid_memory._store.sync.IndexSync`): the vector leg answers alone, in
        ``fallback_mode``. Only an unfiltered search runs so."""
        # Other processes' writes are looked for once, at the start (each call into the
        # index would look again).
        with self._index.one_view():
            return self._search(query, s, warming)

    def _search(self, query: Query, s: HybridMemorySettings, warming: str | None) -> SearchResult:
        if warming is not None:
            return self._vector_only(query, s, warming)
        index, node, exclude = self._index, query.node, query.exclude
        scope = Scope.of(index, node)
        depth = _depth(query, s)

        # The query embedding (a model call that releases the GIL) runs beside the
        # keyword leg and the choice of the feedback memories, which do not need it,
        # unless it is known to be faster than the hand-off to a worker (then at once:
        # QueryCache.embedding); Chroma's query needs the vector, so it runs after them.
        vector = query.vector
        embedding: Future[Vector] | None = None
        if vector is None:
            vector = self._queries.cached(query.text)
            if vector is None:
                embedding = self._queries.embedding(query.text, self._pool)
        keyword_leg = KeywordLeg(index, node, scope)
        keyword_hits = keyword_leg.rank(
            query.text, depth, drop_stopwords=s.drop_stopwords, max_df=s.keyword_max_df
        )
        keyword_ids = [i for i in keyword_hits if i != exclude]
        # Memories longer than the model reads: what share of each one the legs agree on.
        read_shares, lengths = keyword_leg.read_shares(
            query.text, keyword_ids, s.long_memory_window, drop_stopwords=s.drop_stopwords
        )

        alpha = query.alpha if query.alpha is not None else s.alpha
        if alpha is None:
            size = index.count(node) if scope is None else len(scope.rows)
            alpha = adaptive_alpha(size, s.alpha_thresholds, s.alpha_values)
        weights = leg_weights(alpha, s.tag_weight, s.tag_boost, len(query.tags))

        # Pseudo-relevance feedback before the one vector query: the keyword leg's top
        # moves the query vector towards itself. (Its top fused with the tag leg's, as
        # before, scored no better and cost the tag leg a ranking of its own: LoCoMo
        # nDCG@10 0.555 -> 0.559, Cranfield unchanged, having no tags.)
        # A small namespace's vectors, all read at once by id (None otherwise).
        share = None
        if scope is None:
            share = VectorLeg.share_vectors(self._collection, index, node)
        feedback: dict[str, np.ndarray] = {}
        if s.feedback_docs and s.feedback_weight and weights[VECTOR]:
            top = keyword_ids[: s.feedback_docs]
            if top:
                feedback = self.vectors(top, share)
        fallback_reason = None
        if embedding is not None:
            try:
                vector = embedding.result()
            except EmbeddingError as exc:
                vector = None
                fallback_reason = (
                    f"query embedding failed, answered from keyword and tag legs: {exc}"
                )
                weights[VECTOR] = 0.0
        if vector is not None and feedback:
            weight = length_scaled_weight(
                s.feedback_weight, len(query_words(query.text)), s.feedback_full_words
            )
            counts = [feedback_weight(lengths.get(i, 0), s.long_memory_window) for i in feedback]
            vector = rocchio(vector, list(feedback.values()), weight, counts)
        # The vector leg: Chroma's nearest, with what its approximate search left out
        # among this process's latest writes and the feedback memories (the keyword
        # leg's top, whose vectors are at hand): compared exactly, kept if they reach
        # its cut.
        vector_hits = (
            {}
            if vector is None
            else with_checked(
                self._with_recent(
                    VectorLeg(self._collection, index, node, scope, share).rank(vector, depth),
                    vector,
                    depth,
                    node,
                ),
                vector,
                feedback,
                depth,
            )
        )
        vector_ids = [i for i in vector_hits if i != exclude]
        tag_leg = TagLeg(index, query.tags, depth, node, exclude, scope, query.text, keyword_ids)
        tag_counts = tag_leg.rank(best_ranks(vector_ids, keyword_ids))
        rankings = {VECTOR: vector_ids, KEYWORD: keyword_ids, TAG: list(tag_counts)}
        multipliers = {}
        if s.vector_score_lift and vector_ids:
            cosines_in_order = [vector_hits[i] for i in vector_ids]
            multipliers[VECTOR] = score_lifts(cosines_in_order, s.vector_score_lift)
        if s.keyword_score_lift and keyword_ids:
            bm25_in_order = [keyword_hits[i] for i in keyword_ids]
            multipliers[KEYWORD] = score_lifts(bm25_in_order, s.keyword_score_lift)
        if read_shares:
            multipliers[KEYWORD] = by_share(multipliers.get(KEYWORD), keyword_ids, read_shares)
        fused = reciprocal_rank_fusion(rankings, weights, s.rrf_k, multipliers)
        if s.recency_decay > 0 and fused:
            created = index.created_at(list(fused))
            for memory_id in fused:
                age = age_in_days(created.get(memory_id, query.now), query.now)
                fused[memory_id] *= decay_factor(age, s.recency_decay)
        if fused and (query.boost_window is not None or query.order is not None):
            favour_times(
                fused,
                index.created_at(list(fused)),
                query.boost_window,
                query.order,
                boost=s.time_boost,
                order_weight=s.time_order_weight,
                rrf_k=s.rrf_k,
            )
        superseded: dict[str, str] = {}
        if fused:
            superseded, depths = chain_depths(
                list(fused), lambda ids: index.superseding(SUPERSEDES_KEY, ids)
            )
            demote_superseded(
                fused,
                superseded,
                depths,
                s.supersede_factor,
                lambda ids: {i for i in index.passing(ids, node) if i != exclude},
            )

        scores = {
            VECTOR: {i: vector_hits[i] for i in rankings[VECTOR]},
            KEYWORD: keyword_hits,
            TAG: {i: float(c) for i, c in tag_counts.items()},
        }
        cosines = {} if fallback_reason is not None else scores[VECTOR]
        known = {**(share or {}), **feedback}  # vectors read for this search already
        return self._result(
            query, s, fused, rankings, scores, cosines, alpha, fallback_reason, superseded, known
        )

    def _result(
        self,
        query: Query,
        s: HybridMemorySettings,
        fused: Mapping[str, float],
        rankings: Mapping[str, list[str]],
        scores: Mapping[str, Mapping[str, float]],
        cosines: Mapping[str, float],
        alpha: float,
        fallback_reason: str | None,
        superseded: Mapping[str, str] | None = None,
        known: Mapping[str, np.ndarray] | None = None,
    ) -> SearchResult:
        """The one ending of every search path: the top ``k`` of the ``fused`` scores
        that exist, within the token budget, each with its relevance (from ``cosines``
        and keyword coverage), fused score and every leg's rank and score. ``known``: the
        vectors the search read already, which the folding of near-duplicates reuses."""
        # Near-duplicates folded into one hit, variety by MMR (_search.collapse).
        rule = NearDuplicateRule.of(s) if s.collapse_similar else None
        candidates = ReusingVectors(self, known or {})
        picked = choose(
            order_by_score(fused), fused, query.k, candidates, rule, query.mmr, superseded
        )
        fused, cosines = picked.best(fused), picked.best(cosines)
        memories = within_budget(picked.memories, query.max_tokens, s.token_encoding)
        relevance = hit_relevance(
            query.text, memories, cosines, self._index, self._queries, self.vectors, s
        )
        return SearchResult(
            as_hits(memories, relevance, fused, rankings, scores, superseded or {}, picked),
            alpha=float(alpha),
            matched_tags=query.tags,
            fallback_mode=fallback_reason is not None,
            fallback_reason=fallback_reason,
            time_window=query.time_window,
        )

    def _with_recent(
        self, hits: dict[str, float], vector: Vector, depth: int, node: Node | None
    ) -> dict[str, float]:
        """The vector leg's ``hits`` with the memories this process wrote lately
        (:mod:`hybrid_memory._store.recent_vectors`) that Chroma's approximate search left
        out though they reach its cut and pass its filter: ``{id: cosine}``, best first.

        Only those at least as near as the leg's farthest hit are looked at (the one
        asked for by its own text is the nearest of all), best first, a leg's depth at
        a time, each batch checked in the index (still there, passing the filter: a
        narrow filter's memories are those passing it) until none can reach the cut."""
        floor = min(hits.values()) if hits else -1.0
        limit = depth + self._recent.count_of(hits)  # those already hits come back too
        while True:
            near = self._recent.nearest(vector, floor, limit)
            fresh = [(i, c) for i, c in near.items() if i not in hits]
            if not fresh and len(near) < limit:
                return hits
            kept = dict(hits)
            for start in range(0, len(fresh), depth):
                batch = fresh[start : start + depth]
                if len(kept) >= depth and batch[0][1] < min(kept.values()):
                    break  # this batch and the rest are all farther than the cut
                passing = self._index.passing([i for i, _ in batch], node)
                kept.update((i, c) for i, c in batch if i in passing)
                kept = dict(sorted(kept.items(), key=lambda pair: -pair[1])[:depth])
            # The ``limit`` nearest were looked at: the rest, no nearer than the last of
            # them, matter only while the cut is not full or is farther than that.
            if len(near) < limit or (
                len(kept) >= depth and min(kept.values()) >= next(reversed(near.values()))
            ):
                return kept
            limit *= 4

    def vectors(
        self, ids: list[str], known: Mapping[str, np.ndarray] | None = None
    ) -> dict[str, np.ndarray]:
        """The vectors of those of ``ids`` that exist, by id: from ``known`` (read for the
        search already), the index's copy where it has one (a row read from its file),
        else the collection's (a Chroma call)."""
        found = {i: known[i] for i in ids if i in known} if known else {}
        missing = [i for i in ids if i not in found]
        if missing:
            found.update(self._index.vectors(missing))
            missing = [i for i in missing if i not in found]
        if missing:
            found.update(self._collection.vectors_by_id(missing))
        return found

    def anchor_time(
        self, event: str, node: Node | None, s: HybridMemorySettings
    ) -> tuple[str, float] | None:
        """The memory that best matches ``event`` by keywords ("I moved to Berlin"), and
        when it was created: what "before/after <event>" in a query is relative to."""
        scope = Scope.of(self._index, node)
        hits = KeywordLeg(self._index, node, scope).rank(
            event, 1, drop_stopwords=s.drop_stopwords, max_df=s.keyword_max_df
        )
        for memory_id in hits:
            created = self._index.created_at([memory_id]).get(memory_id)
            if created is not None:
                return memory_id, created
        return None

    def _vector_only(self, query: Query, s: HybridMemorySettings, reason: str) -> SearchResult:
        """The vector leg alone, while the keyword index cannot rank (``reason``)."""
        depth = _depth(query, s)
        vector = query.vector if query.vector is not None else self._queries.embed(query.text)
        hits = self._with_recent(self._collection.nearest(vector, depth, None), vector, depth, None)
        ranking = [i for i in hits if i != query.exclude]
        weights = {VECTOR: 1.0, KEYWORD: 0.0, TAG: 0.0}
        fused = reciprocal_rank_fusion({VECTOR: ranking}, weights, s.rrf_k)
        return self._result(query, s, fused, {VECTOR: ranking}, {VECTOR: hits}, hits, 1.0, reason)

    def memories(self, ordered: Sequence[str], k: int) -> list[Memory]:
        """The first ``k`` of ``ordered`` that exist, as memories.

        They are read from the index, which holds a copy of every memory and is checked
        against the collection every ``sync_interval`` (reading the collection instead
        costs a Chroma call on every search). Ids the index lacks (a vector hit written
        by another process since the last check) are read from the collection; ids
        found in neither are skipped."""
        out: list[Memory] = []
        position = 0
        while len(out) < k and position < len(ordered):
            batch = list(ordered[position : position + (k - len(out))])
            position += len(batch)
            rows = self._index.rows(batch)
            unknown = [i for i in batch if i not in rows]
            if unknown:
                for page in self._collection.rows_by_id(unknown):
                    rows.update((row.id, row) for row in page)
            out.extend(to_memory(rows[i]) for i in batch if i in rows)
        return out


def _depth(query: Query, s: HybridMemorySettings) -> int:
    """How many candidates each leg ranks: enough for ``k`` and the excluded memory."""
    return max(s.candidates, query.k) + (1 if query.exclude else 0)
