"""Read your own write: a memory just stored comes back in the fused top 10 when it is
asked for by its own text (issue 22), also when its text names a tag that thousands of
other memories carry and it does not (a speaker tag: "John said ..." stored by Maria).

Before the tag leg counted the tags named by a memory that says what the query says,
such a memory ranked first in the vector and keyword legs, was absent from the tag leg,
and fell below the many carriers of that tag the content legs ranked moderately well
(every test here failed on main 5a7263e).
"""

from __future__ import annotations

import random
import unicodedata
from collections.abc import Iterator
from typing import Any

import pytest

from hybrid_memory import HybridMemory
from hybrid_memory._model.filters import parse_filter

from ..conftest import SeededEmbedding

SPEAKERS = ["john", "maria", "gina", "tim"]
TOPICS = ["work", "family", "travel", "idea"]
WORDS = """
    garage code dentist appointment tuesday garden tomatoes piano lesson marathon training
    plan server outage backup invoice birthday gift trip tokyo budget meeting recipe soup
    kitchen paint fence dog walk park library book concert tickets
""".split()  # noqa: SIM905 - a word list reads better as prose
FRESH = [
    ("John told me the garage code is 4721", ["maria"]),
    ("Gina and John moved the piano lesson to tuesday", ["tim"]),
    ("Tim said the family trip to tokyo is in may", ["gina", "travel"]),
    ("Maria paints the garden fence every spring", ["john"]),
    ("the work budget meeting with Gina is at noon", ["maria", "idea"]),
    ("John booked concert tickets for the family", []),
]


@pytest.fixture(scope="module")
def store() -> Iterator[HybridMemory]:
    """3,000 memories, each tagged with a speaker and maybe a topic, whose texts often
    name another speaker: every speaker tag is carried by about a quarter of them."""
    rng = random.Random(22)
    items: list[dict[str, Any]] = []
    for i in range(3000):
        words = [rng.choice(WORDS) for _ in range(rng.randint(5, 12))]
        words.insert(rng.randrange(len(words)), rng.choice(SPEAKERS + TOPICS))
        tags = [rng.choice(SPEAKERS), *rng.sample(TOPICS, rng.choice([0, 1]))]
        items.append({"text": " ".join(words) + f" note {i}", "tags": tags})
    with HybridMemory(embedding=SeededEmbedding(), embedding_name="test-seeded-64") as memory:
        memory.add_many(items)
        yield memory


@pytest.mark.parametrize(("text", "tags"), FRESH)
def test_a_fresh_memory_is_found_by_its_own_text(
    store: HybridMemory, text: str, tags: list[str]
) -> None:
    memory_id = store.add(text, tags=tags)
    result = store.search(text, k=10)
    assert result.matched_tags, "the text names tags many memories carry"
    assert memory_id in [hit.id for hit in result]
    (own,) = [hit for hit in result if hit.id == memory_id]
    # It names every tag the search matched in its (own) text: the tag leg counts it.
    assert own.ranks.get("tag") is not None
    assert own.scores["tag"] == len(result.matched_tags)


def test_only_a_memory_saying_what_the_query_says_counts_as_naming_its_tags(
    store: HybridMemory,
) -> None:
    """A memory with the query's words (stopwords aside) matches the tags its text
    names; one that only mentions them (conversation turns name the person they
    answer) does not, nor does one that neither names nor carries them."""
    naming = store.add("John changed the shed lock code to 9911", tags=["maria"])
    mention = store.add("John says hi, the shed lock code changed again", tags=["maria"])
    silent = store.add("the shed lock code is written on the fridge", tags=["maria"])
    result = store.search("John changed the shed lock code to 9911", k=100)
    assert result.matched_tags == ("john",)
    hits = {hit.id: hit for hit in result}
    assert {naming, mention, silent} <= set(hits)
    assert hits[naming].scores["tag"] == 1
    assert naming in [hit.id for hit in result[:10]]
    assert "tag" not in hits[mention].ranks
    assert "tag" not in hits[silent].ranks


@pytest.mark.parametrize(
    "spelled",
    ["John moved the ｐｉａｎｏ lesson", "John moved the piano ﬁle", "Zoe\u0308 met John"],
)
def test_a_memory_saying_the_query_in_other_spellings_names_its_tags(
    store: HybridMemory, spelled: str
) -> None:
    """Full-width letters, a ligature, a decomposed accent: the words are the same once
    normalised (NFKC), as tags and queries compare them, so the memory says what the
    query in plain spelling says and counts as naming its tags. (Before 5e22181 the
    full-width and the decomposed spellings did not count; casefolding alone already
    took the ligature apart.)"""
    memory_id = store.add(spelled, tags=["tim"])
    plain = unicodedata.normalize("NFKC", spelled)
    assert plain != spelled
    result = store.search(plain, k=100)
    assert "john" in result.matched_tags
    (own,) = [hit for hit in result if hit.id == memory_id]
    assert own.ranks.get("tag") is not None
    assert own.scores["tag"] == 1


