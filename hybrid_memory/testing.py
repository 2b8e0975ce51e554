"""The library's inside, as the repository's benchmarks and studies reach it.

A benchmark times the stages of a search, a study re-scores the keyword leg with another
BM25 ``b`` or fuses legs it computed once: they need more than the public API gives, and
they must not import the private modules, which are free to move. This module is the one
place they reach in through, under names made for them; when the inside moves, this
module moves with it and the benchmarks do not change.

It is not part of the library's API (``hybrid_memory.__all__``): no compatibility is
promised beyond this repository, and nothing here is needed to use a store.
"""

from __future__ import annotations

import contextlib
import importlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from hybrid_memory._embedding.default_model import MiniLMEmbedder, SentenceTransformerEmbedder
from hybrid_memory._embedding.model_files import find_model_files
from hybrid_memory._keyword import bm25_scores, scoring_kernel
from hybrid_memory._keyword.bm25 import _TOKEN, STOPWORDS, query_words
from hybrid_memory._memory.memory import HybridMemory
from hybrid_memory._model.filters import matches, parse_filter
from hybrid_memory._model.namespaces import namespace_digest, partition_collection
from hybrid_memory._model.records import IndexRow, chroma_metadata
from hybrid_memory._model.tags import normalise_tag
from hybrid_memory._process import heap
from hybrid_memory._search.feedback import length_scaled_weight, rocchio
from hybrid_memory._search.fusion import adaptive_alpha, reciprocal_rank_fusion, score_lifts
from hybrid_memory._search.legs import Scope
from hybrid_memory._store.partition import PARTITION_KEY, chroma_id

__all__ = [
    "BM25_B",
    "BM25_K1",
    "NARROW_FILTER",
    "SEARCH_PARTS",
    "SEARCH_STAGES",
    "STOPWORDS",
    "adaptive_alpha",
    "bm25_idf",
    "chroma_nearest",
    "chroma_record",
    "compiled_keyword_loops_from",
    "default_embedder",
    "default_model",
    "default_model_tokenizer_file",
    "filter_matches",
    "keyword_bm25_b",
    "keyword_leg",
    "keyword_leg_path",
    "keyword_postings",
    "keyword_postings_built",
    "keyword_terms",
    "known_tags",
    "last_check_seconds",
    "length_scaled_weight",
    "memory_lengths",
    "namespace_records",
    "normalise_tag",
    "owns_path",
    "parse_filter",
    "query_words",
    "reciprocal_rank_fusion",
    "rocchio",
    "score_lifts",
    "sentence_transformers_embedder",
    "sentence_transformers_model",
    "sync_check",
    "text_words",
    "timed_heap_trims",
    "timed_search_stages",
]

# --- the default embedding model ----------------------------------------------------------


def default_embedder(batch_size: int = 32, cache_dir: str | None = None) -> MiniLMEmbedder:
    """The default model (all-MiniLM-L6-v2 on onnxruntime) as a store's embedding: pass it
    as ``HybridMemory(embedding=...)``, or call its ``embed_documents`` / ``embed_matrix``.
    ``cache_dir``: where its onnxruntime graph is kept (the setting's default)."""
    return MiniLMEmbedder(batch_size, cache_dir)


def sentence_transformers_embedder(batch_size: int = 32) -> SentenceTransformerEmbedder:
    """The same model run by sentence-transformers (the ``sentence-transformers`` extra),
    from the same files: the reference the onnxruntime vectors are held to."""
    return SentenceTransformerEmbedder(batch_size=batch_size)


def default_model(batch_size: int = 32) -> Any:
    """The default model itself, loaded: its ``tokenizer`` (Hugging Face ``tokenizers``)
    and ``embed(texts, batch_size, by_length=...)`` (texts sorted by length before
    batching, or not)."""
    return MiniLMEmbedder(batch_size)._load()


def sentence_transformers_model(batch_size: int = 32) -> Any:
    """The ``SentenceTransformer`` the sentence-transformers backend loads (checked files,
    no download)."""
    return SentenceTransformerEmbedder(batch_size=batch_size)._load()


def default_model_tokenizer_file() -> Path:
    """The default model's ``tokenizer.json``, found as the store finds it."""
    return find_model_files().tokenizer


# --- the keyword index's words and BM25 -----------------------------------------------------

#: A filter passing at most this many memories is resolved once, for every leg.
NARROW_FILTER = Scope.NARROW
#: BM25's parameters as the keyword index scores (SQLite FTS5's).
BM25_K1 = bm25_scores.K1
BM25_B = bm25_scores.B


def bm25_idf(df: int, n: int) -> float:
    """BM25's idf as the keyword index computes it (FTS5's, floored just above 0)."""
    return bm25_scores.bm25_idf(df, n)


