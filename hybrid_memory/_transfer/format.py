"""The export file format, as pure encoding and decoding of its lines (no I/O).

An export is JSON Lines (docs/export-format.md): a header line naming the format, its
version and the embedding the vectors (if any) came from, then one line per memory::

    {"format": "hybrid-memory-export", "version": 1, "embedding": "...", "dimension": 384,
     "vectors": false, "namespace": [], "exported_at": "2026-11-27T15:00:00.000000Z"}
    {"id": "...", "text": "...", "tags": [...], "metadata": {...},
     "created_at": "2026-...Z", "updated_at": "2026-...Z", "namespace": []}

A memory's ``namespace`` is the path of namespaces it lives in, relative to the store
(or view) that was exported: ``[]`` for that store itself, ``["team", "alice"]`` for
``memory.namespace("team").namespace("alice")``. With vectors, each memory line also
holds ``"vector"``: the stored embedding's float32 values, little-endian, in base64 (exact,
and a tenth of the time to write and read that a list of decimal numbers takes); an
import also accepts a JSON list of numbers.

Decoding validates each line completely (id, text, tags, metadata, times, namespace,
vector) with the checks ``add`` makes, and names the line in every error, so an import
can check a whole batch before it writes any of it.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from hybrid_memory._model.encodable import encodable
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.inputs import valid_id, valid_metadata, valid_tags, valid_text
from hybrid_memory._model.records import IndexRow, content_hash
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._model.times import to_datetime, to_timestamp

FORMAT = "hybrid-memory-export"
VERSION = 1

_HEADER_KEYS = frozenset(
    {"format", "version", "embedding", "dimension", "vectors", "namespace", "exported_at"}
)
_RECORD_KEYS = frozenset(
    {"id", "text", "tags", "metadata", "created_at", "updated_at", "namespace", "vector"}
)
_FLOAT32 = np.dtype("<f4")  # little-endian whatever the machine
_NUMBER_TYPES = frozenset({int, float})
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass(frozen=True, slots=True)
class Header:
    """What the first line of an export says about the memories after it."""

    version: int
    #: The name of the embedding the store had (and its vectors came from).
    embedding: str | None
    #: The vectors' dimension (None: the store held no vector yet).
    dimension: int | None
    #: Whether each memory line holds its vector.
    vectors: bool


@dataclass(frozen=True, slots=True)
class ExportRecord:
    """One memory line, validated: the memory as an index row (its content hash
    computed, its times in epoch seconds; None where the line gave none), the namespace
    path it goes to, and its vector when the line held one."""

    row: IndexRow
    created_given: bool
    updated_given: bool
    namespace: tuple[str, ...]
    vector: np.ndarray | None
    line: int


# --- encoding ------------------------------------------------------------------------------


def iso_time(timestamp: float) -> str | None:
    """Epoch seconds as ISO 8601 UTC with microseconds (``...T13:56:00.000000Z``); None
    for a missing time (0, as stored by nothing that set one)."""
    if not timestamp:
        return None
    return to_datetime(timestamp).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def header_line(
    *,
    embedding: str,
    dimension: int | None,
    vectors: bool,
    namespace: tuple[str, ...],
    exported_at: float,
) -> str:
    """The first line of an export, ending in a newline."""
    header = {
        "format": FORMAT,
        "version": VERSION,
        "embedding": embedding,
        "dimension": dimension,
        "vectors": vectors,
        "namespace": list(namespace),
        "exported_at": iso_time(exported_at),
    }
    return _ENCODE(header) + "\n"


def record_line(row: IndexRow, namespace: tuple[str, ...], vector: Any = None) -> str:
    """One memory's line, ending in a newline; ``vector`` (any sequence of numbers) is
    written as :func:`encode_vector` writes it."""
    record: dict[str, Any] = {
        "id": row.id,
        "text": row.text,
        "tags": list(row.tags),
        "metadata": row.metadata,
        "created_at": iso_time(row.created_at),
        "updated_at": iso_time(row.updated_at),
        "namespace": list(namespace),
    }
    if vector is not None:
        record["vector"] = encode_vector(vector)
    return _ENCODE(record) + "\n"


def encode_vector(vector: Any) -> str:
    """A vector as its float32 values, little-endian, in base64."""
    return base64.b64encode(np.asarray(vector, dtype=_FLOAT32).tobytes()).decode("ascii")


# --- decoding ------------------------------------------------------------------------------


def decode_line(text: str, line: int) -> Any:
    """A line's JSON value; InvalidInputError naming the line when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidInputError(f"line {line}", f"not valid JSON ({exc})") from None


def is_header(value: Any) -> bool:
    """Whether a decoded line is an export header rather than a memory."""
    return isinstance(value, Mapping) and "format" in value


