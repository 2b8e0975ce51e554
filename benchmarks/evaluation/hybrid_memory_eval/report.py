"""From runs to figures: mean metrics per system, per category and per group of a query
field (``--by``), p-values against our defaults, and the text report."""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hybrid_memory import InvalidInputError
from hybrid_memory_eval.datasets import Dataset, Query
from hybrid_memory_eval.metrics import metric_names, mrr_at_k, ndcg_at_k, recall_at_k
from hybrid_memory_eval.runs import Run
from hybrid_memory_eval.significance import paired_randomisation_test

__all__ = [
    "NO_VALUE",
    "add_p_values",
    "drop_ids",
    "format_report",
    "group_queries",
    "per_query_scores",
    "query_field",
    "score_run",
]

#: The group of the queries that lack the ``--by`` field.
NO_VALUE = "(none)"


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def per_query_scores(run: Run, dataset: Dataset, *, k: int = 10) -> dict[str, dict[str, float]]:
    """Each query's nDCG@k, Recall@5, Recall@k and MRR@k, by query id."""
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
    return per_query


_QUERY_FIELDS = ("id", "text", "filter", "now", "metadata")


def query_field(query: Query, path: str) -> str:
    """The value at a dotted ``path`` of a query line (``metadata.type``, ``now``,
    ``filter.conversation``), as text; :data:`NO_VALUE` when the query lacks it."""
    head, *rest = path.split(".")
    if head not in _QUERY_FIELDS or not all(rest):
        raise InvalidInputError(
            "--by",
            f"{path!r} is not a query field: expected one of {', '.join(_QUERY_FIELDS)}, "
            "optionally followed by .key (e.g. metadata.type)",
        )
    value: Any = getattr(query, head)
    for key in rest:
        if not isinstance(value, Mapping) or key not in value:
            return NO_VALUE
        value = value[key]
    if value is None:
        return NO_VALUE
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def group_queries(dataset: Dataset, path: str) -> dict[str, list[str]]:
    """The judged queries' ids grouped by their value of ``path``, groups in natural order.

    Raises ``InvalidInputError`` when no judged query has the field (a typo, most likely).
    """
    groups: dict[str, list[str]] = {}
    for query in dataset.judged_queries():
        groups.setdefault(query_field(query, path), []).append(query.id)
    if set(groups) <= {NO_VALUE}:
        raise InvalidInputError("--by", f"no judged query has the field {path!r}")
    return {name: groups[name] for name in sorted(groups, key=_natural)}


def _significance(
    ours: Mapping[str, Mapping[str, float]],
    theirs: Mapping[str, Mapping[str, float]],
    ids: Sequence[str],
    metric: str,
    trials: int,
) -> float:
    paired = [i for i in ids if i in ours and i in theirs]
    if not paired:
        return 1.0
    return round(
        paired_randomisation_test(
            [ours[i][metric] for i in paired], [theirs[i][metric] for i in paired], trials=trials
        ),
        4,
    )


def add_p_values(
    result: dict[str, Any],
    ours: Mapping[str, Mapping[str, float]],
    theirs: Mapping[str, Mapping[str, float]],
    *,
    k: int,
    trials: int,
) -> None:
    """Put on a system's ``result`` the p-value of its nDCG@k against our defaults'
    (``p_value``), overall and in each of its ``categories`` and ``groups``."""
    metric = metric_names(k)[0]
    result["p_value"] = _significance(ours, theirs, list(theirs), metric, trials)
    for key in ("categories", "groups"):
        for figures in result.get(key, {}).values():
            figures["p_value"] = _significance(ours, theirs, figures["ids"], metric, trials)


def drop_ids(result: dict[str, Any]) -> dict[str, Any]:
    """The result without the query ids its groups carried for the p-values."""
    for key in ("categories", "groups"):
        for figures in result.get(key, {}).values():
            figures.pop("ids", None)
    return result


