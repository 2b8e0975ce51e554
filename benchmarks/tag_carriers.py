"""The tag leg's carriers alone (``hybrid_memory/_keyword/tag_carriers.py``): what keeping each
tag's time order costs the writes, and what a search's newest carriers cost, when
batches arrive out of time order.

A million rows (``--n``) carrying 0-2 of 20 tags each are added 1,000 at a time, their
creation times in one of three patterns: wrapping every 200,000 rows (as the scale
benchmark's), in batches of random time order, or in time order with 1% of rows much
older. Printed for each: the time the adds took, each tag's first newest-100 and the
same asked again. Then the scale benchmark's timed adds: 20 times a batch of 49 older
rows, a search of its tags, one row older still (timed) and a search of its tags.
Figures only, no assertions; the load average is printed beside them. Run it from two
checkouts to compare (``PYTHONPATH=<checkout>``).

    python benchmarks/tag_carriers.py
    python benchmarks/tag_carriers.py --n 200000
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from hybrid_memory._keyword.tag_carriers import TagCarriers

TAGS = [f"tag-{k}" for k in range(20)]
SPAN = 730 * 86_400.0  # two years, as the scale benchmark's times
BATCH = 1_000


def _times(pattern: str, count: int, rng: np.random.Generator) -> np.ndarray:
    step = SPAN / 200_000
    rows = np.arange(count)
    if pattern == "wrapping":
        return (rows % 200_000) * step + rng.random(count) * step
    if pattern == "random batches":
        blocks = rng.permutation(-(-count // BATCH))
        return ((blocks[:, None] * BATCH + np.arange(BATCH)).ravel()[:count] * step).astype(float)
    times = rows * step
    older = rng.random(count) < 0.01
    times[older] -= rng.random(int(older.sum())) * SPAN
    return times


def _ms(values: list[float]) -> str:
    return (
        f"p50 {statistics.median(values) * 1e3:.3f} ms, max {max(values) * 1e3:.3f} ms, "
        f"mean {statistics.fmean(values) * 1e3:.3f} ms"
    )


def run(pattern: str, count: int, timed_adds: bool) -> None:
    rng = np.random.default_rng(0)
    extra = 20 * 50
    times = _times(pattern, count + extra, rng)
    sizes = rng.choice(3, size=count + extra, p=[0.3, 0.5, 0.2])
    tags = [tuple(rng.choice(TAGS, size, replace=False)) for size in sizes]
    carriers = TagCarriers(complete=True)
    start = time.perf_counter()
    for begin in range(0, count, BATCH):
        end = min(begin + BATCH, count)
        carriers.add(list(range(begin, end)), tags[begin:end], times[begin:end].tolist())
    filled = time.perf_counter() - start
    first, again = [], []
    for tag in TAGS:
        for into in (first, again):
            start = time.perf_counter()
            carriers.newest(tag, 100)
            into.append(time.perf_counter() - start)
    print(f"{pattern}: {count:,} rows added in {filled:.2f} s")
    print(f"  first newest 100 of a tag: {_ms(first)}")
    print(f"  asked again:               {_ms(again)}")
    if not timed_adds:
        return
    row, batches, adds, after = count, [], [], []
    for turn in range(20):
        older = np.arange(turn * 49, turn * 49 + 49)  # the store's own times again
        start = time.perf_counter()
        carriers.add(list(range(row, row + 49)), [tags[i] for i in older], times[older].tolist())
        batches.append(time.perf_counter() - start)
        row += 49
        for tag in tags[turn]:
            carriers.newest(tag, 100)
        at = count + turn
        carried = tags[at] or (TAGS[0],)
        start = time.perf_counter()
        carriers.add([row], [carried], [float(times[at] - SPAN)])
        adds.append(time.perf_counter() - start)
        row += 1
        start = time.perf_counter()
        for tag in carried:
            carriers.newest(tag, 100)
        after.append(time.perf_counter() - start)
    print(f"  a batch of 49 older rows:  {_ms(batches)}")
    print(f"  one older row (timed add): {_ms(adds)}")
    print(f"  its tags' newest after it: {_ms(after)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000, help="rows (default 1,000,000)")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    for pattern in ("wrapping", "random batches", "1% older"):
        run(pattern, args.n, timed_adds=pattern == "wrapping")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