def parse_header(value: Mapping[str, Any], line: int) -> Header:
    """The header of an export, checked: its format and a version this code reads."""
    where = f"line {line}"
    if value.get("format") != FORMAT:
        raise InvalidInputError(
            f"{where}: format", f"expected {FORMAT!r}, got {value.get('format')!r}"
        )
    version = value.get("version")
    if version != VERSION:
        raise InvalidInputError(
            f"{where}: version",
            f"this hybrid-memory reads export version {VERSION}, got {version!r}",
        )
    unknown = set(value) - _HEADER_KEYS
    if unknown:
        raise InvalidInputError(
            where,
            f"unknown header keys {sorted(unknown)}; allowed: {', '.join(sorted(_HEADER_KEYS))}",
        )
    embedding = value.get("embedding")
    if embedding is not None and not isinstance(embedding, str):
        raise InvalidInputError(f"{where}: embedding", f"expected a string, got {embedding!r}")
    dimension = value.get("dimension")
    if dimension is not None and (
        isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 1
    ):
        raise InvalidInputError(
            f"{where}: dimension", f"expected a positive integer or null, got {dimension!r}"
        )
    vectors = value.get("vectors", False)
    if not isinstance(vectors, bool):
        raise InvalidInputError(f"{where}: vectors", f"expected true or false, got {vectors!r}")
    if vectors and embedding is None:
        raise InvalidInputError(
            f"{where}: embedding", "a file with vectors must name the embedding they came from"
        )
    return Header(VERSION, embedding, dimension, vectors)


def parse_record(
    value: Any,
    line: int,
    settings: HybridMemorySettings,
    *,
    dimension: int | None,
    want_vector: bool,
) -> ExportRecord:
    """One memory line, validated as ``add`` validates a memory; every error names the
    line and the field. ``dimension``: the length every vector must have (None: any,
    the same for all). ``want_vector``: the vector is to be used (the line must hold
    one); otherwise a vector on the line is checked for shape only and dropped."""
    where = f"line {line}"
    if not isinstance(value, Mapping):
        raise InvalidInputError(where, f"expected a JSON object, got {type(value).__name__}")
    unknown = set(value) - _RECORD_KEYS
    if unknown:
        raise InvalidInputError(
            where, f"unknown keys {sorted(unknown)}; allowed: {', '.join(sorted(_RECORD_KEYS))}"
        )
    if "id" not in value:
        raise InvalidInputError(f"{where}: id", "missing (every exported memory has its id)")
    memory_id = valid_id(value["id"], f"{where}: id")
    if "text" not in value:
        raise InvalidInputError(f"{where}: text", "missing")
    text = valid_text(value["text"], settings.max_text_length, f"{where}: text")
    tags = valid_tags(value.get("tags"), settings, f"{where}: tags")
    metadata = valid_metadata(value.get("metadata"), f"{where}: metadata")
    created = _time(value.get("created_at"), f"{where}: created_at")
    updated = _time(value.get("updated_at"), f"{where}: updated_at")
    namespace = _namespace(value.get("namespace"), f"{where}: namespace")
    vector = _vector(value.get("vector"), f"{where}: vector", dimension)
    if want_vector and vector is None:
        raise InvalidInputError(
            f"{where}: vector", "missing (the header says the file holds vectors)"
        )
    row = IndexRow(
        memory_id,
        text,
        tags,
        metadata,
        content_hash(text, metadata),
        created or 0.0,
        updated or created or 0.0,
    )
    return ExportRecord(
        row,
        created is not None,
        updated is not None,
        namespace,
        vector if want_vector else None,
        line,
    )


def _time(value: Any, field: str) -> float | None:
    return None if value is None else to_timestamp(value, field=field)


def _namespace(value: Any, field: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInputError(field, f"expected a list of names, got {value!r}")
    names = []
    for position, name in enumerate(value):
        if not isinstance(name, str) or not name:
            raise InvalidInputError(
                f"{field}[{position}]", f"expected a non-empty string, got {name!r}"
            )
        names.append(encodable(name, f"{field}[{position}]"))
    return tuple(names)


def _vector(value: Any, field: str, dimension: int | None) -> np.ndarray | None:
    """A vector as a line holds it: base64 of little-endian float32 values (as exports
    write it), or a list of numbers."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            raw = base64.b64decode(value, validate=True)
        except ValueError:
            raise InvalidInputError(field, "not valid base64") from None
        if not raw or len(raw) % 4:
            raise InvalidInputError(
                field, f"expected base64 of float32 values (4 bytes each), got {len(raw)} bytes"
            )
        vector = np.frombuffer(raw, dtype=_FLOAT32).astype(np.float32)
    elif isinstance(value, list) and value:
        if not set(map(type, value)) <= _NUMBER_TYPES:  # bool is not a number here
            raise InvalidInputError(field, "expected a flat list of numbers")
        try:
            with np.errstate(over="ignore"):  # beyond float32: inf, refused below
                vector = np.asarray(value, dtype=np.float32)
        except OverflowError:  # an integer beyond any float
            raise InvalidInputError(field, "every number must be finite") from None
    else:
        raise InvalidInputError(
            field, "expected base64 of float32 values or a non-empty list of numbers"
        )
    if dimension is not None and len(vector) != dimension:
        raise InvalidInputError(field, f"expected {dimension} numbers, got {len(vector)}")
    if not np.isfinite(vector).all():
        raise InvalidInputError(field, "every number must be finite (no NaN or infinity)")
    return vector


def same_memory(a: IndexRow, b: IndexRow) -> bool:
    """Whether two rows hold the same memory (text, tags, metadata and both times, to
    the microsecond a stored time keeps)."""
    return (
        a.text == b.text
        and a.tags == b.tags
        and a.metadata == b.metadata
        and _same_time(a.created_at, b.created_at)
        and _same_time(a.updated_at, b.updated_at)
    )


def _same_time(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0.0, abs_tol=5e-7)
