"""From runs to figures: mean metrics per system and per category, and the text report."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hybrid_memory.evaluation.datasets import Dataset
from hybrid_memory.evaluation.metrics import metric_names, mrr_at_k, ndcg_at_k, recall_at_k
from hybrid_memory.evaluation.runs import Run

__all__ = ["format_report", "score_run"]


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def score_run(run: Run, dataset: Dataset, *, k: int = 10) -> dict[str, Any]:
    """Mean metrics of a run over its queries, p50 latency, and per-category means."""
    ndcg, r5, rk, mrr = metric_names(k)
    per_query: dict[str, dict[str, float]] = {}
    for query_id, ranked in run.ranked.items():
        judged = dataset.qrels.get(query_id, {})
        per_query[query_id] = {
            ndcg: ndcg_at_k(ranked, judged, k),
            r5: recall_at_k(ranked, judged, min(5, k)),
            rk: recall_at_k(ranked, judged, k),
            mrr: mrr_at_k(ranked, judged, k),
        }

    def means(ids: Iterable[str]) -> dict[str, Any]:
        rows = [per_query[i] for i in ids]
        out: dict[str, Any] = {
            name: _mean([row[name] for row in rows]) for name in (ndcg, r5, rk, mrr)
        }
        out["n_queries"] = len(rows)
        return out

    result = means(per_query)
    result["p50_ms"] = round(statistics.median(run.latencies_ms), 2) if run.latencies_ms else 0.0
    by_category: dict[str, list[str]] = {}
    for query in dataset.queries:
        if query.id in per_query and query.category is not None:
            by_category.setdefault(query.category, []).append(query.id)
    if by_category:
        result["categories"] = {
            name: means(by_category[name]) for name in sorted(by_category, key=_natural)
        }
    return result


def _natural(name: str) -> tuple[int, float, str]:
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(
            str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _figures(result: Mapping[str, Any], k: int) -> list[str]:
    return [f"{result[name]:.3f}" for name in metric_names(k)] + [f"{result['p50_ms']:.1f}"]


def _driver_line(name: str, driver: Mapping[str, Any]) -> str:
    """``mem0: mem0ai 2.2.1, chroma 1.5.9, <search settings>`` for a foreign peer."""
    rest = [str(v) for key, v in driver.items() if key not in {"library", "version"}]
    head = " ".join(str(driver[key]) for key in ("library", "version") if key in driver)
    return f"{name}: " + ", ".join([head, *rest] if head else rest)


def format_report(report: Mapping[str, Any]) -> str:
    """The human-readable report: a table of systems, a per-category table, sweeps."""
    k = int(report["k"])
    names = metric_names(k)
    header = ["system", *[n.replace("recall", "R") for n in names], "p50 ms"]
    settings = ", ".join(f"{key}={value!r}" for key, value in report["settings"].items())
    out = [
        f"dataset {report['dataset']}: {report['n_memories']} memories"
        + (
            f" ({report['blank_texts_skipped']} blank lines left out)"
            if report.get("blank_texts_skipped")
            else ""
        )
        + ", "
        f"{report['n_queries']} queries, k={k}, settings: {settings or 'defaults'}",
        "",
    ]
    systems: list[tuple[str, Mapping[str, Any]]] = [("hybrid-memory", report)]
    # A peer that did not run (its venv is not built) or failed has no figures: it gets
    # a line under the table saying why, never a silent gap.
    absent: list[str] = []
    for name, res in report.get("peers", {}).items():
        if "not_run" in res:
            absent.append(f"{name}: not run: {res['not_run']}")
        elif "failed" in res:
            absent.append(f"{name}: failed: {res['failed']}")
        else:
            systems.append((name, res))
    out.append(_table(header, [[name, *_figures(res, k)] for name, res in systems]))
    out += [_driver_line(name, res["driver"]) for name, res in systems if res.get("driver")]
    out += absent
    if "categories" in report:
        categories = list(report["categories"])
        cat_header = ["category", "n", *[f"{name} nDCG/R@{k}" for name, _ in systems]]
        cat_rows = []
        for cat in categories:
            row = [cat, str(report["categories"][cat]["n_queries"])]
            for _, res in systems:
                figures = res.get("categories", {}).get(cat)
                row.append(f"{figures[names[0]]:.3f}/{figures[names[2]]:.3f}" if figures else "-")
            cat_rows.append(row)
        out += ["", _table(cat_header, cat_rows)]
    if report.get("sweep"):
        keys = list(dict.fromkeys(key for row in report["sweep"] for key in row["settings"]))
        sweep_header = [*keys, *header[1:]]
        sweep_rows = [
            [json.dumps(row["settings"][key]) if key in row["settings"] else "" for key in keys]
            + _figures(row, k)
            for row in report["sweep"]
        ]
        base = ["(base)"] + [""] * (len(keys) - 1) + _figures(report, k)
        out += [
            "",
            "sweep (rows on the base store reuse its cached query vectors: their p50 "
            "compares with each other, not with the base):",
            _table(sweep_header, [base, *sweep_rows]),
        ]
    return "\n".join(out)
