"""Reads the owner of an embedded path runs for a command line client: a ``search``,
``list`` or ``stats`` answered by the process that already holds the store, its model
and its keyword index open, instead of by a new process that would load them all.

The owner's side: a process registers, per path, what answers these reads (the layer
that owns a store does, for each store it opens on a path:
:mod:`hybrid_memory._memory.read_service`); the owner's loopback server
(:mod:`hybrid_memory._shared_path.server`) hands each such request to them. The
client's side: :func:`ask_owner` finds the owner from its address file and sends one
request on the authenticated link. Nothing here imports Chroma, numpy or a model: a
command that is answered this way loads none of them.

A request is a mapping the registered answerers read; an answer is ``("ok", value)``,
``("raise", error)`` or ``("not-served", why)``. A client that gets no answer (no owner,
an owner that does not serve reads, or none of its stores fits the request) opens the
store itself, as before.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from hybrid_memory._shared_path.link import (
    OwnerGone,
    OwnerSilent,
    alive,
    connect,
    exchange,
    machine,
    read_address,
)

#: The operation name of a read request on the owner's link.
SERVE_READ = "serve_read"
NOT_SERVED = "not-served"

Answerer = Callable[[Mapping[str, Any]], tuple[str, Any]]

_answerers: dict[str, list[Answerer]] = {}
_answerers_lock = threading.Lock()


def path_key(path: str) -> str:
    """The name a path is registered under (as the owner's election names it)."""
    return str(Path(path).resolve())


def register(path: str, answerer: Answerer) -> None:
    """``answerer`` answers reads on ``path`` while this process owns it (until
    :func:`unregister`); the latest registered is asked first."""
    with _answerers_lock:
        _answerers.setdefault(path_key(path), []).append(answerer)


def unregister(path: str, answerer: Answerer) -> None:
    with _answerers_lock:
        found = _answerers.get(path_key(path), [])
        with contextlib.suppress(ValueError):
            found.remove(answerer)
        if not found:
            _answerers.pop(path_key(path), None)


def serve(path: str, request: Mapping[str, Any]) -> tuple[str, Any]:
    """The owner's answer to a read request on ``path``: the first registered answerer's
    that serves it, else ``("not-served", why)``."""
    with _answerers_lock:
        answerers = list(reversed(_answerers.get(path_key(path), [])))
    why = "no store is open on this path in the owning process"
    for answerer in answerers:
        status, value = answerer(request)
        if status != NOT_SERVED:
            return status, value
        why = str(value)
    return NOT_SERVED, why


class OwnerLink:
    """One authenticated connection to the owner of a path, for a client's reads."""

    def __init__(self, connection: Connection, timeout: float) -> None:
        self._connection = connection
        self._timeout = timeout

    def ask(self, request: Mapping[str, Any]) -> tuple[str, Any] | None:
        """The owner's answer to ``request``; None when it gave none (it went away, is
        closing, or does not serve reads)."""
        try:
            status, value = exchange(
                self._connection, (None, SERVE_READ, dict(request)), self._timeout
            )
        except (OwnerGone, OwnerSilent):
            return None
        if status != "ok" or not isinstance(value, tuple) or len(value) != 2:
            return None  # "closing", or an owner that does not know this operation
        return value

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._connection.close()


def reach_owner(path: str, timeout: float) -> OwnerLink | None:
    """A link to the process owning the embedded store at ``path``; None when there is
    none to ask (no address published, a dead or foreign owner, no answer). Creates
    nothing: the address file is only read."""
    address = read_address(path)
    if not address or address.get("machine") != machine():
        return None
    pid = address.get("pid")
    if not isinstance(pid, int) or not alive(pid):
        return None
    try:
        key = bytes.fromhex(str(address["key"]))
        where = (str(address["host"]), int(address["port"]))
        return OwnerLink(connect(where, key, timeout), timeout)
    except (OSError, EOFError, ValueError, KeyError, TypeError, OwnerSilent):
        return None
