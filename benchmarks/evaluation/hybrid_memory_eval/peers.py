"""The peers hybrid-memory is measured against, behind one small interface.

Two hybrid retrievers a user of the frameworks would build by hand, each as its
documentation shows it, using the same embedding model as hybrid-memory:

- ``langchain_ensemble``: LangChain ``EnsembleRetriever([BM25Retriever, Chroma
  retriever], weights=[0.5, 0.5])`` (rank_bm25 with LangChain's default whitespace
  tokenizer; Chroma with cosine distance).
- ``llama_index_fusion``: LlamaIndex ``QueryFusionRetriever([vector index retriever,
  BM25Retriever], mode="reciprocal_rerank", num_queries=1)`` (bm25s with its default
  English stemmer and stopwords; a ``VectorStoreIndex`` on Chroma with cosine distance).
- ``plain_rrf``: the floor any fusion must clear: equal-weight Reciprocal Rank Fusion
  (k = 60) of SQLite FTS5 bm25 (porter stemming, every query word OR-ed, no stopword
  list) and Chroma cosine search, 100 candidates from each; no tags, no feedback. Built
  from sqlite3 and chromadb alone, so it needs no extra.

The first two need the optional extra ``bench`` (``pip install 'hybrid-agent-memory[bench]'``); this
module imports the frameworks only when a peer is built.

The API is stable (the quality harness :func:`hybrid_memory_eval.evaluate` and
the speed benchmark ``benchmarks/scale.py`` use it)::

    from hybrid_memory_eval import PeerRecord, langchain_ensemble, llama_index_fusion

    peer = llama_index_fusion(embedding)          # any object with the Embedder protocol
    peer.add([PeerRecord("m1", "Alice prefers dark mode", tags=("alice",))])
    peer.search("which theme does alice like?", k=10)   # -> ["m1"]: ranked ids
    peer.close()                                  # drops its Chroma collection

- ``PeerRecord(id, text, tags=(), metadata={})``: one memory. Peers cannot use tags,
  so they index :func:`peer_text` of it, ``"<tags joined by spaces>: <text>"`` when it
  has tags (the data README's rule: their strongest simple use of the information).
  ``metadata`` is kept only so callers can choose subsets with :func:`matches_filter`.
- ``Peer.add(records)``: the vector store adds incrementally; the BM25 index is rebuilt
  over every record added so far, which is what a user of either framework must do
  to make new records searchable (neither BM25 retriever updates in place).
- ``Peer.search(query, k)``: the ids of the top ``k`` records, best first.
- ``Peer.close()``: deletes the peer's Chroma collection (each peer owns a uniquely
  named collection in Chroma's in-process ephemeral client).
- ``embedding``: an object with ``embed_documents(list[str]) -> list[list[float]]``,
  ``embed_query(str) -> list[float]`` and ``name`` (hybrid-memory's Embedder
  protocol, e.g. ``HybridMemory().embedder``). It is wrapped as a LangChain
  ``Embeddings`` or a LlamaIndex ``BaseEmbedding``.
- Filters: neither peer can apply one metadata filter to both of its legs, so a
  harness builds one peer per distinct filter over the records that
  :func:`matches_filter` selects (Chroma ``where`` syntax).
- ``PEERS``: display name -> factory, in the order reports print them.
- ``require_frameworks()``: raises ``MissingDependencyError`` (with the pip command)
  when a peer's framework is not installed.
"""

from __future__ import annotations

import contextlib
import logging
import re
import sqlite3
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from hybrid_memory import MissingDependencyError
from hybrid_memory.testing import filter_matches, normalise_tag

__all__ = [
    "PEERS",
    "EmbeddingLike",
    "Peer",
    "PeerRecord",
    "langchain_ensemble",
    "llama_index_fusion",
    "matches_filter",
    "peer_text",
    "plain_rrf",
    "require_frameworks",
]


@dataclass(frozen=True)
class PeerRecord:
    """One memory as the peers see it."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


class EmbeddingLike(Protocol):
    """The part of hybrid-memory's Embedder protocol the peers use."""

    @property
    def name(self) -> str: ...

    def embed_documents(self, texts: list[str]) -> list[list[float]]: ...

    def embed_query(self, text: str) -> list[float]: ...


