"""Clean exits (issue 45): many short processes open a store, write, search and exit;
every one must exit with status 0 (no SIGABRT at interpreter exit, no hang).

Usage::

    python benchmarks/clean_exits.py                 # 60 per store kind, both kinds
    python benchmarks/clean_exits.py --count 20 --stores embedded

Store kinds: ``server`` (``HybridMemory(url=...)`` on a ``chroma run`` this script starts)
and ``embedded`` (``HybridMemory(path=DIR)``, two processes at a time so that one of them
is the owner of the path serving the other). Half of the processes close their store, the
other half exit with it open (the interpreter's own exit then closes it). Each process
gets ``--timeout`` seconds; one that takes longer counts as hung.

Prints, per store kind, ``N/N exited 0`` and the exit status and last lines of stderr of
each process that did not; exit status 1 when any did not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.shared_load import chroma_server  # noqa: E402

SHORT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {repo!r})
    from hybrid_memory import HybridMemory
    from benchmarks.seeded_embedding import SeededEmbedding

    kind, where, serial, close = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"
    if kind == "server":
        store = HybridMemory(url=where, collection="clean-exits", cache_dir=sys.argv[5],
                             embedding=SeededEmbedding(), embedding_name="seeded-64")
    else:
        store = HybridMemory(path=where, embedding=SeededEmbedding(), embedding_name="seeded-64")
    store.add(f"short process {{serial}} was here zqexit{{serial}}")
    assert any(h.text.endswith(f"zqexit{{serial}}") for h in store.search(f"zqexit{{serial}}"))
    if close:
        store.close()
    """
).format(repo=str(REPO))


def run_round(kind: str, where: str, cache: str, serials: Sequence[int], timeout: float) -> list:
    """Start the processes of one round at once; (serial, status, stderr) of each."""
    env = {**os.environ, "PYTHONFAULTHANDLER": "1"}
    started = [
        (
            serial,
            subprocess.Popen(
                [sys.executable, "-c", SHORT, kind, where, str(serial), str(serial % 2), cache],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
            ),
        )
        for serial in serials
    ]
    results = []
    for serial, process in started:
        try:
            _, stderr = process.communicate(timeout=timeout)
            results.append((serial, process.returncode, stderr))
        except subprocess.TimeoutExpired:
            process.kill()
            _, stderr = process.communicate()
            results.append((serial, "hung", stderr))
    return results


def run_kind(kind: str, where: str, cache: str, count: int, timeout: float) -> list:
    at_once = 2 if kind == "embedded" else 1
    results = []
    for start in range(0, count, at_once):
        serials = range(start, min(count, start + at_once))
        results.extend(run_round(kind, where, cache, serials, timeout))
    return results


def report(kind: str, results: list, seconds: float) -> bool:
    ok = sum(1 for _, status, _ in results if status == 0)
    print(f"{kind}: {ok}/{len(results)} exited 0 ({seconds:.0f} s)")
    statuses = Counter(str(status) for _, status, _ in results if status != 0)
    for status, n in sorted(statuses.items()):
        print(f"  status {status}: {n}")
    for serial, status, stderr in results:
        if status != 0:
            tail = "\n    ".join(stderr.strip().splitlines()[-6:])
            print(f"  process {serial}: status {status}\n    {tail}")
    return ok == len(results)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=60, help="processes per store kind")
    parser.add_argument("--stores", choices=["both", "server", "embedded"], default="both")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per process")
    args = parser.parse_args(argv)
    kinds = ["server", "embedded"] if args.stores == "both" else [args.stores]
    all_ok = True
    total = passed = 0
    with tempfile.TemporaryDirectory(prefix="clean-exits-") as scratch:
        directory = Path(scratch)
        for kind in kinds:
            clock = time.monotonic()
            if kind == "server":
                (directory / "server").mkdir()
                cache = str(directory / "cache")
                with chroma_server(directory / "server") as url:
                    results = run_kind(kind, url, cache, args.count, args.timeout)
            else:
                where = str(directory / "embedded")
                results = run_kind(kind, where, "", args.count, args.timeout)
            all_ok = report(kind, results, time.monotonic() - clock) and all_ok
            total += len(results)
            passed += sum(1 for _, status, _ in results if status == 0)
    print(f"{passed}/{total} exited 0")
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
