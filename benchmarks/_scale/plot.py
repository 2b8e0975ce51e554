"""The size curve: search p50/p95 and add-one latency against N, log-log, per system.

Drawn from the report of the run just made (``--plot FILE.png``) or from result JSON
files already written (``--plot FILE.png --from benchmarks/results/scale-*.json``),
without running anything. A result file is one report (``results``: a block per N) or,
in the oldest files, one block (``n``, ``systems``); each block's ``systems`` are its
first round's figures.

When several files measure the same system at the same N (the repeated 100,000 rounds),
only the newest date's runs count and the point is their median, with a bar from their
lowest to their highest: an old run of older code does not pull the curve, and a noisy
round shows as a bar, not as a point that moves. A run whose recorded load average passed
1.5 per CPU (a busy machine) counts only where no quieter run of that date exists, and its
point is then drawn hollow.

The data (:func:`curve_points`) is pure and separate from the drawing (:func:`draw`),
which needs matplotlib (the ``bench`` extra).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .compare import value_at
from .constants import LABELS

#: (figure key, path in a system's result) drawn on the curve.
FIGURES = {
    "search_p50": ("search_ms", "p50"),
    "search_p95": ("search_ms", "p95"),
    "add_one_p50": ("add_one_ms", "p50"),
}


@dataclass(frozen=True)
class Point:
    """One system's figure at one N: the median over the runs that count, and their range."""

    n: int
    median: float
    low: float
    high: float
    runs: int
    busy: bool = False  # a run counted was on a busy machine (see :func:`busy`)


#: A run is busy when the 1-minute load average it recorded passed this many per CPU
#: (the report's own warning uses the same bar).
BUSY_PER_CPU = 1.5


def busy(result: dict[str, Any], cpus: int | None) -> bool:
    """Whether a system's run recorded a load average above :data:`BUSY_PER_CPU` per CPU."""
    loads = [result.get("load_average_start"), result.get("load_average_end")]
    known = [v for v in loads if isinstance(v, (int, float))]
    return bool(known) and max(known) > BUSY_PER_CPU * (cpus or 1)


