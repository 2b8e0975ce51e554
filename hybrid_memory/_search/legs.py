"""The three rankings a search fuses, one small object each.

Every leg applies the search's filter before its cut (a filter applied after a top-k
cut silently loses results), skips the memory a ``related`` search starts from, and
returns ``{id: score}`` best first.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from hybrid_memory._embedding.vectors import Vector, nearest_by_cosine
from hybrid_memory._keyword.bm25 import STOPWORDS, query_words
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.postings import IntArray
from hybrid_memory._keyword.tag_index import TagMatch, tag_order
from hybrid_memory._model.filters import Node, chroma_part, tests_arrays, to_chroma
from hybrid_memory._model.tags import TagMatcher, each_word, words
from hybrid_memory._search.long_memories import QueryWordCounter, window_shares
from hybrid_memory._store.collection import ChromaCollection


class Scope:
    """The memories passing a narrow filter, resolved once in the keyword index, so the
    legs search just those (``rows`` for the index, ``ids`` for the collection).

    Chroma's ``where`` scans its metadata on every query, a cost that grows with the
    collection: a filter passing at most :data:`NARROW` memories, or a tenth of the
    store (:data:`SHARE`) when that is more, is cheaper as an explicit list of ids; a
    broader one is left to each leg (``None``). At a million memories, a filter passing
    20,000 took Chroma 0.5-1.5 s as a ``where`` and 50-70 ms as ids (80,000 ids: 0.17 s).
    """

    NARROW = 20_000
    SHARE = 10

    def __init__(self, rows: IntArray, ids: list[str]) -> None:
        self.rows = rows
        self.ids = ids

    @classmethod
    def of(cls, index: KeywordIndex, node: Node | None) -> Scope | None:
        if node is None:
            return None
        resolved = index.within(node, max(cls.NARROW, index.count() // cls.SHARE))
        return None if resolved is None else cls(*resolved)


class KeywordLeg:
    """BM25 over the keyword index (SQLite FTS5): ``{id: BM25 score}``."""

    def __init__(self, index: KeywordIndex, node: Node | None, scope: Scope | None) -> None:
        self._index = index
        self._node = node
        self._scope = scope

    def rank(
        self, text: str, depth: int, *, drop_stopwords: bool, max_df: float
    ) -> dict[str, float]:
        hits = self._index.search(
            text,
            depth,
            self._node,
            within=None if self._scope is None else self._scope.rows,
            drop_stopwords=drop_stopwords,
            max_df=max_df,
        )
        return dict(hits)

    def read_shares(
        self, text: str, ids: Sequence[str], window: int, *, drop_stopwords: bool
    ) -> tuple[dict[str, float], dict[str, int]]:
        """For hits longer than the embedding model reads (``window`` characters; see
        :mod:`~hybrid_memory._search.long_memories`): the share of each long hit's keyword
        evidence for ``text`` that lies in the part the model read (``{id: share}``), and
        each long hit's length in characters; hits within the window are left out of
        both (their shares are 1). Only the long hits' texts are read."""
        if window <= 0 or not ids:
            return {}, {}
        long, mean_length = self._index.long_texts(ids, window)
        if not long:
            return {}, {}
        lengths = {memory_id: len(t) for memory_id, t in long.items()}
        words = query_words(text, drop_stopwords=drop_stopwords)
        counter = QueryWordCounter(words, self._index.terms)
        return window_shares(long, counter, window, mean_length), lengths


