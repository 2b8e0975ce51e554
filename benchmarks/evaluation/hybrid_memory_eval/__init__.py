"""The evaluation harness behind ``hybrid-memory eval``, and the peers it measures against.

Not part of the store: a distribution of its own, ``hybrid-memory-eval``
(``benchmarks/evaluation`` in the repository), which the core never imports; its
``hybrid-memory eval`` and ``hybrid-memory peers`` commands reach the ``hybrid-memory``
command through the ``hybrid_memory.commands`` entry points. It runs the protocol of
the shared evaluation data on any folder in its format
(:mod:`~hybrid_memory_eval.datasets`), scores with nDCG@k, Recall@5, Recall@k and MRR@k
(:mod:`~hybrid_memory_eval.metrics`), and reports each system's figures and query latency p50::

    from hybrid_memory_eval import evaluate, format_report, load_dataset

    report = evaluate(load_dataset("../shared/data/locomo"), peers=True)
    report["ndcg@10"], report["recall@10"], report["p50_ms"], report["peers"]
    print(format_report(report))

or from the shell::

    hybrid-memory eval ../shared/data/locomo --json
    hybrid-memory eval ../shared/data/cranfield --sweep alpha=0.3,0.5,0.7 --peers

Modules: ``datasets`` (reading a dataset folder), ``metrics`` (pure ranking metrics),
``runs`` (one system over a dataset), ``report`` (scores and the text report),
``harness`` (the whole evaluation, sweeps included), ``peers`` (LangChain,
LlamaIndex and plain-RRF retrievers behind one interface; their frameworks are
imported only when a peer is built) and ``foreign`` (mem0 and mcp-memory-service, each
run from a virtual environment of its own by a driver in ``drivers/``, built by
``hybrid-memory peers install``).
"""

from __future__ import annotations

from hybrid_memory_eval.datasets import Dataset, Document, Query, load_dataset
from hybrid_memory_eval.foreign import (
    FOREIGN_PEERS,
    ForeignPeer,
    ForeignPeerError,
    foreign_peer,
)
from hybrid_memory_eval.harness import evaluate, parse_setting, parse_sweep
from hybrid_memory_eval.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from hybrid_memory_eval.peers import (
    PEERS,
    EmbeddingLike,
    Peer,
    PeerRecord,
    langchain_ensemble,
    llama_index_fusion,
    matches_filter,
    peer_text,
    plain_rrf,
    require_frameworks,
)
from hybrid_memory_eval.report import format_report, score_run
from hybrid_memory_eval.runs import (
    QUIET,
    Progress,
    Run,
    build_memory,
    run_memory,
    run_peer,
)

__all__ = [
    "FOREIGN_PEERS",
    "PEERS",
    "QUIET",
    "Dataset",
    "Document",
    "EmbeddingLike",
    "ForeignPeer",
    "ForeignPeerError",
    "Peer",
    "PeerRecord",
    "Progress",
    "Query",
    "Run",
    "build_memory",
    "evaluate",
    "foreign_peer",
    "format_report",
    "langchain_ensemble",
    "llama_index_fusion",
    "load_dataset",
    "matches_filter",
    "mrr_at_k",
    "ndcg_at_k",
    "parse_setting",
    "parse_sweep",
    "peer_text",
    "plain_rrf",
    "recall_at_k",
    "require_frameworks",
    "run_memory",
    "run_peer",
    "score_run",
]
