"""The peer retrievers (real LangChain, LlamaIndex, Chroma, rank_bm25 and bm25s) on tiny data."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hybrid_memory_eval import (
    PEERS,
    EmbeddingLike,
    Peer,
    PeerRecord,
    langchain_ensemble,
    llama_index_fusion,
    load_dataset,
    matches_filter,
    peer_text,
    plain_rrf,
    run_peer,
)
from hybrid_memory_eval.cli import main
from hybrid_memory_eval.foreign import FOREIGN_PEERS

from hybrid_memory._embedding.default_model import MiniLMEmbedder
from hybrid_memory._model.errors import InvalidInputError
from tests.conftest import HashEmbedding, write_collection
from tests.integration.test_eval_cli import CORPUS, METRIC_KEYS, QRELS, QUERIES

RECORDS = [
    PeerRecord("m1", "I adopted a golden retriever puppy and named him Biscuit", ("alice",)),
    PeerRecord("m2", "I work night shifts as a nurse at the city hospital", ("alice",)),
    PeerRecord("m3", "Training for the Berlin marathon in September", ("bob", "sports")),
    PeerRecord("m4", "The quarterly budget review is due on Friday"),
]


class HashEmbedder(HashEmbedding):
    """The cheap hashed embedding with the Embedder methods, for the fast tests."""

    name = "test-hash-64"

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self(texts)

    def embed_query(self, text: str) -> list[float]:
        return self([text])[0]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    """The default model, as hybrid-memory loads it (all-MiniLM-L6-v2, offline)."""
    return MiniLMEmbedder()


FACTORIES = pytest.mark.parametrize(
    "factory",
    [langchain_ensemble, llama_index_fusion, plain_rrf],
    ids=["langchain", "llama_index", "plain_rrf"],
)


@pytest.fixture
def open_peer() -> Iterator[Callable[[Callable[[EmbeddingLike], Peer], EmbeddingLike], Peer]]:
    peers: list[Peer] = []

    def make(factory: Callable[[EmbeddingLike], Peer], embedding: EmbeddingLike) -> Peer:
        peers.append(factory(embedding))
        return peers[-1]

    yield make
    for peer in peers:
        peer.close()


# --- the pure parts ------------------------------------------------------------------------


def test_peer_text_puts_tags_before_the_text() -> None:
    assert peer_text(PeerRecord("a", "likes hiking", ("Bob", "outdoors"))) == (
        "Bob outdoors: likes hiking"
    )
    assert peer_text(PeerRecord("b", "no tags here")) == "no tags here"


def test_matches_filter_follows_chroma_where_semantics() -> None:
    meta = {"conversation": "c1", "session": 3, "flag": True}
    assert matches_filter(None, meta) and matches_filter({}, meta)
    assert matches_filter({"conversation": "c1"}, meta)
    assert not matches_filter({"conversation": "c2"}, meta)
    assert matches_filter({"session": {"$gte": 3}}, meta)
    assert not matches_filter({"session": {"$gt": 3}}, meta)
    assert matches_filter({"$or": [{"conversation": "c2"}, {"session": 3}]}, meta)
    assert not matches_filter({"$and": [{"conversation": "c1"}, {"session": 4}]}, meta)
    assert matches_filter({"session": {"$in": [1, 3]}}, meta)
    assert not matches_filter({"flag": 1}, meta)  # numbers never equal booleans
    assert matches_filter({"missing": {"$ne": "x"}}, meta)  # as in Chroma
    assert not matches_filter({"missing": "x"}, meta)
    assert matches_filter({"tags": {"$contains": "alice"}}, {}, tags=["Alice"])
    with pytest.raises(InvalidInputError):
        matches_filter({"session": {"$near": 3}}, meta)


def test_peers_registry_names_every_peer() -> None:
    assert list(PEERS) == [
        "LangChain EnsembleRetriever",
        "LlamaIndex QueryFusionRetriever",
        "plain RRF (FTS5 bm25 + dense, k=60)",
    ]


def test_plain_rrf_fuses_both_legs_with_equal_weights() -> None:
    peer = plain_rrf(HashEmbedder())
    try:
        peer.add(RECORDS)
        # FTS5 syntax in the query is searched as words, never parsed.
        assert peer.search('quarterly budget AND "review" NEAR(*)', 10)[0] == "m4"
        # A record found by one leg only still comes back: the fusion keeps every hit.
        assert set(peer.search("Biscuit", 10)) == {r.id for r in RECORDS}
    finally:
        peer.close()


# --- behaviour with a cheap embedding ----------------------------------------------------------


@FACTORIES
def test_empty_peer_finds_nothing_and_closes_twice(
    factory: Callable[[EmbeddingLike], Peer], open_peer: Callable[..., Peer]
) -> None:
    peer = open_peer(factory, HashEmbedder())
    assert isinstance(peer, Peer)
    assert peer.search("anything", 5) == []
    peer.add([])
    assert peer.search("anything", 5) == []
    peer.close()
    peer.close()


@FACTORIES
def test_added_records_become_searchable(
    factory: Callable[[EmbeddingLike], Peer], open_peer: Callable[..., Peer]
) -> None:
    peer = open_peer(factory, HashEmbedder())
    # Three records at first: with two, BM25's idf of a word in one of them is log(1) = 0.
    peer.add([RECORDS[0], RECORDS[1], RECORDS[3]])
    assert peer.search("golden retriever puppy Biscuit", 10)[0] == "m1"
    assert "m3" not in peer.search("Berlin marathon", 10)
    peer.add([RECORDS[2]])  # vector store: incremental; BM25: rebuilt over all four
    assert peer.search("Berlin marathon September", 10)[0] == "m3"
    assert peer.search("quarterly budget review", 10)[0] == "m4"
    top_two = peer.search("nurse hospital", 2)
    assert len(top_two) == 2 and top_two[0] == "m2"
    assert set(peer.search("puppy", 10)) <= {r.id for r in RECORDS}


@FACTORIES
def test_tags_are_indexed_with_the_text(
    factory: Callable[[EmbeddingLike], Peer], open_peer: Callable[..., Peer]
) -> None:
    peer = open_peer(factory, HashEmbedder())
    peer.add(RECORDS)
    # "bob" appears only as a tag: the keyword leg finds it through the indexed prefix
    # "bob sports: Training ..." (LangChain's whitespace tokenizer keeps the colon on
    # the last tag, so the query names the first one).
    assert peer.search("bob", 10)[0] == "m3"


def test_run_peer_builds_one_peer_per_filter(tmp_path: Path) -> None:
    folder = write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)
    dataset = load_dataset(folder)
    in_conversation = {
        c: {d["_id"] for d in CORPUS if d["metadata"]["conversation"] == c} for c in ("c1", "c2")
    }
    for factory in PEERS.values():
        run = run_peer(factory, HashEmbedder(), dataset, k=10)
        assert set(run.ranked) == {"q1", "q2", "q3", "q4"}
        assert len(run.latencies_ms) == 4
        assert set(run.ranked["q1"]) <= in_conversation["c1"]
        assert set(run.ranked["q2"]) <= in_conversation["c2"]
        assert set(run.ranked["q3"]) <= in_conversation["c1"]
        assert len(run.ranked["q4"]) == len(CORPUS)  # no filter: the whole corpus


# --- the real model, and beside hybrid-memory in one run ---------------------------------------


@pytest.mark.slow
@FACTORIES
def test_semantic_match_with_the_default_model(
    factory: Callable[[EmbeddingLike], Peer],
    open_peer: Callable[..., Peer],
    minilm: MiniLMEmbedder,
) -> None:
    peer = open_peer(factory, minilm)
    peer.add(RECORDS)
    # Neither query shares a word with any record, so the keyword leg ranks both the
    # same way and only the model's vectors can tell the dog from the nurse.
    dog = peer.search("canine pet", 10)
    job = peer.search("medical career", 10)
    assert dog.index("m1") < job.index("m1")
    assert job.index("m2") < dog.index("m2")


@pytest.mark.slow
def test_cli_prints_peers_beside_our_figures(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The foreign peers (their own venvs) are tested in test_foreign_peers.py: here none
    # is built, so each is reported as not run.
    monkeypatch.setenv("HYBRID_MEMORY_PEER_VENVS", str(tmp_path / "no-venvs"))
    folder = write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)

    assert main(["eval", str(folder), "--json", "--peers", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["peers"]) == [*PEERS, *FOREIGN_PEERS]
    for name in FOREIGN_PEERS:
        assert set(report["peers"][name]) == {"not_run"}
    for figures in (report["peers"][name] for name in PEERS):
        assert set(figures) >= METRIC_KEYS
        assert figures["n_queries"] == 4
        assert set(figures["categories"]) == {"1", "2"}
        # Verbatim queries within a filtered subset: every peer finds them.
        assert figures["recall@10"] == 1.0

    assert main(["eval", str(folder), "--peers", "--quiet"]) == 0
    text = capsys.readouterr().out
    for name in ("hybrid-memory", *PEERS):
        assert name in text


@FACTORIES
def test_a_corpus_above_chromas_max_batch_size_is_added_in_slices(
    factory: Callable[[EmbeddingLike], Peer],
) -> None:
    """Chroma's embedded client refuses more than get_max_batch_size() records per add
    (5,461): a peer given more (LongMemEval has 10,866) must slice, not crash."""
    import chromadb

    limit = chromadb.EphemeralClient().get_max_batch_size()
    records = [PeerRecord(f"r{i}", f"filler memory number {i}") for i in range(limit + 7)]
    records[-1] = PeerRecord("last", "zebra crossing")
    peer = factory(HashEmbedder())
    try:
        peer.add(records)
        # Every slice landed: the last record is found by both of its words.
        assert "last" in peer.search("zebra crossing", 10)
    finally:
        peer.close()
