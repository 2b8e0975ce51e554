"""Export and import of a store's memories, as JSON Lines (docs/export-format.md).

``export_lines`` reads the store's collection a page at a time (the collection is the
source of truth; the keyword index is derived and not exported), then each namespace
under it, recursively, so that 100,000 memories stream through without being held.

``import_memories`` reads lines, validates a batch of them completely (every line of
it, with the checks ``add`` makes) and only then writes it, through the store's write
path for given memories (:meth:`Writer.restore`): the same ids, times, tags, metadata
and namespaces, and the file's vectors as they are when they come from the store's own
embedding. A bad line stops the import with an error naming it; the batches before it
stay written, and importing the same file again is idempotent (memories are upserted
by id; those already stored as the file holds them are not written again).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import numpy as np

from hybrid_memory._model.errors import EmbeddingMismatchError, InvalidInputError
from hybrid_memory._model.records import IndexRow, rows_from_chroma
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._store.collection import PAGE
from hybrid_memory._transfer.format import (
    ExportRecord,
    Header,
    decode_line,
    header_line,
    is_header,
    parse_header,
    parse_record,
    record_line,
    same_memory,
)

if TYPE_CHECKING:
    from hybrid_memory._memory.memory import HybridMemory

#: Memory lines validated together before any of them is written.
IMPORT_BATCH = 1000


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_memories` did. Each memory line read is counted once, as
    ``added`` (a new id), ``updated`` (an id that held something else) or
    ``unchanged`` (already stored as the line holds it: not written again)."""

    #: Memory lines read (the header and blank lines not counted).
    read: int
    added: int
    updated: int
    unchanged: int
    #: Memories whose text this store's model embedded (the file held no vectors of
    #: this model, or ``re_embed=True``); the others kept the file's vectors.
    embedded: int
    #: The namespace paths written to (``()``: the store itself), in first-seen order.
    namespaces: tuple[tuple[str, ...], ...] = ()


# --- export --------------------------------------------------------------------------------


def export_lines(memory: HybridMemory, *, vectors: bool = False) -> Iterator[str]:
    """Every memory of ``memory`` and of the namespaces under it (recursively), as the
    lines of an export (each ending in ``"\\n"``), the header first; lazily, a page of
    the collection at a time. ``vectors=True`` adds each memory's stored vector (the
    header names the embedding they came from)."""
    parts = memory._parts
    yield header_line(
        embedding=parts.embedder.name,
        dimension=parts.collection.dimension,
        vectors=vectors,
        namespace=memory.namespace_path,
        exported_at=now_timestamp(),
    )
    yield from _namespace_lines(memory, (), vectors)


def _namespace_lines(
    memory: HybridMemory, namespace: tuple[str, ...], vectors: bool
) -> Iterator[str]:
    collection = memory._parts.collection
    include = ["documents", "metadatas", "embeddings"] if vectors else ["documents", "metadatas"]
    offset = 0
    while True:
        got = collection.call("get", limit=PAGE, offset=offset, include=include)
        if not got["ids"]:
            break
        rows = rows_from_chroma(got)
        if vectors:
            for row, vector in zip(rows, got["embeddings"], strict=True):
                yield record_line(row, namespace, vector)
        else:
            for row in rows:
                yield record_line(row, namespace)
        if len(rows) < PAGE:
            break
        offset += len(rows)
    for name in memory.namespaces():
        yield from _namespace_lines(memory.namespace(name), (*namespace, name), vectors)


def export_memories(
    memory: HybridMemory, destination: str | os.PathLike[str] | IO[str], *, vectors: bool = False
) -> int:
    """Write :func:`export_lines` to ``destination``: a file path (written to a
    temporary file beside it, renamed into place once complete, so a failed export
    never leaves a partial file under the name) or an open text file. Returns how many
    memories were written."""
    if isinstance(destination, (str, os.PathLike)):
        target = Path(destination)
        partial = target.with_name(f".{target.name}.partial")
        try:
            with partial.open("w", encoding="utf-8", newline="\n") as file:
                count = _write_lines(memory, file, vectors)
            os.replace(partial, target)
        except BaseException:
            with contextlib.suppress(OSError):
                partial.unlink()
            raise
        return count
    return _write_lines(memory, destination, vectors)


def _write_lines(memory: HybridMemory, file: IO[str], vectors: bool) -> int:
    lines = export_lines(memory, vectors=vectors)
    file.write(next(lines))
    count = 0
    for line in lines:
        file.write(line)
        count += 1
    return count


# --- import --------------------------------------------------------------------------------


def import_memories(
    memory: HybridMemory,
    source: str | os.PathLike[str] | Iterable[str | bytes],
    *,
    re_embed: bool = False,
) -> ImportReport:
    """Restore the memories of an export (a file path, or an iterable of its lines)
    into ``memory``: the same ids, texts, tags, metadata, times and namespaces.

    Vectors in the file are stored as they are when the file's embedding (its header)
    is this store's; a file from another embedding is refused with
    :class:`EmbeddingMismatchError` unless ``re_embed=True``, which embeds every text
    with this store's model (the way to move memories to another model). A file without
    vectors is embedded too (slower: the model's speed).

    Lines are validated a batch at a time (:data:`IMPORT_BATCH`), each batch completely
    before any of it is written: a bad line raises :class:`InvalidInputError` naming its
    line number, with nothing of its batch written; the batches before it stay written.
    Importing the same file again gives the same store (memories are upserted by id).
    """
    importer = _Importer(memory, re_embed=re_embed)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        try:
            file = path.open("rb")
        except OSError as exc:
            raise InvalidInputError(
                "source", f"cannot read {str(path)!r}: {exc.strerror}"
            ) from None
        with file:
            importer.run(file)
    else:
        importer.run(source)
    return importer.report()