def score_run(
    run: Run,
    dataset: Dataset,
    *,
    k: int = 10,
    by: str | None = None,
    keep_ids: bool = False,
) -> dict[str, Any]:
    """Mean metrics of a run over its queries, p50 latency, per-category means, and
    with ``by`` (a dotted query field) the means of each group of queries sharing its
    value (``groups``). ``keep_ids`` keeps each category's and group's query ids
    (``ids``), which :func:`add_p_values` needs; :func:`drop_ids` drops them."""
    per_query = per_query_scores(run, dataset, k=k)
    ndcg, r5, rk, mrr = metric_names(k)

    def means(ids: Iterable[str], with_ids: bool = False) -> dict[str, Any]:
        present = [i for i in ids if i in per_query]
        rows = [per_query[i] for i in present]
        out: dict[str, Any] = {
            name: _mean([row[name] for row in rows]) for name in (ndcg, r5, rk, mrr)
        }
        out["n_queries"] = len(rows)
        if with_ids:
            out["ids"] = present
        return out

    result = means(per_query)
    result["p50_ms"] = round(statistics.median(run.latencies_ms), 2) if run.latencies_ms else 0.0
    by_category: dict[str, list[str]] = {}
    for query in dataset.queries:
        if query.id in per_query and query.category is not None:
            by_category.setdefault(query.category, []).append(query.id)
    if by_category:
        result["categories"] = {
            name: means(by_category[name], keep_ids) for name in sorted(by_category, key=_natural)
        }
    if by is not None:
        result["groups"] = {
            name: means(ids, keep_ids) for name, ids in group_queries(dataset, by).items()
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


def _p(result: Mapping[str, Any]) -> str:
    """The p-value column: blank for our defaults (the reference), else 3 decimals."""
    if "p_value" not in result:
        return "-"
    p = float(result["p_value"])
    return "<0.001" if p < 0.001 else f"{p:.3f}"


def _group_table(
    systems: Sequence[tuple[str, Mapping[str, Any]]], key: str, group: str, k: int
) -> str:
    names = metric_names(k)
    header = ["system", *[n.replace("recall", "R") for n in names], "p"]
    rows = []
    for name, res in systems:
        figures = res.get(key, {}).get(group)
        if figures:
            rows.append([name, *[f"{figures[n]:.3f}" for n in names], _p(figures)])
    return _table(header, rows)


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
    compared = any("p_value" in res for res in report.get("peers", {}).values())
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
    if compared:
        out.append(
            _table(
                [*header, f"p ({names[0]})"],
                [[name, *_figures(res, k), _p(res)] for name, res in systems],
            )
        )
        significance = report.get("significance", {})
        out.append(
            f"p: {significance.get('test', 'paired randomisation test')} of each system's "
            f"per-query {names[0]} against hybrid-memory's"
        )
    else:
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
    if "groups" in report:
        swept = [(f"sweep {json.dumps(row['settings'])}", row) for row in report.get("sweep", [])]
        for group, figures in report["groups"].items():
            out += [
                "",
                f"{report['by']} = {group} ({figures['n_queries']} queries):",
                _group_table([*systems, *swept], "groups", group, k),
            ]
    if report.get("sweep"):
        keys = list(dict.fromkeys(key for row in report["sweep"] for key in row["settings"]))
        sweep_header = [*keys, *header[1:], f"p ({names[0]})"]
        sweep_rows = [
            [json.dumps(row["settings"][key]) if key in row["settings"] else "" for key in keys]
            + _figures(row, k)
            + [_p(row)]
            for row in report["sweep"]
        ]
        base = ["(base)"] + [""] * (len(keys) - 1) + _figures(report, k) + ["-"]
        out += [
            "",
            "sweep (rows on the base store reuse its cached query vectors: their p50 "
            "compares with each other, not with the base):",
            _table(sweep_header, [base, *sweep_rows]),
        ]
    return "\n".join(out)
