"""Resident memory through the scale benchmark's ingest, block by block (issue 44).

Runs hybrid-memory on disk (or Chroma alone) as ``benchmarks/scale.py``'s worker does:
the same generated memories and cheap vectors, blocks of 10,000, then the warm-up, 200
searches and 200 filtered ones; after each block it prints VmRSS, RssAnon, RssFile, the
peak within the block (sampled every 0.2 s) and glibc's heap in use and free
(``mallinfo2``). Usage::

    python benchmarks/ingest_rss.py --n 60000 --load-from 30000   # numba from 30,000
    python benchmarks/ingest_rss.py --n 100000 --time-trims        # what the trims cost
    python benchmarks/ingest_rss.py --n 30000 --system chroma-disk

The last line is the growth (peak minus baseline), as the scale benchmark reports it.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _scale.constants import DEFAULT_DATA, FILTER_USERS  # noqa: E402
from _scale.data import load_prepared, prepare  # noqa: E402
from _scale.embedding import HashingEmbedding, TableEmbedding  # noqa: E402
from _scale.measure import Rss  # noqa: E402
from _scale.systems import build_system, import_system  # noqa: E402
from _scale.worker import ingest_blocks  # noqa: E402


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


def _heap() -> dict[str, int]:
    try:
        info = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return {}
    info.restype = _MallInfo2
    m = info()
    return {"heap_used": m.uordblks >> 20, "heap_free": m.fordblks >> 20}


def _status() -> dict[str, int]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "RssAnon", "RssFile", "VmHWM"):
                out[key] = int(value.split()[0]) // 1024
    return {**out, **_heap()}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--n", type=int, default=60_000)
    parser.add_argument("--system", default="ours-disk", choices=("ours-disk", "chroma-disk"))
    parser.add_argument("--load-from", type=int, default=None, help="LOAD_FROM_ROWS for numba")
    parser.add_argument(
        "--time-trims", action="store_true", help="time the heap trims after large writes"
    )
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    args = parser.parse_args()

    timing = contextlib.ExitStack()
    trims: list[float] = [0.0, 0]
    if args.time_trims:
        from hybrid_memory.testing import timed_heap_trims

        trims = timing.enter_context(timed_heap_trims())
    if args.load_from is not None:
        from hybrid_memory.testing import compiled_keyword_loops_from

        compiled_keyword_loops_from(args.load_from)

    scratch = Path(tempfile.mkdtemp(prefix="ingest-rss-"))
    try:
        prepare(args.data, args.n, 20, 200, scratch / "data", peers=False)
        data, matrix, keys = load_prepared(scratch / "data", peer=False)
        embedding = TableEmbedding(keys, matrix, HashingEmbedding().embed_array, data["embedding"])
        store, warmup, queries = data["store"], data["warmup"], data["queries"]
        import_system(args.system)
        gc.collect()
        baseline = Rss.current_mb()
        Rss().reset_peak()
        started = time.perf_counter()

        def log(what: str) -> None:
            fields = " ".join(f"{k}={v}" for k, v in _status().items())
            print(f"{time.perf_counter() - started:8.1f} {what:24s} {fields}", flush=True)

        log("baseline")
        system = build_system(args.system, embedding, scratch)
        peak = [0]
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.2):
                peak[0] = max(peak[0], _status()["VmRSS"])

        threading.Thread(target=sample, daemon=True).start()
        ingest = 0.0
        for begin, end in ingest_blocks(len(store), args.system):
            peak[0] = 0
            start = time.perf_counter()
            system.ingest(store[begin:end])
            ingest += time.perf_counter() - start
            log(f"block to {end} pk={peak[0]}")
        for query in warmup:
            system.search(query)
            system.search(query, {"user": "user-00"})
        log("warm-up")
        for query in queries:
            system.search(query)
        log("searches")
        for i, query in enumerate(queries):
            system.search(query, {"user": f"user-{i % FILTER_USERS:02d}"})
        log("filtered")
        done.set()
        system.close()
        print(
            f"growth {Rss.peak_mb() - baseline:.1f} MB; ingest {ingest:.1f} s; "
            f"trims {trims[1]}, {trims[0]:.2f} s"
        )
    finally:
        timing.close()
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
