"""``HybridMemory(..., create=False)`` and ``namespace(name, create=False)``: what a read
opens. A path, a collection or a namespace that does not exist is a
:class:`StoreNotFoundError` naming it, and nothing is created: no directory, no file, no
collection, no namespace listed afterwards."""

from __future__ import annotations

import uuid
from pathlib import Path

import chromadb
import pytest

from hybrid_memory import HybridMemory, StoreError, StoreNotFoundError

from ..conftest import HashEmbedding


def _open(path: Path, **options: object) -> HybridMemory:
    return HybridMemory(
        path=str(path), embedding=HashEmbedding(), embedding_name="test-hash-64", **options
    )


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def test_a_missing_path_is_named_and_not_created(tmp_path: Path) -> None:
    missing = tmp_path / "typo" / "memory"
    with pytest.raises(StoreNotFoundError, match=r"no store at .*typo.*no such directory") as err:
        _open(missing, create=False)
    assert err.value.where == str(missing)
    assert isinstance(err.value, StoreError) and isinstance(err.value, LookupError)
    assert not (tmp_path / "typo").exists()


def test_a_directory_without_a_store_is_left_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store")
    with pytest.raises(StoreNotFoundError, match="holds no hybrid-memory store"):
        _open(tmp_path, create=False)
    assert _files(tmp_path) == {"notes.txt"}


def test_a_missing_collection_is_named_with_the_ones_there(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        memory.add("kept", id="k")
    before = _files(tmp_path)
    with pytest.raises(StoreNotFoundError, match=r"no collection 'other' .*hybrid_memory"):
        _open(tmp_path, collection="other", create=False)
    client = chromadb.PersistentClient(path=str(tmp_path))
    assert "other" not in {c.name for c in client.list_collections()}
    assert _files(tmp_path) == before
    with _open(tmp_path, create=False) as memory:  # what exists opens as always
        assert memory.get("k").text == "kept"


def test_a_missing_namespace_is_named_and_never_listed(tmp_path: Path) -> None:
    with _open(tmp_path) as memory:
        memory.namespace("team").namespace("alice").add("a note", id="a")
    before = _files(tmp_path)
    with _open(tmp_path, create=False) as memory:
        with pytest.raises(StoreNotFoundError, match=r"no namespace 'nope' under this store"):
            memory.namespace("nope", create=False)
        team = memory.namespace("team", create=False)
        with pytest.raises(StoreNotFoundError, match=r"under team \(its namespaces: alice"):
            team.namespace("bob", create=False)
        assert team.namespace("alice", create=False).get("a").text == "a note"
    assert _files(tmp_path) == before
    with _open(tmp_path) as memory:
        assert memory.namespaces() == ["team"]
        assert memory.namespace("team").namespaces() == ["alice"]


def test_create_takes_true_or_false_only(tmp_path: Path) -> None:
    from hybrid_memory import InvalidInputError

    with pytest.raises(InvalidInputError, match="create: expected True or False"):
        _open(tmp_path, create="no")


@pytest.mark.server
def test_a_server_without_the_collection_keeps_it_missing(chroma_server: str) -> None:
    name = f"absent-{uuid.uuid4().hex[:8]}"
    with pytest.raises(StoreNotFoundError, match=f"no collection '{name}'"):
        HybridMemory(
            url=chroma_server,
            collection=name,
            embedding=HashEmbedding(),
            embedding_name="test-hash-64",
            create=False,
        )
    host, port = chroma_server.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port))
    assert name not in {c.name for c in client.list_collections()}
