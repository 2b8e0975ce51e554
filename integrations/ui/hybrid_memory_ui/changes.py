"""The routes of the changes to many memories: a bulk delete or re-tag (of a selection
on the browse or search page, or of everything a browse filter matches) and a tag
renamed, merged or removed on the tags page. Each is posted twice: first for its preview
(how many memories, the first of them), then, confirmed, to apply it; see
:mod:`hybrid_memory_ui.bulk` for why the change is then exactly the one previewed.

A filter that cannot be read is an error, never "no filter": the change then offers
nothing. And a change of everything a filter matches never reaches more memories than
the page showed when it was asked for (the form says how many it showed)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode, urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hybrid_memory import HybridMemoryError
from hybrid_memory_ui.bulk import Bulk, ChangedMeanwhile, Preview
from hybrid_memory_ui.filters import FilterError, PageFilter, split_tags, tag_condition
from hybrid_memory_ui.pages import read_filter, safe_target
from hybrid_memory_ui.render import page_of

#: The fields of a browse page's filter, as a bulk form carries them.
FILTER_FIELDS = ("tags", "tag_mode", "when", "field", "value", "ns", "at")
TAG_ACTIONS = ("rename", "merge", "remove")


def form_fields(form: Any) -> dict[str, str]:
    """A posted form's text fields (one value each; files left out)."""
    return {k: v for k, v in form.items() if isinstance(v, str)}


def back_to(target: str, **params: Any) -> RedirectResponse:
    """A 303 to ``target`` (a path on this site) with ``params`` added to its query."""
    safe = safe_target(target)
    given = urlencode({k: v for k, v in params.items() if v not in (None, "")})
    joiner = "&" if urlsplit(safe).query else "?"
    return RedirectResponse(safe + (joiner + given if given else ""), status_code=303)


async def bulk(request: Request) -> Response:
    """``POST /bulk``: a bulk delete or re-tag, previewed, then applied."""
    form = await request.form()
    ids = tuple(v for v in form.getlist("ids") if isinstance(v, str) and v)
    return await run_in_threadpool(_bulk, request, form_fields(form), ids)


def _bulk(request: Request, form: Mapping[str, str], ids: tuple[str, ...]) -> Response:
    scope = form.get("scope", "selected")
    try:
        if scope not in ("selected", "matching"):
            raise FilterError(f"scope: expected selected or matching, got {scope!r}")
        chosen = read_filter(request, {k: form.get(k, "") for k in FILTER_FIELDS})
        change = Bulk(
            action=form.get("action", ""),
            ids=ids if scope == "selected" else (),
            page=chosen if scope == "matching" else None,
            add_tags=split_tags(form.get("add_tags", "")),
            remove_tags=split_tags(form.get("remove_tags", "")),
        )
        shown = _shown(form) if scope == "matching" else None
    except (FilterError, ValueError, HybridMemoryError) as exc:
        return _refused(request, form, str(exc))
    kept = {k: v for k, v in form.items() if k not in ("step", "digest", "ids")}
    return _preview_or_apply(
        request, change, chosen.namespace, form, shown, describe_bulk(change), kept, ("ids", ids)
    )


def _shown(form: Mapping[str, str]) -> int:
    """How many memories the page showed for its filter (what a change of everything
    matching may not exceed)."""
    try:
        shown = int(form.get("shown", ""))
    except ValueError:
        raise FilterError(
            "shown: a change of everything matching a filter needs the count the page "
            "showed; change it from the list"
        ) from None
    if shown < 0:
        raise FilterError(f"shown: expected a count, got {shown}")
    return shown


def describe_bulk(change: Bulk) -> str:
    """What the change is, in words, for its preview."""
    page = change.page
    if page is None:
        which = "The selected memories"
    elif page.active:
        parts = []
        if len(page.tags) == 1:
            parts.append(f"the tag {page.tags[0]}")
        elif page.tags:
            parts.append(f"{page.tag_mode} of the tags {', '.join(page.tags)}")
        if page.key:
            parts.append(f"{page.key} = {page.value}")
        which = "Every memory with " + " and ".join(parts) if parts else "Every memory"
        if page.when:
            which += f", created {page.when}"
    else:
        which = "Every memory (no filter)"
    what = "deleted" if change.action == "delete" else "re-tagged"
    tags = ""
    if change.add_tags:
        tags += f"; adds {', '.join(change.add_tags)}"
    if change.remove_tags:
        tags += f"; removes {', '.join(change.remove_tags)}"
    return f"{which}: {what}{tags}."


