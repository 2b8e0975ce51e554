"""The routes that change the store (edit, delete, bulk changes, import) or hand it out
(export), and the login form's post. The security middleware has already checked the
Host, the Origin, the token and ``--read-only`` before any of these runs."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator, Mapping
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlencode

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response, StreamingResponse

from hybrid_memory import (
    HybridMemoryError,
    MemoryNotFoundError,
    export_lines,
    import_memories,
)
from hybrid_memory_ui.bulk import Bulk
from hybrid_memory_ui.filters import FilterError, split_tags
from hybrid_memory_ui.pages import read_filter, safe_target
from hybrid_memory_ui.render import page_of
from hybrid_memory_ui.security import TOKEN_COOKIE, token_matches

FILTER_FIELDS = ("tags", "tag_mode", "when", "field", "value", "ns")


def _see_other(path: str, **params: Any) -> RedirectResponse:
    given = {k: v for k, v in params.items() if v not in (None, "")}
    return RedirectResponse(path + (f"?{urlencode(given)}" if given else ""), status_code=303)


def _form(form: Any) -> dict[str, str]:
    return {k: v for k, v in form.items() if isinstance(v, str)}


def parse_metadata(text: str) -> dict[str, Any]:
    """The metadata field of the edit form: a JSON object (empty: no metadata)."""
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise FilterError(f"metadata: expected a JSON object, got invalid JSON ({exc})") from exc
    if not isinstance(value, dict):
        raise FilterError(f"metadata: expected a JSON object, got {type(value).__name__}")
    return value


async def edit(request: Request) -> Response:
    form = _form(await request.form())
    return await run_in_threadpool(_edit, request, form)


def _edit(request: Request, form: Mapping[str, str]) -> Response:
    page = page_of(request)
    namespace, memory_id = form.get("ns", ""), form.get("id", "")
    view = page.store.view(namespace)
    try:
        view.update(
            memory_id,
            text=form.get("text", ""),
            tags=split_tags(form.get("tags", "")),
            metadata=parse_metadata(form.get("metadata", "")),
        )
    except MemoryNotFoundError:
        return page.render(request, "missing.html", status=404, memory_id=memory_id, ns=namespace)
    except (FilterError, HybridMemoryError) as exc:
        memory = view.get(memory_id)
        return page.render(
            request,
            "memory.html",
            status=400,
            memory=memory,
            related=view.related(memory_id, k=10),
            done=None,
            error=str(exc),
            form=form,
            ns=namespace,
        )
    return _see_other("/memory", id=memory_id, ns=namespace, done="saved")


async def delete(request: Request) -> Response:
    form = _form(await request.form())
    return await run_in_threadpool(_delete, request, form)


def _delete(request: Request, form: Mapping[str, str]) -> Response:
    page = page_of(request)
    namespace, memory_id = form.get("ns", ""), form.get("id", "")
    view = page.store.view(namespace)
    if not view.existing([memory_id]):
        return page.render(request, "missing.html", status=404, memory_id=memory_id, ns=namespace)
    n = view.delete([memory_id])
    return _see_other("/", ns=namespace, done="deleted", n=n)


async def bulk(request: Request) -> Response:
    form = await request.form()
    ids = tuple(v for v in form.getlist("ids") if isinstance(v, str) and v)
    return await run_in_threadpool(_bulk, request, _form(form), ids)


def _bulk(request: Request, form: Mapping[str, str], ids: tuple[str, ...]) -> Response:
    """Step ``preview`` (the default): how many memories the change would touch, and a
    form to confirm it. Step ``apply``: the change, then back to the list."""
    page = page_of(request)
    filter_params = {k: form.get(k, "") for k in FILTER_FIELDS}
    selection = ids if form.get("scope", "selected") == "selected" else ()
    try:
        chosen = read_filter(request, filter_params)
        change = Bulk(
            action=form.get("action", ""),
            ids=selection,
            page=chosen,
            add_tags=split_tags(form.get("add_tags", "")),
            remove_tags=split_tags(form.get("remove_tags", "")),
        )
        if form.get("scope", "selected") == "selected" and not ids:
            raise FilterError(
                "selection: no memory is selected; tick some, or choose "
                "'everything matching this filter'"
            )
    except (FilterError, ValueError, HybridMemoryError) as exc:
        return page.render(
            request, "bulk.html", status=400, error=str(exc), change=None, form=form, ids=ids
        )
    view = page.store.view(chosen.namespace)
    if form.get("step") == "apply":
        n = change.apply(view)
        done = "bulk-deleted" if change.action == "delete" else "retagged"
        return _see_other("/", **chosen.params(), done=done, n=n)
    return page.render(
        request,
        "bulk.html",
        error=None,
        change=change,
        count=change.count(view),
        form=form,
        ids=selection,
        ns=chosen.namespace,
    )


def export(request: Request) -> Response:
    """The store (or namespace) as JSON Lines, streamed as it is read."""
    page = page_of(request)
    namespace = request.query_params.get("ns", "")
    vectors = request.query_params.get("vectors") == "1"
    view = page.store.view(namespace)
    try:
        # The export ends with the namespaces under the store: a process that cannot list
        # them (one that does not own an embedded path, beside its owner) would break the
        # download half-way. Asked first, the page says so instead.
        view.namespaces()
    except HybridMemoryError as exc:
        return page.render(
            request,
            "transfer.html",
            status=409,
            count=view.count(),
            report=None,
            error=f"export: {exc}",
            ns=namespace,
        )
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    name = f"hybrid-memory{'-' + namespace if namespace else ''}-{stamp}.jsonl"
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return StreamingResponse(
        export_lines(view, vectors=vectors),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{safe_name}"'},
    )


def _lines(upload: UploadFile) -> Iterator[str]:
    """The uploaded file's lines, decoded as UTF-8 as they are read."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = ""
    upload.file.seek(0)
    while chunk := upload.file.read(1 << 16):
        pending += decoder.decode(chunk)
        *complete, pending = pending.split("\n")
        for line in complete:
            yield line + "\n"
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


async def import_file(request: Request) -> Response:
    form = await request.form()
    upload = form.get("file")
    namespace = str(form.get("ns", "") or "")
    re_embed = form.get("re_embed") == "1"
    return await run_in_threadpool(_import, request, upload, namespace, re_embed)


def _import(request: Request, upload: Any, namespace: str, re_embed: bool) -> Response:
    page = page_of(request)
    view = page.store.view(namespace)
    if not isinstance(upload, UploadFile) or not upload.filename:
        return page.render(
            request,
            "transfer.html",
            status=400,
            count=view.count(),
            report=None,
            error="file: choose a JSON Lines file (made by Export) to import",
            ns=namespace,
        )
    try:
        report = import_memories(view, _lines(upload), re_embed=re_embed)
    except (HybridMemoryError, UnicodeDecodeError) as exc:
        return page.render(
            request,
            "transfer.html",
            status=400,
            count=view.count(),
            report=None,
            error=f"{upload.filename}: {exc}",
            ns=namespace,
        )
    return page.render(
        request,
        "transfer.html",
        count=view.count(),
        report=report,
        error=None,
        ns=namespace,
        filename=upload.filename,
    )


async def login(request: Request) -> Response:
    form = _form(await request.form())
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
