"""The whole evaluation behind ``hybrid-memory eval``: our store at its settings, any
sweep of settings, and the peers, on one dataset, as one JSON-ready report.

Every query is searched at k = 10 (by default) and scored with the metrics of
:mod:`hybrid_memory_eval.metrics`, averaged over the queries that have at least
one relevant judgment.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hybrid_memory import HybridMemory, InvalidInputError
from hybrid_memory_eval.datasets import Dataset
from hybrid_memory_eval.foreign import (
    FOREIGN_PEERS,
    ForeignPeerError,
    foreign_peer,
    not_ready_reason,
)
from hybrid_memory_eval.metrics import metric_names
from hybrid_memory_eval.peers import PEERS, EmbeddingLike, require_frameworks
from hybrid_memory_eval.report import (
    add_p_values,
    drop_ids,
    group_queries,
    per_query_scores,
    score_run,
)
from hybrid_memory_eval.runs import (
    QUIET,
    Progress,
    Run,
    build_memory,
    run_file_paths,
    run_memory,
    run_peer,
    write_trec_run,
)
from hybrid_memory_eval.significance import DEFAULT_TRIALS

__all__ = ["evaluate", "parse_setting", "parse_sweep"]

# --- settings from the command line ------------------------------------------------------


def _value(text: str) -> Any:
    """JSON when it parses (numbers, true/false/null, lists), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → (key, value), the value parsed as JSON when possible."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise InvalidInputError("--set", f"expected KEY=VALUE, got {text!r}")
    return key.strip(), _value(raw.strip())


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=v1,v2,...`` → (key, values). A value list given as one JSON array
    (``alpha_values=[[0.5,0.7,0.8],[0.6,0.8,0.9]]``) is taken as it is."""
    key, sep, raw = text.partition("=")
    raw = raw.strip()
    if not sep or not key.strip() or not raw:
        raise InvalidInputError("--sweep", f"expected KEY=v1,v2,..., got {text!r}")
    if raw.startswith("["):
        parsed = _value(raw)
        if not isinstance(parsed, list) or not parsed:
            raise InvalidInputError("--sweep", f"{raw!r} is not a non-empty JSON list")
        return key.strip(), parsed
    return key.strip(), [_value(part.strip()) for part in raw.split(",")]


# --- the whole evaluation ----------------------------------------------------------------


def _sweep_points(sweeps: Sequence[tuple[str, list[Any]]], grid: bool) -> list[dict[str, Any]]:
    if not sweeps:
        return []
    if grid:
        keys = [key for key, _ in sweeps]
        return [
            dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(v for _, v in sweeps))
        ]
    return [{key: value} for key, values in sweeps for value in values]


def _search_view(memory: HybridMemory, point: Mapping[str, Any]) -> HybridMemory | None:
    """The store seen with ``point``'s search settings, or None when ``point`` changes
    something fixed at ingest (tokenizer, embedding model, ...) and needs a new store."""
    try:
        return memory.with_settings(**point)
    except InvalidInputError as exc:
        if exc.field == "with_settings":  # the engine's word for "not a search setting"
            return None
        raise


class _DocumentCache:
    """Reuses document vectors across peers (the same model, so the same vectors);
    queries are always embedded afresh so peer latencies stay honest."""

    def __init__(self, embedder: EmbeddingLike) -> None:
        self._embedder = embedder
        self._vectors: dict[str, list[float]] = {}
        self.name = embedder.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed_documents(missing), strict=True))
        return [self._vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed_query(text)


def _foreign_run(
    name: str, embedding: EmbeddingLike, dataset: Dataset, k: int, progress: Progress
) -> tuple[dict[str, Any], Run | None]:
    """A foreign peer's run; ``({"not_run": why}, None)`` when its venv is not built,
    ``({"failed": error}, None)`` when its driver failed (the other systems' figures
    stand). The dict carries the driver's description (``driver``)."""
    reason = not_ready_reason(name)
    if reason:
        progress.message(f"peer: {name}: not run: {reason}")
        return {"not_run": reason}, None
    progress.message(f"peer: {name}")
    factory = foreign_peer(name)
    try:
        run = run_peer(factory, embedding, dataset, k=k, progress=progress)
    except ForeignPeerError as exc:
        progress.message(f"peer: {name}: failed: {exc}")
        return {"failed": str(exc)}, None
    return {"driver": factory.info}, run


class _Scorer:
    """Scores every system's run the same way and compares it with our defaults'."""

    def __init__(self, dataset: Dataset, k: int, by: str | None, trials: int) -> None:
        self.dataset = dataset
        self.k = k
        self.by = by
        self.trials = trials
        self.runs: dict[str, Run] = {}
        self._reference: dict[str, dict[str, float]] | None = None

    def score(self, label: str, run: Run) -> dict[str, Any]:
        """The run's figures; every run after the first (our defaults) gets p-values."""
        self.runs[label] = run
        result = score_run(run, self.dataset, k=self.k, by=self.by, keep_ids=True)
        scores = per_query_scores(run, self.dataset, k=self.k)
        if self._reference is None:
            self._reference = scores
        else:
            add_p_values(result, self._reference, scores, k=self.k, trials=self.trials)
        return drop_ids(result)


