"""Every client configuration in the plugin's README, started with the MCP Python SDK's
own client: the stdio ones as a desktop app launches them (``PATH`` reduced to
``/usr/bin:/bin``), the HTTP ones against the real HTTP server with its token. The
placeholders (the interpreter, the memory directory, the URL, the token) are swapped
for this machine's; everything else is read from the README as written."""

from __future__ import annotations

import json
import re
import sys
import textwrap
from pathlib import Path
from typing import Any

import httpx2
import pytest
from _mcp_test_support import REPO, child_env, http_server, open_store
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

README = REPO / "integrations" / "mcp" / "README.md"
PLACEHOLDER_PYTHON = "/home/me/.venvs/memory/bin/python"
PLACEHOLDER_PATH = "/home/me/.local/share/hybrid-memory"
PLACEHOLDER_URL = "http://127.0.0.1:8765/mcp"
PLACEHOLDER_TOKEN = "YOUR-TOKEN"
TOKEN = "config-token-0123456789"
DESKTOP_PATH = "/usr/bin:/bin"  # what a desktop app's child process gets, not the shell's


def configs() -> dict[str, str]:
    """The README's marked code blocks: ``<!-- config: NAME -->`` before each."""
    text = README.read_text()
    found = re.findall(r"<!-- config: ([\w-]+) -->\n```\w+\n(.*?)```", text, flags=re.S)
    return dict(found)


def test_the_readme_has_each_client_configuration() -> None:
    assert set(configs()) == {
        "claude-desktop",
        "vscode",
        "cursor-http",
        "vscode-http",
        "python-http",
    }


def server_entry(name: str) -> dict[str, Any]:
    document = json.loads(configs()[name])
    servers = document.get("mcpServers") or document["servers"]
    return servers["hybrid-memory"]  # type: ignore[no-any-return]


async def start_stdio(entry: dict[str, Any], memory_dir: Path, log: Path) -> dict[str, Any]:
    """Launch the entry as a desktop client would; store, then search once."""
    assert entry.get("type", "stdio") == "stdio"
    assert entry["command"] == PLACEHOLDER_PYTHON  # the advice: an absolute interpreter
    env = {k: v.replace(PLACEHOLDER_PATH, str(memory_dir)) for k, v in entry.get("env", {}).items()}
    # This checkout instead of the installed copy; a desktop app's bare PATH.
    params = StdioServerParameters(
        command=sys.executable,
        args=entry["args"],
        env={**child_env(), **env, "PATH": DESKTOP_PATH},
    )
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            stored = await session.call_tool("store_memory", {"text": "The printer is on floor 3"})
            found = await session.call_tool("search_memory", {"query": "where is the printer?"})
    assert not stored.is_error and not found.is_error, (stored.content, found.content)
    return {"stored": stored.structured_content, "found": found.structured_content}


@pytest.mark.parametrize("name", ["claude-desktop", "vscode"])
async def test_a_stdio_configuration_starts_without_the_shell_path(
    tmp_path: Path, name: str
) -> None:
    result = await start_stdio(server_entry(name), tmp_path / "memory", tmp_path / "err.log")
    assert result["found"]["hits"][0]["id"] == result["stored"]["id"]
    # The memory went to the directory the configuration named.
    with open_store(tmp_path / "memory") as memory:
        assert memory.get(result["stored"]["id"]).text == "The printer is on floor 3"


async def test_a_bare_command_name_is_not_found_without_the_shell_path(tmp_path: Path) -> None:
    """Why the README gives an absolute interpreter: with a desktop app's PATH, the
    console script installed beside this interpreter is not found."""
    script = Path(sys.executable).with_name("hybrid-memory")
    if str(script.parent) in DESKTOP_PATH.split(":"):
        pytest.skip("this interpreter lives on the desktop PATH itself")
    params = StdioServerParameters(
        command="hybrid-memory", args=["mcp"], env={**child_env(), "PATH": DESKTOP_PATH}
    )
    with (
        pytest.raises(OSError),  # FileNotFoundError: what the client reports as failed
        (tmp_path / "err.log").open("w") as errlog,
    ):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()


def http_entry(name: str) -> tuple[str, dict[str, str]]:
    entry = server_entry(name)
    assert entry.get("type", "http") == "http"
    assert entry["url"] == PLACEHOLDER_URL
    headers = {k: v.replace(PLACEHOLDER_TOKEN, TOKEN) for k, v in entry["headers"].items()}
    return entry["url"], headers


@pytest.mark.parametrize("name", ["cursor-http", "vscode-http"])
async def test_an_http_configuration_connects_with_its_headers(tmp_path: Path, name: str) -> None:
    _, headers = http_entry(name)
    with open_store(tmp_path / "memory") as memory, http_server(memory, token=TOKEN) as url:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            stored = await client.call_tool("store_memory", {"text": "Lunch is at noon"})
            assert not stored.is_error, stored.content
        assert memory.count() == 1


async def test_the_python_client_example_runs(tmp_path: Path) -> None:
    code = configs()["python-http"].replace(PLACEHOLDER_TOKEN, TOKEN)
    with open_store(tmp_path / "memory") as memory, http_server(memory, token=TOKEN) as url:
        memory.add("The editor theme is solarized")
        code = code.replace(PLACEHOLDER_URL, url)
        namespace: dict[str, Any] = {}
        exec("async def example():\n" + textwrap.indent(code, "    "), namespace)
        printed: list[Any] = []
        namespace["print"] = printed.append
        await namespace["example"]()
    (result,) = printed
    assert not result.is_error and "solarized" in result.structured_content["hits"][0]["text"]
