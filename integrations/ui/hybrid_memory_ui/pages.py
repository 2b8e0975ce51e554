"""The pages that only read: browse (and search, at the same address), one memory,
stats, the tags, the export/import page, the live-update poll and the login form. None
of them changes the store or creates anything in it (a namespace that does not exist is
an error, never a new one)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from hybrid_memory import HybridMemoryError, MemoryNotFoundError, StoreNotFoundError
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
from hybrid_memory_ui.stats import figures, tag_counts
from hybrid_memory_ui.store import LEG_MODES, Changes, utc_now

#: Messages a write's redirect may ask the next page to show (only these: a message in
#: the address cannot put words of an attacker's choosing on the page).
DONE_MESSAGES = {
    "saved": "Saved.",
    "added": "Added.",
    "duplicate": "That memory was already stored: here it is.",
    "similar": "Added. Other memories say nearly the same thing: they are listed below.",
    "deleted": "Deleted {n} {memories}.",
    "bulk-deleted": "Deleted {n} {memories}.",
    "retagged": "Re-tagged {n} {memories}.",
    "merged": "Merged {n} other {memories} into this one.",
}
SEARCH_SIZES = (10, 20, 50)
#: Related memories below this relevance are left out (docs/concepts/scores.md: a
#: threshold that means the same in every store).
RELATED_MIN_SCORE = 0.3
#: The tags page counts at most this many tags (alphabetically first), one count each.
TAGS_COUNTED = 1000


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
    return template.format(n=n, memories="memory" if n == 1 else "memories")


def reference_time(params: Mapping[str, str]) -> datetime:
    """The time a filter's relative parts are read against: the ``at`` a bulk form
    carries (the time its page was drawn), else now."""
    try:
        return datetime.fromtimestamp(float(params["at"]), timezone.utc)
    except (KeyError, ValueError, OverflowError, OSError):
        return utc_now()


def read_filter(request: Request, params: Mapping[str, str] | None = None) -> PageFilter:
    """The filter the request names (its query string, or ``params`` for a form)."""
    store = page_of(request).store
    given = request.query_params if params is None else params
    namespace = given.get("ns", "").strip()
    now = reference_time(given)
    return parse_filter(given, now, lambda phrase: store.read_phrase(namespace, phrase, now))


def here(request: Request) -> str:
    """This page's address (path and query, without the partial-page switch): where a
    memory's page leads back to."""
    params = [(k, v) for k, v in request.query_params.multi_items() if k not in ("part", "done")]
    return request.url.path + (f"?{urlencode(params)}" if params else "")


