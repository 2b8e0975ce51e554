"""The workers: one system (or the default embedding model) measured on the prepared
data in a fresh process."""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from .constants import (
    CHROMA_DISK,
    CHROMA_LAYOUT,
    FILTER_USERS,
    INGEST_BLOCK,
    INGEST_BLOCKS_AT_LEAST,
    LABELS,
    OURS_DISK,
    PEER_SYSTEMS,
    PEER_TEXT_SYSTEMS,
)
from .data import load_prepared
from .embedding import HashingEmbedding, TableEmbedding
from .foreign import ForeignSystem
from .measure import Rss, dir_mb, percentiles
from .systems import Ours, System, build_system, import_system
from .turns import Alone, Turns

# Queries per turn of a paired run (:mod:`_scale.turns`): a fraction of a second each.
BLOCK = 10


def _timed_search(
    system: System, embedding: TableEmbedding, query: str, where: dict[str, Any] | None = None
) -> tuple[float, float, list[str]]:
    """(wall ms, ms excluding the embedding calls made inside, ids) of one search; for
    a system timed in its own process, the second is the time it measured there."""
    before = embedding.seconds
    start = time.perf_counter()
    ids = system.search(query, where)
    wall = time.perf_counter() - start
    inside = system.library_seconds()
    if inside is not None:
        return wall * 1e3, inside * 1e3, ids
    return wall * 1e3, (wall - (embedding.seconds - before)) * 1e3, ids


def search_stages(system: System, queries: list[str]) -> dict[str, float]:
    """Mean ms per search spent in each stage and part of a search over ``queries``
    (``hybrid_memory.testing.SEARCH_STAGES`` and ``SEARCH_PARTS``, timed by wrapping
    them for one more pass: ``search_stages_ms`` is each question's second search, with
    what the first left in the caches and in the index's memory of ids;
    ``search_stages_first_ms`` questions never asked before), and the rest of the total
    (the stages' time subtracted, their parts' not). The wrappers cost a little; the
    figures explain the total, they do not replace it."""
    from hybrid_memory.testing import SEARCH_STAGES, timed_search_stages

    with timed_search_stages() as spent:
        for query in queries:
            system.search(query)
    out = {label: round(seconds / len(queries) * 1e3, 3) for label, seconds in spent.items()}
    out["rest (fusion, orchestration)"] = round(
        out["total"] - sum(out[label] for label, *_ in SEARCH_STAGES if label != "total"), 3
    )
    return out


