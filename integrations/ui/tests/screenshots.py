"""The screenshots of docs/ui.md (docs/images/ui-*.png), taken by the browser the tests use
(Debian's chromium through Playwright) on a store written the way agents write one.

    python integrations/ui/tests/screenshots.py [--out docs/images]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from _ui_support import REPO, chromium_browser, ui_server

from hybrid_memory import HybridMemory

FACTS = [
    ("Alice prefers dark mode in every editor and terminal", ["alice", "ui", "preference"]),
    ("Alice's standup is at 9:30 on weekdays, video off", ["alice", "meetings"]),
    ("The staging database was moved to db-staging-2 on Tuesday", ["infra", "database"]),
    ("Bob is allergic to peanuts: no satay at the team lunch", ["bob", "food", "health"]),
    ("Deploys are frozen during the last week of each quarter", ["infra", "process"]),
    ("Alice asked for the quarterly report as a PDF, not slides", ["alice", "reports"]),
    ("The flaky test in payments was a timezone bug (fixed in #4521)", ["payments", "bugs"]),
    ("Carol's flight to Lisbon lands at 10:05 on Friday", ["carol", "travel"]),
    ("Bob prefers a light theme and large fonts", ["bob", "ui", "preference"]),
    ("Use the read replica for analytics queries, never the primary", ["database", "process"]),
    ("Alice's cat is called Miso; she mentions it in every retro", ["alice", "personal"]),
    ("The API rate limit is 600 requests per minute per key", ["api", "limits"]),
    ("Carol owns the on-call rotation for October", ["carol", "oncall"]),
    ("Payments retries use exponential backoff, capped at 5 attempts", ["payments", "api"]),
    ("Team lunch moved to Thursdays at the Thai place", ["food", "meetings"]),
]


AREAS = ["payments", "search", "infra", "api", "ui"]
OUTCOMES = [
    "approved after a small fix to the error messages",
    "asked for tests on the retry path",
    "merged; the deploy is scheduled for Monday",
    "blocked on the schema migration",
    "needs a second reviewer from the {area} team",
]
PEOPLE = ["Alice", "Bob", "Carol", "Dan"]


def memories(now: datetime) -> list[dict[str, object]]:
    """Hand-written facts, then the kind of notes agents keep while they work."""
    rng = random.Random(42)
    texts = [(text, tags) for text, tags in FACTS]
    for n in range(70):
        area = AREAS[n % len(AREAS)]
        person = PEOPLE[n % len(PEOPLE)]
        if n % 2:
            outcome = OUTCOMES[n % len(OUTCOMES)].format(area=area)
            texts.append(
                (
                    f"Reviewed PR #{4400 + n * 7} ({area}) with {person}: {outcome}",
                    [area, "review", person.lower()],
                )
            )
        else:
            texts.append(
                (
                    f"{person} reported that the {area} dashboard is slow after "
                    f"{rng.choice(['9:00', 'lunch', 'each deploy', 'midnight'])}",
                    [area, "performance", person.lower()],
                )
            )
    rng.shuffle(texts)
    return [
        {
            "text": text,
            "id": f"mem-{i:03d}",
            "tags": tags,
            "metadata": {
                "agent": rng.choice(["claude-code", "assistant", "ide"]),
                "session": i // 6,
            },
            "created_at": now - timedelta(hours=(len(texts) - i) * 6 + rng.randint(0, 5)),
        }
        for i, (text, tags) in enumerate(texts)
    ]


def build_store(path: Path) -> str:
    """The store; returns the id of the memory the one-memory screenshot shows."""
    now = datetime.now(timezone.utc).replace(microsecond=0)
    items = memories(now)
    store = HybridMemory(path=str(path))
    try:
        store.add_many(items)
        store.namespace("alice").add_many(
            [{"text": t, "tags": g} for t, g in FACTS if "alice" in g]
        )
    finally:
        store.close()
    return next(str(m["id"]) for m in items if str(m["text"]).startswith("Alice prefers dark"))


def _add_and_select(page: Any) -> None:
    page.click("details.add summary")
    page.fill("details.add textarea[name=text]", "Standup moves to 9:45 from Monday")
    page.fill("details.add input[name=tags]", "meetings, team")
    page.check("input[data-select-all]")


def _search_selected(page: Any) -> None:
    for box in page.locator("li.hit input[name=ids]").all()[:3]:
        box.check()
    page.select_option("select[name=action]", "retag")
    page.fill("input[name=add_tags]", "reviewed")


def _preview(page: Any) -> None:
    page.select_option("select[name=scope]", "matching")
    page.click("button:has-text('Preview')")
    page.wait_for_selector(".count")


#: Each screenshot: the address, what is done there first, whether the whole page is shot.
SHOTS: dict[str, tuple[str, Callable[[Any], None] | None, bool]] = {
    "ui-browse.png": ("/", None, False),
    "ui-search.png": ("/?q=what+theme+does+alice+like", None, False),
    "ui-memory.png": ("/memory?id={shown}", None, False),
    "ui-stats.png": ("/stats", None, True),
    "ui-add.png": ("/?size=20", _add_and_select, False),
    "ui-search-bulk.png": ("/?q=review+of+the+payments+api", _search_selected, False),
    "ui-preview.png": ("/?tags=performance", _preview, True),
    "ui-tags.png": ("/tags", None, False),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "images"))
    out = Path(parser.parse_args(argv).out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        shown = build_store(Path(folder))
        with ui_server(folder, embedding=False) as server:
            for browser in chromium_browser():
                page = browser.new_page(viewport={"width": 1180, "height": 860})
                for name, (address, action, whole) in SHOTS.items():
                    page.goto(server.url + address.format(shown=shown))
                    page.wait_for_load_state("networkidle")
                    if action is not None:
                        action(page)
                        page.wait_for_load_state("networkidle")
                    page.screenshot(path=str(out / name), full_page=whole)
                    size = (out / name).stat().st_size
                    print(f"{out / name}: {size // 1024} KB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
