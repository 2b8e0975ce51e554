"""What a server store's catch-up with other processes' writes costs, at a store size.

A writer process fills a collection on a ``chroma run`` server, a reader with its own
keyword-index cache file (another machine, as far as the index goes) opens it; then, for
each number of memories the writer updated just before, the reader's periodic check (the
question "is my index behind?", asked on the pool every ``sync_interval``) and its
catch-up (``sync()``, which the check runs when behind) are timed. Each round first
waits ``--settle`` seconds, so that the writes of the rounds before are older than the
window a check reads again (``request_timeout`` + 5 s: see ``hybrid_memory/_store/sync.py``).

    python benchmarks/catch_up_cost.py --n 100000 --recent 0,100,1000

Prints one line per number of recent updates: the check's and the catch-up's median and
p95 in milliseconds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._scale.embedding import HashingEmbedding
from benchmarks.history_check import started_server


def timed(work: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median and p95 of ``work``'s duration, in milliseconds."""
    times = []
    for _ in range(repeats):
        clock = time.perf_counter()
        work()
        times.append((time.perf_counter() - clock) * 1000)
    times.sort()
    return statistics.median(times), times[min(len(times) - 1, int(len(times) * 0.95))]


def main(argv: Sequence[str] | None = None) -> int:
    from hybrid_memory import HybridMemory
    from hybrid_memory.testing import sync_check

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--recent", default="0,100,1000", help="updates just before, each")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--settle", type=float, default=36.0, help="seconds waited before each round"
    )
    args = parser.parse_args(argv)
    embedding = HashingEmbedding(dim=32)
    with tempfile.TemporaryDirectory() as scratch, started_server(Path(scratch)) as server:
        common = {"url": server.url, "collection": "catchup", "embedding": embedding}
        writer = HybridMemory(**common, cache_dir=f"{scratch}/cache-writer")
        clock = time.perf_counter()
        ids: list[str] = []
        step = 5_000
        for start in range(0, args.n, step):
            texts = [
                f"memory {i} about topic {i % 97} and item {i % 1013}"
                for i in range(start, min(args.n, start + step))
            ]
            ids.extend(r.id for r in writer.add_many([{"text": t} for t in texts]))
        print(f"filled {args.n:,} memories in {time.perf_counter() - clock:.0f} s", flush=True)
        reader = HybridMemory(**common, cache_dir=f"{scratch}/cache-reader", sync_interval=3600)
        reader.sync()  # warm
        check = sync_check(reader)  # the periodic check's question
        print("recent updates | check p50 / p95 ms | catch-up p50 / p95 ms")
        for round_, recent in enumerate(int(x) for x in args.recent.split(",")):
            # The writes before leave the window a check reads again (request_timeout +
            # 5 s, see hybrid_memory/_store/sync.py): only this round's updates are in it.
            time.sleep(args.settle)
            if recent:
                writer.update_many(
                    [{"id": i, "text": f"updated {round_} {i}"} for i in ids[:recent]]
                )
            reader.sync()  # copies them
            assert not check(), "the reader's index is behind after a sync"
            check_p50, check_p95 = timed(check, args.repeats)
            sync_p50, sync_p95 = timed(reader.sync, args.repeats)
            print(
                f"{recent:>14,} | {check_p50:8.1f} / {check_p95:6.1f} | "
                f"{sync_p50:8.1f} / {sync_p95:6.1f}",
                flush=True,
            )
        reader.close()
        writer.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