class _Importer:
    """One import: the header read, the batch being collected, the counts so far."""

    def __init__(self, memory: HybridMemory, *, re_embed: bool) -> None:
        self.memory = memory
        self.re_embed = re_embed
        self.header: Header | None = None
        self.use_vectors = False
        self.dimension: int | None = None
        self.batch: list[ExportRecord] = []
        self.batch_keys: set[tuple[tuple[str, ...], str]] = set()
        self.batch_size = min(IMPORT_BATCH, memory._parts.collection.max_batch())
        self.views: dict[tuple[str, ...], HybridMemory] = {(): memory}
        self.namespaces: dict[tuple[str, ...], None] = {}  # in first-seen order
        self.read = self.added = self.updated = self.unchanged = self.embedded = 0

    def run(self, lines: Iterable[str | bytes]) -> None:
        seen_line = False
        for number, raw in enumerate(lines, 1):
            text = _text(raw, number)
            if not text.strip():
                continue
            value = decode_line(text, number)
            if is_header(value):
                if seen_line:
                    raise InvalidInputError(
                        f"line {number}", "a header line may only come first in the file"
                    )
                self._read_header(parse_header(value, number))
                seen_line = True
                continue
            seen_line = True
            self._add(value, number)
        self._flush()

    def _read_header(self, header: Header) -> None:
        self.header = header
        self.use_vectors = header.vectors and not self.re_embed
        self.dimension = header.dimension
        if not self.use_vectors:
            return
        model = self.memory.embedder.name
        if header.embedding != model:
            raise EmbeddingMismatchError(
                f"the file's vectors come from embedding {header.embedding!r}, but this "
                f"store embeds with {model!r}; import with re_embed=True "
                "(hybrid-memory import --re-embed) to embed the texts with this store's model"
            )
        stored = self.memory._parts.collection.dimension
        if stored is not None and header.dimension is not None and stored != header.dimension:
            raise EmbeddingMismatchError(
                f"the file's vectors have {header.dimension} dimensions, but this store's "
                f"have {stored}; import with re_embed=True (hybrid-memory import --re-embed)"
            )

    def _add(self, value: Any, number: int) -> None:
        if (
            self.header is None
            and not self.re_embed
            and isinstance(value, dict)
            and value.get("vector") is not None
        ):
            raise InvalidInputError(
                f"line {number}: vector",
                "a vector needs the export's header line (naming its embedding) first "
                "in the file; or import with re_embed=True (hybrid-memory import "
                "--re-embed) to embed the texts with this store's model",
            )
        record = parse_record(
            value,
            number,
            self.memory.settings,
            dimension=self.dimension,
            want_vector=self.use_vectors,
        )
        if record.vector is not None and self.dimension is None:
            self.dimension = len(record.vector)
        self.read += 1
        self.namespaces.setdefault(record.namespace)
        key = (record.namespace, record.row.id)
        if key in self.batch_keys or len(self.batch) >= self.batch_size:
            # A repeated id is written after the batch holding its first line, so the
            # file is applied in order, as one add after another would apply it.
            self._flush()
        self.batch.append(record)
        self.batch_keys.add(key)

    def _flush(self) -> None:
        batch, self.batch, self.batch_keys = self.batch, [], set()
        groups: dict[tuple[str, ...], list[ExportRecord]] = {}
        for record in batch:
            groups.setdefault(record.namespace, []).append(record)
        for namespace, records in groups.items():
            self._write(self._view(namespace), records)

    def _view(self, namespace: tuple[str, ...]) -> HybridMemory:
        view = self.views.get(namespace)
        if view is None:
            view = self.views[namespace] = self._view(namespace[:-1]).namespace(namespace[-1])
        return view

    def _write(self, view: HybridMemory, records: list[ExportRecord]) -> None:
        parts = view._parts
        stored = {
            row.id: row
            for page in parts.collection.rows_by_id([r.row.id for r in records])
            for row in page
        }
        now = now_timestamp()
        rows: list[IndexRow] = []
        vectors: list[np.ndarray] = []
        for record in records:
            row = _with_times(record, stored.get(record.row.id), now)
            before = stored.get(row.id)
            if before is not None and same_memory(row, before):
                self.unchanged += 1
                continue
            rows.append(row)
            if record.vector is not None:
                vectors.append(record.vector)
        if not rows:
            return
        matrix = np.stack(vectors) if self.use_vectors else None
        existed = parts.writer.restore(rows, matrix)
        if matrix is None:
            self.embedded += len(rows)
        self.updated += len(existed)
        self.added += len(rows) - len(existed)

    def report(self) -> ImportReport:
        return ImportReport(
            read=self.read,
            added=self.added,
            updated=self.updated,
            unchanged=self.unchanged,
            embedded=self.embedded,
            namespaces=tuple(self.namespaces),
        )


def _with_times(record: ExportRecord, before: IndexRow | None, now: float) -> IndexRow:
    """The record's row with both times set: a time the line did not give is kept from
    the stored memory with its id (created now, for a new one)."""
    row = record.row
    if record.created_given and record.updated_given:
        return row
    created = row.created_at if record.created_given else (before.created_at if before else now)
    if record.updated_given:
        updated = row.updated_at
    elif before is None:
        updated = created
    elif before.text == row.text and before.tags == row.tags and before.metadata == row.metadata:
        updated = before.updated_at
    else:
        updated = now
    return IndexRow(row.id, row.text, row.tags, row.metadata, row.content_hash, created, updated)


def _text(raw: str | bytes, number: int) -> str:
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"line {number}",
            f"not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})",
        ) from None