class VectorLeg:
    """Chroma's nearest neighbours passing the filter: ``{id: cosine similarity}``."""

    def __init__(
        self,
        collection: ChromaCollection,
        index: KeywordIndex,
        node: Node | None,
        scope: Scope | None,
        vectors: Mapping[str, npt.ArrayLike] | None = None,
    ) -> None:
        self._collection = collection
        self._index = index
        self._node = node
        self._scope = scope
        self._vectors = vectors

    @staticmethod
    def share_vectors(
        collection: ChromaCollection, index: KeywordIndex, node: Node | None
    ) -> dict[str, np.ndarray] | None:
        """The vectors of every memory passing ``node`` in a small namespace (read by id,
        in one Chroma call), for the leg to compare them all and the feedback step to
        take its own from; None for a store's collection, or a larger namespace.

        A namespace's ids are its index's (in step with its share as any leg's). Chroma's
        ``get`` by the namespace's ``where`` scans the shared collection (13-20 ms at
        100,000 records), by ten ids it does not (1.2-1.8 ms)."""
        if collection.partition is None or index.lagging:
            return None
        few = index.within(node, collection.compare_all)
        if few is None:
            return None
        ids = few[1]
        if collection.holds_kept_vectors:  # its share was just read whole, vectors too
            kept = collection.kept_vectors(ids, index.updated_at(ids))
            if kept is not None:
                return kept
        return collection.vectors_by_id(ids)

    def rank(self, vector: Vector, depth: int) -> dict[str, float]:
        if self._scope is not None:
            return self._collection.nearest_among(vector, depth, self._scope.ids)
        if self._vectors is not None:  # every candidate's vector at hand (share_vectors)
            if not self._vectors:
                return {}
            ids = list(self._vectors)
            matrix = np.asarray([self._vectors[i] for i in ids], dtype=np.float32)
            return {ids[row]: cosine for row, cosine in nearest_by_cosine(matrix, vector, depth)}
        node = self._node
        part, exact = chroma_part(node)
        where = to_chroma(part)
        if exact and not tests_arrays(node):
            return self._collection.nearest(vector, depth, where)
        # Chroma cannot test tags (see chroma_part), and Chroma 1.5 keeps array-metadata
        # index entries of deleted collections, which a new collection's $contains can
        # match (seen here; scalar filters are unaffected): Chroma's hits for the part
        # it can test are checked against the keyword index's copy. When tags leave
        # the part looser than the filter, enough hits are asked for to keep ``depth``
        # at the filter's share of the part, and more while some are missing.
        pool = self._index.count(part)
        wanted = depth
        if not exact:
            share = self._index.count(node) / max(1, pool)
            wanted = min(pool, math.ceil(depth / max(share, 1e-9) * 1.2))
        while True:
            hits = self._collection.nearest(vector, max(1, wanted), where)
            passing = self._index.passing(list(hits), node)
            kept = {i: s for i, s in hits.items() if i in passing}
            if len(kept) >= depth or len(hits) < wanted or wanted >= pool:
                return dict(list(kept.items())[:depth])
            wanted = min(pool, wanted * 2)


