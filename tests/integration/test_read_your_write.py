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
from collections.abc import Iterator
from typing import Any

import pytest

from hybrid_memory import HybridMemory

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
