"""Helpers of the page's tests: the real server in a subprocess (``hybrid-memory ui``),
Debian's chromium driven by Playwright, and stores seeded with the cheap embedding."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybrid_memory import HybridMemory

REPO = Path(__file__).resolve().parents[3]
if str(REPO) not in sys.path:  # tests.conftest (the cheap embedding) is imported from it
    sys.path.insert(0, str(REPO))
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
#: The cheap embedding of the tests (tests/conftest.py), for the server too.
EMBEDDING = ["--embedding", "tests.conftest:HashEmbedding", "--embedding-name", "test-hash-64"]
_SERVING = re.compile(r"serving .* at (http://\S+)/")


def open_store(path: Path | str) -> HybridMemory:
    """The test's own handle on the store, with the cheap embedding (another process
    beside the server: the core shares the path between them)."""
    from tests.conftest import HashEmbedding

    return HybridMemory(path=str(path), embedding=HashEmbedding(), embedding_name="test-hash-64")


def ui_command() -> list[str]:
    """``hybrid-memory`` as installed beside this interpreter (the console script)."""
    beside = Path(sys.executable).with_name("hybrid-memory")
    if beside.exists():
        return [str(beside), "ui"]
    found = shutil.which("hybrid-memory")
    return [found, "ui"] if found else [sys.executable, "-m", "hybrid_memory", "ui"]


def child_env(**extra: str) -> dict[str, str]:
    """A subprocess's environment: this checkout first on the path, offline, no token
    (unless given)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HYBRID_MEMORY_")}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p
    )
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    env.update(extra)
    return env


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    output: list[str]


@contextmanager
def ui_server(
    path: Path | str | None,
    *args: str,
    embedding: bool = True,
    env: dict[str, str] | None = None,
) -> Iterator[Server]:
    """``hybrid-memory ui --path PATH --port 0 ARGS`` running (no ``--path`` when ``path``
    is None: ARGS name the store); yields its URL once it listens, stops it after."""
    where = [] if path is None else ["--path", str(path)]
    command = [*ui_command(), *where, "--port", "0", "--poll-seconds", "0.5"]
    command += [*(EMBEDDING if embedding else []), *args]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=child_env(**(env or {})),
        cwd=str(REPO),
    )
    output: list[str] = []
    url = _wait_for_url(process, output, timeout=180)
    drain = threading.Thread(target=_drain, args=(process, output), daemon=True)
    drain.start()
    try:
        yield Server(url, process, output)
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _wait_for_url(process: subprocess.Popen[str], output: list[str], timeout: float) -> str:
    assert process.stdout is not None
    result: list[str] = []

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            output.append(line)
            found = _SERVING.search(line)
            if found:
                result.append(found.group(1))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout)
    if not result:
        process.kill()
        raise AssertionError("the server did not start:\n" + "".join(output))
    return result[0]


def _drain(process: subprocess.Popen[str], output: list[str]) -> None:
    assert process.stdout is not None
    for line in process.stdout:
        output.append(line)


#: Why the browser tests skip, when they do.
NO_CHROMIUM = f"{CHROMIUM} is absent (CI installs Debian's chromium: apt-get install chromium)"


def chromium_browser() -> Iterator[Any]:
    """Debian's chromium, headless, driven by Playwright (never a downloaded browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def seed(path: Path | str, items: list[dict[str, Any]]) -> list[str]:
    """Store ``items`` (add_many's mappings) and close the store again."""
    store = open_store(path)
    try:
        return store.add_many(items)
    finally:
        store.close()


def stored(path: Path | str) -> dict[str, Any]:
    """Every memory of the store as ``{id: Memory}``, read by this process."""
    store = open_store(path)
    try:
        return {m.id: m for m in store.list_memories()}
    finally:
        store.close()


@contextmanager
def chroma_server(folder: Path) -> Iterator[str]:
    """A real Chroma server (``chroma run``, installed with chromadb) on a free port."""
    import socket
    import time

    import chromadb

    chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    log = (folder / "chroma.log").open("wb")
    process = subprocess.Popen(
        [chroma, "run", "--path", str(folder / "db"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
                break
            except Exception as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    output = (folder / "chroma.log").read_text(errors="replace")
                    raise AssertionError(f"chroma did not start:\n{output}") from exc
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()