def ingest_blocks(count: int, name: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` of each block a system's ingest of ``count`` memories goes
    in (:data:`INGEST_BLOCK`; at least :data:`INGEST_BLOCKS_AT_LEAST`, so small runs
    have several too). A peer takes them all in one call: LangChain's and LlamaIndex's
    BM25 retrievers rebuild their whole index on every add."""
    if name in PEER_SYSTEMS or count == 0:
        return [(0, count)]
    size = max(1, min(INGEST_BLOCK, -(-count // INGEST_BLOCKS_AT_LEAST)))
    return [(start, min(start + size, count)) for start in range(0, count, size)]


def fillers(store: list[dict[str, Any]], turn: int, count: int) -> list[dict[str, Any]]:
    """``count`` new memories for the ``turn``-th timed add's spacing: the store's
    records again, each with an id and a text of its own (not a duplicate)."""
    out = []
    for j in range(count):
        record = store[(turn * count + j) % len(store)]
        out.append({**record, "id": f"filler-{turn}-{j}", "text": f"{record['text']} ({turn}.{j})"})
    return out


def run_worker(
    name: str,
    workdir: Path,
    adds: int,
    turns: Turns | Alone | None = None,
    keep: Path | None = None,
) -> dict[str, Any]:
    """Measure one system on the prepared data, in this (fresh) process; with ``turns``,
    one block at a time, taking turns with the other workers of a paired run. With
    ``keep``, the system's store is moved there when done (``<keep>/<name>-<n>``), to be
    profiled afterwards; else it is deleted."""
    turns = turns or Alone()
    data, matrix, keys = load_prepared(workdir, peer=name in PEER_TEXT_SYSTEMS)
    embedding = TableEmbedding(keys, matrix, HashingEmbedding().embed_array, name=data["embedding"])
    store, extra = data["store"], data["extra"][:adds]
    warmup, queries = data["warmup"], data["queries"]
    import_system(name)
    rss = Rss()
    scratch = Path(tempfile.mkdtemp(prefix=f"scale-{name}-"))
    result: dict[str, Any] = {"system": name, "label": LABELS[name], "n": len(store)}
    # Other work on the machine distorts every figure: keep the evidence with them.
    result["load_average_start"] = round(os.getloadavg()[0], 2)
    try:
        gc.collect()
        baseline = Rss.current_mb()
        rss.reset_peak()

        with turns.turn():
            start = time.perf_counter()
            system = build_system(name, embedding, scratch)
            result["open_s"] = round(time.perf_counter() - start, 3)
        foreign = isinstance(system, ForeignSystem)
        if foreign:
            # The store lives in the driver's process: its memory is the figure, from
            # there, with the library imported and an empty store open as the baseline.
            baseline = system.rss(reset=True)["current_mb"]
            result["peer"] = system.info

        embedding.seconds = 0.0
        ingest_wall = 0.0
        ingest_inside = 0.0  # what a system timed in its own process says it spent
        blocks = ingest_blocks(len(store), name)
        for position, (begin, end) in enumerate(blocks):
            with turns.turn():
                start = time.perf_counter()
                system.ingest(store[begin:end])
                ingest_wall += time.perf_counter() - start
                ingest_inside += system.library_seconds() or 0.0
                if position == len(blocks) - 1:
                    # Work deferred to the first search (LlamaIndex builds its BM25 index
                    # there) belongs to the ingest: first search minus a repeat of it.
                    first, _, _ = _timed_search(system, embedding, warmup[0])
                    again, _, _ = _timed_search(system, embedding, warmup[0])
        embed_seconds = embedding.seconds
        settle = max(0.0, first - again) / 1e3
        wasted = getattr(system, "failed_attempt_s", 0.0)
        ingest_engine = ingest_wall - wasted - embed_seconds + settle
        if foreign:  # the library's own time: no pipe, no JSON, no embedding lookups
            ingest_engine = ingest_inside + settle
        result["ingest"] = {
            "blocks": len(blocks),
            "calls": getattr(system, "ingest_calls", len(blocks)),
            "failed_attempt_s": round(wasted, 3),
            "wall_s": round(ingest_wall, 3),
            "embedding_calls_s": round(embed_seconds, 3),
            "first_search_settle_s": round(settle, 3),
            "engine_s": round(ingest_engine, 3),
            "rate_per_s": round(len(store) / ingest_engine, 1),
            "peak_rss_mb": system.rss()["peak_mb"] if foreign else Rss.peak_mb(),
        }
        result["count_after_ingest"] = system.count()

        with turns.turn():
            for query in warmup:
                system.search(query)
                if system.filterable:
                    system.search(query, {"user": "user-00"})

        # add one: the call, plus whatever the next search still has to do for it
        add_ms, settle_ms, total_ms = [], [], []
        found: dict[str, int] = {}
        missed: list[dict[str, Any]] = []  # where each memory not found ranks
        applicable: dict[str, int] = {}  # the tag leg: only memories that have tags
        # A disk store's single add costs more the further Chroma is into its write
        # cycle (CHROMA_SYNC_CYCLE: 9.5 -> 19 ms at 100,000 memories), and where each
        # system's ingest left that cycle is chance (at a million, one run timed Chroma
        # alone's adds just after a persist and hybrid-memory's 640 records into the
        # cycle). So before each timed add, a batch of filler memories (not timed, then
        # a warm-up question, not timed either, for any work the batch left) moves the
        # cycle on: the timed adds sample it evenly, for every system alike.
        spacing = system.write_cycle // len(extra) - 1 if extra and system.write_cycle else 0
        for i, memory in enumerate(extra):
            with turns.turn():
                if spacing > 0:
                    system.ingest(fillers(store, i, spacing))
                    system.search(warmup[i % len(warmup)])  # what the batch left to do
                start = time.perf_counter()
                system.add_one(memory)
                add = (time.perf_counter() - start) * 1e3
                inside = system.library_seconds()
                if inside is not None:
                    add = inside * 1e3
                first, _, _ = _timed_search(system, embedding, memory["text"])
                again, _, _ = _timed_search(system, embedding, memory["text"])
                checked = system.found_by(memory)
                if not checked["top10"]:
                    missed.append(system.miss_detail(memory))
            settle = max(0.0, first - again)
            add_ms.append(add)
            settle_ms.append(settle)
            total_ms.append(add + settle)
            for leg, ok in checked.items():
                found[leg] = found.get(leg, 0) + int(ok)
                applicable[leg] = applicable.get(leg, 0) + 1
        result["add_spacing"] = max(spacing, 0)  # filler memories before each timed add
        result["add_one_ms"] = percentiles(total_ms)
        result["add_call_ms"] = percentiles(add_ms)
        result["add_settle_ms"] = percentiles(settle_ms)
        result["searchable_after_add"] = {leg: f"{c}/{applicable[leg]}" for leg, c in found.items()}
        result["missed_after_add"] = missed

        wall_ms, engine_ms = [], []
        for start in range(0, len(queries), BLOCK):
            with turns.turn():
                for query in queries[start : start + BLOCK]:
                    wall, engine, _ = _timed_search(system, embedding, query)
                    wall_ms.append(wall)
                    engine_ms.append(engine)
        result["search_ms"] = percentiles(engine_ms)
        result["search_wall_ms"] = percentiles(wall_ms)
        with turns.turn():  # every worker takes this turn, to keep the ring in step
            if isinstance(system, Ours):
                result["search_stages_ms"] = search_stages(system, queries)
                if data["stage_queries"]:
                    result["search_stages_first_ms"] = search_stages(system, data["stage_queries"])
                # Which path ranked the keyword leg (compiled loops or numpy, and why).
                from hybrid_memory.testing import keyword_leg_path

                result["keyword_leg"] = keyword_leg_path()
        filtered, filtered_hits = [], []
        for start in range(0, len(queries), BLOCK):
            with turns.turn():
                for i in range(start, min(start + BLOCK, len(queries))):
                    if system.filterable:
                        where = {"user": f"user-{i % FILTER_USERS:02d}"}
                        _, spent, ids = _timed_search(system, embedding, queries[i], where)
                        filtered.append(spent)
                        filtered_hits.append(len(ids))
        if system.filterable:
            result["search_filtered_ms"] = percentiles(filtered)
            # Hits each filtered search returned, K asked (every user has hundreds of
            # memories): fewer means a filter applied after a top-k cut lost some.
            result["search_filtered_hits_mean"] = round(
                sum(filtered_hits) / max(1, len(filtered_hits)), 2
            )
        result["count"] = system.count()
        peak = system.rss()["peak_mb"] if foreign else Rss.peak_mb()
        if foreign:  # single adds the library declined (not stored)
            result["add_one_refused"] = system.refused
        result["rss_mb"] = {
            "baseline": baseline,
            "peak": peak,
            "growth": round(peak - baseline, 1),
            "peak_reset_at_baseline": rss.resettable,
            "process": "the peer's driver" if foreign else "this worker",
        }
        result["embedding_fallback_texts"] = embedding.fallback_texts
        result["load_average_end"] = round(os.getloadavg()[0], 2)
        with turns.turn():
            system.close()
            if name in (OURS_DISK, CHROMA_DISK, CHROMA_LAYOUT):
                result["disk_mb"] = dir_mb(scratch)
    finally:
        if keep is not None and scratch.exists():
            keep.mkdir(parents=True, exist_ok=True)
            target, again = keep / f"{name}-{len(store)}", 1
            while target.exists():  # a later round's store beside the first's
                again += 1
                target = keep / f"{name}-{len(store)}-{again}"
            shutil.move(str(scratch), str(target))
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    return result


def run_model_worker(
    workdir: Path, batch_size: int | None, backend: str = "onnxruntime"
) -> dict[str, Any]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from hybrid_memory import HybridMemorySettings
    from hybrid_memory.testing import default_embedder, sentence_transformers_embedder

    settings = HybridMemorySettings()
    batch = batch_size or settings.embedding_batch_size
    models: dict[int, Any] = {}

    def new_model(size: int) -> Any:
        if backend == "sentence-transformers":  # the backend before onnxruntime, same files
            return sentence_transformers_embedder(size)
        return default_embedder(size, settings.cache_dir)

    data, matrix, keys = load_prepared(workdir, peer=False)
    texts = [m["text"] for m in data["store"][:1024]]

    def encode(batch_texts: list[str], size: int = batch) -> np.ndarray:
        # One embedder per batch size (they share the cached graph), as the store runs it.
        if size not in models:
            models[size] = new_model(size)
        return models[size].embed_matrix(batch_texts)

    load_start = round(os.getloadavg()[0], 2)
    encode(texts[:batch])  # warm-up (loads the model)
    start = time.perf_counter()
    encode(texts)
    throughput = len(texts) / (time.perf_counter() - start)
    single = []
    for query in data["warmup"] + data["queries"][:50]:
        start = time.perf_counter()
        encode([query], 1)
        single.append((time.perf_counter() - start) * 1e3)
    result: dict[str, Any] = {
        "model": settings.embedding_model,
        "device": "cpu",
        "backend": backend,
        "batch_size": batch,
        "texts": len(texts),
        "mean_chars": round(statistics.fmean(len(t) for t in texts)),
        "texts_per_s": round(throughput, 1),
        "query_embed_ms": percentiles(single[5:]),
        "load_average_start": load_start,
        "load_average_end": round(os.getloadavg()[0], 2),
    }

    # End to end: the on-disk store at N, documents with the cheap vectors (same
    # dimension, so the engine's cost is the same), every query embedded by the model.
    if matrix.shape[1] != encode(["dimension"]).shape[1]:
        result["end_to_end"] = "skipped: model dimension differs from the cheap embedding"
        return result
    embedding = TableEmbedding(
        keys[: len(data["store"]) + len(data["extra"])],  # the memories' texts, not the queries
        matrix,
        encode,
        name=settings.embedding_model,
    )
    scratch = Path(tempfile.mkdtemp(prefix="scale-model-"))
    try:
        system = Ours(embedding, scratch / "store")
        system.ingest(data["store"])
        for query in data["warmup"]:
            system.search(query)
        first, repeat = [], []
        for query in data["queries"]:
            start = time.perf_counter()
            system.search(query)
            first.append((time.perf_counter() - start) * 1e3)
        embedded_before = embedding.fallback_texts
        for query in data["queries"]:
            start = time.perf_counter()
            system.search(query)
            repeat.append((time.perf_counter() - start) * 1e3)
        repeat_embedded = embedding.fallback_texts - embedded_before
        system.close()
        result["end_to_end"] = {
            "n": len(data["store"]),
            "store": "disk",
            "search_ms": percentiles(first),
            "repeated_query_ms": percentiles(repeat),
            # how many repeated queries reached the model (0: the query cache served all)
            "repeated_queries_embedded": repeat_embedded,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result