def text_words(text: str) -> list[str]:
    """The words of a text as the keyword index's tokenizer sees them (before folding and
    stemming), stopwords included."""
    return _TOKEN.findall(text)


@contextlib.contextmanager
def keyword_bm25_b(b: float) -> Iterator[None]:
    """The keyword leg scores with BM25's ``b`` set to ``b`` inside the block (every store
    of the process; the index itself does not depend on ``b``)."""
    default, bm25_scores.B = bm25_scores.B, b
    try:
        yield
    finally:
        bm25_scores.B = default


def compiled_keyword_loops_from(rows: int) -> None:
    """Load the keyword leg's compiled loops once a store holds ``rows`` memories."""
    scoring_kernel.LOAD_FROM_ROWS = rows


def keyword_leg_path() -> str:
    """Which path ranks the keyword leg now (compiled loops or numpy), and why."""
    return scoring_kernel.status()


# --- a store's keyword index, as studies read it --------------------------------------------


def keyword_leg(
    memory: HybridMemory,
    text: str,
    k: int,
    where: Mapping[str, Any] | None = None,
    *,
    drop_stopwords: bool = True,
) -> list[tuple[str, float]]:
    """The keyword leg of a search of ``memory``: its ``k`` best ``(id, BM25 score)`` for
    ``text`` among the memories passing ``where``, as a search ranks them (a narrow filter
    resolved once first)."""
    index = memory._parts.index
    node = parse_filter(where, single_valued=index.single_valued)
    scope = None if node is None else index.within(node, NARROW_FILTER)
    within = None if scope is None else scope[0]
    return index.search(text, k, node, within=within, drop_stopwords=drop_stopwords)


def known_tags(memory: HybridMemory, text: str) -> tuple[str, ...]:
    """The tags of ``memory`` that ``text`` names, as a search finds them."""
    return tuple(memory._parts.tags.find(text))


def memory_lengths(memory: HybridMemory) -> npt.NDArray[np.float64]:
    """Each memory's length in the keyword index's terms (BM25's document length), in the
    index's order of rows."""
    postings = memory._parts.index.keywords.keeper.ready()
    if postings is None:
        raise RuntimeError("the keyword index holds no postings (an empty store?)")
    return np.asarray(postings.length[postings.live], dtype=np.float64)


def keyword_terms(memory: HybridMemory, words: Sequence[str]) -> list[tuple[str, ...]]:
    """Each word's terms in ``memory``'s keyword index, as its tokenizer makes them."""
    return memory._parts.index.keywords.terms_of(list(words))


def keyword_postings(
    memory: HybridMemory,
) -> Iterator[tuple[str, list[str], npt.NDArray[np.float32]]]:
    """Every term of ``memory``'s keyword index with the ids of the memories holding it
    and how often each holds it."""
    index = memory._parts.index
    with index._lock:
        postings = index.keywords.keeper.ready()
        if postings is None:
            return
        rowids = sorted(int(r) for r in postings.live_rowids())
        id_of = index.ids_cache.ids_of(rowids)
        for term, rows, frequencies in postings.each_term():
            yield term, [id_of[int(r)] for r in rows], frequencies


def keyword_postings_built(memory: HybridMemory) -> bool:
    """Whether ``memory``'s keyword leg ranks from its in-memory postings yet (a store
    opened again builds them in the background; FTS5 ranks meanwhile)."""
    return memory._parts.index.keywords.postings is not None


# --- a store's sync and its Chroma side, as diagnostics read them ----------------------------


def sync_check(memory: HybridMemory) -> Callable[[], bool]:
    """The periodic sync check's question for ``memory``, to ask (and time) at will:
    whether its keyword index is behind the collection."""
    return memory._parts.sync._behind


def last_check_seconds(memory: HybridMemory) -> float:
    """How long ``memory``'s last sync check took (the periodic check waits 20 times that
    at least before the next)."""
    return memory._parts.sync.check_seconds


def owns_path(memory: HybridMemory) -> bool:
    """Whether this process owns ``memory``'s embedded path (serves it to the others)."""
    ownership = memory._parts.collection._ownership
    return ownership is not None and ownership.is_owner


def chroma_record(memory: HybridMemory, memory_id: str) -> tuple[str, list[float]] | None:
    """The document and vector Chroma itself holds for ``memory_id`` (None: none)."""
    got = memory._parts.collection.call("get", ids=[memory_id], include=["documents", "embeddings"])
    if not got["ids"]:
        return None
    return got["documents"][0], list(got["embeddings"][0])


def chroma_nearest(memory: HybridMemory, vector: Sequence[float], n: int) -> list[str]:
    """The ids of the ``n`` records nearest ``vector`` by Chroma's own search (approximate),
    nearest first."""
    return list(memory._parts.collection.nearest(list(vector), n, None))