@runtime_checkable
class Peer(Protocol):
    """A retriever measured beside hybrid-memory."""

    name: str

    def add(self, records: Sequence[PeerRecord]) -> None:
        """Make ``records`` searchable (vector store: incremental; BM25: full rebuild)."""

    def search(self, query: str, k: int) -> list[str]:
        """The ids of the best ``k`` records for ``query``, best first."""

    def close(self) -> None:
        """Release the peer's collection."""


def peer_text(record: PeerRecord) -> str:
    """What a peer indexes: ``"<tags joined by spaces>: <text>"``, or the text alone."""
    if record.tags:
        return f"{' '.join(record.tags)}: {record.text}"
    return record.text


# --- metadata filters (Chroma `where` syntax), for choosing a peer's subset ------------


def matches_filter(
    where: Mapping[str, Any] | None, metadata: Mapping[str, Any], tags: Sequence[str] = ()
) -> bool:
    """Whether a record with ``metadata`` (and ``tags``) passes the Chroma ``where`` filter.

    The same validation and semantics as hybrid-memory's own search legs
    (:func:`hybrid_memory.testing.filter_matches`): ``$and``/``$or``, bare values for
    equality, ``$eq $ne $gt $gte $lt $lte $in $nin $contains $not_contains``;
    ``$ne``/``$nin`` also match records that lack the field, numbers never equal
    booleans. ``None`` or ``{}`` matches everything. An invalid filter raises ``InvalidInputError``.
    """
    return filter_matches(where, metadata, tuple(normalise_tag(t) for t in tags))


# --- shared plumbing -----------------------------------------------------------------


def _require(module: str, package: str) -> None:
    try:
        __import__(module)
    except ImportError as exc:
        raise MissingDependencyError(
            package, "the peer retrievers (pip install 'hybrid-agent-memory[bench]')"
        ) from exc


def _batches(items: Sequence[Any], size: int) -> list[Sequence[Any]]:
    """``items`` cut into consecutive slices of at most ``size``."""
    return [items[start : start + size] for start in range(0, len(items), max(1, size))]


def _max_batch(client: Any) -> int:
    """The most records the Chroma client takes in one add (5,461 for the embedded
    client on SQLite): a peer's add above it fails, so every peer adds in slices of it."""
    return int(client.get_max_batch_size())


def _new_collection(prefix: str) -> tuple[Any, Any, str]:
    """A fresh cosine collection in Chroma's in-process client.

    Chroma's ephemeral clients share one in-process system, so every peer takes a
    unique collection name instead of trusting a new client to be empty.
    """
    import chromadb

    client = chromadb.EphemeralClient()
    name = f"{prefix}-{uuid.uuid4().hex}"
    collection = client.create_collection(
        name, configuration={"hnsw": {"space": "cosine"}}, embedding_function=None
    )
    return client, collection, name


# --- LangChain ------------------------------------------------------------------------


def _require_langchain() -> None:
    _require("langchain_community.retrievers", "langchain-community")
    _require("langchain_classic.retrievers", "langchain-classic")
    _require("langchain_chroma", "langchain-chroma")
    _require("rank_bm25", "rank-bm25")


def _require_llama_index() -> None:
    _require("llama_index.core", "llama-index-core")
    _require("llama_index.retrievers.bm25", "llama-index-retrievers-bm25")
    _require("llama_index.vector_stores.chroma", "llama-index-vector-stores-chroma")


def require_frameworks() -> None:
    """Fail now, with the pip command, if a peer's framework is missing (a harness calls
    this before a long run rather than after it)."""
    _require_langchain()
    _require_llama_index()


def langchain_ensemble(embedding: EmbeddingLike, *, weights: Sequence[float] = (0.5, 0.5)) -> Peer:
    """LangChain ``EnsembleRetriever`` over ``BM25Retriever`` and a Chroma retriever."""
    _require_langchain()
    return _LangChainEnsemble(embedding, tuple(weights))


