"""The documentation site opened from the file system (``site/index.html``, as a person
opens a built site without a server) searches: in Chromium (Debian's package, driven by
Playwright, as the page's tests drive it), a query typed in the search box lists pages.
Built with the same command CI runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"


@pytest.mark.slow
@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is absent")
def test_the_site_opened_from_files_searches(tmp_path: Path) -> None:
    playwright = pytest.importorskip("playwright.sync_api")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    assert (site / "search" / "search_index.js").is_file()
    # Nothing the search needs comes from another site.
    index = (site / "index.html").read_text()
    assert "unpkg.com" not in index and "iframe-worker-1.0.4/shim.js" in index
    with playwright.sync_playwright() as driver:
        browser = driver.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.goto((site / "index.html").as_uri())
            page.focus("input[data-md-component=search-query]")
            page.keyboard.type("namespace")
            page.wait_for_selector(".md-search-result__item", timeout=30_000)
            assert page.locator(".md-search-result__item").count() > 0
            assert "matching" in page.locator(".md-search-result__meta").inner_text()
        finally:
            browser.close()
