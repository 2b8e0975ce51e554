"""A pytest plugin that runs LangGraph's own store tests, unmodified, against our stores.

LangGraph's test files (from the pinned ``langgraph-checkpoint`` and
``langgraph-checkpoint-sqlite`` source archives, fetched by ``run.py``, never copied
here) build their stores through a few names of their own modules: ``InMemoryStore``
(called like ``InMemoryStore(index=...)``), ``SqliteStore`` and ``AsyncSqliteStore``
(``from_conn_string(conn, index=..., ttl=...)`` context managers, then ``setup()``).
This plugin swaps exactly those names, in each test module, for factories of
:class:`HybridMemoryStore` / :class:`AsyncHybridMemoryStore`; nothing else changes.

``EXPECTED_FAILURES`` lists the tests allowed to fail, each with why; every one of
them fails for LangGraph's own ``InMemoryStore`` too (``run.py --check-in-memory``
runs them against it and says so). They are marked ``xfail(strict=True)``: one that
starts passing fails the run, so the list cannot go stale.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.hybrid_memory import AsyncHybridMemoryStore, HybridMemoryStore

#: Set by ``run.py --check-in-memory``: keep LangGraph's InMemoryStore where the tests use
#: it, to show that the expected failures fail for it too.
CHECK_IN_MEMORY = os.environ.get("HYBRID_MEMORY_UPSTREAM_CHECK_IN_MEMORY") == "1"

#: test node id (relative to the archive's root) -> why it fails for us and InMemoryStore.
EXPECTED_FAILURES: dict[str, str] = {}


class _Store(HybridMemoryStore):
    """Our store with the SQLite store's ``setup()`` (tables exist from the start)."""

    def setup(self) -> None:
        return None


class _AsyncStore(AsyncHybridMemoryStore):
    async def setup(self) -> None:
        return None


def _store_options(conn_string: str, index: Any, ttl: Any) -> tuple[dict[str, Any], Path | None]:
    """``HybridMemoryStore`` options for a SQLite connection string: ``:memory:`` is an
    in-memory store, a file path a store in a directory beside it (removed after)."""
    options: dict[str, Any] = {"index": index, "ttl": ttl}
    if conn_string == ":memory:":
        return options, None
    directory = Path(tempfile.mkdtemp(prefix="hm-upstream-", dir=Path(conn_string).parent))
    options["path"] = str(directory)
    return options, directory


class SqliteStoreFactory:
    """Stands in for ``langgraph.store.sqlite.SqliteStore`` in LangGraph's tests."""

    @staticmethod
    @contextlib.contextmanager
    def from_conn_string(
        conn_string: str, *, index: Any = None, ttl: Any = None, **_: Any
    ) -> Iterator[HybridMemoryStore]:
        options, directory = _store_options(conn_string, index, ttl)
        try:
            with _Store(**options) as store:
                yield store
        finally:
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)


class AsyncSqliteStoreFactory:
    """Stands in for ``langgraph.store.sqlite.AsyncSqliteStore``."""

    @staticmethod
    @contextlib.asynccontextmanager
    async def from_conn_string(
        conn_string: str, *, index: Any = None, ttl: Any = None, **_: Any
    ) -> AsyncIterator[AsyncHybridMemoryStore]:
        options, directory = _store_options(conn_string, index, ttl)
        try:
            async with _AsyncStore(**options) as store:
                yield store
        finally:
            if directory is not None:
                shutil.rmtree(directory, ignore_errors=True)


class InMemoryStoreFactory(HybridMemoryStore):
    """Stands in for ``InMemoryStore(index=..., ttl=...)``: an in-memory store, as a
    class of its own (the tests spy on the class's ``batch``)."""

    def __init__(self, *, index: Any = None, ttl: Any = None) -> None:
        super().__init__(index=index, ttl=ttl)


_FACTORIES: dict[str, Any] = {
    "InMemoryStore": InMemoryStoreFactory,
    "SqliteStore": SqliteStoreFactory,
    "AsyncSqliteStore": AsyncSqliteStoreFactory,
}


@pytest.fixture(autouse=True)
def _our_store(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    module = request.module
    for name, factory in _FACTORIES.items():
        if CHECK_IN_MEMORY and name == "InMemoryStore":
            continue
        if hasattr(module, name):
            monkeypatch.setattr(module, name, factory)


def pytest_configure(config: pytest.Config) -> None:
    # LangGraph's TTL tests retry timing-sensitive tests with pytest-retry's marker.
    config.addinivalue_line("markers", "flaky(retries): retried by pytest-retry upstream")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        reason = EXPECTED_FAILURES.get(item.nodeid)
        if reason is not None:
            item.add_marker(pytest.mark.xfail(reason=reason, strict=True))
