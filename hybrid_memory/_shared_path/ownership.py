"""Many processes on one embedded store path: one of them owns the path, the others
reach its collections through it.

Why: Chroma's embedded client is not safe for two processes on one directory (each keeps
its own copy of the vector index and never reads the other's writes back), and two MCP
clients on one path is the common setup.

How: the owner is elected with an OS file lock held for its life (the kernel frees it
when the owner dies), opens embedded Chroma and serves the others on loopback
(:mod:`~hybrid_memory._shared_path.server`); the others send each call as one request with
a deadline (:mod:`~hybrid_memory._shared_path.proxy`). When the owner goes away, its
clients elect again and send the failed request again: every request is safe to repeat
(an ``add`` carries ids the store generated, which Chroma skips when it holds them), and
nothing is acknowledged before the owner answered. A path whose file system has no
working locks, or whose owner runs on another machine, is refused with
:class:`StoreError`. The whole design: docs/architecture.md, "Many processes on one
embedded path".
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from hybrid_memory._model.errors import StoreError
from hybrid_memory._process.disk_room import check_room
from hybrid_memory._shared_path.link import (
    ADDRESS_FILE,
    OwnerGone,
    OwnerSilent,
    alive,
    connect,
    exchange,
    machine,
    read_address,
)
from hybrid_memory._shared_path.lock import PathLock
from hybrid_memory._shared_path.proxy import ProxyClient
from hybrid_memory._shared_path.server import (
    RemoteChromaError,
    _Dispatcher,
    _Server,
)
from hybrid_memory._shared_path.write_ledger import ANY, WriteLedger

LOCK_FILE = "hybrid-memory-owner.lock"
# How long a process keeps trying to find or become the owner of a path (the owner may
# be opening a large store, on a loaded machine) before it gives up.
ELECTION_PATIENCE = 120.0
# The deadline of a request when the caller names none (HybridMemorySettings.request_timeout).
DEFAULT_REQUEST_TIMEOUT = 30.0
_SETTING = "request_timeout, HYBRID_MEMORY_REQUEST_TIMEOUT"


_registry: dict[str, PathOwnership] = {}
_registry_lock = threading.Lock()


def acquire(
    path: str,
    request_timeout: float = DEFAULT_REQUEST_TIMEOUT,
    write_reserve: int = 0,
) -> PathOwnership:
    """This process's handle on an embedded store path, one per path (an OS file lock is
    per open file, so two stores of one process on one path share it), counted:
    :meth:`PathOwnership.release` once per acquire. ``request_timeout`` bounds each wait
    for the owner while electing; ``write_reserve`` is the room the owner keeps on disk
    when it writes for others."""
    key = str(Path(path).resolve())
    with _registry_lock:
        ownership = _registry.get(key)
        if ownership is None:
            ownership = PathOwnership(key, str(path))
            _registry[key] = ownership
        ownership.users += 1
        ownership.request_timeout = request_timeout
        ownership.write_reserve = write_reserve
    try:
        ownership.start()
    except BaseException:
        ownership.release()
        raise
    return ownership


def _forget_after_fork() -> None:
    """A forked child inherits the parent's lock file descriptor, and with it the lock
    (``flock`` locks belong to the open file, shared across fork): the child would keep
    a dead parent's path locked with nobody serving it. The child drops every handle."""
    global _registry_lock
    _registry_lock = threading.Lock()
    for ownership in _registry.values():
        ownership._lock.forget()
        # The parent's sockets too: a child keeping them open would leave the parent's
        # clients waiting on connections nobody answers once the parent died.
        if ownership._server is not None:
            with contextlib.suppress(OSError):
                ownership._server._listener.close()
            for connection in ownership._server._connections:
                with contextlib.suppress(OSError):
                    connection.close()
        for connection in ownership._idle:
            with contextlib.suppress(OSError):
                connection.close()
    _registry.clear()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_forget_after_fork)