class _LangChainEnsemble:
    name = "LangChain EnsembleRetriever"

    def __init__(self, embedding: EmbeddingLike, weights: tuple[float, ...]) -> None:
        from langchain_chroma import Chroma
        from langchain_core.embeddings import Embeddings

        class _Embeddings(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return embedding.embed_documents(list(texts))

            def embed_query(self, text: str) -> list[float]:
                return embedding.embed_query(text)

        self._weights = list(weights)
        self._client, _, self._collection_name = _new_collection("peer-langchain")
        self._vectorstore = Chroma(
            collection_name=self._collection_name,
            embedding_function=_Embeddings(),
            client=self._client,
        )
        self._texts: list[str] = []
        self._metadatas: list[dict[str, Any]] = []
        self._ensemble: Any = None
        self._bm25: Any = None
        self._vector: Any = None

    def add(self, records: Sequence[PeerRecord]) -> None:
        if not records:
            return
        from langchain_classic.retrievers import EnsembleRetriever
        from langchain_community.retrievers import BM25Retriever

        texts = [peer_text(r) for r in records]
        metadatas = [{"id": r.id} for r in records]
        # add_texts hands everything to Chroma in one call, which refuses more than the
        # client's max batch size: a user adding a large corpus must slice it too.
        for batch in _batches(range(len(records)), _max_batch(self._client)):
            self._vectorstore.add_texts(
                [texts[i] for i in batch],
                metadatas=[metadatas[i] for i in batch],
                ids=[records[i].id for i in batch],
            )
        self._texts.extend(texts)
        self._metadatas.extend(metadatas)
        # rank_bm25 cannot add documents: the keyword leg is rebuilt over everything.
        self._bm25 = BM25Retriever.from_texts(self._texts, metadatas=self._metadatas)
        self._vector = self._vectorstore.as_retriever()
        self._ensemble = EnsembleRetriever(
            retrievers=[self._bm25, self._vector], weights=self._weights
        )

    def search(self, query: str, k: int) -> list[str]:
        if self._ensemble is None:
            return []
        self._bm25.k = k
        self._vector.search_kwargs = {"k": min(k, len(self._texts))}
        docs = self._ensemble.invoke(query)
        return [doc.metadata["id"] for doc in docs[:k]]

    def close(self) -> None:
        # Already gone: closing twice is harmless.
        with contextlib.suppress(Exception):
            self._client.delete_collection(self._collection_name)


# --- LlamaIndex -----------------------------------------------------------------------


def llama_index_fusion(embedding: EmbeddingLike) -> Peer:
    """LlamaIndex ``QueryFusionRetriever`` (reciprocal rerank) over vector + bm25s."""
    _require_llama_index()
    return _LlamaIndexFusion(embedding)


def _llama_index_embedding(embedding: EmbeddingLike) -> Any:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from pydantic import PrivateAttr

    class _Embedding(BaseEmbedding):
        _embedder: Any = PrivateAttr()

        def __init__(self, embedder: EmbeddingLike) -> None:
            super().__init__(model_name=embedder.name)
            self._embedder = embedder

        def _get_query_embedding(self, query: str) -> list[float]:
            return list(self._embedder.embed_query(query))

        async def _aget_query_embedding(self, query: str) -> list[float]:
            return self._get_query_embedding(query)

        def _get_text_embedding(self, text: str) -> list[float]:
            return list(self._embedder.embed_documents([text])[0])

        def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
            return [list(v) for v in self._embedder.embed_documents(list(texts))]

    return _Embedding(embedding)


class _LlamaIndexFusion:
    name = "LlamaIndex QueryFusionRetriever"

    def __init__(self, embedding: EmbeddingLike) -> None:
        from llama_index.core import StorageContext, VectorStoreIndex
        from llama_index.vector_stores.chroma import ChromaVectorStore

        self._client, collection, self._collection_name = _new_collection("peer-llamaindex")
        storage = StorageContext.from_defaults(
            vector_store=ChromaVectorStore(chroma_collection=collection)
        )
        self._index = VectorStoreIndex(
            nodes=[], storage_context=storage, embed_model=_llama_index_embedding(embedding)
        )
        self._nodes: list[Any] = []
        self._bm25: Any = None
        self._fusion: Any = None
        self._fusion_k = 0

    def add(self, records: Sequence[PeerRecord]) -> None:
        if not records:
            return
        from llama_index.core.schema import TextNode

        # No node metadata: LlamaIndex would embed and BM25-index it with the text.
        nodes = [TextNode(id_=r.id, text=peer_text(r)) for r in records]
        # ChromaVectorStore slices at 41,665 nodes, above the client's max batch size.
        for batch in _batches(nodes, _max_batch(self._client)):
            self._index.insert_nodes(list(batch))
        self._nodes.extend(nodes)
        # bm25s cannot add documents: the keyword leg is rebuilt over everything, now,
        # so the cost lands in add() as it does for a user.
        from llama_index.retrievers.bm25 import BM25Retriever

        # bm25s warns (and clamps) when k exceeds the corpus; _retriever() clamps instead.
        logging.getLogger("llama_index.retrievers.bm25.base").setLevel(logging.ERROR)
        self._bm25 = BM25Retriever.from_defaults(
            nodes=self._nodes, similarity_top_k=min(self._fusion_k or 10, len(self._nodes))
        )
        self._fusion = None

    def _retriever(self, k: int) -> Any:
        if self._fusion is not None and self._fusion_k == k:
            return self._fusion
        from llama_index.core.llms import MockLLM
        from llama_index.core.retrievers import QueryFusionRetriever
        from llama_index.core.retrievers.fusion_retriever import FUSION_MODES

        top_k = min(k, len(self._nodes))
        self._bm25.similarity_top_k = top_k
        self._fusion = QueryFusionRetriever(
            [self._index.as_retriever(similarity_top_k=top_k), self._bm25],
            mode=FUSION_MODES.RECIPROCAL_RANK,
            num_queries=1,  # the query alone: no LLM-generated rewrites
            similarity_top_k=k,
            use_async=False,  # same results; avoids an event loop per query
            llm=MockLLM(),  # never called with num_queries=1, but the class resolves one
        )
        self._fusion_k = k
        return self._fusion

    def search(self, query: str, k: int) -> list[str]:
        if not self._nodes:
            return []
        nodes = self._retriever(k).retrieve(query)
        return [n.node.node_id for n in nodes[:k]]

    def close(self) -> None:
        # Already gone: closing twice is harmless.
        with contextlib.suppress(Exception):
            self._client.delete_collection(self._collection_name)


# --- plain RRF of FTS5 bm25 + dense -------------------------------------------------------


def plain_rrf(embedding: EmbeddingLike, *, k: float = 60.0, depth: int = 100) -> Peer:
    """Equal-weight RRF of SQLite FTS5 bm25 and Chroma cosine search (the floor)."""
    return _PlainRRF(embedding, k, depth)


class _PlainRRF:
    name = "plain RRF (FTS5 bm25 + dense, k=60)"

    def __init__(self, embedding: EmbeddingLike, k: float, depth: int) -> None:
        self._embedding = embedding
        self._k = k
        self._depth = depth
        self._client, self._collection, self._collection_name = _new_collection("peer-plain")
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE docs USING fts5(id UNINDEXED, text, "
            "tokenize = 'porter unicode61 remove_diacritics 2')"
        )
        self._count = 0

    def add(self, records: Sequence[PeerRecord]) -> None:
        if not records:
            return
        texts = [peer_text(r) for r in records]
        ids = [r.id for r in records]
        vectors = self._embedding.embed_documents(texts)
        size = _max_batch(self._client)
        for start in range(0, len(ids), size):
            end = start + size
            self._collection.add(ids=ids[start:end], embeddings=vectors[start:end])
        rows = zip(ids, texts, strict=True)
        self._db.executemany("INSERT INTO docs (id, text) VALUES (?, ?)", rows)
        self._count += len(ids)

    def search(self, query: str, k: int) -> list[str]:
        if not self._count:
            return []
        depth = min(max(self._depth, k), self._count)
        words = dict.fromkeys(w.casefold() for w in re.findall(r"\w+", query))
        keyword: list[str] = []
        if words:
            expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
            keyword = [
                row[0]
                for row in self._db.execute(
                    "SELECT id FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?",
                    (expression, depth),
                )
            ]
        got = self._collection.query(
            query_embeddings=[self._embedding.embed_query(query)],
            n_results=depth,
            include=["distances"],
        )
        fused: dict[str, float] = {}
        for ranking in (got["ids"][0], keyword):
            for position, doc_id in enumerate(ranking, start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + 0.5 / (self._k + position)
        return sorted(fused, key=fused.__getitem__, reverse=True)[:k]

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client.delete_collection(self._collection_name)
        self._db.close()


#: Display name -> factory, in report order.
PEERS: dict[str, Callable[[EmbeddingLike], Peer]] = {
    _LangChainEnsemble.name: langchain_ensemble,
    _LlamaIndexFusion.name: llama_index_fusion,
    _PlainRRF.name: plain_rrf,
}
