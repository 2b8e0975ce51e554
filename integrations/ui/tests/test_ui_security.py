"""The page's security, from outside: a memory holding HTML stays text in the browser,
foreign Host and Origin are refused and change nothing, --read-only refuses writes, the
token guards every page, and an off-loopback bind without a token does not start."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from _ui_support import (
    CHROMIUM,
    NO_CHROMIUM,
    REPO,
    child_env,
    chromium_browser,
    open_store,
    seed,
    stored,
    ui_command,
    ui_server,
)

needs_chromium = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=NO_CHROMIUM)

HOSTILE = [
    "<script>window.__xss = 'script'</script>",
    "<img src=x onerror=\"window.__xss = 'img'\">",
    '"><svg onload="window.__xss = \'svg\'">',
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(NO_CHROMIUM)
    yield from chromium_browser()


def _two(path: Path) -> None:
    seed(
        path,
        [
            {"text": "keep me safe", "id": "keep", "tags": ["k"]},
            {"text": "me too", "id": "also", "tags": ["k"]},
        ],
    )


@needs_chromium
def test_memories_holding_html_are_shown_as_text(tmp_path: Path, browser: Any) -> None:
    seed(
        tmp_path,
        [
            {
                "text": f"hostile {i} {text}",
                "id": f"x{i}",
                "tags": [f"<b>tag{i}</b>"],
                "metadata": {"note": text, "<i>key</i>": i},
            }
            for i, text in enumerate(HOSTILE)
        ],
    )
    with ui_server(tmp_path) as server:
        context = browser.new_context()
        page = context.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        for address in ("/", "/?q=hostile+script+img", "/memory?id=x1", "/stats"):
            page.goto(server.url + address)
            page.wait_for_load_state("load")
            assert page.evaluate("window.__xss") is None, address
            assert page.locator("script:not([src])").count() == 0, address
            assert page.locator("main img, main svg:not(.chart)").count() == 0, address
        page.goto(server.url + "/memory?id=x1")
        assert page.locator(".fulltext").inner_text() == f"hostile 1 {HOSTILE[1]}"
        assert "<b>tag1</b>" in page.locator("dl.facts").inner_text()
        page.goto(server.url + "/")
        assert HOSTILE[0] in page.locator("li.memory[data-id=x0] a.text").inner_text()
        assert dialogs == []
        context.close()


def test_foreign_host_and_origin_are_refused_and_change_nothing(tmp_path: Path) -> None:
    _two(tmp_path)
    with ui_server(tmp_path) as server:
        own = server.url
        port = urlsplit(own).port
        with httpx.Client(base_url=own, timeout=30) as client:
            # DNS rebinding: a page of evil.example whose name now points here.
            for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
                r = client.get("/", headers={"Host": host})
                assert r.status_code == 403, host
                r = client.post(
                    "/memory/delete",
                    data={"id": "keep"},
                    headers={"Host": host, "Origin": f"http://{host}"},
                )
                assert r.status_code == 403, host
            # Cross-site request forgery: a foreign Origin, a foreign Referer, neither.
            attempts: list[dict[str, str]] = [
                {"Origin": "http://evil.example"},
                {"Origin": "null"},
                {"Origin": f"http://localhost:{port + 1}"},
                {"Referer": "http://evil.example/page"},
                {},
            ]
            for headers in attempts:
                for path, data in (
                    ("/memory/delete", {"id": "keep"}),
                    ("/memory/edit", {"id": "keep", "text": "pwned"}),
                    ("/bulk", {"action": "delete", "scope": "matching", "step": "apply"}),
                    ("/import", {"ns": ""}),
                ):
                    r = client.post(path, data=data, headers=headers)
                    assert r.status_code == 403, (path, headers)
                    assert "403" in r.text
            # The same write from the server's own page goes through (the refusals above
            # were the checks, not a broken route).
            r = client.post("/memory/delete", data={"id": "also"}, headers={"Origin": own})
            assert r.status_code == 303
    after = stored(tmp_path)
    assert set(after) == {"keep"} and after["keep"].text == "keep me safe"


def test_read_only_offers_and_accepts_no_write(tmp_path: Path) -> None:
    _two(tmp_path)
    with (
        ui_server(tmp_path, "--read-only") as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        page = client.get("/memory?id=keep").text
        assert "edit-form" not in page and "Delete this memory" not in page
        assert 'id="bulk-form"' not in client.get("/").text
        assert 'action="/import"' not in client.get("/transfer").text
        r = client.post("/memory/delete", data={"id": "keep"}, headers={"Origin": server.url})
        assert r.status_code == 403 and "read-only" in r.text
        assert client.get("/export").status_code == 200  # reading is fine
    assert set(stored(tmp_path)) == {"keep", "also"}


def test_the_token_guards_every_page(tmp_path: Path) -> None:
    _two(tmp_path)
    token = "s3cret-token-for-the-test"
    with (
        ui_server(tmp_path, env={"HYBRID_MEMORY_UI_TOKEN": token}) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        r = client.get("/?q=keep", headers={"Accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"].startswith("/login?next=")
        assert client.get("/export").status_code == 401
        assert client.get("/static/style.css").status_code == 200
        bad = client.post("/login", data={"token": "wrong"}, headers={"Origin": server.url})
        assert bad.status_code == 401
        r = client.get("/export", headers={"Authorization": f"Bearer {token}"})
        assert r.status_code == 200 and '"keep"' in r.text
        r = client.post(
            "/login", data={"token": token, "next": "/stats"}, headers={"Origin": server.url}
        )
        assert r.status_code == 303 and r.headers["location"] == "/stats"
        assert client.get("/stats").status_code == 200  # the cookie now
        r = client.post(
            "/login",
            data={"token": token, "next": "//evil.example/"},
            headers={"Origin": server.url},
        )
        assert r.headers["location"] == "/"  # never sent to another site


def test_off_loopback_without_a_token_does_not_start(tmp_path: Path) -> None:
    done = subprocess.run(
        [*ui_command(), "--path", str(tmp_path), "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=str(REPO),
        timeout=120,
    )
    assert done.returncode == 2
    assert "HYBRID_MEMORY_UI_TOKEN" in done.stderr
    assert not any(tmp_path.iterdir())  # refused before the store was opened


def test_a_page_opens_only_namespaces_that_exist(tmp_path: Path) -> None:
    """Opening a namespace makes its collection: a GET (which any site can make a browser
    send) naming one that does not exist is refused and creates nothing."""
    store = open_store(tmp_path)
    store.namespace("team").add("a note of the team", id="t1")
    store.close()
    with (
        ui_server(tmp_path) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        shown = client.get("/?ns=team")
        assert shown.status_code == 200 and 'data-id="t1"' in shown.text
        for address in ("/?ns=junk", "/stats?ns=junk", "/export?ns=junk", "/memory?id=t1&ns=x"):
            refused = client.get(address)
            assert refused.status_code == 404, address
            assert "no namespace" in refused.text
    reopened = open_store(tmp_path)
    try:
        assert reopened.namespaces() == ["team"]
    finally:
        reopened.close()
