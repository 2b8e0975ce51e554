"""Near-duplicates on the page: a memory's page lists the memories that say nearly the
same thing (``HybridMemory.similar``), and a group of them can be merged: one kept, the
others deleted or superseded by it, after a preview of exactly what will change.

Superseding keeps every memory and links them newest to oldest, the kept one first:
each memory supersedes the next older one of the group (a memory supersedes one other),
so searches rank the older ones below it and mark them ``superseded_by`` the kept one.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hybrid_memory import HybridMemory, HybridMemoryError, Memory, MemoryNotFoundError
from hybrid_memory_ui.render import page_of, query_string

#: What a merge does with the memories it does not keep.
MERGE_ACTIONS = ("supersede", "delete")
#: The most memories one group shows and merges.
MOST = 50
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class Plan:
    """A merge: the memory ``kept``, the ``others`` and what is done with them, and the
    ``links`` superseding writes, ``(newer id, older id)``."""

    kept: Memory
    others: tuple[Memory, ...]
    action: str
    links: tuple[tuple[str, str], ...]


def group_of(view: HybridMemory, memory: Memory) -> list[tuple[Memory, float | None]]:
    """``memory`` and the memories that say nearly the same thing, directly or through
    another of them (two restatements of a fact, each with a date of its own, through the
    fact: as a search collapses them), at most :data:`MOST` in all, newest first; each
    with its similarity to ``memory`` or to the member it was found from (None for
    ``memory`` itself)."""
    similarity: dict[str, float | None] = {memory.id: None}
    waiting = [memory.id]
    while waiting and len(similarity) < MOST:
        for found in view.similar(waiting.pop(0)):
            if found.id not in similarity and len(similarity) < MOST:
                similarity[found.id] = found.similarity
                waiting.append(found.id)
    others = [i for i in similarity if i != memory.id]
    members = [memory, *(view.get_many(others) if others else [])]
    pairs = [(m, similarity[m.id]) for m in members]
    return sorted(pairs, key=lambda pair: _when(pair[0]), reverse=True)


def plan(members: Sequence[Memory], keep: str, action: str) -> Plan:
    """What merging ``members`` into the one with id ``keep`` by ``action`` writes."""
    if action not in MERGE_ACTIONS:
        raise ValueError(f"action: expected one of {', '.join(MERGE_ACTIONS)}, got {action!r}")
    kept = next((m for m in members if m.id == keep), None)
    if kept is None:
        raise ValueError("keep: choose one of the memories being merged")
    others = tuple(
        sorted((m for m in members if m.id != keep), key=_when, reverse=True)  # newest first
    )
    links: tuple[tuple[str, str], ...] = ()
    if action == "supersede":
        chain = [kept, *others]
        links = tuple((newer.id, older.id) for newer, older in itertools.pairwise(chain))
    return Plan(kept, others, action, links)


def near_duplicates(request: Request) -> Response:
    """``/memory/similar?id=...``: the list on a memory's page (loaded into it)."""
    page = page_of(request)
    namespace = request.query_params.get("ns", "")
    view = page.store.view(namespace)
    try:
        memory = view.get(request.query_params.get("id", ""))
        group = group_of(view, memory)
    except HybridMemoryError as exc:
        return page.render(request, "_similar.html", status=404, memory=None, error=str(exc))
    return page.render(request, "_similar.html", memory=memory, group=group, error=None)


def merge_page(request: Request) -> Response:
    """``/memory/merge?id=...``: choose the memory to keep, the others to merge into it
    and how; with ``keep`` given, the preview of what the merge will change."""
    page = page_of(request)
    params = request.query_params
    namespace = params.get("ns", "")
    view = page.store.view(namespace)
    try:
        memory = view.get(params.get("id", ""))
        group = group_of(view, memory)
    except MemoryNotFoundError:
        return page.render(request, "missing.html", status=404, memory_id=params.get("id", ""))
    chosen = set(params.getlist("member")) if "keep" in params else {m.id for m, _ in group}
    members = [m for m, _ in group if m.id in chosen]
    keep = params.get("keep") or group[0][0].id
    action = params.get("action", "supersede")
    preview, error = None, None
    if "keep" in params:
        try:
            preview = plan(members, keep, action)
        except ValueError as exc:
            error = str(exc)
    return page.render(
        request,
        "merge.html",
        memory=memory,
        group=group,
        chosen=chosen,
        keep=keep,
        action=action,
        actions=MERGE_ACTIONS,
        preview=preview,
        texts={m.id: m.text for m, _ in group},
        error=error,
        status=400 if error else 200,
    )


async def merge(request: Request) -> Response:
    """``POST /memory/merge``: the merge the preview showed (``keep``, ``action``, the
    ``member`` ids), then the kept memory's page."""
    form = await request.form()
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    members = [v for v in form.getlist("member") if isinstance(v, str) and v]
    return await run_in_threadpool(_merge, request, fields, members)


def _merge(request: Request, form: Mapping[str, str], member_ids: list[str]) -> Response:
    page = page_of(request)
    namespace = form.get("ns", "")
    view = page.store.view(namespace)
    try:
        members = view.get_many(list(dict.fromkeys(member_ids)))
        merged = plan(members, form.get("keep", ""), form.get("action", ""))
    except (ValueError, HybridMemoryError) as exc:
        return page.render(request, "error.html", status=400, error=str(exc))
    if merged.action == "delete":
        if merged.others:
            view.delete([m.id for m in merged.others])
    else:
        view.update_many([{"id": newer, "supersedes": older} for newer, older in merged.links])
    target = query_string(id=merged.kept.id, ns=namespace, done="merged", n=len(merged.others))
    return RedirectResponse(f"/memory?{target}", status_code=303)


def _when(memory: Memory) -> datetime:
    return memory.created_at or _EPOCH
