"""How long the ``hybrid-memory`` command takes per call, as a person or a script calling
it in a loop pays it: wall time of real processes, p50 / p95 per subcommand.

    python benchmarks/cli_latency.py                  # 15 calls of each, 200 memories
    python benchmarks/cli_latency.py --runs 30 --holder ui

Three situations, measured in one run, the calls of each interleaved:

- ``--help`` (nothing opened);
- each subcommand on a path another process holds (``--holder python``: a process with
  the store open, as an agent or an MCP server has it; ``--holder ui``: the memory page):
  the holder answers the reads (``search``, ``list``, ``get``, ``tags``, ``stats``);
  ``add`` (a write) goes through it too;
- each subcommand on a store nobody holds: the command opens it (and, to search or add,
  loads the embedding model) itself.

The store holds ``--memories`` short notes embedded by the default model (what a user
runs), built once in ``--workdir`` (a temporary directory by default). Beside the
commands, the same run times ``python -c pass``, ``python -c "import hybrid_memory"`` and
Chroma alone opening the store's path (``import chromadb; chromadb.PersistentClient(...)``,
no hybrid-memory): the floors a command pays on this machine now, the last one for any
command that opens an embedded store itself. The machine's load average is printed before
and after: figures taken while other work runs are noisy; the CPU time each call used is
printed beside its wall time.

Targets (docs/cli.md): ``--help`` <= 0.2 s; a call on a held path <= 0.4 s p50; a search on
a store nobody holds <= 1.0 s p50.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from hybrid_memory import HybridMemory

TARGETS = {"help": 0.2, "held": 0.4, "search-alone": 1.0}
TOPICS = ["deploys", "the garden", "alice's editor", "the quarterly report", "lunch", "on-call"]
READS = ("search", "list", "get", "tags", "stats")


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def command() -> list[str]:
    """``hybrid-memory`` as installed beside this interpreter."""
    beside = Path(sys.executable).with_name("hybrid-memory")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("hybrid-memory")
    return [found] if found else [sys.executable, "-m", "hybrid_memory"]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_MEMORY_")}
    return env | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


def build(path: Path, n: int) -> str:
    """The store of ``n`` notes at ``path`` (kept for a rerun); returns one memory's id."""
    with HybridMemory(path=str(path)) as memory:
        if memory.count() < n:
            memory.add_many(
                {
                    "text": f"Note {i} about {TOPICS[i % len(TOPICS)]}: item {i * 7 % 101}",
                    "id": f"note-{i:04d}",
                    "tags": [TOPICS[i % len(TOPICS)].split()[-1], f"batch{i % 4}"],
                }
                for i in range(n)
            )
        return "note-0001"


def timed(args: list[str]) -> tuple[float, float]:
    """A call's wall time and the CPU time (user + system) its process used."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        process = subprocess.Popen(args, stdout=out, stderr=err, env=environment())
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - start
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode not in (0, 1):
            err.seek(0)
            message = err.read().decode(errors="replace")
            raise SystemExit(f"{' '.join(args)} failed ({process.returncode}):\n{message}")
    return seconds, usage.ru_utime + usage.ru_stime


@contextmanager
def holding(path: Path, kind: str) -> Iterator[None]:
    """Another process holding the store: a Python process with it open, or the page."""
    if kind == "ui":
        args = [*command(), "ui", "--path", str(path), "--port", "0"]
        ready = re.compile(r"serving .* at http://")
    else:
        code = (
            "import sys\nfrom hybrid_memory import HybridMemory\n"
            f"m = HybridMemory(path={str(path)!r})\nm.search('warm the model up')\n"
            "print('holding', flush=True)\nsys.stdin.read()\nm.close()\n"
        )
        args = [sys.executable, "-c", code]
        ready = re.compile(r"holding")
    process = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=environment(),
    )
    try:
        assert process.stdout is not None
        for line in process.stdout:
            if ready.search(line):
                break
        else:
            raise SystemExit(f"the holder did not start ({kind})")
        if kind == "ui":  # the page opens the model on its first search: warm it up
            timed([*command(), "search", "warm up", "--path", str(path)])
        yield
    finally:
        if kind == "ui":
            process.terminate()
        elif process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=60)


def calls(path: Path, memory_id: str) -> dict[str, list[str]]:
    at = ["--path", str(path)]
    base = command()
    return {
        "search": [*base, "search", "what is due for the quarterly report?", *at],
        "list": [*base, "list", *at],
        "get": [*base, "get", memory_id, *at],
        "tags": [*base, "tags", *at],
        "stats": [*base, "stats", *at],
        "add": [*base, "add", "a note the benchmark adds", "--tag", "bench", *at],
    }


def measure(named: dict[str, list[str]], runs: int) -> dict[str, list[tuple[float, float]]]:
    """Each call ``runs`` times, round-robin (slow drifts of the machine hit all alike):
    (wall, CPU) seconds of each."""
    seconds: dict[str, list[tuple[float, float]]] = {name: [] for name in named}
    for _ in range(runs):
        for name, args in named.items():
            seconds[name].append(timed(args))
    return seconds


def row(name: str, values: list[tuple[float, float]]) -> str:
    wall50, wall95 = percentiles([w for w, _ in values])
    cpu50, _ = percentiles([c for _, c in values])
    return f"{name:<22} {wall50:7.3f} {wall95:7.3f} {cpu50:7.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="calls of each (default 15)")
    parser.add_argument("--memories", type=int, default=200, help="store size (default 200)")
    parser.add_argument("--holder", choices=("python", "ui"), default="python")
    parser.add_argument("--workdir", help="keep the store here (default: a temporary one)")
    args = parser.parse_args(argv)
    folder = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="cli-lat-"))
    path = folder / "store"
    memory_id = build(path, args.memories)
    load_before = os.getloadavg()
    chroma = f"import chromadb; chromadb.PersistentClient(path={str(path)!r})"
    floor = measure(
        {
            "python -c pass": [sys.executable, "-c", "pass"],
            "import hybrid_memory": [sys.executable, "-c", "import hybrid_memory"],
            "--help": [*command(), "--help"],
            "Chroma opens the path": [sys.executable, "-c", chroma],
        },
        args.runs,
    )
    with holding(path, args.holder):
        held = measure(calls(path, memory_id), args.runs)
    alone = measure(calls(path, memory_id), args.runs)
    load_after = os.getloadavg()
    print(
        f"hybrid-memory per call: wall p50 / p95 and CPU p50, seconds, of {args.runs} calls "
        f"each; {args.memories} memories, default model; holder: {args.holder}"
    )
    print(f"load average (1 min) before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    header = f"{'':<22} {'p50':>7} {'p95':>7} {'cpu p50':>7}"
    print(f"\n{header}")
    for name, values in floor.items():
        print(row(name, values))
    print(f"\nheld by another process\n{header}")
    for name, values in held.items():
        print(row(name, values))
    print(f"\nnobody holds the store\n{header}")
    for name, values in alone.items():
        print(row(name, values))
    print()
    help_p50 = percentiles([w for w, _ in floor["--help"]])[0]
    held_worst = max(percentiles([w for w, _ in held[name]])[0] for name in READS)
    search_alone = percentiles([w for w, _ in alone["search"]])[0]
    for label, value, target in (
        ("--help, p50", help_p50, TARGETS["help"]),
        ("the slowest read on a held path, p50", held_worst, TARGETS["held"]),
        ("search on a store nobody holds, p50", search_alone, TARGETS["search-alone"]),
    ):
        verdict = "met" if value <= target else "NOT met"
        print(f"{label}: {value:.3f} s (target <= {target} s): {verdict}")
    if not args.workdir:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
