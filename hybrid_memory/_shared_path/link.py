"""How a process finds and reaches the owner of an embedded store path: the owner's
address file, and loopback connections to it whose every wait has a deadline.

The owner publishes its address and a random key in ``hybrid-memory-owner.json`` (mode
0600, renamed into place so no reader sees half of it). A connection is stdlib
``multiprocessing.connection`` over TCP on 127.0.0.1, authenticated by an HMAC challenge
before anything is unpickled. Every read and write on it has a deadline (the socket's
``SO_RCVTIMEO`` / ``SO_SNDTIMEO``, and a poll before each answer): an owner that is stopped
(SIGSTOP, a debugger, a laptop lid) still holds its lock and its listening socket, so the
kernel accepts the connection and the request, and without a deadline the client would
wait for an answer forever.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import sys
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from pathlib import Path
from typing import Any

ADDRESS_FILE = "hybrid-memory-owner.json"


class OwnerGone(Exception):
    """The connection to the owner broke: elect again, then send the request again."""


class OwnerSilent(Exception):
    """The owner accepted the connection but did not answer within the deadline: it is
    alive (its lock is held) but stopped or stuck. Not a reason to elect again."""


def connect(address: tuple[str, int], key: bytes, timeout: float) -> Connection:
    """An authenticated connection to the owner at ``address``. OwnerSilent when it does
    not complete the handshake within ``timeout`` seconds; OSError when nobody listens."""
    sock = socket.create_connection(address, timeout=timeout)
    try:
        sock.setblocking(True)  # Connection reads the descriptor itself...
        set_deadline(sock, timeout)  # ...and these make its every wait end
        connection = Connection(sock.detach())
    except BaseException:
        sock.close()
        raise
    try:
        answer_challenge(connection, key)
        deliver_challenge(connection, key)
    except BlockingIOError as exc:
        connection.close()
        raise OwnerSilent(f"no answer to the handshake within {timeout:g} s") from exc
    except BaseException:
        connection.close()
        raise
    return connection


def set_deadline(sock: socket.socket, timeout: float) -> None:
    """A kernel deadline on every receive and send of a blocking socket: the call fails
    with EAGAIN (BlockingIOError) after ``timeout`` seconds without progress."""
    if sys.platform == "win32":  # pragma: no cover - a DWORD of milliseconds
        value = struct.pack("=L", max(1, int(timeout * 1000)))
    else:
        seconds = int(timeout)
        value = struct.pack("ll", seconds, int((timeout - seconds) * 1_000_000))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def exchange(connection: Connection, request: Any, timeout: float) -> Any:
    """Send one request and return the answer. OwnerSilent when the owner does not answer
    within ``timeout`` seconds (the connection is then closed: a late answer must not be
    read as the next request's); OwnerGone when the connection broke."""
    try:
        connection.send(request)
        if not connection.poll(timeout):
            raise OwnerSilent(f"no answer within {timeout:g} s")
        return connection.recv()
    except OwnerSilent:
        connection.close()
        raise
    except BlockingIOError as exc:  # a send or receive passed the socket's deadline
        connection.close()
        raise OwnerSilent(f"no progress within {timeout:g} s") from exc
    except (OSError, EOFError) as exc:
        connection.close()
        raise OwnerGone(str(exc) or type(exc).__name__) from exc


def machine() -> str:
    """This machine's name, recorded with the owner's address."""
    return socket.gethostname()


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (on this machine)."""
    if sys.platform == "win32":  # pragma: no cover - os.kill(pid, 0) would end it there
        return True  # the path's lock tells: an owner that exited no longer holds it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_address(path: str) -> dict[str, Any]:
    """The owner's published record (pid, machine, host, port, key); {} when none."""
    try:
        found = json.loads((Path(path) / ADDRESS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def write_address(path: str, host: str, port: int, key: bytes) -> None:
    """The owner's address and key, for the processes of this user only: written to a
    0600 file, then renamed into place (a reader never sees half of it)."""
    target = Path(path) / ADDRESS_FILE
    temporary = target.with_name(f".{ADDRESS_FILE}.{os.getpid()}.tmp")
    record = {"pid": os.getpid(), "machine": machine(), "host": host, "port": port}
    record["key"] = key.hex()
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(record, out)
    os.replace(temporary, target)