def safe_target(target: str) -> str:
    """A path on this server to go to (after logging in, back from a memory): never
    another site."""
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _filter_context(request: Request, ns: str) -> dict[str, Any]:
    return {
        "namespaces": page_of(request).store.namespace_choices(ns),
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
    status = 200
    try:
        chosen = read_filter(request)
        view = page.store.view(chosen.namespace)
    except (FilterError, HybridMemoryError) as exc:
        # Shown again as typed, matching nothing: no list, and no change offered.
        chosen, context["error"] = PageFilter.as_typed(params), str(exc)
        view = None
        status = 404 if isinstance(exc, StoreNotFoundError) else 400
    context["filter"] = chosen
    context["back"] = here(request)
    if not part:
        context.update(_filter_context(request, chosen.namespace))
    if query:
        if view is not None:
            context["changes"] = page.store.changes_now(chosen.namespace)
        return _search(request, page, query, chosen, context, part, status)
    size = _int(params, "size", 50, page.config.page_sizes)
    number = _int(params, "page", 1, range(1, 10**9))
    where = chosen.with_time()
    memories: list[Any] = []
    total = 0
    if view is not None:
        try:
            total = page.store.count(view, where)
            number = min(number, max(1, -(-total // size)))  # past the last page: the last
            memories = view.list_memories(
                where, limit=size, offset=(number - 1) * size, newest_first=True
            )
        except HybridMemoryError as exc:
            context["error"] = str(exc)
    if view is not None and context["error"] is None:
        unfiltered = where is None
        context["changes"] = page.store.changes_now(chosen.namespace, total if unfiltered else None)
    context.update(
        memories=memories,
        rows=memory_rows(
            memories, chosen.namespace, not page.config.read_only, back=context["back"]
        ),
        total=total,
        size=size,
        number=number,
        pages_total=max(1, -(-total // size)),
        offer_changes=context["error"] is None and not page.config.read_only,
    )
    return page.render(request, "_list.html" if part else "browse.html", status, **context)


def _search(
    request: Request,
    page: Page,
    query: str,
    chosen: PageFilter,
    context: dict[str, Any],
    part: bool,
    status: int,
) -> Response:
    params = request.query_params
    leg = params.get("leg", "fused")
    leg = leg if leg in LEG_MODES else "fused"
    k = _int(params, "k", 20, SEARCH_SIZES)
    read_time = params.get("time") != "off"
    result = None
    if context["error"] is None:
        try:
            result = page.store.search(query, chosen, leg=leg, k=k, read_time=read_time)
        except HybridMemoryError as exc:
            context["error"] = str(exc)
    hits = list(result or [])
    matched = list(result.matched_tags) if result is not None else []
    texts = [highlight(hit.text, query) for hit in hits]
    selectable = not page.config.read_only and context["error"] is None
    context["rows"] = hit_rows(
        hits, texts, matched, chosen.namespace, selectable=selectable, back=context["back"]
    )
    context.update(
        result=result,
        hits=hits,
        leg=leg,
        legs=LEG_MODES,
        k=k,
        sizes=SEARCH_SIZES,
        read_time=read_time,
        offer_changes=selectable and bool(hits),
    )
    return page.render(request, "_hits.html" if part else "search.html", status, **context)


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
    params = request.query_params
    memory_id = params.get("id", "").strip()
    namespace = params.get("ns", "")
    back = safe_target(params.get("back", "/"))
    if not memory_id:
        return page.render(
            request,
            "missing.html",
            status=404,
            memory_id="",
            problem="no memory chosen: open one from the list",
            back=back,
        )
    try:
        view = page.store.view(namespace)
        memory = view.get(memory_id)
    except MemoryNotFoundError:
        return page.render(
            request, "missing.html", status=404, memory_id=memory_id, ns=namespace, back=back
        )
    except HybridMemoryError as exc:
        status = 404 if isinstance(exc, StoreNotFoundError) else 400
        return page.render(
            request,
            "missing.html",
            status=status,
            memory_id=memory_id,
            problem=str(exc).replace("ids[0]", "id"),
            back=back,
        )
    return page.render(
        request,
        "memory.html",
        memory=memory,
        related=related_memories(view, memory.id),
        related_min=RELATED_MIN_SCORE,
        done=done_message(params),
        error=None,
        form=None,
        back=back,
    )


def related_memories(view: Any, memory_id: str) -> list[Any]:
    """The memories related to this one that score at least :data:`RELATED_MIN_SCORE`."""
    return [hit for hit in view.related(memory_id, k=10) if hit.score >= RELATED_MIN_SCORE]


def delete_page(request: Request) -> Response:
    """``/memory/delete?id=...``: the confirmation before a memory is deleted."""
    page = page_of(request)
    memory_id = request.query_params.get("id", "")
    namespace = request.query_params.get("ns", "")
    back = safe_target(request.query_params.get("back", "/"))
    try:
        memory = page.store.view(namespace).get(memory_id)
    except HybridMemoryError:
        return page.render(request, "missing.html", status=404, memory_id=memory_id, back=back)
    return page.render(request, "delete.html", memory=memory, back=back)


def stats_page(request: Request) -> Response:
    page = page_of(request)
    namespace = request.query_params.get("ns", "")
    view = page.store.view(namespace)
    children = page.store.children_params(namespace)
    found = figures(view, children)
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
            links=[
                f"/?{urlencode({'tags': t, 'ns': namespace} if namespace else {'tags': t})}"
                for t, _ in found.top_tags
            ],
        ),
        namespace_chart=charts.bar_chart(
            [label for _, label, _ in found.namespaces],
            [c for _, _, c in found.namespaces],
            title="memories per namespace",
        ),
    )


def tags_page(request: Request) -> Response:
    """``/tags``: every tag with how many memories carry it, and the form that renames,
    merges or removes tags (after a preview)."""
    page = page_of(request)
    params = request.query_params
    namespace = params.get("ns", "")
    view = page.store.view(namespace)
    counted = tag_counts(view, TAGS_COUNTED)
    return page.render(
        request,
        "tags.html",
        counted=counted,
        total=len(view.tags()),
        done=done_message(params),
        error=None,
    )


def transfer_page(request: Request) -> Response:
    page = page_of(request)
    namespace = request.query_params.get("ns", "")
    view = page.store.view(namespace)
    return page.render(
        request,
        "transfer.html",
        exported=page.store.export_count(view),
        report=None,
        error=None,
        preview=None,
    )


def login_form(request: Request) -> Response:
    target = request.query_params.get("next", "/")
    return page_of(request).render(request, "login.html", target=safe_target(target), error=None)