# --- filters, tags and a store's layout in Chroma --------------------------------------------


def filter_matches(
    where: Mapping[str, Any] | None,
    metadata: Mapping[str, Any],
    tags: Sequence[str] = (),
    created_at: float | None = None,
    updated_at: float | None = None,
) -> bool:
    """Whether a memory with these fields passes ``where`` (a store's filter syntax), as
    every leg of a search decides it."""
    return matches(parse_filter(where), metadata, tags, created_at, updated_at)


def namespace_records(
    collection: str, namespace: str, memories: Sequence[Mapping[str, Any]], now: float
) -> tuple[str, list[str], list[dict[str, Any]]]:
    """How a store keeps namespace ``namespace`` of its collection ``collection`` in
    Chroma: the shared collection's name, and the Chroma ids and metadata of
    ``memories`` (dicts with ``id``, ``text``, ``tags``, ``metadata``; created and
    updated at ``now``), to write there directly with their texts and vectors."""
    key = namespace_digest(collection, namespace)
    ids, metadatas = [], []
    for item in memories:
        row = IndexRow(
            str(item["id"]), item["text"], tuple(item["tags"]), item["metadata"], "", now, now
        )
        ids.append(chroma_id(key, row.id))
        metadatas.append({**chroma_metadata(row), PARTITION_KEY: key})
    return partition_collection(collection), ids, metadatas


# --- timing the inside ---------------------------------------------------------------------


@contextlib.contextmanager
def timed_heap_trims() -> Iterator[list[float]]:
    """Inside the block, the heap trims after large writes are timed: the list yielded
    holds their total seconds and their number once the block is done."""
    spent = [0.0, 0]
    trim = heap._trim
    if trim is None:
        yield spent
        return

    def timed(pad: int) -> int:
        start = time.perf_counter()
        try:
            return trim(pad)
        finally:
            spent[0] += time.perf_counter() - start
            spent[1] += 1

    heap._trim = timed
    try:
        yield spent
    finally:
        heap._trim = trim


# Where a search spends its time: (label, module, class, method), each timed by wrapping
# the method; a class of "" names a function of the module, as the module calls it. The
# stages add up to the total; their parts are timed inside them.
SEARCH_STAGES = (
    ("total", "hybrid_memory._search.searcher", "Searcher", "search"),
    ("vector leg (Chroma query)", "hybrid_memory._search.legs", "VectorLeg", "rank"),
    (
        "feedback vectors (Chroma get)",
        "hybrid_memory._store.collection",
        "ChromaCollection",
        "vectors_by_id",
    ),
    ("keyword leg", "hybrid_memory._search.legs", "KeywordLeg", "rank"),
    ("long hits' read shares", "hybrid_memory._search.legs", "KeywordLeg", "read_shares"),
    ("tag leg", "hybrid_memory._search.legs", "TagLeg", "rank"),
    ("relevance scores", "hybrid_memory._search.searcher", "", "hit_relevance"),
    ("hits read from the index", "hybrid_memory._search.searcher", "Searcher", "memories"),
)
SEARCH_PARTS = (
    ("within: keyword top rows", "hybrid_memory._keyword.postings", "Postings", "top"),
    ("within: memory ids to index rows", "hybrid_memory._keyword.postings", "Postings", "rows_of"),
    ("within: index rows to memory ids", "hybrid_memory._keyword.postings", "Postings", "ids_of"),
    ("within: tag leg, hits naming the tags", "hybrid_memory._search.legs", "TagLeg", "_naming"),
)


@contextlib.contextmanager
def timed_search_stages() -> Iterator[dict[str, float]]:
    """Inside the block, every stage and part of a search (:data:`SEARCH_STAGES`,
    :data:`SEARCH_PARTS`) is timed: the dict yielded holds each label's total seconds.
    The wrappers cost a little: the figures explain a total, they do not replace it."""
    spent = dict.fromkeys((label for label, *_ in SEARCH_STAGES + SEARCH_PARTS), 0.0)
    originals = []
    for label, module, owner_name, name in SEARCH_STAGES + SEARCH_PARTS:
        where = importlib.import_module(module)
        owner = getattr(where, owner_name) if owner_name else where
        original = getattr(owner, name)
        originals.append((owner, name, vars(owner).get(name)))

        def timed(*args: Any, _f: Any = original, _label: str = label, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return _f(*args, **kwargs)
            finally:
                spent[_label] += time.perf_counter() - start

        setattr(owner, name, timed)
    try:
        yield spent
    finally:
        for owner, name, own in reversed(originals):
            if own is None:  # inherited: the base's stands again
                delattr(owner, name)
            else:
                setattr(owner, name, own)
