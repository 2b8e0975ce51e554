"""The store as the page sees it: the namespace views, the searches (fused or one leg
alone), the time phrases and whether anything changed since a page was drawn. On
hybrid-memory's public API only."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from hybrid_memory import HybridMemory, HybridMemoryError, InvalidInputError, SearchResult
from hybrid_memory_ui.filters import PageFilter, Window

#: The search modes the page offers: every leg fused, or one leg alone.
LEG_MODES = {
    "fused": "all legs fused",
    "vector": "vector leg alone",
    "keyword": "keyword leg alone",
}


#: A filter every memory passes (created at or after the year 1): a count with it is
#: answered by the keyword index (see :meth:`PageStore.count`).
EVERY_MEMORY: dict[str, Any] = {"created_at": {"$gte": datetime(1, 1, 1, tzinfo=timezone.utc)}}


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class Changes:
    """What a page last saw of its store: the count, and the newest update time."""

    count: int
    since: float


class PageStore:
    """One open store (or namespace view) and the namespaces under it."""

    def __init__(self, memory: HybridMemory, remember_seconds: float = 5.0) -> None:
        self.root = memory
        self._remember = remember_seconds
        self._namespaces: tuple[float, list[str]] | None = None

    def view(self, namespace: str = "") -> HybridMemory:
        """The store, or its namespace ``namespace`` (opened once, then kept by the store).
        Only a namespace that exists: opening one makes its collection, and a page asked
        for (a GET, which any site can make a browser send) must not write."""
        if not namespace:
            return self.root
        if namespace not in self.namespaces() and namespace not in self.namespaces(fresh=True):
            raise InvalidInputError(
                "ns", f"no namespace {namespace!r} under this store (see the stats page)"
            )
        return self.root.namespace(namespace)

    def namespaces(self, *, fresh: bool = False) -> list[str]:
        """The namespaces under the store; none when the store cannot list them here (a
        process that does not own an embedded path may not: the page then offers the
        store alone, and a namespace is still reachable by its name in ``?ns=``)."""
        known = self._namespaces
        now = time.monotonic()
        if known is not None and now - known[0] < self._remember and not fresh:
            return known[1]  # every page lists them: one look at the store per few seconds
        try:
            names = self.root.namespaces()
        except HybridMemoryError:
            names = []
        self._namespaces = (now, names)
        return names

    def read_phrase(self, namespace: str, phrase: str, now: datetime) -> Window | None:
        """The window a time phrase ("last week", "in March", "3 days ago") names, read the
        way the store's own search reads one (the window its result reports), or None for
        a phrase that names none."""
        reader = self.view(namespace).with_settings(time_phrases="narrow")
        found = reader.search(phrase, k=1, now=now).time_window
        if found is None or found.kind != "window":
            return None
        return found.start, found.end

    def search(self, query: str, page: PageFilter, *, leg: str, k: int) -> SearchResult:
        """The hits for ``query`` within ``page``'s filter: every leg fused, or with
        ``leg`` the vector or keyword leg alone (its share of the fusion set to all, the
        tag leg's to none: the hits are that leg's ranking; every hit still shows the
        ranks the other legs gave it)."""
        view = self.view(page.namespace)
        options: dict[str, Any] = {
            "k": k,
            "filter": page.where,
            "after": page.after,
            "before": page.before,
        }
        if leg == "fused":
            return view.search(query, **options)
        if leg not in LEG_MODES:
            raise ValueError(f"leg: expected one of {', '.join(LEG_MODES)}, got {leg!r}")
        alone = view.with_settings(tag_weight=0.0)
        return alone.search(query, alpha=1.0 if leg == "vector" else 0.0, **options)

    def count(self, view: HybridMemory, where: dict[str, Any] | None = None) -> int:
        """How many memories of ``view`` pass ``where`` (all of them without one), as the
        keyword index holds them: the same rows the listing pages through, and a count
        the index keeps until the next write (the collection's own count, which an
        unfiltered ``count()`` asks, takes ~10 ms at 100,000 memories, every time)."""
        return view.count(EVERY_MEMORY if where is None else where)

    def changes(self, namespace: str, seen: Changes) -> Changes | None:
        """What changed since ``seen`` (None: nothing): another count, or a memory updated
        after the newest update seen. Other processes' writes reach the index by the
        store's own periodic check (every ``sync_interval``), which these counts set off."""
        view = self.view(namespace)
        count = self.count(view)
        since = datetime.fromtimestamp(seen.since, timezone.utc)
        updated = {"updated_at": {"$gt": since}}
        fresh = view.count(updated)
        if count == seen.count and not fresh:
            return None
        newer = view.list_memories(updated, limit=1000) if fresh else []
        latest = max(
            (m.updated_at.timestamp() for m in newer if m.updated_at is not None),
            default=seen.since,
        )
        return Changes(count=count, since=max(latest, seen.since))

    def changes_now(self, namespace: str, count: int | None = None) -> Changes:
        """The state a page drawn now shows (``count``: the store's count, when the page
        has just read it)."""
        if count is None:
            count = self.count(self.view(namespace))
        return Changes(count=count, since=utc_now().timestamp())
