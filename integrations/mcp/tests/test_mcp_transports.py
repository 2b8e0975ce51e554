"""The server over its real transports: ``hybrid-memory mcp`` as a stdio subprocess and
as a streamable-HTTP subprocess, and the HTTP app in this process for its refusals
(token, Origin, Host, body size) and for several concurrent client sessions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from _mcp_test_support import (
    child_env,
    free_port,
    http_server,
    open_store,
    server_command,
    wait_for_port,
)
from hybrid_memory_mcp import MCPServerSettings, build_http_app, create_server
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from hybrid_memory import HybridMemory, InvalidInputError

TOKEN = "test-token-0123456789"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"},
    },
}


def post(url: str, body: bytes, **headers: str) -> int:
    """POST ``body`` to ``url`` with plain urllib; the HTTP status."""
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


@asynccontextmanager
async def authorised_client(url: str) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, sending the bearer token."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=300) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        yield client


def structured(result: Any) -> Any:
    assert not result.is_error, result.content
    return result.structured_content


async def test_stdio_subprocess_stores_and_searches(tmp_path: Path) -> None:
    command = server_command()
    params = StdioServerParameters(
        command=command[0],
        args=[*command[1:], "mcp"],
        env=child_env(HYBRID_MEMORY_PATH=str(tmp_path / "memory")),
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "hybrid-memory"
            stored = structured(
                await session.call_tool(
                    "store_memory",
                    {"text": "The cat is called Miso", "tags": ["pets"]},
                )
            )
            found = structured(
                await session.call_tool("search_memory", {"query": "what is the cat's name?"})
            )
            bad = await session.call_tool("search_memory", {"query": "cat", "k": 0})
    assert found["hits"][0]["id"] == stored["id"]
    assert found["hits"][0]["text"] == "The cat is called Miso"
    assert bad.is_error and "k: expected an integer in 1..100" in bad.content[0].text
    # The memory was written to the directory HYBRID_MEMORY_PATH named.
    reopened = open_store(tmp_path / "memory")
    try:
        assert reopened.get(stored["id"]).tags == ("pets",)
    finally:
        reopened.close()


async def test_http_subprocess_with_token(tmp_path: Path) -> None:
    port = free_port()
    command = server_command()
    env = child_env(
        HYBRID_MEMORY_PATH=str(tmp_path / "memory"),
        HYBRID_MEMORY_MCP_TOKEN=TOKEN,
    )
    args = ["mcp", "--transport", "streamable-http", "--host", "127.0.0.1", "--port", str(port)]
    log = (tmp_path / "server.log").open("w")
    process = subprocess.Popen([*command, *args], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_port(port)
        url = f"http://127.0.0.1:{port}/mcp"
        assert post(url, json.dumps(INITIALIZE).encode()) == 401
        async with authorised_client(url) as client:
            stored = structured(
                await client.call_tool("store_memory", {"text": "Lunch is at noon on Fridays"})
            )
            found = structured(await client.call_tool("search_memory", {"query": "lunch"}))
        assert found["hits"][0]["id"] == stored["id"]
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
    assert process.returncode == 0, (tmp_path / "server.log").read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--host", "0.0.0.0"], "HYBRID_MEMORY_MCP_TOKEN"),
        (["--host", "192.0.2.10"], "bearer token is required"),
        (["--host", "0.0.0.0", "--token", "t"], "ALLOWED_HOSTS"),
    ],
)
def test_cli_refuses_an_unsafe_bind(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run(
        [*server_command(), "mcp", "--transport", "streamable-http", *args],
        env=child_env(HYBRID_MEMORY_PATH=str(tmp_path / "memory")),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert message in done.stderr
    assert not (tmp_path / "memory").exists()  # refused before opening the store


def test_non_loopback_without_token_is_refused_in_code(tmp_path: Path) -> None:
    store = open_store(tmp_path / "memory")
    try:
        settings = MCPServerSettings(transport="streamable-http", host="10.1.2.3")
        with pytest.raises(InvalidInputError, match="bearer token is required"):
            build_http_app(create_server(store, settings), settings)
        ok = MCPServerSettings(host="10.1.2.3", token="secret")
        build_http_app(create_server(store, ok), ok)  # with a token it starts
    finally:
        store.close()


@pytest.fixture(scope="module")
def http_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    memory = open_store(tmp_path_factory.mktemp("http"), sync_interval=0)
    yield memory
    memory.close()


def test_http_refusals(http_store: HybridMemory) -> None:
    before = http_store.count()
    limit = 64 * 1024
    with http_server(http_store, token=TOKEN, max_body_bytes=limit) as url:
        body = json.dumps(INITIALIZE).encode()
        auth = {"Authorization": f"Bearer {TOKEN}"}
        # Token: missing, wrong, wrong scheme.
        assert post(url, body) == 401
        assert post(url, body, Authorization="Bearer wrong-token") == 401
        assert post(url, body, Authorization=TOKEN) == 401
        # Origin: a foreign web page (DNS rebinding, CSRF) is refused; loopback pages pass.
        assert post(url, body, Origin="http://evil.example", **auth) == 403
        assert post(url, body, Origin="http://127.0.0.1:3000", **auth) == 200
        # Host: a rebound DNS name is refused.
        assert post(url, body, Host="evil.example:80", **auth) == 421
        # Body size: above the limit, 413 before anything is parsed.
        store_call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "store_memory", "arguments": {"text": "x" * (limit + 1)}},
        }
        assert post(url, json.dumps(store_call).encode(), **auth) == 413
        # And the right request passes.
        assert post(url, body, **auth) == 200
    assert http_store.count() == before


def test_http_allowed_origin_option(http_store: HybridMemory) -> None:
    with http_server(http_store, allowed_origins=["https://app.example"]) as url:
        body = json.dumps(INITIALIZE).encode()
        assert post(url, body, Origin="https://app.example") == 200
        assert post(url, body, Origin="https://other.example") == 403
        assert post(url, body) == 200  # no token configured: not asked for on loopback


async def test_concurrent_http_sessions_lose_nothing(http_store: HybridMemory) -> None:
    sessions, per_session = 6, 8
    stored: dict[str, str] = {}
    seen_errors: list[str] = []
    with http_server(http_store, token=TOKEN) as url:

        async def agent(number: int) -> None:
            async with authorised_client(url) as client:
                for i in range(per_session):
                    text = f"agent {number} note {i}: the codeword is zq{number}x{i}"
                    result = await client.call_tool(
                        "store_memory", {"text": text, "tags": [f"agent{number}"]}
                    )
                    if result.is_error:
                        seen_errors.append(result.content[0].text)
                        continue
                    stored[result.structured_content["id"]] = text
                    found = await client.call_tool(
                        "search_memory", {"query": f"codeword zq{number}x{i}", "k": 3}
                    )
                    if found.is_error:
                        seen_errors.append(found.content[0].text)

        async with anyio.create_task_group() as group:
            for number in range(sessions):
                group.start_soon(agent, number)

        assert seen_errors == []
        assert len(stored) == sessions * per_session
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            stats = structured(await client.call_tool("memory_stats", {}))
            assert stats["count"] >= sessions * per_session
            assert stats["in_step"] is True
            for memory_id, text in stored.items():
                codeword = text.rsplit(" ", 1)[1]
                hits = structured(
                    await client.call_tool("search_memory", {"query": codeword, "k": 1})
                )["hits"]
                assert hits[0]["id"] == memory_id, (codeword, hits)
    for memory_id, text in stored.items():
        assert http_store.get(memory_id).text == text


def test_module_entry_and_core_subcommand_share_one_parser() -> None:
    # ``python -m hybrid_memory_mcp.cli --help`` and ``hybrid-memory mcp --help`` describe
    # the same options (one parser).
    direct = subprocess.run(
        [sys.executable, "-m", "hybrid_memory_mcp.cli", "--help"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    via_core = subprocess.run(
        [*server_command(), "mcp", "--help"],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert direct.returncode == via_core.returncode == 0
    assert "--transport" in direct.stdout and "--token" in via_core.stdout
    assert direct.stdout.split("\n", 1)[1] == via_core.stdout.split("\n", 1)[1]
