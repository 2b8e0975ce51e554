"""The owner's listener stops even when its accepting thread has already left: it left
after accepting a peer that came just as the owner began to close (three processes
creating one store at once hung so, the owner waiting for its own wake-up call)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from hybrid_memory._shared_path.link import connect
from hybrid_memory._shared_path.server import _Server


def _nothing(target: str, operation: str, kwargs: dict[str, Any]) -> Any:
    return None


def test_stop_returns_when_the_accepting_thread_already_left(tmp_path: Path) -> None:
    server = _Server(str(tmp_path), _nothing, lambda: None)
    server._closing = True  # the owner began to close...
    # ...and a peer came: the accepting thread takes it, sees the owner closing, and leaves.
    peer = connect(server._address, server._key, 30.0)
    server._accepting.join(10)
    assert not server._accepting.is_alive()
    stopped = threading.Event()

    def stop() -> None:
        server.stop()
        stopped.set()

    threading.Thread(target=stop, daemon=True).start()
    assert stopped.wait(30), "stop() waited for a handshake nobody would answer"
    peer.close()


def test_stop_wakes_an_accepting_thread_that_waits(tmp_path: Path) -> None:
    server = _Server(str(tmp_path), _nothing, lambda: None)
    assert server._accepting.is_alive()
    server.stop()
    assert not server._accepting.is_alive()
