"""The namespace → collection-name mapping: valid for Chroma and injective for any name."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_memory import InvalidInputError
from hybrid_memory._model.namespaces import (
    namespace_collection,
    namespace_index_path,
    valid_namespace,
)

# Chroma's rule for collection names (chromadb 1.5, Rust front end).
CHROMA_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")
# Any Unicode text without lone surrogates (the library refuses those everywhere).
names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=200)


def chroma_accepts(name: str) -> bool:
    return bool(CHROMA_NAME.match(name)) and ".." not in name


# Parents Chroma accepts: alphanumeric ends, '.', '_' and '-' inside (no '..').
parents = st.builds(
    lambda head, middle, tail: head + middle.replace("..", ".-") + tail,
    st.sampled_from("aZ0"),
    st.text(alphabet="ab9._-", min_size=1, max_size=300),
    st.sampled_from("z9"),
)


@given(parent=parents, name=names)
def test_every_name_maps_to_a_collection_chroma_accepts(parent: str, name: str) -> None:
    assert chroma_accepts(parent)
    assert chroma_accepts(namespace_collection(parent, name))


@given(a=names, b=names)
def test_different_names_map_to_different_collections(a: str, b: str) -> None:
    if a != b:
        assert namespace_collection("hybrid_memory", a) != namespace_collection("hybrid_memory", b)


def test_names_a_slug_confuses_stay_apart() -> None:
    confusable = ["A", "a", "A:sub", "A-sub", "A sub", "A.sub", "A/sub", "Ä", "-A-", "A_", " "]
    collections = {namespace_collection("hybrid_memory", n) for n in confusable}
    assert len(collections) == len(confusable)


def test_the_same_name_under_two_parents_maps_apart() -> None:
    assert namespace_collection("one", "x") != namespace_collection("two", "x")
    long_a, long_b = "p" * 150 + "a", "p" * 150 + "b"  # equal once the prefix is cut
    assert namespace_collection(long_a, "x") != namespace_collection(long_b, "x")


def test_the_collection_name_is_readable() -> None:
    name = namespace_collection("hybrid_memory", "Alice's notes")
    assert name.startswith("hybrid_memory.ns.Alice-s-notes.")
    assert namespace_collection("hybrid_memory", "日本").startswith("hybrid_memory.ns.")


def test_an_explicit_index_file_gets_one_file_per_namespace(tmp_path: object) -> None:
    a = namespace_index_path("/data/index.sqlite3", "hybrid_memory", "a")
    b = namespace_index_path("/data/index.sqlite3", "hybrid_memory", "b")
    assert a != b
    assert a.startswith("/data/index.ns-") and a.endswith(".sqlite3")


@pytest.mark.parametrize("bad", ["", None, 3, b"x", "\ud800"])
def test_a_namespace_must_be_non_empty_text(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="namespace"):
        valid_namespace(bad)