def _preview_or_apply(
    request: Request,
    change: Bulk,
    namespace: str,
    form: Mapping[str, str],
    shown: int | None,
    description: str,
    kept: Mapping[str, str],
    repeated: tuple[str, tuple[str, ...]],
) -> Response:
    """The preview of ``change`` (step ``preview``), or the change itself once confirmed
    (step ``apply``, with the preview's digest). ``kept``: the form's fields the
    confirmation sends again; ``repeated``: its one field of many values (the ids, the
    tags) and their values."""
    page = page_of(request)
    try:
        view = page.store.view(namespace)
        preview = change.preview(view)
    except HybridMemoryError as exc:
        return _refused(request, form, str(exc))
    if shown is not None and preview.considered > shown:
        return _refused(
            request,
            form,
            f"the filter now matches {preview.considered:,} memories, more than the "
            f"{shown:,} the page showed: nothing was changed; look at the list again",
        )
    back = safe_target(form.get("back", "/"))
    error = None
    if form.get("step") == "apply":
        try:
            n = change.apply(view, form.get("digest", ""))
        except ChangedMeanwhile as exc:
            error, preview = str(exc), change.preview(view)
        except HybridMemoryError as exc:
            return _refused(request, form, str(exc))
        else:
            done = "bulk-deleted" if change.action == "delete" else "retagged"
            return back_to(back, done=done, n=n)
    return _render(request, preview, change, description, kept, repeated, error, namespace)


def _render(
    request: Request,
    preview: Preview | None,
    change: Bulk | None,
    description: str,
    kept: Mapping[str, str],
    repeated: tuple[str, tuple[str, ...]],
    error: str | None,
    namespace: str,
    status: int = 200,
) -> Response:
    return page_of(request).render(
        request,
        "bulk.html",
        status=status if error is None or preview is None else 409,
        preview=preview,
        change=change,
        description=description,
        kept=kept,
        repeated=repeated,
        error=error,
        ns=namespace,
        back=safe_target(kept.get("back", "/")),
        target=request.url.path,
    )


def _refused(request: Request, form: Mapping[str, str], message: str) -> Response:
    """A change that offers nothing: its form could not be read."""
    return _render(request, None, None, "", form, ("ids", ()), message, form.get("ns", ""), 400)


async def tag_change(request: Request) -> Response:
    """``POST /tags/change``: tags renamed, merged or removed, previewed, then applied."""
    form = await request.form()
    tags = tuple(v for v in form.getlist("tag") if isinstance(v, str) and v)
    return await run_in_threadpool(_tag_change, request, form_fields(form), tags)


def tag_bulk(action: str, tags: tuple[str, ...], into: str, namespace: str) -> Bulk:
    """The re-tag that renames tag ``tags[0]`` to ``into``, merges ``tags`` into
    ``into`` (one of them, or a new one) or removes ``tags``, on every memory carrying
    one of them."""
    if action not in TAG_ACTIONS:
        raise FilterError(f"action: expected one of {', '.join(TAG_ACTIONS)}, got {action!r}")
    if not tags:
        raise FilterError("tag: tick the tags to change")
    target = split_tags(into)
    if action == "remove":
        add: tuple[str, ...] = ()
        remove = tags
    else:
        if len(target) != 1:
            raise FilterError(f"into: expected one tag to {action} into, got {into!r}")
        if action == "rename" and len(tags) != 1:
            raise FilterError("tag: rename one tag at a time (or merge several)")
        if action == "merge" and len(tags) < 2:
            raise FilterError("tag: tick two tags or more to merge")
        add = target
        remove = tuple(t for t in tags if t.lower() != target[0].lower())
    where = tag_condition(tags, "any")
    page = PageFilter(tags=tags, tag_mode="any", namespace=namespace, where=where)
    return Bulk(action="retag", ids=(), page=page, add_tags=add, remove_tags=remove)


def _tag_change(request: Request, form: Mapping[str, str], tags: tuple[str, ...]) -> Response:
    namespace = form.get("ns", "")
    action = form.get("action", "")
    into = form.get("into", "").strip()
    try:
        change = tag_bulk(action, tags, into, namespace)
    except (FilterError, ValueError) as exc:
        return _refused(request, form, str(exc))
    listed = ", ".join(tags)
    description = {
        "rename": f"Tag {listed} renamed {into} on every memory carrying it.",
        "merge": f"Tags {listed} merged into {into} on every memory carrying one of them.",
        "remove": f"Tags {listed} removed from every memory carrying them (the memories stay).",
    }[action]
    back = "/tags" + (f"?{urlencode({'ns': namespace})}" if namespace else "")
    given = {"back": back, **form}
    kept = {k: v for k, v in given.items() if k not in ("step", "digest", "tag")}
    return _preview_or_apply(
        request, change, namespace, given, None, description, kept, ("tag", tags)
    )
