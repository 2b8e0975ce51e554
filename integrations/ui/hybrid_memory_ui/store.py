"""The store as the page sees it: the namespace views, the searches (fused or one leg
alone), the time phrases and whether anything changed since a page was drawn. On
hybrid-memory's public API only."""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from hybrid_memory import HybridMemory, HybridMemoryError, SearchResult, StoreNotFoundError
from hybrid_memory_ui.filters import PageFilter, Window, namespace_param, namespace_path

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


#: An export page counts the memories of at most this many namespaces.
COUNTED_NAMESPACES = 200


@dataclass(frozen=True)
class ExportCount:
    """What an export writes: ``own`` memories of the store (or namespace) itself and
    ``under`` in its ``namespaces`` (all of them when ``complete``; else the first
    counted)."""

    own: int
    under: int
    namespaces: int
    complete: bool

    @property
    def total(self) -> int:
        return self.own + self.under


@dataclass(frozen=True)
class Changes:
    """What a page last saw of its store: the count, and the newest update time."""

    count: int
    since: float


class PageStore:
    """One open store (or namespace view) and the namespaces under it, at any depth."""

    def __init__(self, memory: HybridMemory, remember_seconds: float = 5.0) -> None:
        self.root = memory
        self._remember = remember_seconds
        self._children: dict[tuple[str, ...], tuple[float, list[str]]] = {}
        # Each namespace's view that reads time words in a query (made once: a view made
        # with other settings validates them again, a few milliseconds).
        self._reading_time: dict[str, HybridMemory] = {}

    def view(self, ns: str = "") -> HybridMemory:
        """The store, or the namespace the page parameter ``ns`` names (a name, or a JSON
        list of names for a nested one; opened once, then kept by the store). Only a
        namespace that exists: a page asked for (a GET, which any site can make a browser
        send) creates nothing; :class:`StoreNotFoundError` for one that does not exist."""
        view = self.root
        path = namespace_path(ns)
        for depth, name in enumerate(path):
            above = path[:depth]
            if name not in self.namespaces(above) and name not in self.namespaces(
                above, fresh=True
            ):
                where = " / ".join(above) or "this store"
                raise StoreNotFoundError(
                    name, f"no namespace {name!r} under {where} (see the stats page)"
                )
            view = view.namespace(name)  # listed: it exists, opening it creates nothing
        return view

    def namespaces(self, path: tuple[str, ...] = (), *, fresh: bool = False) -> list[str]:
        """The namespaces directly under the store's namespace ``path``; none when the
        store cannot list them here (a process that does not own an embedded path may
        not: the page then offers the store alone)."""
        known = self._children.get(path)
        now = time.monotonic()
        if known is not None and now - known[0] < self._remember and not fresh:
            return known[1]  # every page lists them: one look at the store per few seconds
        try:
            names = (
                self.view(namespace_param(path)).namespaces() if path else self.root.namespaces()
            )
        except HybridMemoryError:
            names = []
        self._children[path] = (now, names)
        return names

    def namespace_choices(self, ns: str = "") -> list[tuple[str, str]]:
        """The namespaces a page offers to switch to, as ``(ns parameter, label)``: the
        store's own, then the path of ``ns`` down from the store and the namespaces
        directly under it."""
        try:
            path = namespace_path(ns)
        except ValueError:
            path = ()
        paths: list[tuple[str, ...]] = [(name,) for name in self.namespaces()]
        for depth in range(2, len(path) + 1):
            paths.append(path[:depth])
        if path:
            with contextlib.suppress(HybridMemoryError):
                paths += [(*path, name) for name in self.namespaces(path)]
        unique = list(dict.fromkeys(paths))
        return [(namespace_param(p), " / ".join(p)) for p in unique]

    def read_phrase(self, namespace: str, phrase: str, now: datetime) -> Window | None:
        """The window a time phrase ("last week", "in March", "3 days ago") names, read the
        way the store's own search reads one (the window its result reports), or None for
        a phrase that names none."""
        reader = self.view(namespace).with_settings(time_phrases="narrow")
        found = reader.search(phrase, k=1, now=now).time_window
        if found is None or found.kind != "window":
            return None
        return found.start, found.end

    def search(
        self, query: str, page: PageFilter, *, leg: str, k: int, read_time: bool = True
    ) -> SearchResult:
        """The hits for ``query`` within ``page``'s filter: every leg fused, or with
        ``leg`` the vector or keyword leg alone (its share of the fusion set to all, the
        tag leg's to none: the hits are that leg's ranking; every hit still shows the
        ranks the other legs gave it). With ``read_time`` and no time filter, a time the
        query names ("last week", "in March") limits the hits to it, as the search box
        invites; the result's ``time_window`` says how it was read."""
        view = self.view(page.namespace)
        if read_time and page.after is None and page.before is None:
            reading = self._reading_time.get(page.namespace)
            if reading is None:
                reading = self._reading_time[page.namespace] = view.with_settings(
                    time_phrases="narrow"
                )
            view = reading
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

    def children_params(self, ns: str) -> list[tuple[str, str]]:
        """The namespaces directly under the page's namespace ``ns``, as ``(ns parameter,
        name)``."""
        path = namespace_path(ns)
        return [(namespace_param((*path, name)), name) for name in self.namespaces(path)]

    def export_count(self, view: HybridMemory) -> ExportCount:
        """What an export of ``view`` writes: its memories and those of every namespace
        under it, at any depth (counted up to :data:`COUNTED_NAMESPACES` namespaces)."""
        own = self.count(view)
        under = 0
        namespaces = 0
        pending = [view]
        while pending:
            current = pending.pop()
            try:
                names = current.namespaces()
            except HybridMemoryError:
                return ExportCount(own, under, namespaces, complete=False)
            for name in names:
                if namespaces >= COUNTED_NAMESPACES:
                    return ExportCount(own, under, namespaces, complete=False)
                child = current.namespace(name)  # listed: it exists
                namespaces += 1
                under += self.count(child)
                pending.append(child)
        return ExportCount(own, under, namespaces, complete=True)

    def count(self, view: HybridMemory, where: dict[str, Any] | None = None) -> int:
        """How many memories of ``view`` pass ``where`` (all of them without one), as the
        keyword index holds them: the same rows the listing pages through, and a count
        the index keeps until the next write (the collection's own count, which an
        unfiltered ``count()`` asks, grows with the collection and is asked every time;
        docs/ui.md has the figures)."""
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
