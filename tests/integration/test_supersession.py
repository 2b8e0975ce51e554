"""Supersession through the library: a newer memory names the one it replaces; searches
rank the older lower, mark it, and never drop it (hybrid_memory._search.supersession)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, InvalidInputError, MemoryNotFoundError
from tests.conftest import HashEmbedding

ROOT = Path(__file__).resolve().parents[2]

# Three statements of one thing, sharing the words a query asks with: without links
# they tie closely, so where each lands is the links' doing.
PARIS = "Alice lives in Paris near the river"
BERLIN = "Alice lives in Berlin near the river"
LISBON = "Alice lives in Lisbon near the river"
QUERY = "where does Alice live near the river"


def store(**settings: Any) -> HybridMemory:
    return HybridMemory(embedding=HashEmbedding(), embedding_name="test-hash-64", **settings)


def order(memory: HybridMemory, query: str = QUERY) -> list[str]:
    return [hit.id for hit in memory.search(query, k=10)]


def hits_by_id(memory: HybridMemory, query: str = QUERY) -> dict[str, Any]:
    return {hit.id: hit for hit in memory.search(query, k=10)}


def test_add_supersedes_ranks_the_newer_first_and_marks_the_older() -> None:
    with store() as memory:
        memory.add(PARIS, id="paris")
        memory.add(BERLIN, id="berlin", supersedes="paris")
        hits = memory.search(QUERY, k=10)
        assert [h.id for h in hits[:2]] == ["berlin", "paris"]
        by_id = {h.id: h for h in hits}
        assert by_id["paris"].superseded_by == "berlin"
        assert by_id["berlin"].superseded_by is None
        assert by_id["berlin"].supersedes == "paris"
        assert memory.get("berlin").metadata == {"supersedes": "paris"}
        assert memory.get("berlin").supersedes == "paris"


def test_the_older_memory_is_demoted_not_dropped_even_when_it_matches_better() -> None:
    with store() as memory:
        memory.add("the wifi password is tulip42", id="old")
        memory.add("new wifi code: orchid7", id="new", supersedes="old")
        found = hits_by_id(memory, "wifi password tulip42")
        assert "old" in found and found["old"].superseded_by == "new"
        neutral = memory.with_settings(supersede_factor=1.0).search("wifi password tulip42", k=10)
        demoted = memory.search("wifi password tulip42", k=10)
        old_neutral = next(h for h in neutral if h.id == "old").fused_score
        old_demoted = next(h for h in demoted if h.id == "old").fused_score
        assert old_demoted <= old_neutral
        # the correction takes the old one's place, the old one right below it
        assert [h.id for h in demoted[:2]] == ["new", "old"]
        assert [h.id for h in neutral[:1]] == ["old"]
        # supersede_factor 0 still returns it, last
        zero = memory.with_settings(supersede_factor=0.0).search("wifi password tulip42", k=10)
        assert "old" in [h.id for h in zero]


# The table of supersession cases: what is written (in time order), which memory must
# rank before which (the rest is the engine's order) and each one's superseded_by.
CASES = [
    pytest.param(
        [("paris", PARIS, None), ("berlin", BERLIN, "paris"), ("lisbon", LISBON, "berlin")],
        [("lisbon", "berlin"), ("berlin", "paris")],
        {"paris": "berlin", "berlin": "lisbon", "lisbon": None},
        id="chain A<-B<-C: newest first, each marked by the next",
    ),
    pytest.param(
        [("lisbon", LISBON, None), ("berlin", BERLIN, None), ("paris", PARIS, "lisbon")],
        [("paris", "lisbon")],
        {"paris": None, "berlin": None, "lisbon": "paris"},
        id="an unrelated memory is untouched",
    ),
    pytest.param(
        [("paris", PARIS, None), ("berlin", BERLIN, "paris"), ("lisbon", LISBON, "paris")],
        [("lisbon", "paris")],
        {"paris": "lisbon", "berlin": None, "lisbon": None},
        id="two newer memories of one older: the newest is named",
    ),
]


@pytest.mark.parametrize(("writes", "expected", "marks"), CASES)
def test_supersession_cases(
    writes: list[tuple[str, str, str | None]],
    expected: list[tuple[str, str]],
    marks: dict[str, Any],
) -> None:
    with store() as memory:
        for number, (memory_id, text, supersedes) in enumerate(writes):
            memory.add(text, id=memory_id, supersedes=supersedes, created_at=1_000_000 + number)
        found = hits_by_id(memory)
        ranked = [i for i in order(memory) if i in marks]
        assert {i: found[i].superseded_by for i in marks} == marks
        for first, then in expected:
            assert ranked.index(first) < ranked.index(then), ranked
        assert set(ranked) == set(marks)  # nothing dropped


def test_unknown_id_is_refused_naming_the_field_and_nothing_is_stored() -> None:
    with store() as memory:
        with pytest.raises(InvalidInputError) as err:
            memory.add(BERLIN, supersedes="nope")
        assert err.value.field == "supersedes" and "nope" in str(err.value)
        assert memory.count() == 0
        memory.add(PARIS, id="paris")
        with pytest.raises(InvalidInputError) as err:
            memory.add_many([{"text": BERLIN}, {"text": LISBON, "supersedes": "gone"}])
        assert err.value.field == "items[1].supersedes"
        assert memory.count() == 1
        with pytest.raises(InvalidInputError) as err:
            memory.add(BERLIN, metadata={"supersedes": 7})
        assert err.value.field == "metadata['supersedes']"
        with pytest.raises(InvalidInputError) as err:
            memory.add(BERLIN, id="x", supersedes="x")
        assert "itself" in str(err.value)
        with pytest.raises(InvalidInputError):
            memory.add(BERLIN, metadata={"supersedes": "paris"}, supersedes="other")
        assert memory.count() == 1


def test_add_many_items_may_supersede_stored_memories_and_each_other() -> None:
    with store() as memory:
        memory.add(PARIS, id="paris")
        memory.add_many(
            [
                {"text": BERLIN, "id": "berlin", "supersedes": "paris"},
                {"text": LISBON, "id": "lisbon", "supersedes": "berlin"},
            ]
        )
        assert order(memory)[:3] == ["lisbon", "berlin", "paris"]


def test_update_sets_the_link_keeping_or_replacing_metadata_and_refuses_cycles() -> None:
    with store() as memory:
        memory.add(PARIS, id="paris", metadata={"user": "alice"})
        memory.add(BERLIN, id="berlin", metadata={"user": "alice"})
        updated = memory.update("berlin", supersedes="paris")
        assert updated.metadata == {"user": "alice", "supersedes": "paris"}
        assert hits_by_id(memory)["paris"].superseded_by == "berlin"
        with pytest.raises(InvalidInputError) as err:
            memory.update("paris", supersedes="berlin")
        assert err.value.field == "supersedes" and "chain" in str(err.value)
        with pytest.raises(InvalidInputError) as err:
            memory.update_many([{"id": "paris", "supersedes": "missing"}])
        assert err.value.field == "updates[0].supersedes"
        with pytest.raises(MemoryNotFoundError):
            memory.update("nobody", supersedes="paris")
        # metadata replaced without the key: the link goes with it (the link is metadata)
        memory.update("berlin", metadata={"user": "alice"})
        assert hits_by_id(memory)["paris"].superseded_by is None


def test_deleting_the_newer_memory_restores_the_older_rank() -> None:
    with store() as memory:
        memory.add(PARIS, id="paris")
        memory.add(LISBON, id="lisbon")
        before = order(memory)
        memory.add(BERLIN, id="berlin", supersedes=before[0])
        assert order(memory).index(before[0]) > order(memory).index("berlin")
        memory.delete("berlin")
        assert order(memory) == before
        assert all(hit.superseded_by is None for hit in memory.search(QUERY, k=10))


def test_a_link_never_crosses_namespaces() -> None:
    with store() as memory:
        alice = memory.namespace("alice")
        bob = memory.namespace("bob")
        alice.add(PARIS, id="paris")
        with pytest.raises(InvalidInputError) as err:
            bob.add(BERLIN, supersedes="paris")
        assert err.value.field == "supersedes" and "namespace" in str(err.value)
        with pytest.raises(InvalidInputError):
            memory.add(BERLIN, supersedes="paris")
        assert bob.count() == 0 and memory.count() == 0


def test_another_process_sees_the_link(tmp_path: Path) -> None:
    path = tmp_path / "store"
    with HybridMemory(path, embedding=HashEmbedding(), embedding_name="test-hash-64") as memory:
        memory.add(PARIS, id="paris")
        script = textwrap.dedent(
            f"""
            from hybrid_memory import HybridMemory
            from tests.conftest import HashEmbedding
            with HybridMemory({str(path)!r}, embedding=HashEmbedding(),
                              embedding_name="test-hash-64") as other:
                other.add({BERLIN!r}, id="berlin", supersedes="paris")
            """
        )
        subprocess.run([sys.executable, "-c", script], cwd=ROOT, check=True, timeout=120)
        memory.sync()
        found = hits_by_id(memory)
        assert found["paris"].superseded_by == "berlin"
        assert order(memory)[:2] == ["berlin", "paris"]
