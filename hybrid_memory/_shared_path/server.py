"""The owner's side of a shared embedded store path: a loopback listener that runs the
other processes' Chroma requests on the owner's embedded client.

One thread accepts connections; each connection gets a thread that answers its requests
one at a time. Only the operations a store makes are served, and the reads a command
line asks of the stores open here (:mod:`hybrid_memory._shared_path.reads`). See
:mod:`hybrid_memory._shared_path.ownership` for the election and why every request may be repeated.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection, Listener
from typing import Any

from hybrid_memory._model.errors import HybridMemoryError
from hybrid_memory._shared_path.link import write_address
from hybrid_memory._shared_path.reads import SERVE_READ, serve

# How often an idle connection handler of the owner checks whether it is closing.
_IDLE_CHECK = 0.25
_WAKE_TIMEOUT = 5.0  # seconds for the owner's own connection that wakes its accepting thread

_CLIENT_OPERATIONS = frozenset(
    {"get_or_create_collection", "get_max_batch_size", "delete_collection", "list_collections"}
)
_COLLECTION_OPERATIONS = frozenset({"get", "query", "add", "upsert", "delete", "count", "modify"})
# The operations that write: counted, by the owner of a path, whoever asks for them.
WRITE_OPERATIONS = frozenset({"add", "upsert", "delete", "modify", "delete_collection"})


class RemoteChromaError(Exception):
    """A Chroma call the owner of the path made for this process failed there (the
    owner's message; :class:`~hybrid_memory._store.collection.ChromaCollection` turns it into
    :class:`StoreError` as it does a local failure)."""


class _Dispatcher:
    """Runs requests on the embedded client: the owner's answers to its clients, and a
    former client's own calls once it became the owner. Only the operations a store
    makes are served. Collections are looked up once by name (a lookup is a query of
    Chroma's own catalogue), again after a collection was deleted."""

    def __init__(self, chroma: Any, before_write: Callable[[], None] = lambda: None) -> None:
        self.chroma = chroma
        self._before_write = before_write  # raises when a write must be refused (disk_room)
        self._collections: dict[str, Any] = {}

    def __call__(self, target: str | None, operation: str, kwargs: dict[str, Any]) -> Any:
        chroma = self.chroma
        if operation in WRITE_OPERATIONS:
            self._before_write()
        if target is None:
            if operation not in _CLIENT_OPERATIONS:
                raise RemoteChromaError(f"operation {operation!r} is not served")
            if operation == "get_or_create_collection":
                collection = chroma.get_or_create_collection(**kwargs, embedding_function=None)
                self._collections[collection.name] = collection
                return {"id": str(collection.id), "metadata": collection.metadata}
            if operation == "list_collections":  # names and metadata: what namespaces() reads
                return [{"name": c.name, "metadata": c.metadata} for c in chroma.list_collections()]
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

    def __init__(
        self,
        path: str,
        dispatch: _Dispatcher,
        note_write: Callable[[], None],
        wrote: Callable[[], None] = lambda: None,
    ) -> None:
        self._path = path
        self._dispatch = dispatch
        self._note_write = note_write  # told before each write request is run
        self._wrote = wrote  # and once it was run (applied or failed)
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
        write_address(path, self._address[0], self._address[1], self._key)

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
                    writes = _is_write(request)
                    if writes:
                        self._note_write()
                try:
                    reply = self._answer(request)
                finally:
                    if writes:
                        self._wrote()
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
            if operation == SERVE_READ:  # a command line's read (see _shared_path.reads)
                return ("ok", serve(self._path, kwargs))
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
