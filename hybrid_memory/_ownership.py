"""Many processes on one embedded store path: one of them owns the path, the others
reach its collections through it.

Why: Chroma's embedded client (``PersistentClient``) is not safe for two processes on
one directory. Each process keeps its own copy of the vector index in memory and never
reads the other's writes back (a second process's memories stay invisible to the first
one's vector search), and their logs interleave until one fails with "Error finding id"
on every read. Two MCP clients launching ``hybrid-memory mcp`` on one
``HYBRID_MEMORY_PATH`` is the README's own setup, so that case must just work.

How:

* **One owner per path**, elected with an OS file lock (``flock`` on
  ``hybrid-memory-owner.lock`` in the store directory), held for the owner's life. The
  kernel frees the lock when the owner exits or is killed (kill -9 included), so a dead
  owner can never block the path. The owner opens embedded Chroma as a single process
  would: its own calls go straight to Chroma (a single process is as fast as before).
* **The owner serves the others** on a loopback socket (stdlib
  ``multiprocessing.connection``: 127.0.0.1, a free port, an HMAC challenge with a random
  key before anything is unpickled). The address and key are in
  ``hybrid-memory-owner.json`` (mode 0600, so only the user owning the store reads it).
  A non-owner's collection is a :class:`ProxyCollection` with the surface
  :class:`~hybrid_memory._collection.ChromaCollection` uses; each call is one request,
  sent on a connection of a small per-process pool (threads do not wait for each other).
* **When the owner goes away** (closed, crashed, killed), its clients' connections fail;
  each of them runs the election again: one takes the lock and opens embedded Chroma
  (which replays Chroma's write-ahead log: every write the old owner acknowledged is
  there), the others connect to it. The failed request is then sent again. Every
  request is safe to repeat: reads; ``upsert`` and ``delete`` (idempotent); ``add``,
  which the store sends only with ids it generated (uuid4), so a repeat either writes the
  records (the first try never reached Chroma) or finds them there already, which Chroma
  skips; ``modify`` (sets the same metadata again). A request is acknowledged only once
  the owner answered, so nothing acknowledged is lost.
* **The keyword index** is a SQLite file every process on the path opens itself (SQLite
  is made for that); each process's periodic sync catches up with the others' writes.

Refused up front, with :class:`StoreError`: a store directory whose file system has no
working file locks (some network file systems), and a path whose owner runs on another
machine (a shared file system: loopback cannot reach it; use a Chroma server).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import gc
import json
import os
import random
import secrets
import socket
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Client, Connection, Listener
from pathlib import Path
from typing import Any

from hybrid_memory._errors import HybridMemoryError, StoreError

LOCK_FILE = "hybrid-memory-owner.lock"
ADDRESS_FILE = "hybrid-memory-owner.json"
# How long a process keeps trying to find or become the owner of a path (the owner may
# be opening a large store, on a loaded machine) before it gives up.
ELECTION_PATIENCE = 120.0
# How often an idle connection handler of the owner checks whether it is closing.
_IDLE_CHECK = 0.25
_WAKE_TIMEOUT = 5.0  # seconds for the owner's own connection that wakes its accepting thread

_CLIENT_OPERATIONS = frozenset(
    {"get_or_create_collection", "get_max_batch_size", "delete_collection"}
)
_COLLECTION_OPERATIONS = frozenset({"get", "query", "add", "upsert", "delete", "count", "modify"})
# The operations that write: counted, by the owner of a path, whoever asks for them.
WRITE_OPERATIONS = frozenset({"add", "upsert", "delete", "modify", "delete_collection"})


class RemoteChromaError(Exception):
    """A Chroma call the owner of the path made for this process failed there (the
    owner's message; :class:`~hybrid_memory._collection.ChromaCollection` turns it into
    :class:`StoreError` as it does a local failure)."""


class _OwnerGone(Exception):
    """The connection to the owner broke: elect again, then send the request again."""


# --- one process's share of a path ----------------------------------------------------------

_registry: dict[str, PathOwnership] = {}
_registry_lock = threading.Lock()


def acquire(path: str) -> PathOwnership:
    """This process's handle on an embedded store path (one per path per process: an OS
    file lock is per open file, so two stores of one process on one path must share
    it), counted: :meth:`PathOwnership.release` once per acquire."""
    key = str(Path(path).resolve())
    with _registry_lock:
        ownership = _registry.get(key)
        if ownership is None:
            ownership = PathOwnership(key, str(path))
            _registry[key] = ownership
        ownership.users += 1
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
        if ownership._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(ownership._lock_fd)
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
        self._lock_fd: int | None = None
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

    @property
    def client(self) -> Any:
        """What a store's :class:`ChromaCollection` uses as its Chroma client: the
        embedded client itself when this process owns the path, else a proxy."""
        if self._chroma is not None:
            return self._chroma
        return ProxyClient(self)

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
                    if _read_address(self.path).get("pid") == os.getpid():
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
            if self._lock_fd is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
                    os.close(self._lock_fd)
                self._lock_fd = None
            self._started = False

    def note_write(self) -> None:
        """A write is about to be made on the path: by a store of this process, or for
        another process by this owner."""
        with self._writes_lock:
            self._writes_begun += 1

    def writes_begun(self) -> int | None:
        """How many writes :meth:`note_write` counted so far; None when this process does
        not own the path (the writes of other processes then go elsewhere)."""
        return None if self._chroma is None else self._writes_begun

    def perform(self, target: str | None, operation: str, kwargs: dict[str, Any]) -> Any:
        """One Chroma operation on the path: ``target`` is a collection name (None: the
        client). Done here when this process owns the path, else by the owner; a broken
        connection is followed by an election and the request again (see the module
        docstring for why every request may be repeated)."""
        deadline = time.monotonic() + ELECTION_PATIENCE
        while True:
            if self._chroma is not None:
                assert self._dispatch is not None
                return self._dispatch(target, operation, kwargs)
            generation = self._generation
            try:
                return self._ask(target, operation, kwargs)
            except _OwnerGone as gone:
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
            address = _read_address(self.path)
            waited_for = self._check_owner(address) or ""
            if not waited_for:
                try:
                    key = bytes.fromhex(address["key"])
                    where = (str(address["host"]), int(address["port"]))
                    self._idle_put(_connect(where, key))
                    self._address = (where, key)
                    self._generation = generation
                    return
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
        if address.get("machine") != _machine():
            raise StoreError(
                f"the store {self.path} is in use by a process on another machine "
                f"({address.get('machine')!r}, pid {address.get('pid')}): an embedded store "
                "is shared by the processes of one machine only; share a Chroma server "
                "between machines instead (url=, HYBRID_MEMORY_URL)"
            )
        pid = address.get("pid")
        if not isinstance(pid, int) or not _alive(pid):
            return f"the recorded owner (pid {pid}) is gone"
        return None

    def _take_lock(self) -> bool:
        if self._lock_fd is None:
            lock = Path(self.path) / LOCK_FILE
            try:
                self._lock_fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:
                raise StoreError(
                    f"could not open the store's lock file {lock}: {exc.strerror}; the store "
                    "directory must be writable"
                ) from exc
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            return False
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise StoreError(
                f"the file system of {self.path} does not support file locks ({exc.strerror}), "
                "which processes sharing an embedded store need; put the store on a local "
                "disk, or use a Chroma server (url=, HYBRID_MEMORY_URL)"
            ) from exc

    def _become_owner(self) -> None:
        """Open embedded Chroma and serve it; the lock is held."""
        try:
            self._chroma = _open_embedded(self._chroma_path)
            self._dispatch = _Dispatcher(self._chroma)
            self._server = _Server(self.path, self._dispatch, self.note_write)
        except BaseException:
            if self._chroma is not None:
                with contextlib.suppress(Exception):
                    self._chroma.close()
                self._chroma = None
            assert self._lock_fd is not None
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
            raise
        self._address = None

    # --- asking the owner -----------------------------------------------------------------

    def _ask(self, target: str | None, operation: str, kwargs: dict[str, Any]) -> Any:
        connection = self._idle_take()
        try:
            connection.send((target, operation, kwargs))
            status, value = connection.recv()
        except (OSError, EOFError) as exc:
            with contextlib.suppress(OSError):
                connection.close()
            raise _OwnerGone(str(exc) or type(exc).__name__) from exc
        self._idle_put(connection)
        if status == "ok":
            return value
        if status == "closing":
            raise _OwnerGone("the owner is closing")
        raise RemoteChromaError(value)

    def _idle_take(self) -> Connection:
        with self._idle_lock:
            if self._idle:
                return self._idle.pop()
            address = self._address
        if address is None:
            raise _OwnerGone("no owner")
        try:
            return _connect(*address)
        except (OSError, EOFError) as exc:
            raise _OwnerGone(f"could not connect: {exc}") from exc

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


def _connect(address: tuple[str, int], key: bytes) -> Connection:
    connection = Client(address, authkey=key)
    return connection


def _machine() -> str:
    return socket.gethostname()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _read_address(path: str) -> dict[str, Any]:
    try:
        found = json.loads((Path(path) / ADDRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _write_address(path: str, host: str, port: int, key: bytes) -> None:
    """The owner's address and key, for the processes of this user only: written to a
    0600 file, then renamed into place (a reader never sees half of it)."""
    target = Path(path) / ADDRESS_FILE
    temporary = target.with_name(f".{ADDRESS_FILE}.{os.getpid()}.tmp")
    record = {"pid": os.getpid(), "machine": _machine(), "host": host, "port": port}
    record["key"] = key.hex()
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(record, out)
    os.replace(temporary, target)


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


# --- the owner's side -----------------------------------------------------------------------


class _Dispatcher:
    """Runs requests on the embedded client: the owner's answers to its clients, and a
    former client's own calls once it became the owner. Only the operations a store
    makes are served. Collections are looked up once by name (a lookup is a query of
    Chroma's own catalogue), again after a collection was deleted."""

    def __init__(self, chroma: Any) -> None:
        self.chroma = chroma
        self._collections: dict[str, Any] = {}

    def __call__(self, target: str | None, operation: str, kwargs: dict[str, Any]) -> Any:
        chroma = self.chroma
        if target is None:
            if operation not in _CLIENT_OPERATIONS:
                raise RemoteChromaError(f"operation {operation!r} is not served")
            if operation == "get_or_create_collection":
                collection = chroma.get_or_create_collection(**kwargs, embedding_function=None)
                self._collections[collection.name] = collection
                return {"id": str(collection.id), "metadata": collection.metadata}
            if operation == "delete_collection":
                self._collections.pop(kwargs.get("name", ""), None)
            return getattr(chroma, operation)(**kwargs)
        if operation not in _COLLECTION_OPERATIONS:
            raise RemoteChromaError(f"operation {operation!r} is not served")
        collection = self._collections.get(target)
        if collection is None:
            collection = chroma.get_collection(target, embedding_function=None)
            self._collections[target] = collection
        result = getattr(collection, operation)(**kwargs)
        if operation == "modify":
            return collection.metadata
        return result


def _is_write(request: Any) -> bool:
    """Whether a peer's request (``(target, operation, kwargs)``) asks for a write; a
    malformed one counts as a write (the count only ever errs on the safe side)."""
    try:
        return request[1] in WRITE_OPERATIONS
    except Exception:
        return True


class _Server:
    """The owner's loopback listener: one thread accepting, one thread per connection."""

    def __init__(self, path: str, dispatch: _Dispatcher, note_write: Callable[[], None]) -> None:
        self._dispatch = dispatch
        self._note_write = note_write  # told before each write request is run
        self._key = secrets.token_bytes(32)
        self._listener = Listener(("127.0.0.1", 0), authkey=self._key)
        self._address: tuple[str, int] = self._listener.address
        self._closing = False
        self._busy = 0
        self._quiet = threading.Condition()
        self._connections: set[Connection] = set()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(
            target=self._accept, name="hybrid-memory-owner", daemon=True
        )
        self._accepting.start()
        _write_address(path, self._address[0], self._address[1], self._key)

    def _accept(self) -> None:
        while not self._closing:
            try:
                connection = self._listener.accept()
            except Exception:  # a peer that failed the challenge, or the listener closed
                if self._closing:
                    return
                continue
            if self._closing:
                connection.close()
                return
            with self._quiet:
                self._connections.add(connection)
            thread = threading.Thread(
                target=self._serve, args=(connection,), name="hybrid-memory-peer", daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: Connection) -> None:
        try:
            while True:
                if not connection.poll(_IDLE_CHECK):
                    if self._closing:
                        return
                    continue
                request = connection.recv()
                with self._quiet:
                    if self._closing:
                        connection.send(("closing", None))
                        return
                    self._busy += 1
                    if _is_write(request):
                        self._note_write()
                try:
                    reply = self._answer(request)
                finally:
                    with self._quiet:
                        self._busy -= 1
                        self._quiet.notify_all()
                connection.send(reply)
        except Exception:  # the client went away, or sent what is not a request
            return
        finally:
            with self._quiet:
                self._connections.discard(connection)
            with contextlib.suppress(OSError):
                connection.close()

    def _answer(self, request: Any) -> tuple[str, Any]:
        try:
            target, operation, kwargs = request
            return ("ok", self._dispatch(target, operation, dict(kwargs)))
        except HybridMemoryError as exc:
            return ("error", str(exc))
        except Exception as exc:
            return ("error", f"{exc}" or type(exc).__name__)

    def stop(self) -> None:
        """Stop taking requests, let the ones running finish (their answers are sent),
        then close every connection: the clients elect a new owner and send again."""
        with self._quiet:
            self._closing = True
        # Wake the accepting thread with a bare connection, which its handshake then
        # refuses. Not a client's: that waits for the handshake, forever when the
        # thread already left (it accepted a peer after _closing was set, and returned).
        with contextlib.suppress(OSError):
            socket.create_connection(self._address, timeout=_WAKE_TIMEOUT).close()
        self._accepting.join(timeout=5)
        self._listener.close()
        with self._quiet:
            self._quiet.wait_for(lambda: self._busy == 0, timeout=60)
        for thread in list(self._threads):
            thread.join(timeout=2 * _IDLE_CHECK + 1)


# --- a non-owner's view of the path ---------------------------------------------------------


class ProxyClient:
    """The part of a Chroma client a store uses, answered by the owner of the path."""

    def __init__(self, ownership: PathOwnership) -> None:
        self._ownership = ownership

    def get_or_create_collection(
        self,
        name: str,
        configuration: Any = None,
        metadata: Any = None,
        embedding_function: Any = None,
    ) -> ProxyCollection:
        got = self._ownership.perform(
            None,
            "get_or_create_collection",
            {"name": name, "configuration": configuration, "metadata": metadata},
        )
        return ProxyCollection(self._ownership, name, got["id"], got["metadata"])

    def get_max_batch_size(self) -> int:
        return int(self._ownership.perform(None, "get_max_batch_size", {}))

    def delete_collection(self, name: str) -> None:
        self._ownership.perform(None, "delete_collection", {"name": name})


class ProxyCollection:
    """The part of a Chroma collection a store uses, answered by the owner of the path."""

    def __init__(
        self, ownership: PathOwnership, name: str, collection_id: str, metadata: Any
    ) -> None:
        self._ownership = ownership
        self.name = name
        self.id = collection_id
        self.metadata = metadata

    def _call(self, operation: str) -> Callable[..., Any]:
        def call(**kwargs: Any) -> Any:
            return self._ownership.perform(self.name, operation, kwargs)

        return call

    def get(self, **kwargs: Any) -> Any:
        return self._call("get")(**kwargs)

    def query(self, **kwargs: Any) -> Any:
        return self._call("query")(**kwargs)

    def add(self, **kwargs: Any) -> Any:
        return self._call("add")(**kwargs)

    def upsert(self, **kwargs: Any) -> Any:
        return self._call("upsert")(**kwargs)

    def delete(self, **kwargs: Any) -> Any:
        return self._call("delete")(**kwargs)

    def count(self) -> int:
        return int(self._call("count")())

    def modify(self, **kwargs: Any) -> None:
        self.metadata = self._call("modify")(**kwargs)
