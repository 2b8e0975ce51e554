"""The routes that change one memory (add, edit, delete) and the login form's post.
The security middleware has already checked the Host, the Origin, the token and
``--read-only`` before any of these runs. The changes to many memories are in
:mod:`hybrid_memory_ui.changes`, export and import in :mod:`hybrid_memory_ui.transfer`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from hybrid_memory import HybridMemoryError, MemoryNotFoundError
from hybrid_memory_ui.changes import back_to, form_fields
from hybrid_memory_ui.filters import FilterError, split_tags
from hybrid_memory_ui.pages import RELATED_MIN_SCORE, related_memories, safe_target
from hybrid_memory_ui.render import page_of
from hybrid_memory_ui.security import TOKEN_COOKIE, token_matches


def parse_metadata(text: str) -> dict[str, Any]:
    """The metadata field of the add and edit forms: a JSON object (empty: none)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FilterError(f"metadata: expected a JSON object, got invalid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise FilterError(f"metadata: expected a JSON object, got {type(value).__name__}")
    return value


async def add(request: Request) -> Response:
    form = form_fields(await request.form())
    return await run_in_threadpool(_add, request, form)


def _add(request: Request, form: Mapping[str, str]) -> Response:
    """A new memory in the page's namespace (which must exist), then its page."""
    page = page_of(request)
    namespace = form.get("ns", "")
    try:
        view = page.store.view(namespace)
        added = view.add(
            form.get("text", ""),
            tags=split_tags(form.get("tags", "")),
            metadata=parse_metadata(form.get("metadata", "")),
        )
    except (FilterError, HybridMemoryError) as exc:
        return page.render(
            request, "add.html", status=400, error=f"add: {exc}", add_form=form, ns=namespace
        )
    done = added.outcome if added.outcome in ("duplicate", "similar") else "added"
    back = "/" + (f"?{urlencode({'ns': namespace})}" if namespace else "")
    return back_to("/memory", id=str(added), ns=namespace, back=back, done=done)


async def edit(request: Request) -> Response:
    form = form_fields(await request.form())
    return await run_in_threadpool(_edit, request, form)


def _edit(request: Request, form: Mapping[str, str]) -> Response:
    page = page_of(request)
    namespace, memory_id = form.get("ns", ""), form.get("id", "")
    back = safe_target(form.get("back", "/"))
    view = page.store.view(namespace)
    try:
        view.update(
            memory_id,
            text=form.get("text", ""),
            tags=split_tags(form.get("tags", "")),
            metadata=parse_metadata(form.get("metadata", "")),
        )
    except MemoryNotFoundError:
        return page.render(
            request, "missing.html", status=404, memory_id=memory_id, ns=namespace, back=back
        )
    except (FilterError, HybridMemoryError) as exc:
        memory = view.get(memory_id)
        return page.render(
            request,
            "memory.html",
            status=400,
            memory=memory,
            related=related_memories(view, memory_id),
            related_min=RELATED_MIN_SCORE,
            done=None,
            error=str(exc),
            form=form,
            ns=namespace,
            back=back,
        )
    return back_to("/memory", id=memory_id, ns=namespace, back=back, done="saved")


async def delete(request: Request) -> Response:
    form = form_fields(await request.form())
    return await run_in_threadpool(_delete, request, form)


def _delete(request: Request, form: Mapping[str, str]) -> Response:
    page = page_of(request)
    namespace, memory_id = form.get("ns", ""), form.get("id", "")
    back = safe_target(form.get("back", "/"))
    view = page.store.view(namespace)
    if not view.existing([memory_id]):
        return page.render(
            request, "missing.html", status=404, memory_id=memory_id, ns=namespace, back=back
        )
    n = view.delete([memory_id])
    return back_to(back, done="deleted", n=n)


async def login(request: Request) -> Response:
    form = form_fields(await request.form())
    page = page_of(request)
    target = safe_target(form.get("next", "/"))
    token = page.config.token
    if not token or not token_matches(form.get("token"), token):
        return page.render(
            request, "login.html", status=401, target=target, error="That token is not right."
        )
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(
        TOKEN_COOKIE, token, httponly=True, samesite="strict", secure=request.url.scheme == "https"
    )
    return response