def with_checked(
    hits: dict[str, float], vector: Vector, checked: Mapping[str, npt.ArrayLike], depth: int
) -> dict[str, float]:
    """The vector leg's ``hits`` (``{id: cosine}``, best first) with those of ``checked``
    (memories another leg ranked first, their vectors at hand, passing the search's
    filter) that Chroma's approximate search left out though their exact cosine with
    ``vector`` reaches the leg's cut: ``{id: cosine}``, best first, at most ``depth``.

    Chroma's HNSW can miss a memory asked for with its own vector: one in 20 at a million
    memories, most of them where many vectors tie. This process's own writes are covered by
    :mod:`hybrid_memory._store.recent_vectors`; a memory another process wrote, asked for by its own
    text, is the keyword leg's first hit, and this puts it back in the vector leg as
    well, with its true cosine. The feedback memories' vectors are read anyway, so this
    costs a search three dot products."""
    missing = [i for i in checked if i not in hits]
    if not missing:
        return hits
    matrix = np.asarray([checked[i] for i in missing], dtype=np.float64)
    query = np.asarray(vector, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(query)
    cosines = np.divide(matrix @ query, norms, out=np.zeros(len(missing)), where=norms > 0)
    cut = min(hits.values()) if len(hits) >= depth else -math.inf
    reaching = {  # a vector of no length has no cosine: left out
        i: float(c) for i, c, n in zip(missing, cosines, norms, strict=True) if n > 0 and c >= cut
    }
    if not reaching:
        return hits
    merged = sorted({**hits, **reaching}.items(), key=lambda pair: -pair[1])
    return dict(merged[:depth])


class TagLeg:
    """Memories carrying the tags matched in the query, ranked by how many they carry,
    then by their best rank in the other legs, then newest first: ``{id: matched}``.

    Among the other legs' hits, a memory whose text says what the query says (the same
    words, stopwords aside) counts as carrying each matched tag its text names (the tag's
    words in sequence, the test that found the tag in the query), whatever it is tagged
    with. Without this, a memory just stored and asked for by its own text sat first in
    the vector and keyword legs but was absent from this one, which cost it this leg's
    whole weight in the fusion, and the carriers of a tag its text names that those legs
    ranked moderately well all came first (7 of 20 such memories outside the top 10 at
    100,000 memories). Other mentions do not count: conversation turns name the person
    they answer ("Thanks, Caroline!"). Counting any mention dropped LoCoMo's nDCG@10 from
    0.556 to 0.359, counting memories that hold every query word (and more) to 0.551;
    this rule leaves it at 0.556.

    A search ranks once, after the vector query: the newest carriers of each tag and
    the carriers among the other legs' hits, in one call to the carriers held in memory
    (two SQL reads when the filter is left to SQL). Full ties go to the lower index row.
    """

    def __init__(
        self,
        index: KeywordIndex,
        tags: tuple[str, ...],
        depth: int,
        node: Node | None,
        exclude: str | None,
        scope: Scope | None,
        text: str = "",
        keyword_ids: Iterable[str] = (),
    ) -> None:
        self._index = index
        self._tags = tags
        self._query_words = content_words(text)
        # A memory with the query's words matches each of its keyword terms, so those
        # worth reading for naming are among the keyword leg's hits.
        self._keyword_ids = frozenset(keyword_ids)
        self._depth = depth
        self._node = node
        self._rows = None if scope is None else scope.rows
        self._exclude = exclude
        self._names = TagMatcher(tags)

    def rank(self, best_ranks: Mapping[str, int]) -> dict[str, int]:
        """``{id: matched count}`` in rank order, given each id's best rank in the other
        legs."""
        if not self._tags:
            return {}
        ids = list(best_ranks)
        named = self._naming([i for i in ids if i in self._keyword_ids])
        if self._node is None or self._rows is not None:  # from the carriers in memory
            return self._index.tag_ranking(
                self._tags, self._depth, best_ranks, named, self._exclude, within=self._rows
            )
        # A filter the index tests in SQL.
        newest = self._index.tag_carriers(self._tags, self._depth, self._node)
        carrying = {
            m.id: m for m in self._index.tag_carriers(self._tags, len(ids), self._node, among=ids)
        }
        carrying.update((m.id, m) for m in named)
        among = sorted(carrying.values(), key=tag_order)
        best: dict[str, TagMatch] = {}
        for match in (*newest, *among):
            if match.id != self._exclude:
                best[match.id] = match
        ordered = sorted(
            best.values(),
            key=lambda m: (-m.matched, best_ranks.get(m.id, math.inf), -m.created_at, m.row),
        )
        return {m.id: m.matched for m in ordered[: self._depth]}

    def _naming(self, ids: list[str]) -> list[TagMatch]:
        """Those of ``ids`` whose text has the query's words and names an asked tag they
        do not carry, each with how many asked tags it carries or names. (``ids`` come
        from the other legs, which applied the search's filter already.)"""
        if not self._query_words or not ids:
            return []
        # Texts first, tags (JSON to decode) only for the few that say what the query
        # says: the keyword leg's hits are many, those few. Texts are read only for
        # those holding every query word and lacking an asked tag (one carrying them
        # all matches no more by naming them): 44% fewer texts on the scale benchmark's
        # questions at 100,000 memories.
        ids = self._index.holding_every(sorted(self._query_words), ids)
        ids = self._index.lacking_tags(self._tags, ids) if ids else ids
        saying = [i for i, text in self._index.texts(ids).items() if self._says_query(text)]
        if not saying:
            return []
        asked = set(self._tags)
        out = []
        for memory_id, row, created, text, tags in self._index.texts_and_tags(saying):
            carried = asked.intersection(tags)
            matched = carried.union(self._names.find(text))
            if len(matched) > len(carried):
                out.append(TagMatch(memory_id, len(matched), created, row))
        return out

    def _says_query(self, text: str) -> bool:
        """Whether ``text`` has the query's content words and no other."""
        asked = self._query_words
        # A content word the query lacks settles it, and a text that says more than the
        # query mostly has one early: 34 of the keyword leg's hits hold every word of a
        # short question about a person ("What pet does Caroline have?") and lack its
        # tag at 100,000 memories, and taking all their words took 1.2 ms of the search
        # (now 0.2). The texts asked about were chosen for holding every query word (by
        # the postings, when built): testing that again here only read each text twice.
        # One pass: the words read on the way decide when none settled it.
        read: list[str] = []
        for word in each_word(text):
            if word not in asked and word not in STOPWORDS:
                return False
            read.append(word)
        return content_of(read) == asked


def content_words(text: str) -> frozenset[str]:
    """The words of ``text`` as tags are compared (:func:`~hybrid_memory._model.tags.words`),
    stopwords left out unless nothing else is left."""
    return content_of(words(text))


def content_of(found: Iterable[str]) -> frozenset[str]:
    """Those of the words ``found`` that are not stopwords, or all of them when every
    one is."""
    every = frozenset(found)
    return every - STOPWORDS or every


def best_ranks(*rankings: list[str]) -> dict[str, int]:
    """Each id's best (lowest) rank across ``rankings``, in first-seen order."""
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, memory_id in enumerate(ranking, start=1):
            if best.setdefault(memory_id, rank) > rank:
                best[memory_id] = rank
    return best