def blocks_of(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The per-N blocks of a result document, whichever of the two layouts it has."""
    if isinstance(report.get("results"), list):
        return [b for b in report["results"] if isinstance(b, dict)]
    if "n" in report and isinstance(report.get("systems"), dict):
        return [report]
    raise ValueError("not a scale benchmark result: expected 'results' or 'n' and 'systems'")


def curve_points(reports: Iterable[dict[str, Any]]) -> dict[str, dict[str, list[Point]]]:
    """``{figure: {system: [Point, ...] by N}}`` from the given reports (see the module
    docstring for how repeated measurements combine). Systems that failed are left out."""
    # (figure, system, n) -> date -> (value, busy) of each run
    seen: dict[tuple[str, str, int], dict[str, list[tuple[float, bool]]]] = {}
    for report in reports:
        date = str(report.get("date") or "")
        cpus = value_at(report, "machine", "cpus")
        for block in blocks_of(report):
            n = int(block["n"])
            for system, result in block["systems"].items():
                if not isinstance(result, dict) or "error" in result:
                    continue
                for figure, path in FIGURES.items():
                    value = value_at(result, *path)
                    if isinstance(value, (int, float)) and value > 0:
                        by_date = seen.setdefault((figure, system, n), {})
                        run = (float(value), busy(result, cpus))
                        by_date.setdefault(date, []).append(run)
    curves: dict[str, dict[str, list[Point]]] = {figure: {} for figure in FIGURES}
    for (figure, system, n), by_date in sorted(seen.items()):
        runs = by_date[max(by_date)]
        quiet = [run for run in runs if not run[1]]
        runs = quiet or runs  # runs on a busy machine count only when there is no other
        values = [value for value, _ in runs]
        point = Point(
            n,
            statistics.median(values),
            min(values),
            max(values),
            len(values),
            any(was_busy for _, was_busy in runs),
        )
        curves[figure].setdefault(system, []).append(point)
    return curves


def load_reports(paths: Sequence[Path]) -> list[dict[str, Any]]:
    """The result documents at ``paths``; one that is not a scale result is named."""
    reports = []
    for path in paths:
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            blocks_of(report)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"--from {path}: {exc}") from None
        reports.append(report)
    return reports


def _size(n: float) -> str:
    for unit, scale in (("M", 1e6), ("k", 1e3)):
        if n >= scale:
            return f"{n / scale:g}{unit}"
    return f"{n:g}"


def _minor(value: float) -> str:
    """Minor ticks labelled at 2 and 5 of each decade only, so labels never crowd."""
    lead = value / 10 ** int(f"{value:e}".split("e")[1])
    return f"{value:g}" if round(lead) in (2, 5) else ""


def _label(system: str) -> str:
    return LABELS.get(system, system)


def draw(curves: dict[str, dict[str, list[Point]]], out: Path, title: str = "") -> None:
    """Two panels, log-log: search latency (p50 solid, p95 dashed) and add one (p50)."""
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "--plot needs matplotlib: pip install -e '.[bench]' (or pip install matplotlib)"
        ) from None
    matplotlib.use("Agg")  # a file, never a window
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    systems = sorted({s for figure in curves.values() for s in figure})
    if not systems:
        raise SystemExit("--plot: no system with search or add figures in the results given")
    colours = dict(zip(systems, plt.get_cmap("tab10").colors, strict=False))
    fig, (search_ax, add_ax) = plt.subplots(1, 2, figsize=(12, 6), layout="constrained")
    panels = (
        (search_ax, (("search_p50", "-", "o"), ("search_p95", "--", "s")), "search"),
        (add_ax, (("add_one_p50", "-", "o"),), "add one memory (until searchable)"),
    )
    for ax, figures, what in panels:
        for figure, style, marker in figures:
            for system, points in curves[figure].items():
                xs = [p.n for p in points]
                ys = [p.median for p in points]
                spread = [[p.median - p.low for p in points], [p.high - p.median for p in points]]
                colour = colours[system]
                ax.errorbar(xs, ys, yerr=spread, linestyle=style, capsize=3, color=colour)
                for hollow in (False, True):  # a run on a busy machine: a hollow marker
                    picked = [p for p in points if p.busy == hollow]
                    ax.plot(
                        [p.n for p in picked],
                        [p.median for p in picked],
                        linestyle="none",
                        marker=marker,
                        markersize=6,
                        color=colour,
                        markerfacecolor="white" if hollow else colour,
                    )
        ax.set_xscale("log")
        ax.set_yscale("log")
        # Plain numbers, not powers of ten: 1k .. 1M memories, milliseconds as they are.
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _size(v)))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: _minor(v)))
        ax.set_xlabel("memories in the store (N)")
        ax.set_ylabel("milliseconds")
        ax.set_title(what)
        ax.grid(True, which="both", alpha=0.3)
    from matplotlib.lines import Line2D

    key = [Line2D([], [], color=colours[s], linewidth=2, label=_label(s)) for s in systems]
    key += [
        Line2D([], [], color="grey", marker="o", label="p50 (solid)"),
        Line2D([], [], color="grey", marker="s", linestyle="--", label="search p95 (dashed)"),
        Line2D(
            [], [], color="grey", marker="o", markerfacecolor="white", linestyle="none",
            label=f"hollow: run on a busy machine (load > {BUSY_PER_CPU:g} per CPU)",
        ),
    ]  # fmt: skip
    fig.legend(handles=key, loc="outside lower center", ncol=3, fontsize=8, frameon=False)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def plot(reports: Sequence[dict[str, Any]], out: Path) -> dict[str, dict[str, list[Point]]]:
    """Draw the curve of ``reports`` into ``out`` (a PNG); returns the points drawn."""
    curves = curve_points(reports)
    sizes = sorted({p.n for figure in curves.values() for pts in figure.values() for p in pts})
    dates = sorted({str(r.get("date")) for r in reports if r.get("date")})
    span = f"{dates[0]} to {dates[-1]}" if len(dates) > 1 else (dates[0] if dates else "")
    cpus = sorted({str(value_at(r, "machine", "cpus")) for r in reports} - {"None"})
    title = (
        "hybrid-memory scale benchmark (benchmarks/scale.py): k = 10, precomputed vectors, "
        f"{'/'.join(cpus) or '?'} CPUs, N = {', '.join(_size(n) for n in sizes)}\n"
        f"runs of {span}; a point is the median of the newest date's runs, its bar their range"
    )
    draw(curves, out, title)
    return curves


def describe(curves: dict[str, dict[str, list[Point]]], out: Path) -> str:
    """What was drawn, a line per system and figure (printed after drawing)."""
    lines = [f"drew {out}:"]
    for figure, systems in curves.items():
        for system, points in systems.items():
            values = ", ".join(
                f"{p.n:,}: {p.median:.4g} ms" + (f" ({p.runs} runs)" if p.runs > 1 else "")
                for p in points
            )
            lines.append(f"  {figure:<12} {_label(system):<40} {values}")
    return "\n".join(lines)
