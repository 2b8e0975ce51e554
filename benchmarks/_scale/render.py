"""The report as text: one table per N, the ratios, the rounds, the targets, the model."""

from __future__ import annotations

from typing import Any

from .compare import value_at
from .constants import LABELS, K


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        if abs(value) < 0.1 and value:
            return f"{value:.{digits + 2}f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _fmt_ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(
        h.ljust(w) if i == 0 else h.rjust(w)
        for i, (h, w) in enumerate(zip(headers, widths, strict=True))
    )
    out = [line, "  ".join("-" * w for w in widths)]
    for row in rows:
        out.append(
            "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(row, widths, strict=True))
            )
        )
    return "\n".join(out)


def render(report: dict[str, Any]) -> str:
    lines = [
        f"hybrid-memory scale benchmark, {report['date']}, commit {report.get('commit')}, "
        f"{report['machine']['cpus']} CPUs, Python {report['machine']['python']}",
        f"embedding: {report['config']['embedding']} (precomputed lookup; time in embedding "
        f"calls subtracted); k = {K}; {report['config']['queries']} distinct queries",
    ]
    loads = [
        v
        for block in report["results"]
        for r in block["systems"].values()
        for v in (r.get("load_average_start"), r.get("load_average_end"))
        if v is not None
    ]
    if loads and max(loads) > 1.5 * (report["machine"]["cpus"] or 1):
        lines.append(
            f"WARNING: the machine was busy (1-minute load average up to {max(loads):.1f} on "
            f"{report['machine']['cpus']} CPUs): timings are inflated and noisy"
        )
    lines.append("")
    for block in report["results"]:
        lines.append(
            f"N = {block['n']:,}  ({block['data']['mean_chars']} chars/memory on "
            f"average, {block['data']['distinct_tags']} distinct tags)"
        )
        headers = [
            "system",
            "ingest/s",
            "ingest s",
            "add-one p50 ms",
            "search p50 ms",
            "p95 ms",
            "filtered p50",
            "filtered p95",
            "peak RSS MB",
            "RSS growth MB",
            "searchable",
        ]
        rows = []
        for name, r in block["systems"].items():
            if "error" in r:
                rows.append([LABELS[name], r["error"], *[""] * (len(headers) - 2)])
                continue
            rows.append(
                [
                    r["label"],
                    _fmt(value_at(r, "ingest", "rate_per_s"), 0),
                    _fmt(value_at(r, "ingest", "engine_s"), 2),
                    _fmt(value_at(r, "add_one_ms", "p50"), 2),
                    _fmt(value_at(r, "search_ms", "p50"), 2),
                    _fmt(value_at(r, "search_ms", "p95"), 2),
                    _fmt(value_at(r, "search_filtered_ms", "p50"), 2),
                    _fmt(value_at(r, "search_filtered_ms", "p95"), 2),
                    _fmt(value_at(r, "rss_mb", "peak"), 0),
                    _fmt(value_at(r, "rss_mb", "growth"), 0),
                    " ".join(f"{k}={v}" for k, v in r.get("searchable_after_add", {}).items()),
                ]
            )
        lines.append(_table(headers, rows))
        for name, r in block["systems"].items():
            hits = r.get("search_filtered_hits_mean")
            if hits is not None and hits < K:
                lines.append(
                    f"  {LABELS[name]}: a filtered search returned {hits} of the {K} hits "
                    "asked on average (every user has more memories than that)"
                )
            if r.get("add_one_refused"):
                lines.append(
                    f"  {LABELS[name]}: declined {len(r['add_one_refused'])} of the single "
                    f"adds: {r['add_one_refused'][0]['message']}"
                )
        if block["ratios"]:
            lines.append("")
            lines.append("ratios ours/theirs (time: < 1 = hybrid-memory faster)")
            rheaders = [
                "pair",
                "ingest time",
                "add-one p50",
                "search p50",
                "search p95",
                "filtered p95",
                "RSS growth",
            ]
            rrows = [
                [
                    pair,
                    _fmt_ratio(v.get("ingest_time")),
                    _fmt_ratio(v.get("add_one_p50")),
                    _fmt_ratio(v.get("search_p50")),
                    _fmt_ratio(v.get("search_p95")),
                    _fmt_ratio(v.get("filtered_p95")),
                    _fmt_ratio(v.get("peak_rss_growth")),
                ]
                for pair, v in block["ratios"].items()
            ]
            lines.append(_table(rheaders, rrows))
        repeated = block.get("ingest_rounds")
        if repeated:
            lines.append("")
            lines.append(
                f"ingest over {repeated['rounds']} rounds (every system once per round, "
                "each in its own process): seconds per round, and ratios within a round"
            )
            for name, times in repeated["engine_s"].items():
                lines.append(f"  {name:<28} " + "  ".join(_fmt(t, 2) for t in times))
            for pair, v in repeated["ingest_time"].items():
                lines.append(
                    f"  {pair:<28} "
                    + "  ".join(_fmt_ratio(t) for t in v["each"])
                    + f"   median {_fmt_ratio(v['median'])}"
                )
        lines.append("")
        lines.append("targets (issue 5, hybrid-memory on disk; reported, not asserted)")
        for name, t in block["targets"].items():
            mark = {True: "met", False: "NOT met", None: "n/a"}[t["met"]]
            lines.append(f"  {name:<24} {_fmt(t['value'], 3):>10}  goal {t['goal']:<22} {mark}")
        lines.append("")
    model = report.get("model")
    if model:
        lines.append("default embedding model")
        if "error" in model:
            lines.append(f"  {model['error']}")
        else:
            lines.append(
                f"  {model['model']} on {model['device']} ({model['backend']}): "
                f"{model['texts_per_s']:.1f} texts/s at batch {model['batch_size']} "
                f"({model['mean_chars']} chars/text); one query "
                f"p50 {model['query_embed_ms']['p50']:.1f} ms (load average "
                f"{model['load_average_start']}-{model['load_average_end']})"
            )
            e2e = model.get("end_to_end")
            if isinstance(e2e, dict):
                lines.append(
                    f"  end to end at N = {e2e['n']:,} ({e2e['store']}): search incl. query "
                    f"embedding p50 {e2e['search_ms']['p50']:.1f} ms, p95 "
                    f"{e2e['search_ms']['p95']:.1f} ms; repeated query p50 "
                    f"{e2e['repeated_query_ms']['p50']:.2f} ms ("
                    f"{e2e['repeated_queries_embedded']} of them re-embedded)"
                )
            elif e2e:
                lines.append(f"  end to end: {e2e}")
    return "\n".join(lines)
