"""Export and import against real Chroma (embedded and a server) and real SQLite: every
memory comes back with its id, times, tags, metadata and namespace, and is found by its
own text on the keyword and the vector legs; importing twice changes nothing; vectors
travel without re-embedding; a model mismatch, a bad line and re-embedding behave as
documented (docs/export-format.md)."""

from __future__ import annotations

import base64
import io
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hybrid_memory import (
    EmbeddingMismatchError,
    HybridMemory,
    InvalidInputError,
    export_lines,
    export_memories,
    import_memories,
)
from hybrid_memory._transfer import transfer as transfer

from ..conftest import SeededEmbedding

MODEL = "seeded-64"
NAMESPACES = [(), ("team",), ("team", "alice"), ("a b/ç",)]


class CountingEmbedding(SeededEmbedding):
    """The seeded embedding, counting the texts it embeds."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __call__(self, texts: list[str]) -> list[list[float]]:
        self.calls += len(texts)
        return super().__call__(texts)


def open_store(path: Path, name: str = MODEL, **kwargs: Any) -> HybridMemory:
    embedding = kwargs.pop("embedding", None) or CountingEmbedding()
    return HybridMemory(
        path=str(path), embedding=embedding, embedding_name=name, sync_interval=0, **kwargs
    )


def view(store: HybridMemory, namespace: tuple[str, ...]) -> HybridMemory:
    for name in namespace:
        store = store.namespace(name)
    return store


def fill(store: HybridMemory, per_namespace: int = 6) -> dict[tuple[str, ...], list[str]]:
    """Memories in the store and three namespaces, with tags, metadata and old times."""
    ids: dict[tuple[str, ...], list[str]] = {}
    for n, namespace in enumerate(NAMESPACES):
        target = view(store, namespace)
        items = [
            {
                "id": f"ns{n}-m{i}",
                "text": f"memory {i} of namespace {n}: zebra{n}x{i} keeps quartz{i}y{n}",
                "tags": [f"t{i % 2}", "shared"],
                "metadata": {"user": f"u{i % 3}", "rank": i, "score": i / 4, "ok": i % 2 == 0},
                "created_at": 1_600_000_000 + 86_400 * i + 0.123456,
            }
            for i in range(per_namespace)
        ]
        ids[namespace] = target.add_many(items)
    target = view(store, ("team",))
    target.update("ns1-m0", text="memory 0 of namespace 1, rewritten: zebra1x0 keeps quartz0y1")
    target.add("a memory with a list value", id="listy", metadata={"xs": ["a", "b"]})
    ids[("team",)].append("listy")
    return ids


def snapshot(store: HybridMemory) -> dict[tuple[tuple[str, ...], str], tuple[Any, ...]]:
    """Every memory of the store and its namespaces: (namespace, id) -> fields."""
    found = {}
    for line in export_lines(store):
        value = json.loads(line)
        if "format" in value:
            continue
        found[(tuple(value["namespace"]), value["id"])] = (
            value["text"],
            tuple(value["tags"]),
            json.dumps(value["metadata"], sort_keys=True),
            value["created_at"],
            value["updated_at"],
        )
    return found


def assert_found_on_every_leg(store: HybridMemory, namespace: tuple[str, ...], ids: list[str]):
    target = view(store, namespace)
    for memory in target.get_many(ids):
        hits = {h.id: h for h in target.search(memory.text, k=10)}
        assert memory.id in hits, memory.text
        ranks = hits[memory.id].ranks
        assert ranks.get("vector") == 1 and ranks.get("keyword") == 1, (memory.id, ranks)


@pytest.fixture
def source(tmp_path: Path) -> Iterator[tuple[HybridMemory, dict[tuple[str, ...], list[str]]]]:
    store = open_store(tmp_path / "source")
    try:
        yield store, fill(store)
    finally:
        store.close()


def test_export_then_import_restores_every_memory_on_every_leg(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]], tmp_path: Path
) -> None:
    store, ids = source
    exported = tmp_path / "memories.jsonl"
    assert export_memories(store, exported) == sum(len(i) for i in ids.values())
    header = json.loads(exported.read_text().splitlines()[0])
    assert header["embedding"] == MODEL and header["vectors"] is False
    assert header["dimension"] == 64

    with open_store(tmp_path / "target") as target:
        report = import_memories(target, exported)
        assert report.read == sum(len(i) for i in ids.values())
        assert (report.added, report.updated, report.unchanged) == (report.read, 0, 0)
        assert report.embedded == report.read  # no vectors in the file
        assert set(report.namespaces) == set(NAMESPACES)
        assert snapshot(target) == snapshot(store)
        assert target.namespaces() == ["a b/ç", "team"]
        assert view(target, ("team",)).namespaces() == ["alice"]
        for namespace, memory_ids in ids.items():
            original = view(store, namespace).get_many(memory_ids)
            assert view(target, namespace).get_many(memory_ids) == original
            assert_found_on_every_leg(target, namespace, memory_ids)
        assert view(target, ("team",)).get("listy").metadata == {"xs": ["a", "b"]}
        # The tag leg and the tag set are derived from the restored memories too.
        assert target.tags() == ["shared", "t0", "t1"]
        assert target.search("anything", tags=["t1"], k=3)[0].ranks.get("tag") == 1
        # Times are the exported ones, not the import's.
        assert view(target, ("team",)).get("ns1-m0").created_at == (
            view(store, ("team",)).get("ns1-m0").created_at
        )
        updated = view(store, ("team",)).get("ns1-m0").updated_at
        assert view(target, ("team",)).get("ns1-m0").updated_at == updated


def test_importing_twice_gives_the_same_store(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]], tmp_path: Path
) -> None:
    store, _ = source
    lines = list(export_lines(store))
    with open_store(tmp_path / "target") as target:
        first = import_memories(target, lines)
        before = snapshot(target)
        counts = {ns: view(target, ns).count() for ns in NAMESPACES}
        second = import_memories(target, lines)
        assert (second.read, second.unchanged, second.added, second.updated) == (
            first.read,
            first.read,
            0,
            0,
        )
        assert second.embedded == 0  # nothing written, nothing embedded
        assert snapshot(target) == before
        assert {ns: view(target, ns).count() for ns in NAMESPACES} == counts
        assert all(view(target, ns).stats().in_step for ns in NAMESPACES)


def test_an_import_replaces_a_changed_memory_and_counts_it_updated(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]], tmp_path: Path
) -> None:
    store, _ = source
    lines = list(export_lines(store))
    with open_store(tmp_path / "target") as target:
        import_memories(target, lines)
        team = view(target, ("team",))
        team.update("ns1-m2", text="changed since the export: walrus", tags=["other"])
        report = import_memories(target, lines)
        assert (report.updated, report.added) == (1, 0)
        restored = team.get("ns1-m2")
        assert restored == view(store, ("team",)).get("ns1-m2")
        # The keyword index holds the restored text, not the replaced one.
        assert all("keyword" not in h.ranks for h in team.search("walrus", k=3))
        assert "other" not in team.tags()


def test_vectors_travel_without_re_embedding(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]], tmp_path: Path
) -> None:
    store, ids = source
    exported = tmp_path / "with-vectors.jsonl"
    export_memories(store, exported, vectors=True)
    lines = exported.read_text().splitlines()
    assert json.loads(lines[0])["vectors"] is True
    assert len(base64.b64decode(json.loads(lines[1])["vector"])) == 64 * 4  # float32
    counting = CountingEmbedding()
    with open_store(tmp_path / "target", embedding=counting) as target:
        report = import_memories(target, exported)
        assert report.embedded == 0 and counting.calls == 0
        for namespace, memory_ids in ids.items():
            source_vectors = view(store, namespace)._parts.collection.vectors_by_id(memory_ids)
            target_vectors = view(target, namespace)._parts.collection.vectors_by_id(memory_ids)
            for memory_id in memory_ids:
                # Chroma normalises a vector it stores for cosine: once more on import,
                # which may move a value by one float32 rounding step.
                assert np.allclose(
                    source_vectors[memory_id], target_vectors[memory_id], rtol=0, atol=1e-7
                )
        searched = counting.calls
        assert_found_on_every_leg(target, ("team", "alice"), ids[("team", "alice")])
        assert counting.calls > searched  # the queries, embedded by the target's model


def test_vectors_of_another_model_are_refused_unless_re_embedded(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]], tmp_path: Path
) -> None:
    store, ids = source
    lines = list(export_lines(store, vectors=True))
    counting = CountingEmbedding()
    with open_store(tmp_path / "other", name="other-model", embedding=counting) as target:
        with pytest.raises(EmbeddingMismatchError, match="--re-embed") as error:
            import_memories(target, lines)
        assert "seeded-64" in str(error.value) and "other-model" in str(error.value)
        assert target.count() == 0 and target.namespaces() == []

        report = import_memories(target, lines, re_embed=True)
        total = sum(len(i) for i in ids.values())
        assert report.embedded == total == report.added and counting.calls == total
        assert target.stats().embedding == "other-model"
        assert snapshot(target) == snapshot(store)
        for namespace, memory_ids in ids.items():
            assert_found_on_every_leg(target, namespace, memory_ids)


def test_a_file_without_a_header_is_embedded_and_its_vectors_are_refused(
    tmp_path: Path,
) -> None:
    with open_store(tmp_path / "target") as target:
        lines = ['{"id": "a", "text": "a hand written memory about otters"}', ""]
        report = import_memories(target, lines)
        assert (report.read, report.added, report.embedded) == (1, 1, 1)
        memory = target.get("a")
        assert memory.created_at is not None and memory.updated_at == memory.created_at
        # Again: the times the first import gave are kept, nothing is written.
        assert import_memories(target, lines).unchanged == 1
        assert target.get("a") == memory
        with pytest.raises(InvalidInputError, match=r"line 1: vector.*header"):
            import_memories(target, ['{"id": "b", "text": "t", "vector": [0.1, 0.2]}'])
        assert not target.existing(["b"])


def test_a_bad_line_is_reported_and_nothing_of_its_batch_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "IMPORT_BATCH", 100)
    good = [
        json.dumps({"id": f"m{i}", "text": f"memory number {i} about heron{i}", "tags": ["x"]})
        for i in range(250)
    ]
    lines = [*good[:170], '{"id": "bad", "text": 42}', *good[170:]]  # line 171
    with open_store(tmp_path / "target") as target:
        with pytest.raises(InvalidInputError) as error:
            import_memories(target, lines)
        assert error.value.field == "line 171: text"
        # Lines 1-100 form the first batch, written; lines 101-200 hold the bad one.
        assert target.count() == 100
        assert target.existing([f"m{i}" for i in range(250)]) == {f"m{i}" for i in range(100)}
        assert len(target.list_memories()) == 100  # the keyword index agrees

        fixed = [*good[:170], *good[170:]]
        report = import_memories(target, fixed)
        assert (report.unchanged, report.added) == (100, 150)
        assert target.count() == 250 and target.stats().in_step


def test_a_line_that_is_not_json_or_utf8_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"id": "a", "text": "fine"}\n{"id": "b", "text": "\xff"}\n')
    with open_store(tmp_path / "target") as target:
        with pytest.raises(InvalidInputError, match=r"^line 2: not UTF-8"):
            import_memories(target, bad)
        with pytest.raises(InvalidInputError, match=r"^line 3: not valid JSON"):
            import_memories(target, ['{"id": "a", "text": "x"}', "", "{oops"])
        with pytest.raises(InvalidInputError, match="line 2: a header line may only come first"):
            import_memories(target, [*list(export_lines(target))[:1]] * 2)
        with pytest.raises(InvalidInputError, match="cannot read"):
            import_memories(target, tmp_path / "missing.jsonl")
        assert target.count() == 0


def test_a_repeated_id_is_applied_in_file_order(tmp_path: Path) -> None:
    lines = [
        '{"id": "a", "text": "first version of a"}',
        '{"id": "b", "text": "b"}',
        '{"id": "a", "text": "second version of a"}',
    ]
    with open_store(tmp_path / "target") as target:
        report = import_memories(target, lines)
        assert (report.read, report.added, report.updated) == (3, 2, 1)
        assert target.get("a").text == "second version of a"
        assert target.count() == 2


def test_export_reads_the_collection_a_page_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transfer, "PAGE", 7)
    with open_store(tmp_path / "source") as store:
        store.add_many([f"memory {i}" for i in range(30)])
        store.namespace("n").add_many([f"other {i}" for i in range(9)])
        reads = []
        collection = store._parts.collection
        original = collection.call

        def counting_call(operation: str, **kwargs: Any) -> Any:
            if operation == "get" and "offset" in kwargs:
                reads.append(kwargs["limit"])
            return original(operation, **kwargs)

        monkeypatch.setattr(collection, "call", counting_call)
        buffer = io.StringIO()
        assert export_memories(store, buffer) == 39
        assert reads == [7] * 5  # 30 memories: four pages of 7 and a short one
        assert buffer.getvalue().count("\n") == 40


def test_a_failed_export_leaves_no_partial_file(
    source: tuple[HybridMemory, dict[tuple[str, ...], list[str]]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    store, _ = source
    target = tmp_path / "out.jsonl"
    target.write_text("the previous export\n")

    def failing(*args: Any) -> str:
        raise OSError("disk full")

    monkeypatch.setattr(transfer, "record_line", failing)
    with pytest.raises(OSError, match="disk full"):
        export_memories(store, target)
    assert target.read_text() == "the previous export\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_namespaces_lists_those_under_a_store_in_any_process(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with open_store(path) as store:
        assert store.namespaces() == []
        store.namespace("b")
        store.namespace("A:sub").namespace("deep")
        store.namespace("a b")
        assert store.namespaces() == ["A:sub", "a b", "b"]
        assert store.namespace("A:sub").namespaces() == ["deep"]
        assert store.namespace("b").namespaces() == []
    with open_store(path) as again:
        assert again.namespaces() == ["A:sub", "a b", "b"]


@pytest.mark.server
def test_a_server_store_exports_and_imports(chroma_server: str, tmp_path: Path) -> None:
    collection = f"transfer-{uuid.uuid4().hex[:8]}"
    store = HybridMemory(
        url=chroma_server,
        collection=collection,
        embedding=SeededEmbedding(),
        embedding_name=MODEL,
        sync_interval=0,
    )
    with store:
        ids = fill(store, per_namespace=4)
        exported = tmp_path / "server.jsonl"
        export_memories(store, exported, vectors=True)
        with open_store(tmp_path / "local") as local:
            report = import_memories(local, exported)
            assert report.embedded == 0
            assert snapshot(local) == snapshot(store)
            for namespace, memory_ids in ids.items():
                assert_found_on_every_leg(local, namespace, memory_ids)
        # And back into another collection on the server.
        other = HybridMemory(
            url=chroma_server,
            collection=f"{collection}-copy",
            embedding=SeededEmbedding(),
            embedding_name=MODEL,
            sync_interval=0,
        )
        with other:
            import_memories(other, exported)
            assert snapshot(other) == snapshot(store)
            assert other.namespaces() == ["a b/ç", "team"]