class PathOwnership:
    """This process's role on one store path: the owner (embedded Chroma, serving the
    others) or a client of the owner; it changes from client to owner when the owner
    goes away and this process wins the election."""

    def __init__(self, path: str, chroma_path: str) -> None:
        self.path = path
        # Chroma keeps one system per path as spelled: the first spelling is used, so a
        # plain chromadb client of this process on the same spelling shares the system.
        self._chroma_path = chroma_path
        self.users = 0
        self._writes_lock = threading.Lock()
        self._writes_begun = 0  # see note_write
        self.ledger = WriteLedger()  # the same writes, by what they can touch
        self._lock = PathLock(Path(path) / LOCK_FILE)
        self.request_timeout = DEFAULT_REQUEST_TIMEOUT  # the handshake's deadline
        self.write_reserve = 0  # bytes kept free when writing (disk_room)
        self._election = threading.Lock()
        self._started = False
        # As the owner:
        self._chroma: Any = None  # the embedded chromadb client
        self._dispatch: _Dispatcher | None = None
        self._server: _Server | None = None
        # As a client: the owner's address and key, idle connections to it, and a
        # generation counter so that threads failing on one broken owner elect once.
        self._address: tuple[tuple[str, int], bytes] | None = None
        self._idle: list[Connection] = []
        self._idle_lock = threading.Lock()
        self._generation = 0

    # --- the public face ------------------------------------------------------------------

    @property
    def is_owner(self) -> bool:
        return self._chroma is not None

    def client(self, request_timeout: float) -> Any:
        """What a store's :class:`ChromaCollection` uses as its Chroma client: the
        embedded client itself when this process owns the path, else a proxy whose
        requests wait at most ``request_timeout`` seconds for the owner."""
        if self._chroma is not None:
            return self._chroma
        return ProxyClient(self, request_timeout)

    def start(self) -> None:
        with self._election:
            if not self._started:
                self._elect(self._generation)
                self._started = True

    def release(self) -> None:
        """One store of this process on the path closed; the last one gives the path up
        (stops serving, closes Chroma's files, frees the lock for the others)."""
        with _registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            _registry.pop(self.path, None)
        with self._election:
            self._drop_connections()
            if self._server is not None:
                self._server.stop()
                self._server = None
                with contextlib.suppress(OSError):
                    if read_address(self.path).get("pid") == os.getpid():
                        os.unlink(Path(self.path) / ADDRESS_FILE)
            if self._chroma is not None:
                with contextlib.suppress(Exception):
                    self._chroma.close()  # Chroma's own count: the last client stops it
                self._chroma = None
                self._dispatch = None
                # Chroma's stopped system keeps its database open until a reference
                # cycle of its own is collected: collect it now, so that close()
                # really gives every file back.
                gc.collect()
            self._lock.close()
            self._started = False

    def note_write(self, touching: str | None = ANY) -> None:
        """A write is about to be made on the path: by a store of this process, or for
        another process by this owner. ``touching``: what it can touch, for the
        :class:`~hybrid_memory._shared_path.write_ledger.WriteLedger` (None: anything); the caller
        calls :meth:`wrote` with the same once it is done."""
        with self._writes_lock:
            self._writes_begun += 1
        self.ledger.begin(touching)

    def wrote(self, touching: str | None = ANY) -> None:
        """The write :meth:`note_write` was told of is done."""
        self.ledger.end(touching)

    def write_mark(self, *keys: str) -> int | None:
        """:meth:`WriteLedger.mark` of ``keys``; None when this process does not own
        the path (the writes of other processes then go elsewhere, uncounted)."""
        return None if self._chroma is None else self.ledger.mark(*keys)

    def writes_begun(self) -> int | None:
        """How many writes :meth:`note_write` counted so far; None when this process does
        not own the path (the writes of other processes then go elsewhere)."""
        return None if self._chroma is None else self._writes_begun

    def perform(
        self,
        target: str | None,
        operation: str,
        kwargs: dict[str, Any],
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
    ) -> Any:
        """One Chroma operation on the path (``target``: a collection name; None: the
        client), here when this process owns the path, else by the owner: after a broken
        connection, once an election is over. An owner alive but silent for ``timeout``
        seconds (stopped, stuck) fails it with StoreError naming its pid."""
        deadline = time.monotonic() + ELECTION_PATIENCE
        while True:
            if self._chroma is not None:
                assert self._dispatch is not None
                return self._dispatch(target, operation, kwargs)
            generation = self._generation
            try:
                return self._ask(target, operation, kwargs, timeout)
            except OwnerSilent as silent:
                raise self._silent_error(operation, timeout, silent) from silent
            except OwnerGone as gone:
                if time.monotonic() > deadline:
                    raise StoreError(
                        f"the owner of the store {self.path} went away and no process took "
                        f"over within {ELECTION_PATIENCE:.0f} s: {gone}"
                    ) from gone
                with self._election:
                    if self._generation == generation:
                        self._drop_connections()
                        self._elect(generation + 1)

    # --- electing -------------------------------------------------------------------------

    def _elect(self, generation: int) -> None:
        """Become the owner of the path, or find the owner and check it answers; under
        ``self._election``."""
        Path(self.path).mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + ELECTION_PATIENCE
        delay = 0.02
        waited_for = "no owner yet"
        while True:
            if self._take_lock():
                self._become_owner()
                self._generation = generation
                return
            address = read_address(self.path)
            waited_for = self._check_owner(address) or ""
            if not waited_for:
                try:
                    key = bytes.fromhex(address["key"])
                    where = (str(address["host"]), int(address["port"]))
                    self._idle_put(connect(where, key, self.request_timeout))
                    self._address = (where, key)
                    self._generation = generation
                    return
                except OwnerSilent as silent:
                    raise self._silent_error("open", self.request_timeout, silent) from silent
                except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
                    waited_for = f"the owner did not answer: {exc}"
            if time.monotonic() > deadline:
                raise StoreError(
                    f"could not open the store {self.path}: another process holds it "
                    f"({waited_for}) and did not answer for {ELECTION_PATIENCE:.0f} s"
                )
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.5)

    def _check_owner(self, address: dict[str, Any]) -> str | None:
        """Why the recorded owner cannot be reached yet (None: try it). A file left by a
        dead owner, or not yet written by a new one, means waiting; an owner on another
        machine is refused."""
        if not address:
            return "the owner has not published its address yet"
        if address.get("machine") != machine():
            raise StoreError(
                f"the store {self.path} is in use by a process on another machine "
                f"({address.get('machine')!r}, pid {address.get('pid')}): an embedded store "
                "is shared by the processes of one machine only; share a Chroma server "
                "between machines instead (url=, HYBRID_MEMORY_URL)"
            )
        pid = address.get("pid")
        if not isinstance(pid, int) or not alive(pid):
            return f"the recorded owner (pid {pid}) is gone"
        return None

    def _take_lock(self) -> bool:
        return self._lock.try_take()

    def _become_owner(self) -> None:
        """Open embedded Chroma and serve it; the lock is held."""
        try:
            self._chroma = _open_embedded(self._chroma_path)
            self._dispatch = _Dispatcher(
                self._chroma, lambda: check_room(self.path, self.write_reserve)
            )
            self._server = _Server(self.path, self._dispatch, self.note_write, self.wrote)
        except BaseException:
            if self._chroma is not None:
                with contextlib.suppress(Exception):
                    self._chroma.close()
                self._chroma = None
            self._lock.unlock()
            raise
        self._address = None

    # --- asking the owner -----------------------------------------------------------------

    def _ask(
        self, target: str | None, operation: str, kwargs: dict[str, Any], timeout: float
    ) -> Any:
        connection = self._idle_take()
        status, value = exchange(connection, (target, operation, kwargs), timeout)
        self._idle_put(connection)
        if status == "ok":
            return value
        if status == "closing":
            raise OwnerGone("the owner is closing")
        raise RemoteChromaError(value)

    def _silent_error(self, operation: str, timeout: float, why: Exception) -> StoreError:
        """The error of a request the owner did not answer in time."""
        pid = read_address(self.path).get("pid", "unknown")
        return StoreError(
            f"the process that owns the store {self.path} (pid {pid}) did not answer "
            f"{operation!r} within {timeout:g} s ({why}): it is alive but stopped or stuck "
            f"(SIGSTOP, a debugger, a suspended machine). It keeps the store until it "
            f"resumes or exits; the next call asks again. The deadline is the setting "
            f"{_SETTING}. A write that timed out may still be applied when the owner resumes."
        )

    def _idle_take(self) -> Connection:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
            address = self._address
        if address is None:
            raise OwnerGone("no owner")
        try:
            return connect(*address, self.request_timeout)
        except (OSError, EOFError) as exc:
            raise OwnerGone(f"could not connect: {exc}") from exc

    def _idle_put(self, connection: Connection) -> None:
        with self._idle_lock:
            self._idle.append(connection)

    def _drop_connections(self) -> None:
        with self._idle_lock:
            idle, self._idle = self._idle, []
            self._address = None
        for connection in idle:
            with contextlib.suppress(OSError):
                connection.close()


def _open_embedded(path: str) -> Any:
    """Embedded Chroma on the path, its setup retried a few times (a half-started
    system is dropped from Chroma's per-path cache before the next try)."""
    import chromadb

    for attempt in range(1, 6):
        try:
            return chromadb.PersistentClient(path=path)
        except Exception as exc:
            forget_embedded(path)
            if attempt == 5:
                raise StoreError(f"could not set up Chroma for path {path!r}: {exc}") from exc
            time.sleep(0.05 * attempt * (0.5 + random.random()))
    raise AssertionError("unreachable")


def forget_embedded(path: str) -> None:
    """Drop Chroma's cached system for a path (Chroma keeps one per path, a half-started
    one included, and would hand it to the next client)."""
    from chromadb.api.shared_system_client import SharedSystemClient

    with contextlib.suppress(Exception):
        SharedSystemClient._identifier_to_system.pop(path, None)
        SharedSystemClient._identifier_to_refcount.pop(path, None)