def evaluate(
    dataset: Dataset,
    *,
    k: int = 10,
    overrides: Mapping[str, Any] | None = None,
    sweeps: Sequence[tuple[str, list[Any]]] = (),
    grid: bool = False,
    peers: bool = False,
    embedding: Any = None,
    by: str | None = None,
    run_file: str | Path | None = None,
    trials: int = DEFAULT_TRIALS,
    progress: Progress = QUIET,
) -> dict[str, Any]:
    """Run the protocol; returns the JSON-ready report.

    Top-level keys are our default-or-``overrides`` run (``ndcg@10``, ``recall@5``,
    ``recall@10``, ``mrr@10``, ``p50_ms``, ``n_queries``, ``categories`` when queries
    carry ``metadata.category``), plus ``sweep`` (one entry per swept point, each with
    its ``settings``) and ``peers`` (name → the same metrics) when asked for. The
    foreign peers (mem0, mcp-memory-service: :mod:`~hybrid_memory_eval.foreign`)
    add ``driver`` (library, version, store, search settings); one whose venv is not
    built is ``{"not_run": "no venv at ...; build it with: ..."}``, one whose driver
    failed ``{"failed": "..."}``. The store
    is built once and reused through ``with_settings`` for every search-time point;
    a point that changes an ingest-time setting builds its own store.

    Every peer and sweep point carries ``p_value``: the two-sided paired randomisation
    test (``trials`` seeded sign flips, :mod:`~hybrid_memory_eval.significance`) of
    its per-query nDCG@k against the top-level run's; ``significance`` says so. ``by``
    (a dotted query field, e.g. ``metadata.type``) adds ``groups``: the same figures and
    p-values for each value of that field, on every system. ``run_file`` writes each
    system's ranking as a TREC run (:func:`~hybrid_memory_eval.runs.run_file_paths`
    says where); ``run_files`` maps each system to its file.
    """
    if peers:
        require_frameworks()  # before the long run, not after it
    if by is not None:
        group_queries(dataset, by)  # a mistyped field fails now, not after the long run
    base = dict(overrides or {})
    stored = len(dataset.storable())
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "n_memories": stored,
        "k": k,
        "settings": base,
    }
    if by is not None:
        report["by"] = by
    blank = len(dataset.corpus) - stored
    if blank:
        report["blank_texts_skipped"] = blank
    progress.message(
        f"{dataset.name}: {stored} memories"
        + (f" ({blank} blank corpus lines left out)" if blank else "")
        + f", {len(dataset.judged_queries())} judged queries"
    )
    scorer = _Scorer(dataset, k, by, trials)
    memory = build_memory(dataset, base, embedding=embedding, progress=progress)
    try:
        report.update(
            scorer.score("hybrid-memory", run_memory(memory, dataset, k=k, progress=progress))
        )
        points = _sweep_points(sweeps, grid)
        if points:
            rows: list[dict[str, Any]] = []
            for point in points:
                progress.message(f"sweep: {json.dumps(point)}")
                view = _search_view(memory, point)
                if view is None:  # an ingest-time setting: this point needs its own store
                    same_model = not {"embedding_model", "embedding_batch_size"} & set(point)
                    rebuilt = build_memory(
                        dataset,
                        base | point,
                        # the loaded model serves the new store too, unless it is the point
                        embedding=memory.embedder if same_model else embedding,
                        progress=progress,
                    )
                    try:
                        run = run_memory(rebuilt, dataset, k=k, progress=progress)
                    finally:
                        rebuilt.close()
                else:
                    run = run_memory(view, dataset, k=k, progress=progress)
                label = "sweep " + " ".join(f"{key}={json.dumps(v)}" for key, v in point.items())
                rows.append({"settings": point, **scorer.score(label, run)})
            report["sweep"] = rows
        if peers:
            cached = _DocumentCache(memory.embedder)
            report["peers"] = {}
            for name, factory in PEERS.items():
                progress.message(f"peer: {name}")
                run = run_peer(factory, cached, dataset, k=k, progress=progress)
                report["peers"][name] = scorer.score(name, run)
            for name in FOREIGN_PEERS:
                outcome, foreign_run = _foreign_run(name, cached, dataset, k, progress)
                if foreign_run is not None:
                    outcome = {**scorer.score(name, foreign_run), **outcome}
                report["peers"][name] = outcome
    finally:
        memory.close()
    if len(scorer.runs) > 1:
        report["significance"] = {
            "metric": metric_names(k)[0],
            "test": f"two-sided paired randomisation test, {trials} sign flips, seed 0",
        }
    if run_file is not None:
        paths = run_file_paths(run_file, list(scorer.runs))
        for label, path in paths.items():
            write_trec_run(scorer.runs[label], path, label)
        report["run_files"] = {label: str(path) for label, path in paths.items()}
    return report
