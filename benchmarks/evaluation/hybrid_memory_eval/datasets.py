"""Reading a dataset folder in the shared evaluation format.

- ``corpus.jsonl``: one memory a line, ``{"_id", "text", "tags"?, "timestamp"?,
  "metadata"?}``;
- ``queries.jsonl``: one query a line, ``{"_id", "text", "filter"?, "now"?,
  "metadata"?}`` (``filter`` in Chroma's ``where`` syntax; ``metadata.category``
  gives a per-category breakdown);
- ``qrels.tsv``: a header line, then ``query-id<TAB>corpus-id<TAB>grade``; grade ≥ 1 is
  relevant.

A malformed or missing file raises ``InvalidInputError`` naming ``file`` or ``file:line``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hybrid_memory import InvalidInputError

__all__ = ["Dataset", "Document", "Query", "load_dataset"]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FILE = "qrels.tsv"


@dataclass(frozen=True)
class Document:
    """One corpus line."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None


@dataclass(frozen=True)
class Query:
    """One query line."""

    id: str
    text: str
    filter: dict[str, Any] | None = None
    now: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def category(self) -> str | None:
        value = self.metadata.get("category")
        return None if value is None else str(value)


@dataclass(frozen=True)
class Dataset:
    """A corpus, its queries and their judgments (``qrels[query_id][doc_id] = grade``)."""

    name: str
    corpus: list[Document]
    queries: list[Query]
    qrels: dict[str, dict[str, int]]

    def storable(self) -> list[Document]:
        """The corpus lines a memory store can hold: all but blank texts, which
        hybrid-memory refuses. The peers get the same lines, so every system is
        measured on one corpus."""
        return [d for d in self.corpus if d.text.strip()]

    def judged_queries(self) -> list[Query]:
        """The queries that have at least one relevant judgment: the ones scored."""
        return [q for q in self.queries if any(g >= 1 for g in self.qrels.get(q.id, {}).values())]

    def limited(self, n: int | None) -> Dataset:
        """The same corpus with only the first ``n`` judged queries (all when None)."""
        if n is None:
            return self
        if n < 1:
            raise InvalidInputError("limit", f"must be at least 1, got {n}")
        return Dataset(self.name, self.corpus, self.judged_queries()[:n], self.qrels)


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; errors name the file and line."""
    if not path.is_file():
        raise InvalidInputError(
            str(path),
            f"missing: a dataset folder holds {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_FILE}",
        )
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(_where(path, number), f"not UTF-8 ({exc})") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(
                    _where(path, number), f"invalid JSON: {exc.msg} at column {exc.colno}"
                ) from None
            if not isinstance(obj, dict):
                raise InvalidInputError(
                    _where(path, number), f"expected a JSON object, got {type(obj).__name__}"
                )
            yield number, obj


def _identifier(obj: Mapping[str, Any], where: str) -> str:
    value = obj.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise InvalidInputError(where, f'"_id" must be a non-empty string, got {value!r}')
    return str(value)


def _text(obj: Mapping[str, Any], where: str, *, blank: bool = False) -> str:
    value = obj.get("text")
    if not isinstance(value, str) or (not blank and not value.strip()):
        kind = "a string" if blank else "a non-empty string"
        raise InvalidInputError(where, f'"text" must be {kind}, got {value!r}')
    return value


def _optional_mapping(obj: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInputError(where, f'"{key}" must be a JSON object, got {value!r}')
    return value


def _optional_time(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(where, f'"{key}" must be an ISO 8601 string, got {value!r}')
    try:
        datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            where,
            f'"{key}" must be an ISO 8601 time like "2023-05-08T13:56:00+00:00", got {value!r}',
        ) from None
    return value


def _unique_records(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(file:line, "_id", object) for each JSONL line; a repeated "_id" is an error."""
    lines: dict[str, int] = {}
    for number, obj in _jsonl(path):
        where = _where(path, number)
        record_id = _identifier(obj, where)
        if record_id in lines:
            raise InvalidInputError(
                where, f'duplicate "_id" {record_id!r} (first on line {lines[record_id]})'
            )
        lines[record_id] = number
        yield where, record_id, obj


def _load_corpus(path: Path) -> list[Document]:
    documents: list[Document] = []
    for where, doc_id, obj in _unique_records(path):
        tags = obj.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidInputError(where, f'"tags" must be a list of strings, got {tags!r}')
        documents.append(
            Document(
                id=doc_id,
                # Real collections hold blank documents (Cranfield 471 and 995): kept
                # here, left out of the stores by Dataset.storable().
                text=_text(obj, where, blank=True),
                tags=tuple(tags),
                metadata=_optional_mapping(obj, "metadata", where) or {},
                timestamp=_optional_time(obj, "timestamp", where),
            )
        )
    if not documents:
        raise InvalidInputError(str(path), "the corpus is empty")
    return documents


def _load_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    for where, query_id, obj in _unique_records(path):
        queries.append(
            Query(
                id=query_id,
                text=_text(obj, where),
                filter=_optional_mapping(obj, "filter", where),
                now=_optional_time(obj, "now", where),
                metadata=_optional_mapping(obj, "metadata", where) or {},
            )
        )
    if not queries:
        raise InvalidInputError(str(path), "there are no queries")
    return queries


def _load_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise InvalidInputError(
            str(path),
            f"missing: a dataset folder holds {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_FILE}",
        )
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", errors="strict") as handle:
        try:
            lines = handle.read().splitlines()
        except UnicodeDecodeError as exc:
            raise InvalidInputError(str(path), f"not UTF-8 ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise InvalidInputError(
                _where(path, number),
                f"expected query-id<TAB>corpus-id<TAB>grade, got {len(fields)} tab-separated "
                f"field(s): {line!r}",
            )
        query_id, doc_id, grade_text = (f.strip() for f in fields)
        try:
            grade = int(grade_text)
        except ValueError:
            if number == 1:  # the header line
                continue
            raise InvalidInputError(
                _where(path, number), f"grade must be an integer, got {grade_text!r}"
            ) from None
        if not query_id or not doc_id:
            raise InvalidInputError(_where(path, number), "empty query id or corpus id")
        judged = qrels.setdefault(query_id, {})
        if doc_id in judged and judged[doc_id] != grade:
            raise InvalidInputError(
                _where(path, number),
                f"conflicting grades for ({query_id!r}, {doc_id!r}): {judged[doc_id]} and {grade}",
            )
        judged[doc_id] = grade
    if not qrels:
        raise InvalidInputError(str(path), "there are no judgments")
    return qrels


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset folder; a malformed or missing file raises ``InvalidInputError``
    whose field is ``file`` or ``file:line``."""
    folder = Path(path)
    if not folder.is_dir():
        raise InvalidInputError(str(folder), "no such dataset folder")
    corpus = _load_corpus(folder / CORPUS_FILE)
    queries = _load_queries(folder / QUERIES_FILE)
    qrels = _load_qrels(folder / QRELS_FILE)
    known = {q.id for q in queries}
    unknown = sorted(set(qrels) - known)
    if unknown:
        raise InvalidInputError(
            str(folder / QRELS_FILE),
            f"judgments for {len(unknown)} query id(s) not in {QUERIES_FILE}, e.g. {unknown[0]!r}",
        )
    dataset = Dataset(folder.resolve().name, corpus, queries, qrels)
    if not dataset.judged_queries():
        raise InvalidInputError(str(folder / QRELS_FILE), "no query has a relevant judgment")
    return dataset
