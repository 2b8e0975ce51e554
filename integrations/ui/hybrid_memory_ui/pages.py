"""The pages that only read: browse (and search, at the same address), one memory,
stats, the export/import page, the live-update poll and the login form."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from hybrid_memory import HybridMemoryError, MemoryNotFoundError
from hybrid_memory_ui import charts
from hybrid_memory_ui.filters import (
    TAG_MODES,
    TIME_PHRASES,
    TIME_PRESETS,
    FilterError,
    PageFilter,
    parse_filter,
)
from hybrid_memory_ui.highlight import highlight
from hybrid_memory_ui.render import Page, page_of
from hybrid_memory_ui.rows import hit_rows, memory_rows
from hybrid_memory_ui.stats import figures
from hybrid_memory_ui.store import LEG_MODES, Changes, utc_now

#: Messages a write's redirect may ask the next page to show (only these: a message in
#: the address cannot put words of an attacker's choosing on the page).
DONE_MESSAGES = {
    "saved": "Saved.",
    "deleted": "Deleted {n} memory.",
    "bulk-deleted": "Deleted {n} memories.",
    "retagged": "Re-tagged {n} memories.",
    "merged": "Merged {n} other memories into this one.",
}
SEARCH_SIZES = (10, 20, 50)


def _int(
    params: Mapping[str, str], name: str, default: int, allowed: range | tuple[int, ...]
) -> int:
    try:
        value = int(params.get(name, default))
    except ValueError:
        return default
    return value if value in allowed else default


def done_message(params: Mapping[str, str]) -> str | None:
    template = DONE_MESSAGES.get(params.get("done", ""))
    if template is None:
        return None
    n = _int(params, "n", 0, range(0, 10**9))
    return template.format(n=n)


def read_filter(request: Request, params: Mapping[str, str] | None = None) -> PageFilter:
    """The filter the request names (its query string, or ``params`` for a form)."""
    store = page_of(request).store
    given = request.query_params if params is None else params
    namespace = given.get("ns", "").strip()
    now = utc_now()
    return parse_filter(given, now, lambda phrase: store.read_phrase(namespace, phrase, now))


def _filter_context(request: Request) -> dict[str, Any]:
    return {
        "namespaces": page_of(request).store.namespaces(),
        "presets": TIME_PRESETS,
        "phrases": TIME_PHRASES,
        "tag_modes": TAG_MODES,
    }


def home(request: Request) -> Response:
    """``/``: the newest memories, paged and filtered; ``/?q=...``: a search."""
    page = page_of(request)
    params = request.query_params
    query = params.get("q", "").strip()
    part = params.get("part") == "list"
    context: dict[str, Any] = {"q": query, "done": done_message(params), "error": None}
    try:
        chosen = read_filter(request)
    except (FilterError, HybridMemoryError) as exc:
        chosen, context["error"] = PageFilter(namespace=params.get("ns", "")), str(exc)
    context["filter"] = chosen
    view = page.store.view(chosen.namespace)
    if not part:
        context.update(_filter_context(request))
    if query:
        context["changes"] = page.store.changes_now(chosen.namespace)
        return _search(request, page, query, chosen, context, part)
    size = _int(params, "size", 50, page.config.page_sizes)
    number = _int(params, "page", 1, range(1, 10**9))
    where = chosen.with_time()
    memories: list[Any] = []
    total = 0
    if context["error"] is None:
        try:
            total = page.store.count(view, where)
            memories = view.list_memories(
                where, limit=size, offset=(number - 1) * size, newest_first=True
            )
        except HybridMemoryError as exc:
            context["error"] = str(exc)
    unfiltered = where is None and context["error"] is None
    context["changes"] = page.store.changes_now(chosen.namespace, total if unfiltered else None)
    pages_total = max(1, -(-total // size))
    context.update(
        memories=memories,
        rows=memory_rows(memories, chosen.namespace, not page.config.read_only),
        total=total,
        size=size,
        number=number,
        pages_total=pages_total,
    )
    return page.render(request, "_list.html" if part else "browse.html", **context)


def _search(
    request: Request,
    page: Page,
    query: str,
    chosen: PageFilter,
    context: dict[str, Any],
    part: bool,
) -> Response:
    params = request.query_params
    leg = params.get("leg", "fused")
    leg = leg if leg in LEG_MODES else "fused"
    k = _int(params, "k", 20, SEARCH_SIZES)
    result = None
    if context["error"] is None:
        try:
            result = page.store.search(query, chosen, leg=leg, k=k)
        except HybridMemoryError as exc:
            context["error"] = str(exc)
    hits = list(result or [])
    matched = list(result.matched_tags) if result is not None else []
    texts = [highlight(hit.text, query) for hit in hits]
    context["rows"] = hit_rows(hits, texts, matched, chosen.namespace)
    context.update(result=result, hits=hits, leg=leg, legs=LEG_MODES, k=k, sizes=SEARCH_SIZES)
    return page.render(request, "_hits.html" if part else "search.html", **context)


def changes(request: Request) -> Response:
    """The live-update poll: 204 when nothing changed since the page was drawn, else the
    next poller and the event (``HX-Trigger: memories-changed``) that redraws the list."""
    page = page_of(request)
    params = request.query_params
    namespace = params.get("ns", "")
    try:
        seen = Changes(count=int(params.get("count", "-1")), since=float(params.get("since", "0")))
    except ValueError:
        seen = Changes(count=-1, since=0.0)
    now = page.store.changes(namespace, seen)
    if now is None:
        return Response(status_code=204)
    html = page.env.get_template("_poller.html").render(
        changes=now, ns=namespace, config=page.config
    )
    return HTMLResponse(html, headers={"HX-Trigger": "memories-changed"})


def memory_page(request: Request) -> Response:
    """``/memory?id=...``: one memory, its related memories, and its edit form."""
    page = page_of(request)
    memory_id = request.query_params.get("id", "")
    namespace = request.query_params.get("ns", "")
    view = page.store.view(namespace)
    try:
        memory = view.get(memory_id)
    except MemoryNotFoundError:
        return page.render(request, "missing.html", status=404, memory_id=memory_id, ns=namespace)
    except HybridMemoryError as exc:
        return page.render(request, "missing.html", status=400, memory_id=memory_id, error=str(exc))
    related = view.related(memory.id, k=10)
    return page.render(
        request,
        "memory.html",
        memory=memory,
        related=related,
        done=done_message(request.query_params),
        error=None,
        form=None,
    )


def delete_page(request: Request) -> Response:
    """``/memory/delete?id=...``: the confirmation before a memory is deleted."""
    page = page_of(request)
    memory_id = request.query_params.get("id", "")
    namespace = request.query_params.get("ns", "")
    try:
        memory = page.store.view(namespace).get(memory_id)
    except HybridMemoryError:
        return page.render(request, "missing.html", status=404, memory_id=memory_id)
    return page.render(request, "delete.html", memory=memory)


def stats_page(request: Request) -> Response:
    page = page_of(request)
    namespace = request.query_params.get("ns", "")
    view = page.store.view(namespace)
    found = figures(view, page.store.namespaces() if not namespace else [])
    line = found.timeline
    return page.render(
        request,
        "stats.html",
        figures=found,
        per_bucket=charts.column_chart(
            line.labels, line.counts, title=f"memories created per {line.unit}"
        ),
        growth=charts.column_chart(line.labels, line.cumulative, title="memories over time"),
        tag_chart=charts.bar_chart(
            [t for t, _ in found.top_tags],
            [c for _, c in found.top_tags],
            title="tags by number of memories",
        ),
        namespace_chart=charts.bar_chart(
            [n for n, _ in found.namespaces],
            [c for _, c in found.namespaces],
            title="memories per namespace",
        ),
    )


def transfer_page(request: Request) -> Response:
    page = page_of(request)
    view = page.store.view(request.query_params.get("ns", ""))
    return page.render(request, "transfer.html", count=view.count(), report=None, error=None)


def login_form(request: Request) -> Response:
    target = request.query_params.get("next", "/")
    return page_of(request).render(request, "login.html", target=safe_target(target), error=None)


def safe_target(target: str) -> str:
    """A path on this server to go to after logging in (never another site)."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target
