"""Running one system over a dataset: every judged query searched, its ranking and
latency kept in a :class:`Run`.

A hybrid-memory run stores every corpus line in a fresh in-memory
:class:`~hybrid_memory.HybridMemory` (its text exactly, its tags, metadata, and
timestamp as creation time) and searches each query with its filter and ``now``. A
peer run builds one peer per distinct query filter over the lines that filter selects.
"""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from hybrid_memory import HybridMemory
from hybrid_memory_eval.datasets import Dataset, Query
from hybrid_memory_eval.peers import EmbeddingLike, Peer, PeerRecord, matches_filter

__all__ = [
    "QUIET",
    "Progress",
    "Run",
    "build_memory",
    "run_file_paths",
    "run_memory",
    "run_peer",
    "write_trec_run",
]


class Progress:
    """Counter lines on a stream (stderr): ``label: done/total`` every ``every`` steps."""

    def __init__(self, stream: TextIO | None = sys.stderr, every: int = 100) -> None:
        self.stream = stream
        self.every = max(1, every)

    def message(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def counter(self, label: str, total: int) -> Callable[[int], None]:
        """A callback taking the number done so far; prints at steps and at the end."""
        start = time.perf_counter()
        state = {"printed": 0}

        def update(done: int) -> None:
            if done - state["printed"] < self.every and done != total:
                return
            state["printed"] = done
            elapsed = time.perf_counter() - start
            self.message(f"{label}: {done}/{total} ({elapsed:.1f} s)")

        return update


QUIET = Progress(stream=None)


@dataclass
class Run:
    """The ranked ids a system returned for each query, and each query's latency."""

    name: str
    ranked: dict[str, list[str]] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)


def build_memory(
    dataset: Dataset,
    overrides: Mapping[str, Any] | None = None,
    *,
    embedding: Any = None,
    batch_size: int = 256,
    progress: Progress = QUIET,
) -> HybridMemory:
    """A fresh in-memory store holding every corpus line (text, tags, metadata,
    timestamp as creation time)."""
    documents = dataset.storable()
    memory = HybridMemory(embedding=embedding, **dict(overrides or {}))
    try:
        tick = progress.counter("ingest", len(documents))
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            items: list[dict[str, Any]] = []
            for doc in batch:
                item: dict[str, Any] = {"id": doc.id, "text": doc.text}
                if doc.tags:
                    item["tags"] = list(doc.tags)
                if doc.metadata:
                    item["metadata"] = doc.metadata
                if doc.timestamp is not None:
                    item["created_at"] = doc.timestamp
                items.append(item)
            # Identical texts under different ids are different memories here.
            memory.add_many(items, allow_duplicates=True)
            tick(start + len(batch))
    except BaseException:
        memory.close()
        raise
    return memory


def run_memory(
    memory: HybridMemory,
    dataset: Dataset,
    *,
    k: int = 10,
    progress: Progress = QUIET,
    name: str = "hybrid-memory",
) -> Run:
    """Search every judged query with its filter and ``now``."""
    run = Run(name)
    queries = dataset.judged_queries()
    tick = progress.counter(f"queries ({name})", len(queries))
    for done, query in enumerate(queries, start=1):
        started = time.perf_counter()
        hits = memory.search(query.text, k=k, filter=query.filter, now=query.now)
        run.latencies_ms.append((time.perf_counter() - started) * 1000.0)
        run.ranked[query.id] = [hit.id for hit in hits]
        tick(done)
    return run


def run_peer(
    factory: Callable[[EmbeddingLike], Peer],
    embedding: EmbeddingLike,
    dataset: Dataset,
    *,
    k: int = 10,
    progress: Progress = QUIET,
) -> Run:
    """Run a peer on the dataset: one peer per distinct query filter, built over the
    corpus lines that filter selects (a peer cannot filter both of its legs)."""
    records = [PeerRecord(d.id, d.text, d.tags, d.metadata) for d in dataset.storable()]
    queries = dataset.judged_queries()
    groups: dict[str, list[Query]] = {}
    for query in queries:
        groups.setdefault(json.dumps(query.filter or {}, sort_keys=True), []).append(query)
    run = Run("")
    tick: Callable[[int], None] | None = None
    for key, group in groups.items():
        where = json.loads(key) or None
        subset = [r for r in records if matches_filter(where, r.metadata, r.tags)]
        peer = factory(embedding)
        try:
            if tick is None:
                run.name = peer.name
                tick = progress.counter(f"queries ({peer.name})", len(queries))
            label = f" matching {key}" if where else ""
            progress.message(f"{peer.name}: indexing {len(subset)} records{label}")
            peer.add(subset)
            for query in group:
                started = time.perf_counter()
                ranked = peer.search(query.text, k)
                run.latencies_ms.append((time.perf_counter() - started) * 1000.0)
                run.ranked[query.id] = ranked
                tick(len(run.ranked))
        finally:
            peer.close()
    return run


# --- TREC run files ----------------------------------------------------------------------


def _slug(name: str) -> str:
    """A file-name and run-tag safe form of a system's name."""
    return re.sub(r"[^A-Za-z0-9_.=-]+", "-", name).strip("-") or "system"


def run_file_paths(path: str | Path, names: Sequence[str]) -> dict[str, Path]:
    """Where each system's run goes: the first system (our defaults) at ``path`` itself,
    every other beside it as ``<stem>.<system>.<suffix>`` (``runs.trec`` →
    ``runs.plain-RRF-...trec``), so each file is one run, as trec_eval expects."""
    base = Path(path)
    paths: dict[str, Path] = {}
    for position, name in enumerate(names):
        if position == 0:
            paths[name] = base
        else:
            paths[name] = base.with_name(f"{base.stem}.{_slug(name)}{base.suffix}")
    return paths


def write_trec_run(run: Run, path: str | Path, tag: str) -> None:
    """Write ``run`` in TREC format, ``qid Q0 docid rank score tag`` a line.

    The runs keep only the order, so the score is ``n - rank + 1`` (n = the query's
    number of hits): strictly decreasing, which is all trec_eval uses it for.
    """
    tag = _slug(tag)
    with Path(path).open("w", encoding="utf-8") as handle:
        for query_id, ranked in run.ranked.items():
            distinct = list(dict.fromkeys(ranked))
            for rank, doc_id in enumerate(distinct, start=1):
                score = len(distinct) - rank + 1
                handle.write(f"{query_id} Q0 {doc_id} {rank} {score} {tag}\n")
