"""The browse and search pages' filters: from the query string to a hybrid-memory
filter (Chroma ``where`` syntax) plus a time window, and back to a query string.

Pure: the time phrases ("last week", "in March") are read by a function the caller
passes (the store's own reading of them; see :mod:`hybrid_memory_ui.store`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlencode

#: Time presets: their key in the query string, their label, how far back they reach.
TIME_PRESETS: dict[str, tuple[str, timedelta]] = {
    "24h": ("last 24 hours", timedelta(hours=24)),
    "7d": ("last 7 days", timedelta(days=7)),
    "30d": ("last 30 days", timedelta(days=30)),
    "365d": ("last 365 days", timedelta(days=365)),
}
#: Phrases offered beside the presets (any phrase hybrid-memory reads works).
TIME_PHRASES = ("today", "yesterday", "this week", "last week", "this month", "last month")
TAG_MODES = ("any", "all")

Window = tuple[datetime | None, datetime | None]
PhraseReader = Callable[[str], Window | None]


class FilterError(ValueError):
    """A filter the page cannot apply; the message names the field."""


def namespace_path(ns: str) -> tuple[str, ...]:
    """The namespace path a page's ``ns`` parameter names: ``""`` the store itself,
    ``"team"`` its namespace ``team``, ``'["team", "alice"]'`` (a JSON list) namespace
    ``alice`` inside ``team``."""
    if not ns:
        return ()
    if not ns.startswith("["):
        return (ns,)
    try:
        names = json.loads(ns)
    except ValueError:
        names = None
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise FilterError(f"ns: expected a namespace name or a JSON list of names, got {ns!r}")
    return tuple(names)


def namespace_param(path: tuple[str, ...]) -> str:
    """The ``ns`` parameter naming ``path`` (the inverse of :func:`namespace_path`)."""
    if not path:
        return ""
    if len(path) == 1 and not path[0].startswith("["):
        return path[0]
    return json.dumps(list(path), ensure_ascii=False)


def namespace_label(ns: str) -> str:
    """``team / alice``: a namespace path as people read it."""
    try:
        return " / ".join(namespace_path(ns))
    except FilterError:
        return ns


@dataclass(frozen=True)
class PageFilter:
    """What a browse or search page is narrowed to, as the query string gave it."""

    tags: tuple[str, ...] = ()
    tag_mode: str = "any"
    when: str = ""
    key: str = ""
    value: str = ""
    namespace: str = ""
    after: datetime | None = None
    before: datetime | None = None
    where: dict[str, Any] | None = None
    #: The time the relative parts ("7d", "last week") were read against: a bulk change
    #: confirmed later reads them against the same time, so it acts on what was shown.
    now: datetime | None = None
    #: False for the filter of a query string the page could not read (kept as typed,
    #: to show it again; it matches nothing and offers no change).
    valid: bool = True

    @property
    def active(self) -> bool:
        return bool(self.tags or self.when or self.key)

    @classmethod
    def as_typed(cls, params: Mapping[str, str]) -> PageFilter:
        """The filter of a query string the page could not read, as the person typed
        it: shown again in the form, applied to nothing."""
        return cls(
            tags=split_tags(params.get("tags", "")),
            tag_mode=params.get("tag_mode", "any") or "any",
            when=params.get("when", "").strip(),
            key=params.get("field", "").strip(),
            value=params.get("value", ""),
            namespace=params.get("ns", "").strip(),
            valid=False,
        )

    def with_time(self) -> dict[str, Any] | None:
        """``where`` with the time window joined in (for listing and counting; a search
        takes the window as ``after``/``before`` instead)."""
        parts: list[dict[str, Any]] = [] if self.where is None else [self.where]
        if self.after is not None:
            parts.append({"created_at": {"$gte": self.after}})
        if self.before is not None:
            parts.append({"created_at": {"$lt": self.before}})
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {"$and": parts}

    def params(self) -> dict[str, str]:
        """The query-string parameters that give this filter again (empty ones left out)."""
        given = {
            "tags": ", ".join(self.tags),
            "tag_mode": self.tag_mode if self.tag_mode != "any" else "",
            "when": self.when,
            "field": self.key,
            "value": self.value if self.key else "",
            "ns": self.namespace,
        }
        return {k: v for k, v in given.items() if v}

    def query_string(self, **extra: Any) -> str:
        params: dict[str, Any] = self.params()
        params.update({k: v for k, v in extra.items() if v not in (None, "")})
        return urlencode(params)


def split_tags(text: str) -> tuple[str, ...]:
    """``"a, b  c"`` -> ``("a", "b", "c")``: commas or spaces between tags."""
    return tuple(dict.fromkeys(t for t in text.replace(",", " ").split() if t))


def metadata_value(text: str) -> Any:
    """A metadata value as typed: ``true``/``false``, a number, a ``"quoted"`` string (to
    match the text ``"3"``), else the text itself."""
    value = text.strip()
    if value in ("true", "false"):
        return value == "true"
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        return value[1:-1]
    try:
        number = json.loads(value)
    except ValueError:
        return value
    return number if isinstance(number, (int, float)) else value


def tag_condition(tags: tuple[str, ...], mode: str) -> dict[str, Any] | None:
    if not tags:
        return None
    each = [{"tags": {"$contains": t}} for t in tags]
    if len(each) == 1:
        return each[0]
    return {"$or" if mode == "any" else "$and": each}


def parse_filter(params: Mapping[str, str], now: datetime, read_phrase: PhraseReader) -> PageFilter:
    """The filter a page's query string names; :class:`FilterError` for one it cannot
    apply (an unknown tag mode, a time phrase not understood)."""
    namespace = params.get("ns", "").strip()
    namespace_path(namespace)  # a malformed one is named here
    tags = split_tags(params.get("tags", ""))
    mode = params.get("tag_mode", "any") or "any"
    if mode not in TAG_MODES:
        raise FilterError(f"tag_mode: expected one of {', '.join(TAG_MODES)}, got {mode!r}")
    when = params.get("when", "").strip()
    after: datetime | None = None
    before: datetime | None = None
    if when in TIME_PRESETS:
        after = now - TIME_PRESETS[when][1]
    elif when:
        window = read_phrase(when)
        if window is None:
            raise FilterError(
                f"when: {when!r} is not a time hybrid-memory reads; try a preset "
                f"({', '.join(TIME_PRESETS)}) or a phrase such as "
                f"{', '.join(repr(p) for p in TIME_PHRASES[:4])}, 'in March', '3 days ago'"
            )
        after, before = window
    name = params.get("field", "").strip()
    value = params.get("value", "")
    parts = [c for c in (tag_condition(tags, mode),) if c is not None]
    if name:
        if name in ("tags", "created_at", "updated_at"):
            raise FilterError(
                f"field: {name!r} is not a metadata field; use the tag and time filters"
            )
        parts.append({name: metadata_value(value)})
    where = None if not parts else parts[0] if len(parts) == 1 else {"$and": parts}
    return PageFilter(
        tags=tags,
        tag_mode=mode,
        when=when,
        key=name,
        value=value,
        namespace=namespace,
        after=after,
        before=before,
        where=where,
        now=now,
    )
