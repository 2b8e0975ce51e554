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

In that burst each key's last operation is a delete, so a batch that dedupes a key's
operations (as LangGraph's batching does) writes little: ``--puts N`` measures a burst
of N puts of distinct keys instead, every one written.

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


def puts(store: Any, count: int) -> list[Any]:
    return [store.aput(("test", "puts"), f"key{i}", {"text": f"fact {i}"}) for i in range(count)]


async def run(kind: str, rounds: int, keys: int, put_count: int) -> float:
    store: Any = AsyncHybridMemoryStore() if kind == "batched" else HybridMemoryStore()
    await store.aput(("warm",), "up", {"text": "load the embedding model first"})
    start = time.perf_counter()
    calls = puts(store, put_count) if put_count else burst(store, rounds, keys)
    results = await asyncio.gather(*calls)
    elapsed = time.perf_counter() - start
    assert len(results) == (put_count or rounds * keys * 6)
    if put_count:
        assert len(await store.asearch(("test", "puts"), limit=put_count + 1)) == put_count
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
    parser.add_argument("--puts", type=int, default=0, help="N puts of distinct keys instead")
    args = parser.parse_args()
    elapsed = asyncio.run(run(args.store, args.rounds, args.keys, args.puts))
    operations = args.puts or args.rounds * args.keys * 6
    kind = "puts" if args.puts else "operations"
    print(f"{args.store}: {operations} {kind} in {elapsed:.2f} s")


if __name__ == "__main__":
    main()