def test_a_memory_the_approximate_vector_search_leaves_out_is_found_by_its_writer() -> None:
    """Chroma's vector search is approximate: in a large store it can leave out a memory
    just added, even asked with its own vector (Chroma alone, a million memories: one of
    20). The vector leg then takes it from this process's latest writes, compared exactly
    and filtered as the leg is. Here Chroma's real hits lack the memory, as such a miss
    returns them."""
    embedding = SeededEmbedding()
    with HybridMemory(embedding=embedding, embedding_name="test-seeded-64") as store:
        rng = random.Random(7)
        store.add_many(
            [
                {
                    "text": " ".join(rng.choice(WORDS) for _ in range(8)) + f" note {i}",
                    "metadata": {"user": "u1" if i % 2 else "u2"},
                }
                for i in range(400)
            ]
        )
        text = "the dentist moved the marathon training plan to tuesday"
        fresh = store.add(text, metadata={"user": "u1"})
        parts = store._parts
        (vector,) = embedding([text])
        hits = parts.collection.nearest(vector, 100, None)
        assert next(iter(hits)) == fresh  # Chroma finds it here...
        missed = {i: c for i, c in hits.items() if i != fresh}  # ...a miss lacks it

        got = parts.searcher._with_recent(missed, vector, 100, None)
        assert next(iter(got)) == fresh and got[fresh] == pytest.approx(1.0, abs=1e-5)
        assert len(got) == 100 and list(got.values()) == sorted(got.values(), reverse=True)
        assert parts.searcher._with_recent(hits, vector, 100, None) == hits

        # Filtered as the leg is.
        other_user = parse_filter({"user": "u2"})
        assert fresh not in parts.searcher._with_recent(missed, vector, 100, other_user)
        same_user = parse_filter({"user": "u1"})
        assert fresh in parts.searcher._with_recent(missed, vector, 100, same_user)
        # Fewer hits than the depth (a narrow filter): still only the filter's memories.
        few = dict(list(missed.items())[:5])
        got = parts.searcher._with_recent(few, vector, 100, same_user)
        assert next(iter(got)) == fresh and set(few) < set(got)
        assert all(store.get(i).metadata["user"] == "u1" for i in set(got) - set(few))
        assert fresh not in parts.searcher._with_recent(few, vector, 100, other_user)

        # Deleted, it is gone from the latest writes too.
        store.delete(fresh)
        assert fresh not in parts.searcher._with_recent(missed, vector, 100, None)


def _with_recent_reference(
    store: HybridMemory, hits: dict[str, float], vector: Any, depth: int, node: Any
) -> dict[str, float]:
    """The vector leg's merge with the latest writes, exhaustively: every kept memory at
    least as near as the farthest hit, still indexed and passing the filter, the nearest
    ``depth`` of all."""
    parts = store._parts
    floor = min(hits.values()) if hits else -1.0
    near = parts.searcher._recent.nearest(vector, floor)  # no limit: all of them
    passing = parts.index.passing(list(near), node)
    merged = {**hits, **{i: c for i, c in near.items() if i not in hits and i in passing}}
    return dict(sorted(merged.items(), key=lambda pair: -pair[1])[:depth])


def test_the_latest_writes_looked_at_best_first_equal_looking_at_all() -> None:
    """The vector leg looks at the latest writes best first, as few as can reach its
    cut, asking for more while they can: the same result as looking at all of them,
    whatever share of them Chroma returned, with deleted ones, filters that reject
    many of them, and small depths."""
    embedding = SeededEmbedding()
    with HybridMemory(embedding=embedding, embedding_name="test-seeded-64") as store:
        rng = random.Random(11)
        ids = store.add_many(
            [
                {
                    "text": " ".join(rng.choice(WORDS) for _ in range(6)) + f" n{i}",
                    "metadata": {"user": f"u{i % 4}"},
                }
                for i in range(300)
            ]
        )
        store.delete(ids[::7])
        parts = store._parts
        repeated = 0
        nearest = parts.searcher._recent.nearest

        def counting(vector: Any, floor: float, limit: int | None = None) -> dict[str, float]:
            nonlocal repeated
            repeated += limit is not None
            return nearest(vector, floor, limit)

        parts.searcher._recent.nearest = counting  # type: ignore[method-assign]
        for trial in range(60):
            (vector,) = embedding([" ".join(rng.choice(WORDS) for _ in range(4))])
            depth = rng.choice([1, 3, 10, 50])
            node = parse_filter({"user": "u1"}) if trial % 2 else None
            # Chroma's hits: all of the nearest, or some of a deeper list (a low floor,
            # with many of the latest writes between it and the nearest).
            deeper = parts.collection.nearest(vector, 3 * depth, None)
            passing = parts.index.passing(list(deeper), node)
            candidates = [i for i in deeper if i in passing]
            chosen = (
                candidates[:depth]
                if trial % 3 == 0
                else rng.sample(candidates, min(depth, len(candidates) // 2))
            )
            hits = {i: deeper[i] for i in sorted(chosen, key=lambda i: -deeper[i])}
            got = parts.searcher._with_recent(hits, vector, depth, node)
            expected = _with_recent_reference(store, hits, vector, depth, node)
            assert list(got) == list(expected)
            assert list(got.values()) == pytest.approx(list(expected.values()))
        assert repeated > 60  # some searches asked for more of the latest writes
