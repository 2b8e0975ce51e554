"""Helpers shared by the MCP tests: one loaded embedding model per test session, real
stores in temporary directories, the command that runs the server, and an HTTP server
started and stopped in this process. (Not a conftest: plugin test folders share the
root test run, so this module has a name of its own.)"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hybrid_memory_mcp import MCPServerSettings, build_http_app, create_server
from mcp import Client

from hybrid_memory import HybridMemory

REPO = Path(__file__).resolve().parents[3]
#: The rest of a store result for a memory written, and for one not written (a
#: duplicate), when no stored memory says nearly the same thing.
STORED: dict[str, Any] = {"stored": True, "similar": []}
NOT_STORED: dict[str, Any] = {"stored": False, "similar": []}


@functools.cache
def shared_embedder() -> Any:
    """The real default embedding (all-MiniLM-L6-v2, offline), loaded once per session."""
    probe = HybridMemory()
    embedder = probe.embedder
    probe.add("warm up: loads the model once")
    probe.close()
    return embedder


def open_store(path: Path | str, **overrides: Any) -> HybridMemory:
    """A real on-disk store using the session's loaded model."""
    return HybridMemory(path=str(path), embedding=shared_embedder(), **overrides)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command() -> list[str]:
    """``hybrid-memory`` as installed beside this interpreter (the console script)."""
    beside = Path(sys.executable).with_name("hybrid-memory")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("hybrid-memory")
    return [found] if found else [sys.executable, "-m", "hybrid_memory.cli"]


def child_env(**extra: str) -> dict[str, str]:
    """Environment for a server subprocess: this checkout first on the path, offline."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "PYTHONPATH": path,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    env.update(extra)
    return env


def wait_for_port(port: int, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listened on 127.0.0.1:{port} within {timeout} s")


@contextmanager
def http_server(memory: HybridMemory, **settings: Any) -> Iterator[str]:
    """The real streamable-HTTP app (uvicorn) on 127.0.0.1 in a thread; yields its URL."""
    import uvicorn

    port = free_port()
    config = MCPServerSettings(transport="streamable-http", port=port, **settings)
    app = build_http_app(create_server(memory, config), config)
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for_port(port, timeout=30)
        yield f"http://127.0.0.1:{port}{config.http_path}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


async def call(client: Client, tool: str, arguments: dict[str, Any] | None = None) -> Any:
    """A tool's structured result, which must not be an error."""
    result = await client.call_tool(tool, arguments or {})
    assert not result.is_error, result.content
    return result.structured_content


async def refused(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    """The text of a tool's refusal, which must be an error without structured content."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result.structured_content
    assert result.structured_content is None
    return result.content[0].text  # type: ignore[union-attr]
