"""The size curve of ``benchmarks/scale.py --plot`` (``benchmarks/_scale/plot.py``): the
points taken from result files, and the picture drawn from them by the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks._scale.plot import blocks_of, curve_points

REPO = Path(__file__).resolve().parents[2]


def system(search_p50: float, search_p95: float, add_p50: float) -> dict[str, Any]:
    return {
        "search_ms": {"p50": search_p50, "p95": search_p95},
        "add_one_ms": {"p50": add_p50},
    }


def report(date: str, n: int, **systems: dict[str, Any]) -> dict[str, Any]:
    return {
        "date": date,
        "machine": {"cpus": 2},
        "results": [{"n": n, "systems": systems}],
    }


def test_points_by_system_and_size_sorted_by_n() -> None:
    curves = curve_points(
        [
            report("2026-11-27", 100_000, ours=system(6, 8, 28)),
            report("2026-11-27", 10_000, ours=system(3, 4, 9), mem0=system(12, 20, 30)),
        ]
    )
    assert [p.n for p in curves["search_p50"]["ours"]] == [10_000, 100_000]
    assert [p.median for p in curves["search_p95"]["ours"]] == [4, 8]
    assert [p.median for p in curves["add_one_p50"]["mem0"]] == [30]


def test_repeated_runs_give_the_median_of_the_newest_date_and_their_range() -> None:
    curves = curve_points(
        [
            report("2026-11-24", 100_000, ours=system(50, 60, 70)),  # older code: ignored
            report("2026-11-27", 100_000, ours=system(5, 8, 20)),
            report("2026-11-27", 100_000, ours=system(7, 9, 30)),
            report("2026-11-27", 100_000, ours=system(6, 12, 25)),
        ]
    )
    (point,) = curves["search_p50"]["ours"]
    assert (point.median, point.low, point.high, point.runs) == (6, 5, 7, 3)


def test_failed_systems_and_missing_figures_are_left_out() -> None:
    curves = curve_points(
        [
            report(
                "2026-11-27",
                1_000,
                ours=system(1, 2, 3),
                mem0={"error": "worker exited with 1"},
                chroma={"search_ms": {"p50": 1.5, "p95": 2.0}},  # no add-one figure
            )
        ]
    )
    assert set(curves["search_p50"]) == {"ours", "chroma"}
    assert set(curves["add_one_p50"]) == {"ours"}


def test_the_oldest_layout_one_block_per_file_is_read() -> None:
    old = {"n": 1_000_000, "date": "2026-11-24", "systems": {"ours": system(20, 40, 90)}}
    assert blocks_of(old) == [old]
    assert curve_points([old])["search_p50"]["ours"][0].median == 20
    with pytest.raises(ValueError, match="not a scale benchmark result"):
        blocks_of({"benchmark": "something else"})


def test_the_command_line_draws_a_png_from_result_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    files = []
    for i, (n, ours, theirs) in enumerate(
        [(1_000, (1, 2, 5), (2, 3, 6)), (10_000, (2, 3, 7), (9, 14, 20))]
    ):
        path = tmp_path / f"run-{i}.json"
        path.write_text(
            json.dumps(
                report("2026-11-27", n, **{"ours-disk": system(*ours), "mem0": system(*theirs)})
            )
        )
        files.append(str(path))
    out = tmp_path / "curve.png"
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "scale.py"),
            "--plot",
            str(out),
            "--from",
            *files,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "hybrid-memory (disk)" in done.stdout and "1,000: 1 ms" in done.stdout
    assert "mem0, infer=False" in done.stdout


def test_from_without_plot_and_a_file_that_is_not_a_result_are_refused(tmp_path: Path) -> None:
    script = str(REPO / "benchmarks" / "scale.py")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"hello": 1}))
    done = subprocess.run(
        [sys.executable, script, "--from", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "name the picture with --plot" in done.stderr
    done = subprocess.run(
        [sys.executable, script, "--plot", str(tmp_path / "x.png"), "--from", str(bad)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and f"--from {bad}: not a scale benchmark result" in done.stderr


def test_a_point_from_a_run_on_a_busy_machine_is_marked() -> None:
    quiet = system(5, 8, 20) | {"load_average_start": 1.2, "load_average_end": 2.9}
    loaded = system(9, 15, 60) | {"load_average_start": 2.0, "load_average_end": 7.6}
    curves = curve_points(
        [report("2026-11-27", 1_000, ours=quiet), report("2026-11-27", 10_000, ours=loaded)]
    )
    assert [p.busy for p in curves["search_p50"]["ours"]] == [False, True]  # 7.6 > 1.5 x 2


def test_busy_runs_count_only_where_no_quiet_run_exists() -> None:
    quiet = system(5, 8, 20) | {"load_average_start": 1.2, "load_average_end": 1.4}
    loaded = system(50, 80, 200) | {"load_average_start": 7.0, "load_average_end": 7.6}
    curves = curve_points(
        [report("2026-11-27", 100_000, ours=quiet), report("2026-11-27", 100_000, ours=loaded)]
    )
    (point,) = curves["search_p50"]["ours"]
    assert (point.median, point.runs, point.busy) == (5, 1, False)
