"""The export format's lines, encoded and decoded without a store: a memory survives the
round trip exactly (times to the microsecond, float32 vectors bit for bit), and every
bad line is refused with its line number and the field at fault."""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np
import pytest

from hybrid_memory import HybridMemorySettings, InvalidInputError
from hybrid_memory._model.records import IndexRow, content_hash
from hybrid_memory._transfer.format import (
    FORMAT,
    VERSION,
    decode_line,
    header_line,
    is_header,
    iso_time,
    parse_header,
    parse_record,
    record_line,
    same_memory,
)

SETTINGS = HybridMemorySettings()


def _row(**changes: Any) -> IndexRow:
    values: dict[str, Any] = dict(
        id="m-1",
        text="Alice prefers dark mode ✓",
        tags=("alice", "ui"),
        metadata={"user": "alice", "n": 3, "w": 0.5, "ok": True, "xs": ["a", "b"]},
        created_at=1_700_000_000.123456,
        updated_at=1_700_000_100.000001,
    )
    values.update(changes)
    values["content_hash"] = content_hash(values["text"], values["metadata"])
    return IndexRow(**values)


def _parse(line: str, number: int = 2, **kwargs: Any) -> Any:
    options: dict[str, Any] = {"dimension": None, "want_vector": False, **kwargs}
    return parse_record(decode_line(line, number), number, SETTINGS, **options)


def test_a_memory_line_round_trips_exactly() -> None:
    row = _row()
    line = record_line(row, ("team", "alice"))
    assert line.endswith("\n") and line.count("\n") == 1
    value = json.loads(line)
    assert value["created_at"] == "2023-11-14T22:13:20.123456Z"
    assert value["namespace"] == ["team", "alice"] and "vector" not in value
    record = _parse(line)
    assert record.row == row and record.namespace == ("team", "alice")
    assert record.created_given and record.updated_given and record.vector is None
    assert same_memory(record.row, row)


def test_a_vector_is_written_as_float32_and_read_back_bit_for_bit() -> None:
    vector = np.random.default_rng(7).standard_normal(384).astype(np.float32)
    line = record_line(_row(), (), vector)
    assert base64.b64decode(json.loads(line)["vector"]) == vector.astype("<f4").tobytes()
    record = _parse(line, dimension=384, want_vector=True)
    assert record.vector is not None and record.vector.dtype == np.float32
    assert np.array_equal(record.vector, vector)
    # Not wanted (re-embedding): checked, then dropped.
    assert _parse(line, dimension=384).vector is None


def test_a_vector_may_also_be_a_list_of_numbers() -> None:
    value = json.loads(record_line(_row(), ()))
    value["vector"] = [0.5, -1, 2.25]
    record = parse_record(value, 3, SETTINGS, dimension=None, want_vector=True)
    assert record.vector is not None and record.vector.tolist() == [0.5, -1.0, 2.25]


def test_the_header_names_format_version_embedding_and_dimension() -> None:
    line = header_line(
        embedding="all-MiniLM-L6-v2", dimension=384, vectors=True, namespace=(), exported_at=1.0
    )
    value = decode_line(line, 1)
    assert is_header(value) and not is_header(json.loads(record_line(_row(), ())))
    assert value["format"] == FORMAT and value["version"] == VERSION
    header = parse_header(value, 1)
    assert (header.embedding, header.dimension, header.vectors) == ("all-MiniLM-L6-v2", 384, True)


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ({"format": "something-else", "version": 1}, "line 1: format"),
        ({"format": FORMAT, "version": 2}, "line 1: version"),
        ({"format": FORMAT, "version": 1, "vectors": True}, "line 1: embedding"),
        ({"format": FORMAT, "version": 1, "dimension": 0}, "line 1: dimension"),
        ({"format": FORMAT, "version": 1, "extra": 1}, "line 1"),
    ],
)
def test_a_bad_header_is_refused(header: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidInputError) as error:
        parse_header(header, 1)
    assert error.value.field == field


