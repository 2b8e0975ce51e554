"""``AsyncHybridMemoryStore``: the store for asyncio code, its operations gathered into
batches run by :class:`HybridMemoryStore` in a worker thread."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from os import PathLike
from typing import Any

from langgraph.store.base import Op, Result, TTLConfig
from langgraph.store.base.batch import AsyncBatchedBaseStore
from langgraph.store.hybrid_memory._checks import sweep_minutes
from langgraph.store.hybrid_memory.store import HybridIndexConfig, HybridMemoryStore

from hybrid_memory import HybridMemory


class AsyncHybridMemoryStore(AsyncBatchedBaseStore):
    """:class:`HybridMemoryStore` for asyncio code, as LangGraph's async stores are.

    Concurrent ``aput``/``aget``/``asearch``/... calls made in one event-loop tick are
    gathered into one batch (LangGraph's ``AsyncBatchedBaseStore``), so a burst of puts
    is one ``add_many``: one embedding call and one collection write. The TTL methods
    are coroutines (``await store.sweep_ttl()``, ``await store.start_ttl_sweeper()``,
    ``await store.stop_ttl_sweeper()``). The synchronous methods work from other
    threads; in the event loop's own thread they raise ``asyncio.InvalidStateError``,
    as in LangGraph. Create it inside a running event loop::

        async with AsyncHybridMemoryStore(path="./memory") as store:
            await store.aput(("users", "alice"), "theme", {"text": "dark mode"})

    Takes the arguments of :class:`HybridMemoryStore`; ``store.sync`` is that store.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: HybridMemory | None = None,
        *,
        path: str | PathLike[str] | None = None,
        index: HybridIndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **memory_options: Any,
    ) -> None:
        super().__init__()
        self.sync = HybridMemoryStore(memory, path=path, index=index, ttl=ttl, **memory_options)
        self.memory = self.sync.memory
        self.index_config = self.sync.index_config
        self.ttl_config = self.sync.ttl_config
        self._sweeper_task: asyncio.Task[None] | None = None
        self._sweeper_stop: asyncio.Event | None = None

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`HybridMemoryStore.batch` in a worker thread."""
        return await asyncio.to_thread(self.sync.batch, list(ops))

    async def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        return await asyncio.to_thread(self.sync.sweep_ttl)

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a task of this event loop, until :meth:`stop_ttl_sweeper`;
        returns the task (the one already running, if any)."""
        minutes = sweep_minutes(sweep_interval_minutes, self.ttl_config)
        if self._sweeper_task is not None and not self._sweeper_task.done():
            return self._sweeper_task
        stop = self._sweeper_stop = asyncio.Event()

        async def sweep() -> None:
            while True:
                try:
                    await asyncio.wait_for(stop.wait(), minutes * 60.0)
                    return
                except asyncio.TimeoutError:
                    pass
                try:
                    await self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    continue

        self._sweeper_task = asyncio.create_task(sweep(), name="hybrid-memory-ttl")
        return self._sweeper_task

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper task; True once it has stopped (or none ran)."""
        task = self._sweeper_task
        if task is None:
            return True
        if self._sweeper_stop is not None:
            self._sweeper_stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except asyncio.TimeoutError:
            return False
        self._sweeper_task = None
        return True

    async def aclose(self) -> None:
        """Stop the TTL sweeper and close the memory this store opened."""
        await self.stop_ttl_sweeper()
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncHybridMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"AsyncHybridMemoryStore({self.memory!r})"
