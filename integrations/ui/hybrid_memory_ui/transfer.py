"""Export and import from the page. An export streams the store (or namespace) and the
namespaces under it as JSON Lines. An import is previewed before anything is written:
how many memories the file holds, how many are new, and which stored memories it would
replace (a memory of the file whose id is stored already replaces it); the upload waits
on the server until the person confirms, then is imported if what it would replace is
still what the preview showed."""

from __future__ import annotations

import codecs
import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from hybrid_memory import HybridMemory, HybridMemoryError, Memory, export_lines, import_memories
from hybrid_memory_ui.filters import namespace_param, namespace_path
from hybrid_memory_ui.render import page_of
from hybrid_memory_ui.uploads import UploadStash

#: How many of the memories an import replaces its preview shows.
SHOWN = 10


class ImportFileError(ValueError):
    """The uploaded file is not an export the page can read; the message names the line."""


@dataclass(frozen=True)
class ImportPreview:
    """What importing an upload would do now: ``read`` memories, ``added`` new ones,
    ``replaced`` stored ones (the ``first`` of them: (stored memory, the file's text)),
    ``unchanged`` ones; ``digest`` fingerprints which ids are new and which replaced."""

    token: str
    read: int
    added: int
    replaced: int
    unchanged: int
    first: list[tuple[Any, str]]
    digest: str
    re_embed: bool


@dataclass(frozen=True)
class _Stored:
    """A stored memory an import would replace, as its preview shows it."""

    id: str
    text: str
    namespace: str


