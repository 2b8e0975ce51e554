"""Comparing the systems of one run: ratios ours/theirs, ingest over repeated rounds,
and issue 5's targets (reported, never asserted)."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

from .constants import (
    CHROMA_DISK,
    CHROMA_LAYOUT,
    CHROMA_MEMORY,
    FOREIGN_SYSTEMS,
    LANGCHAIN,
    LLAMAINDEX,
    OURS,
    OURS_DISK,
    OURS_MEMORY,
    PEER_SYSTEMS,
)


def _ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b is None or b == 0:
        return None
    return round(a / b, 3)


def value_at(result: dict[str, Any] | None, *path: str) -> Any:
    value: Any = result
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def compare(systems: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ratios ours/theirs from one run (time ratios: < 1 means hybrid-memory is faster)."""
    ratios: dict[str, Any] = {}
    for ours in OURS:
        if ours not in systems or "error" in systems[ours]:
            continue
        mine = systems[ours]
        chroma = CHROMA_DISK if ours == OURS_DISK else CHROMA_MEMORY
        if chroma in systems:
            ratios[f"{ours}/{chroma}"] = {
                "ingest_time": _ratio(
                    value_at(mine, "ingest", "engine_s"),
                    value_at(systems[chroma], "ingest", "engine_s"),
                ),
                "search_p50": _ratio(
                    value_at(mine, "search_ms", "p50"),
                    value_at(systems[chroma], "search_ms", "p50"),
                ),
            }
        if ours == OURS_DISK and CHROMA_LAYOUT in systems:
            ratios[f"{ours}/{CHROMA_LAYOUT}"] = {
                "ingest_time": _ratio(
                    value_at(mine, "ingest", "engine_s"),
                    value_at(systems[CHROMA_LAYOUT], "ingest", "engine_s"),
                ),
            }
        for peer in PEER_SYSTEMS + FOREIGN_SYSTEMS:
            if peer not in systems or "error" in systems[peer]:
                continue
            theirs = systems[peer]
            ratios[f"{ours}/{peer}"] = {
                "ingest_time": _ratio(
                    value_at(mine, "ingest", "engine_s"), value_at(theirs, "ingest", "engine_s")
                ),
                "add_one_p50": _ratio(
                    value_at(mine, "add_one_ms", "p50"), value_at(theirs, "add_one_ms", "p50")
                ),
                "search_p50": _ratio(
                    value_at(mine, "search_ms", "p50"), value_at(theirs, "search_ms", "p50")
                ),
                "search_p95": _ratio(
                    value_at(mine, "search_ms", "p95"), value_at(theirs, "search_ms", "p95")
                ),
                "filtered_p95": _ratio(
                    value_at(mine, "search_filtered_ms", "p95"),
                    value_at(theirs, "search_filtered_ms", "p95"),
                ),
                "peak_rss_growth": _ratio(
                    value_at(mine, "rss_mb", "growth"), value_at(theirs, "rss_mb", "growth")
                ),
            }
    return ratios


def ingest_rounds(rounds: list[dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Ingest over repeated rounds: each system's time per round and, for hybrid-memory
    against Chroma, the ratio within each round (the two ran one after the other) and
    its median. Chroma's own add alone moves by several percent between processes."""
    names = [n for n in rounds[0] if all(n in r and "error" not in r[n] for r in rounds)]
    engine_s = {n: [value_at(r[n], "ingest", "engine_s") for r in rounds] for n in names}
    pairs: dict[str, Any] = {}
    for ours, chroma in ((OURS_DISK, CHROMA_DISK), (OURS_MEMORY, CHROMA_MEMORY)):
        for theirs in (chroma, CHROMA_LAYOUT) if ours == OURS_DISK else (chroma,):
            if ours in engine_s and theirs in engine_s:
                each = [_ratio(a, b) for a, b in zip(engine_s[ours], engine_s[theirs], strict=True)]
                known = [v for v in each if v is not None]
                median = round(statistics.median(known), 3) if known else None
                pairs[f"{ours}/{theirs}"] = {"each": each, "median": median}
    return {"rounds": len(rounds), "engine_s": engine_s, "ingest_time": pairs}


def targets(
    systems: dict[str, dict[str, Any]],
    ratios: dict[str, Any],
    rounds: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Issue 5's targets, checked (reported, never asserted)."""
    mine = systems.get(OURS_DISK) or {}
    out: dict[str, Any] = {}

    def check(name: str, value: Any, ok: Callable[[Any], bool], goal: str) -> None:
        out[name] = {
            "value": value,
            "goal": goal,
            "met": None if value is None else bool(ok(value)),
        }

    check("search_p50_ms", value_at(mine, "search_ms", "p50"), lambda v: v <= 10, "<= 10")
    check("search_p95_ms", value_at(mine, "search_ms", "p95"), lambda v: v <= 30, "<= 30")
    check("add_one_p50_ms", value_at(mine, "add_one_ms", "p50"), lambda v: v <= 15, "<= 15")
    pair = f"{OURS_DISK}/{CHROMA_DISK}"
    check(
        "ingest_time_vs_chroma",
        value_at(rounds, "ingest_time", pair, "median")
        if rounds
        else value_at(ratios, pair, "ingest_time"),
        lambda v: v <= 1.2,
        "<= 1.2" + (f" (median of {rounds['rounds']} rounds)" if rounds else ""),
    )
    lc = value_at(ratios, f"{OURS_DISK}/{LANGCHAIN}", "search_p50")
    check("search_vs_langchain", lc, lambda v: v <= 0.1, "<= 0.1 (10x faster)")
    li = value_at(ratios, f"{OURS_DISK}/{LLAMAINDEX}", "search_p50")
    check("search_vs_llamaindex", li, lambda v: v <= 1.0, "<= 1.0")
    # Issue 44: ahead of mem0 and mcp-memory-service on every figure (or say why not).
    for peer in FOREIGN_SYSTEMS:
        for figure, ratio in (value_at(ratios, f"{OURS_DISK}/{peer}") or {}).items():
            check(f"{figure}_vs_{peer}", ratio, lambda v: v < 1.0, "< 1 (ahead)")
    return out
