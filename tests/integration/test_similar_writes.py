"""Writes that say what stored memories say nearly the same as: the outcome "similar",
the memories found (AddResult.similar), and what on_similar does with them (keep, skip,
supersede); namespaces kept apart; the same report from another process on the path and
from another client of a Chroma server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hybrid_memory import HybridMemory, InvalidInputError

from ..conftest import HashEmbedding
from .test_multiprocess import Agent

FACT = "Alice is allergic to peanuts"
AGAIN = "Alice is allergic to peanuts (confirmed again)"
DATED = "2026-10-13: Alice is allergic to peanuts"
OTHER = "Alice drinks oat milk every morning"
REPO = Path(__file__).resolve().parents[2]


def test_keep_stores_it_and_names_the_memory_it_repeats(memory: HybridMemory) -> None:
    first = memory.add(FACT)
    other = memory.add(OTHER)
    again = memory.add(AGAIN)
    assert (first.outcome, other.outcome) == ("added", "added")
    assert again.outcome == "similar" and again.stored and again != first
    assert [s.id for s in again.similar] == [first]
    assert 0.6 <= again.similar[0].similarity <= 1.0
    assert memory.count() == 3 and memory.get(again).text == AGAIN
    assert memory.get(again).supersedes is None


def test_skip_stores_nothing_and_returns_the_stored_memory(memory: HybridMemory) -> None:
    first = memory.add(FACT, tags=["health"])
    skipped = memory.add(DATED, on_similar="skip")
    assert (skipped, skipped.outcome, skipped.stored) == (first, "similar", False)
    assert skipped.similar[0].id == first
    assert memory.count() == 1
    assert [h.text for h in memory.search("peanuts", k=5)] == [FACT]


def test_supersede_links_the_new_memory_to_the_most_similar(memory: HybridMemory) -> None:
    first = memory.add(FACT)
    newer = memory.add(AGAIN, on_similar="supersede")
    assert newer.outcome == "similar" and newer.stored and newer != first
    assert memory.get(newer).supersedes == first
    hits = memory.with_settings(collapse_similar=False).search("allergic peanuts", k=2)
    assert [h.id for h in hits] == [newer, first]
    assert hits[1].superseded_by == newer
    # A link the caller gives is kept: supersede never overrides it.
    unrelated = memory.add("Bob plays chess")
    given = memory.add(DATED, supersedes=unrelated, on_similar="supersede")
    assert given.outcome == "similar" and memory.get(given).supersedes == unrelated


def test_the_setting_is_the_default_and_the_argument_wins(memory: HybridMemory) -> None:
    first = memory.add(FACT)
    skipping = memory.with_settings(on_similar="skip")
    assert skipping.add(AGAIN).stored is False
    assert skipping.add(AGAIN, on_similar="keep").stored is True
    assert memory.count() == 2 and first in memory.existing([first])


def test_an_unknown_choice_is_refused_and_stores_nothing(memory: HybridMemory) -> None:
    with pytest.raises(InvalidInputError) as caught:
        memory.add(FACT, on_similar="merge")  # type: ignore[arg-type]
    assert caught.value.field == "on_similar" and "keep, skip, supersede" in str(caught.value)
    with pytest.raises(InvalidInputError, match="on_similar"):
        memory.add_many([FACT], on_similar="ignore")  # type: ignore[arg-type]
    assert memory.count() == 0


def test_a_call_finds_its_own_earlier_items(memory: HybridMemory) -> None:
    kept = memory.add_many([FACT, OTHER, AGAIN])
    assert [r.outcome for r in kept.results] == ["added", "added", "similar"]
    assert kept.results[2].similar[0].id == kept[0]
    assert kept.similar == (kept[2],) and kept.written == 3
    memory.delete(list(kept))
    skipped = memory.add_many([FACT, AGAIN, DATED, AGAIN], on_similar="skip")
    # The second and third repeat the first; the fourth is an exact repeat of the second,
    # which was skipped: it too hands back the memory that was stored.
    assert list(skipped) == [skipped[0]] * 4
    assert [r.outcome for r in skipped.results] == ["added", "similar", "similar", "similar"]
    assert skipped.written == 1 and memory.count() == 1


def test_replacing_an_id_is_not_looked_at_a_new_id_is(memory: HybridMemory) -> None:
    first = memory.add(FACT, id="fact")
    replaced = memory.add(AGAIN, id="fact", upsert=True)
    assert replaced.outcome == "replaced" and replaced.similar == ()
    mine = memory.add(FACT, id="mine")  # what "fact" said before it was replaced
    assert (mine, mine.outcome, [s.id for s in mine.similar]) == ("mine", "similar", [first])


def test_namespaces_and_the_store_stay_apart(hash_embedding: HashEmbedding) -> None:
    with HybridMemory(embedding=hash_embedding, embedding_name="test-hash-64") as store:
        alice, bob = store.namespace("alice"), store.namespace("bob")
        in_alice = alice.add(FACT)
        assert bob.add(AGAIN).outcome == "added"  # nothing of alice's is seen from bob
        assert store.add(DATED).outcome == "added"  # nor from the store itself
        assert alice.add(DATED).similar[0].id == in_alice
        assert bob.add(FACT).similar[0].id != in_alice


@pytest.mark.parametrize("read_all_up_to", [256, 2])
def test_a_namespace_finds_its_own_by_reading_them_or_by_a_query(
    hash_embedding: HashEmbedding, filter_paths: Any, read_all_up_to: int
) -> None:
    """A namespace of few memories reads them all and compares them here; a larger one
    asks Chroma's query, narrowed to it: the same answer, other namespaces left out."""
    filter_paths(exact_search=read_all_up_to)
    with HybridMemory(embedding=hash_embedding, embedding_name="test-hash-64") as store:
        alice, bob = store.namespace("alice"), store.namespace("bob")
        bob.add_many([FACT, OTHER, "Bob plays chess", "Bob likes tea"])
        stored = alice.add_many([FACT, OTHER, "Alice plays the cello", "Alice likes tea"])
        again = alice.add(AGAIN)
        assert again.outcome == "similar" and [s.id for s in again.similar] == [stored[0]]
        assert bob.similar(bob.list_memories()[0].id) == ()  # bob's are all distinct


