"""The library's errors cross process boundaries whole (a process pool, a multiprocessing
queue, a task runner pickle what a worker raised), and a delete of several missing ids
names them all."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

import hybrid_memory
from hybrid_memory import HybridMemory, HybridMemoryError, MemoryNotFoundError

# One instance of each public error, made as the library makes it.
EXAMPLES: dict[str, HybridMemoryError] = {
    "HybridMemoryError": hybrid_memory.HybridMemoryError("something failed"),
    "InvalidInputError": hybrid_memory.InvalidInputError("tags", "must be a list of strings"),
    "DuplicateIdError": hybrid_memory.DuplicateIdError("m1"),
    "MemoryNotFoundError": hybrid_memory.MemoryNotFoundError("m2"),
    "EmbeddingError": hybrid_memory.EmbeddingError("the model is unavailable"),
    "EmbeddingMismatchError": hybrid_memory.EmbeddingMismatchError("dimension 384, not 64"),
    "StoreError": hybrid_memory.StoreError("Chroma get failed: refused"),
    "StoreNotFoundError": hybrid_memory.StoreNotFoundError(
        "/tmp/typo", "no store at /tmp/typo: no such directory (nothing was created)"
    ),
    "IndexFileError": hybrid_memory.IndexFileError(
        "/tmp/index.sqlite3", "is a directory", "remove it"
    ),
    "MissingDependencyError": hybrid_memory.MissingDependencyError(
        "langchain-core", "HybridRetriever", "langchain"
    ),
}


def test_every_public_error_has_an_example() -> None:
    public = {
        name
        for name in hybrid_memory.__all__
        if isinstance(getattr(hybrid_memory, name), type)
        and issubclass(getattr(hybrid_memory, name), HybridMemoryError)
    }
    assert public == set(EXAMPLES)


def attributes(error: BaseException) -> dict[str, Any]:
    return {k: v for k, v in vars(error).items() if not k.startswith("__")}


@pytest.mark.parametrize("protocol", range(2, pickle.HIGHEST_PROTOCOL + 1))
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_each_public_error_survives_a_pickle_round_trip(name: str, protocol: int) -> None:
    error = EXAMPLES[name]
    back = pickle.loads(pickle.dumps(error, protocol=protocol))
    assert type(back) is type(error)
    assert str(back) == str(error)
    assert back.args == error.args
    assert attributes(back) == attributes(error)
    assert isinstance(back, HybridMemoryError)


def test_a_raised_error_survives_pickling_with_its_fields(memory: HybridMemory) -> None:
    with pytest.raises(hybrid_memory.InvalidInputError) as raised:
        memory.add("x", tags=[["not", "a", "tag"]])  # type: ignore[list-item]
    back = pickle.loads(pickle.dumps(raised.value))
    assert back.field == raised.value.field
    assert str(back) == str(raised.value)
    assert isinstance(back, ValueError)


def test_a_delete_names_every_missing_id(memory: HybridMemory) -> None:
    kept = memory.add("keep me", id="keep").id
    with pytest.raises(MemoryNotFoundError) as raised:
        memory.delete(["nope-1", kept, "nope-2", "nope-1", "nope-3"])
    error = raised.value
    assert error.memory_ids == ("nope-1", "nope-2", "nope-3")
    assert error.memory_id == "nope-1"
    assert str(error) == "no memory with ids 'nope-1', 'nope-2', 'nope-3'"
    assert memory.count() == 1  # nothing deleted


def test_a_delete_of_many_missing_ids_names_the_first_ten_and_counts_the_rest(
    memory: HybridMemory,
) -> None:
    missing = [f"gone-{i:02}" for i in range(25)]
    with pytest.raises(MemoryNotFoundError) as raised:
        memory.delete(missing)
    message = str(raised.value)
    assert message.startswith("no memory with ids 'gone-00', 'gone-01'")
    assert message.endswith("'gone-09' and 15 more")
    assert raised.value.memory_ids == tuple(missing)
    back = pickle.loads(pickle.dumps(raised.value))
    assert str(back) == message


def test_one_missing_id_reads_as_before(memory: HybridMemory) -> None:
    with pytest.raises(MemoryNotFoundError) as raised:
        memory.delete(["nope"])
    assert str(raised.value) == "no memory with id 'nope'"


def test_get_many_and_update_many_name_every_missing_id(memory: HybridMemory) -> None:
    kept = memory.add("keep me").id
    with pytest.raises(MemoryNotFoundError) as raised:
        memory.get_many(["a", kept, "b"])
    assert raised.value.memory_ids == ("a", "b")
    with pytest.raises(MemoryNotFoundError) as raised:
        memory.update_many(
            [{"id": "c", "text": "x"}, {"id": kept, "text": "y"}, {"id": "d", "tags": ["t"]}]
        )
    assert raised.value.memory_ids == ("c", "d")
    assert memory.get(kept).text == "keep me"
