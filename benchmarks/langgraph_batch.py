"""LangGraph's 6,000-operation burst against the LangGraph store, per-call or batched.

The same burst as LangGraph's ``test_large_batches_async`` (langgraph-checkpoint-sqlite's
tests): 10 rounds of 100 keys, each key an ``aput``, ``aget``, ``alist_namespaces``,
``asearch``, ``aput`` again and ``adelete``, all gathered at once. ``--store``:

- ``per-call``: :class:`HybridMemoryStore`, where every call is its own batch (a worker
  thread, an embedding call and a collection write per put): the store before batching;
- ``batched``: :class:`AsyncHybridMemoryStore`, where the calls of one event-loop tick
  are one batch and its puts one ``add_many``.

    python benchmarks/langgraph_batch.py --store per-call
    python benchmarks/langgraph_batch.py --store batched

Prints the wall time (numbers only: no assertion on them).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from langgraph.store.hybrid_memory import AsyncHybridMemoryStore, HybridMemoryStore


def burst(store: Any, rounds: int, keys: int) -> list[Any]:
    calls: list[Any] = []
    for m in range(rounds):
        namespace = ("test", "foo", "bar", "baz", str(m % 2))
        for i in range(keys):
            calls += [
                store.aput(namespace, f"key{i}", value={"foo": f"bar{i}"}),
                store.aget(namespace, f"key{i}"),
                store.alist_namespaces(prefix=None, max_depth=m + 1),
                store.asearch(("test",)),
                store.aput(namespace, f"key{i}", value={"foo": f"bar{i}"}),
                store.adelete(namespace, f"key{i}"),
            ]
    return calls


async def run(kind: str, rounds: int, keys: int) -> float:
    store: Any = AsyncHybridMemoryStore() if kind == "batched" else HybridMemoryStore()
    await store.aput(("warm",), "up", {"text": "load the embedding model first"})
    start = time.perf_counter()
    results = await asyncio.gather(*burst(store, rounds, keys))
    elapsed = time.perf_counter() - start
    assert len(results) == rounds * keys * 6
    if kind == "batched":
        await store.aclose()
    else:
        store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=["per-call", "batched"], default="batched")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--keys", type=int, default=100)
    args = parser.parse_args()
    elapsed = asyncio.run(run(args.store, args.rounds, args.keys))
    operations = args.rounds * args.keys * 6
    print(f"{args.store}: {operations} operations in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