@pytest.mark.parametrize(
    ("line", "field", "says"),
    [
        ("{not json", "line 9", "not valid JSON"),
        ("[1, 2]", "line 9", "JSON object"),
        ('{"text": "no id"}', "line 9: id", "missing"),
        ('{"id": "a"}', "line 9: text", "missing"),
        ('{"id": "a", "text": "   "}', "line 9: text", "blank"),
        ('{"id": "", "text": "t"}', "line 9: id", "non-empty"),
        ('{"id": 7, "text": "t"}', "line 9: id", "non-empty string"),
        ('{"id": "a", "text": "t", "tags": "x"}', "line 9: tags", ""),
        ('{"id": "a", "text": "t", "metadata": {"hm:x": 1}}', "line 9: metadata", "reserved"),
        ('{"id": "a", "text": "t", "metadata": {"k": {"nested": 1}}}', "line 9: metadata", ""),
        ('{"id": "a", "text": "t", "created_at": "yesterday"}', "line 9: created_at", "ISO"),
        ('{"id": "a", "text": "t", "namespace": "team"}', "line 9: namespace", "list"),
        ('{"id": "a", "text": "t", "namespace": [""]}', "line 9: namespace[0]", "non-empty"),
        ('{"id": "a", "text": "t", "colour": "red"}', "line 9", "unknown keys"),
        ('{"id": "a", "text": "t", "vector": [1, 2]}', "line 9: vector", "expected 3 numbers"),
        ('{"id": "a", "text": "t", "vector": [1, "2", 3]}', "line 9: vector", "numbers"),
        ('{"id": "a", "text": "t", "vector": [1, true, 3]}', "line 9: vector", "numbers"),
        ('{"id": "a", "text": "t", "vector": [1, NaN, 3]}', "line 9: vector", "finite"),
        ('{"id": "a", "text": "t", "vector": [1, 1e39, 3]}', "line 9: vector", "finite"),
        ('{"id": "a", "text": "t"}', "line 9: vector", "missing"),
        ('{"id": "a", "text": "t", "vector": "not base64!"}', "line 9: vector", "base64"),
        ('{"id": "a", "text": "t", "vector": "AAAA"}', "line 9: vector", "4 bytes each"),
        ('{"id": "a", "text": "t", "vector": "AAAAAA=="}', "line 9: vector", "expected 3 numbers"),
        ('{"id": "a", "text": "t", "vector": "AADAfwAAAAAAAAAA"}', "line 9: vector", "finite"),
        ('{"id": "a", "text": "t", "vector": []}', "line 9: vector", "non-empty list"),
        ('{"id": "a", "text": "t", "vector": {"x": 1}}', "line 9: vector", "base64"),
    ],
)
def test_a_bad_line_is_refused_with_its_number_and_field(line: str, field: str, says: str) -> None:
    want_vector = line == '{"id": "a", "text": "t"}' and field.endswith("vector")
    with pytest.raises(InvalidInputError) as error:
        _parse(line, 9, dimension=3, want_vector=want_vector)
    assert error.value.field.startswith(field)  # metadata['hm:x'], namespace[0]
    assert says in str(error.value)


def test_missing_times_and_namespace_are_left_to_the_import() -> None:
    record = _parse('{"id": "a", "text": "t"}')
    assert record.namespace == ()
    assert not record.created_given and not record.updated_given
    assert record.row.tags == () and record.row.metadata == {}


def test_tags_are_normalised_as_add_normalises_them() -> None:
    record = _parse('{"id": "a", "text": "t", "tags": ["Alice", "alice", " UI "]}')
    assert record.row.tags == ("alice", "ui")


def test_same_memory_compares_content_and_both_times() -> None:
    row = _row()
    assert same_memory(row, _row())
    assert not same_memory(row, _row(text="other"))
    assert not same_memory(row, _row(tags=("alice",)))
    assert not same_memory(row, _row(metadata={"user": "bob"}))
    assert not same_memory(row, _row(created_at=row.created_at + 0.001))
    assert not same_memory(row, _row(updated_at=row.updated_at + 1))
    # Chroma returns a stored float within a unit of its last binary digit.
    assert same_memory(row, _row(created_at=np.nextafter(row.created_at, 2e9)))


def test_a_missing_time_is_written_as_null() -> None:
    assert iso_time(0.0) is None
    assert json.loads(record_line(_row(created_at=0.0, updated_at=0.0), ()))["created_at"] is None
