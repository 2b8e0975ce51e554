"""Every request has a deadline (issue 45): a stopped owner of an embedded path, and a
Chroma server that accepts connections and never answers, fail the call with StoreError
naming them and the setting, within ``request_timeout``; the next call asks again.

The owner is a real process stopped with SIGSTOP (SIGCONT after); the silent server is a
real socket that accepts and says nothing, or forwards to a real ``chroma run`` until
told to go quiet.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, StoreError

from ..conftest import SeededEmbedding
from .test_multiprocess import Agent

TIMEOUT = 2.0  # request_timeout in these tests
# How long past the deadline a call may take to fail: the machine is shared and loaded.
SLACK = 10.0


def ask(agent: Agent, op: str, **args: Any) -> tuple[dict[str, Any], float]:
    """Send one command; the raw reply (ok or error) and how long it took."""
    assert agent.process.stdin is not None
    started = time.monotonic()
    agent.process.stdin.write(json.dumps({"op": op, **args}) + "\n")
    agent.process.stdin.flush()
    reply = agent._read(TIMEOUT + SLACK + 60)
    return reply, time.monotonic() - started


@pytest.fixture
def pair(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Agent, Agent]]:
    monkeypatch.setenv("HYBRID_MEMORY_REQUEST_TIMEOUT", str(TIMEOUT))
    first = Agent(tmp_path / "memory")
    second = Agent(tmp_path / "memory")
    owner, client = (first, second) if first("role")["owner"] else (second, first)
    assert not client("role")["owner"]
    try:
        yield owner, client
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(owner.process.pid, signal.SIGCONT)
        client.close()
        owner.close()


def test_a_stopped_owner_fails_search_and_add_within_the_deadline(
    pair: tuple[Agent, Agent],
) -> None:
    owner, client = pair
    client("add_many", texts=["a memory written before the owner stopped zqbefore"])
    os.kill(owner.process.pid, signal.SIGSTOP)
    try:
        for op, args in (
            ("find", {"text": "anything at all", "token": "zqbefore"}),
            ("add_many", {"texts": ["written while the owner is stopped"]}),
            ("find", {"text": "asked again", "token": "zqbefore"}),  # the next call: again
        ):
            reply, took = ask(client, op, **args)
            assert "error" in reply, reply
            assert reply["error"].startswith("StoreError"), reply["error"]
            assert f"pid {owner.process.pid}" in reply["error"], reply["error"]
            assert "request_timeout" in reply["error"], reply["error"]
            assert took < TIMEOUT + SLACK, (op, took)
    finally:
        os.kill(owner.process.pid, signal.SIGCONT)
    # The owner resumed: the client's next requests are answered again.
    ids = client("add_many", texts=["written once the owner resumed zqafter"])
    assert len(ids) == 1
    assert client("find", text="written once the owner resumed zqafter", token="zqafter") == {
        "vector": 1,
        "keyword": 1,
    }


def test_a_process_opening_the_path_of_a_stopped_owner_fails_within_the_deadline(
    pair: tuple[Agent, Agent], tmp_path: Path
) -> None:
    owner, _ = pair
    os.kill(owner.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match=rf"pid {owner.process.pid}.*request_timeout"):
            HybridMemory(
                path=str(tmp_path / "memory"),
                embedding=SeededEmbedding(),
                embedding_name="seeded-64",
                request_timeout=TIMEOUT,
            )
        assert time.monotonic() - started < TIMEOUT + SLACK
    finally:
        os.kill(owner.process.pid, signal.SIGCONT)


# --- a Chroma server that accepts and never answers ---------------------------------------


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers; given
    ``forward_to``, it relays to that port until :meth:`go_quiet`."""

    def __init__(self, forward_to: int | None = None) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._forward_to = forward_to
        self.quiet = threading.Event()
        if forward_to is None:
            self.quiet.set()
        self._held: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def go_quiet(self) -> None:
        self.quiet.set()

    def _accept(self) -> None:
        while not self._closed:
            try:
                peer, _ = self._listener.accept()
            except OSError:
                return
            self._held.append(peer)
            if self._forward_to is not None:
                upstream = socket.create_connection(("127.0.0.1", self._forward_to))
                self._held.append(upstream)
                for a, b in ((peer, upstream), (upstream, peer)):
                    threading.Thread(target=self._relay, args=(a, b), daemon=True).start()

    def _relay(self, source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                if self.quiet.is_set():
                    return  # swallowed: the peer waits for an answer that never comes
                sink.sendall(data)

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for held in self._held:
            with contextlib.suppress(OSError):
                held.close()


def test_opening_a_store_on_a_server_that_never_answers_fails_within_the_deadline() -> None:
    server = SilentServer()
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match=r"did not answer within 1 s.*request_timeout"):
            HybridMemory(url=server.url, embedding=SeededEmbedding(), request_timeout=1.0)
        assert time.monotonic() - started < 1.0 + SLACK
    finally:
        server.close()


@pytest.mark.server
def test_a_server_that_goes_silent_fails_each_call_within_the_deadline(
    chroma_server: str, tmp_path: Path
) -> None:
    relay = SilentServer(forward_to=int(chroma_server.rsplit(":", 1)[1]))
    store = HybridMemory(
        url=relay.url,
        collection=f"silent-{os.getpid()}",
        cache_dir=str(tmp_path / "cache"),
        embedding=SeededEmbedding(),
        embedding_name="seeded-64",
        request_timeout=1.0,
    )
    try:
        store.add("stored while the server answered")
        relay.go_quiet()
        for call in (
            lambda: store.search("stored while the server answered"),
            lambda: store.add("not stored: the server is silent"),
        ):
            started = time.monotonic()
            with pytest.raises(StoreError, match=r"did not answer within 1 s.*request_timeout"):
                call()
            assert time.monotonic() - started < 1.0 + SLACK
    finally:
        relay.close()
        with contextlib.suppress(Exception):
            store.close()