def lines_of(path: Path) -> Iterator[str]:
    """The file's lines, decoded as UTF-8 as they are read."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    pending = ""
    with path.open("rb") as file:
        while chunk := file.read(1 << 16):
            pending += decoder.decode(chunk)
            *complete, pending = pending.split("\n")
            for line in complete:
                yield line + "\n"
    pending += decoder.decode(b"", final=True)
    if pending:
        yield pending


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _records(path: Path) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """The memories of an export file: (namespace path, record), the header skipped."""
    for number, line in enumerate(lines_of(path), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            raise ImportFileError(f"line {number}: not JSON ({exc})") from None
        if not isinstance(value, dict):
            raise ImportFileError(f"line {number}: expected a JSON object")
        if "format" in value:  # the header (the import checks it)
            continue
        if not isinstance(value.get("id"), str) or not isinstance(value.get("text"), str):
            raise ImportFileError(f"line {number}: expected a memory with an id and a text")
        space = value.get("namespace") or []
        if not isinstance(space, list) or not all(isinstance(n, str) for n in space):
            raise ImportFileError(f"line {number}: namespace: expected a list of names")
        yield tuple(space), value


def _same(stored: Memory, record: dict[str, Any]) -> bool:
    """Whether the file's record holds the stored memory as it is (then it is not
    written again)."""
    created, updated = _time(record.get("created_at")), _time(record.get("updated_at"))
    return (
        stored.text == record["text"]
        and list(stored.tags) == list(record.get("tags") or [])
        and dict(stored.metadata) == dict(record.get("metadata") or {})
        and created is not None
        and updated is not None
        and _close(stored.created_at, created)
        and _close(stored.updated_at, updated)
    )


def _close(a: datetime | None, b: datetime) -> bool:
    return a is not None and abs((a - b).total_seconds()) < 5e-6


def preview_import(store: Any, ns: str, path: Path, token: str, re_embed: bool) -> ImportPreview:
    """What importing the file at ``path`` into the page's namespace ``ns`` would do."""
    by_space: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    read = 0
    for space, record in _records(path):
        by_space.setdefault(space, []).append(record)
        read += 1
    added: list[str] = []
    replaced: list[str] = []
    first: list[tuple[Any, str]] = []
    base = namespace_path(ns)
    for space, records in sorted(by_space.items()):
        full = namespace_param((*base, *space))
        try:
            view: HybridMemory | None = store.view(full)
        except HybridMemoryError:
            view = None  # a namespace the import creates: every memory in it is new
        ids = list(dict.fromkeys(r["id"] for r in records))
        present = view.existing(ids) if view is not None and ids else set()
        stored = {m.id: m for m in view.get_many(sorted(present))} if view is not None else {}
        for record in records:
            key = f"{full}\n{record['id']}"
            memory = stored.get(record["id"])
            if memory is None:
                added.append(key)
            elif not _same(memory, record):
                replaced.append(key)
                if len(first) < SHOWN:
                    label = " / ".join(space)
                    first.append((_Stored(memory.id, memory.text, label), record["text"]))
    fingerprint = "\n".join(["+", *sorted(added), "~", *sorted(replaced)]).encode()
    return ImportPreview(
        token=token,
        read=read,
        added=len(added),
        replaced=len(replaced),
        unchanged=read - len(added) - len(replaced),
        first=first,
        digest=hashlib.sha256(fingerprint).hexdigest()[:32],
        re_embed=re_embed,
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
        return _page(request, namespace, error=f"export: {exc}", status=409)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
    label = "-".join(namespace_path(namespace))
    name = f"hybrid-memory{'-' + label if label else ''}-{stamp}.jsonl"
    safe_name = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return StreamingResponse(
        export_lines(view, vectors=vectors),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{safe_name}"'},
    )


def _page(request: Request, namespace: str, status: int = 200, **context: Any) -> Response:
    page = page_of(request)
    context.setdefault("report", None)
    context.setdefault("error", None)
    context.setdefault("preview", None)
    exported = page.store.export_count(page.store.view(namespace))
    return page.render(
        request, "transfer.html", status=status, exported=exported, ns=namespace, **context
    )


async def import_file(request: Request) -> Response:
    """``POST /import``: an upload previewed, then imported once confirmed."""
    form = await request.form()
    upload = form.get("file")
    fields = {k: v for k, v in form.items() if isinstance(v, str)}
    return await run_in_threadpool(_import, request, upload, fields)


def _import(request: Request, upload: Any, form: dict[str, str]) -> Response:
    """Step ``preview`` (an upload): keep the file, show what it would change. Step
    ``apply`` (the confirmation): import the kept file, unless what it would replace
    changed since its preview."""
    page = page_of(request)
    stash: UploadStash = page.uploads
    namespace = form.get("ns", "")
    if form.get("step") == "apply":
        token = form.get("upload", "")
        path = stash.path(token)
        if path is None:
            return _page(
                request,
                namespace,
                status=400,
                error="import: that upload is gone; choose the file again",
            )
        re_embed = form.get("re_embed") == "1"
        try:
            again = preview_import(page.store, namespace, path, token, re_embed)
            if again.digest != form.get("digest"):
                return _page(
                    request,
                    namespace,
                    status=409,
                    preview=again,
                    filename="the file",
                    error="import: the store changed since the preview (other memories would "
                    "be replaced now): nothing was imported; look at the new preview",
                )
            report = import_memories(page.store.view(namespace), lines_of(path), re_embed=re_embed)
        except (HybridMemoryError, ImportFileError, UnicodeDecodeError) as exc:
            return _page(request, namespace, status=400, error=f"import: {exc}")
        stash.drop(token)
        return _page(request, namespace, report=report, filename="the file")
    if not isinstance(upload, UploadFile) or not upload.filename:
        return _page(
            request,
            namespace,
            status=400,
            error="file: choose a JSON Lines file (made by Export) to import",
        )
    token = stash.keep(upload)
    path = stash.path(token)
    assert path is not None
    try:
        preview = preview_import(page.store, namespace, path, token, form.get("re_embed") == "1")
    except (HybridMemoryError, ImportFileError, UnicodeDecodeError) as exc:
        stash.drop(token)
        return _page(request, namespace, status=400, error=f"{upload.filename}: {exc}")
    return _page(request, namespace, preview=preview, filename=upload.filename)
