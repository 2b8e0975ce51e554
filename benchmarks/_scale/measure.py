"""Measuring: resident memory (current and peak), percentiles, size on disk."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path


def _status_kb(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Rss:
    """Resident memory of this process: current, and peak since the last reset."""

    def __init__(self) -> None:
        self.resettable = False

    def reset_peak(self) -> None:
        try:  # Linux >= 4.0: "5" resets the peak-RSS high-water mark (VmHWM)
            with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
                f.write("5")
            self.resettable = True
        except OSError:
            self.resettable = False

    @staticmethod
    def current_mb() -> float:
        kb = _status_kb("VmRSS")
        return round((kb or 0) / 1024, 1)

    @staticmethod
    def peak_mb() -> float:
        kb = _status_kb("VmHWM")
        if kb is None:
            import resource

            kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
        return round(kb / 1024, 1)


def percentiles(values: Sequence[float]) -> dict[str, float]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]

    return {
        "n": len(values),
        "p50": round(statistics.median(ordered), 3),
        "p95": round(pick(0.95), 3),
        "mean": round(statistics.fmean(ordered), 3),
        "max": round(ordered[-1], 3),
    }


def dir_mb(path: Path) -> float:
    total = sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return round(total / 2**20, 1)