def test_a_write_of_another_process_on_the_path_is_found(tmp_path: Path) -> None:
    """Two processes on one path (one owns it, the other goes through it): each one's
    add finds what the other stored, as one process would."""
    first, second = Agent(tmp_path / "memory"), Agent(tmp_path / "memory")
    try:
        stored = first("add", text=FACT, metadata={"agent": "first"})
        again = second("add", text=FACT, metadata={"agent": "second"})
        assert stored["outcome"] == "added"
        assert again["outcome"] == "similar" and again["stored"]
        assert again["similar"][0][0] == stored["id"]
        assert again["similar"][0][1] == pytest.approx(1.0, abs=1e-4)
        skipped = first("add", text=FACT, metadata={"agent": "third"}, on_similar="skip")
        assert (skipped["id"], skipped["stored"]) in {(stored["id"], False), (again["id"], False)}
        assert {s[0] for s in skipped["similar"]} == {stored["id"], again["id"]}
        assert first("count") == second("count") == 2
    finally:
        first.close()
        second.close()


_CLIENT = """
import json, sys
sys.path.insert(0, sys.argv[1])
from hybrid_memory import HybridMemory
from tests.conftest import SeededEmbedding
store = HybridMemory(url=sys.argv[2], collection=sys.argv[3], embedding=SeededEmbedding(),
                     embedding_name="seeded-64")
added = store.add(sys.argv[4], metadata={"client": sys.argv[5]}, on_similar=sys.argv[6])
print(json.dumps({"id": added.id, "outcome": added.outcome, "stored": added.stored,
                  "similar": [list(s) for s in added.similar]}))
store.close()
"""


def _client(url: str, collection: str, text: str, name: str, on_similar: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", _CLIENT, str(REPO), url, collection, text, name, on_similar],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture
def server_collection(chroma_server: str) -> Iterator[str]:
    name = f"similar-{uuid.uuid4().hex[:8]}"
    yield name
    import chromadb

    host, port = chroma_server.removeprefix("http://").split(":")
    chromadb.HttpClient(host=host, port=int(port)).delete_collection(name)


def test_clients_of_a_chroma_server_each_find_the_others(
    chroma_server: str, server_collection: str
) -> None:
    stored = _client(chroma_server, server_collection, FACT, "first", "keep")
    again = _client(chroma_server, server_collection, FACT, "second", "keep")
    skipped = _client(chroma_server, server_collection, FACT, "third", "skip")
    assert stored["outcome"] == "added"
    assert again["outcome"] == "similar" and again["similar"][0][0] == stored["id"]
    assert skipped["outcome"] == "similar" and not skipped["stored"]
    assert {s[0] for s in skipped["similar"]} == {stored["id"], again["id"]}
