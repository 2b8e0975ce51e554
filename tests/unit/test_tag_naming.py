"""The tag leg's test of a memory that says what the query says: the same content words
(stopwords aside, unless nothing else is left) and no other. It stops at the first
content word the query lacks; its answers are those of the plain definition."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import STOPWORDS
from hybrid_memory._model.tags import each_word, words
from hybrid_memory._search.legs import TagLeg

TOKENIZER = "porter unicode61 remove_diacritics 2"
# Content words, stopwords, and spellings that normalise to them (case, full-width
# letters, a ligature, a decomposed accent), joined by spaces and punctuation.
PIECES = [
    "pet", "Caroline", "CAROLINE", "ｐｅｔ", "dog", "ﬁsh", "fish", "Zoe\u0308", "zoë",
    "the", "The", "does", "what", "have", "a", "of", "I",
]  # fmt: skip
GLUE = [" ", ", ", "? ", "! ", "'s ", " - ", "\n"]


def says(text: str, query: str) -> bool:
    """The plain definition: the two texts' content words are the same."""

    def content(t: str) -> frozenset[str]:
        every = frozenset(words(t))
        return every - STOPWORDS or every

    return content(text) == content(query)


@pytest.fixture(scope="module")
def index() -> Iterator[KeywordIndex]:
    index = KeywordIndex(None, TOKENIZER)
    yield index
    index.close()


def leg(index: KeywordIndex, query: str) -> TagLeg:
    return TagLeg(index, ("caroline",), 10, None, None, None, query)


texts = st.lists(st.tuples(st.sampled_from(PIECES), st.sampled_from(GLUE)), max_size=8).map(
    lambda parts: "".join(p + g for p, g in parts)
)


@settings(max_examples=400, deadline=None)
@given(text=texts, query=texts)
def test_says_what_the_query_says_as_the_plain_definition(
    index: KeywordIndex, text: str, query: str
) -> None:
    assert leg(index, query)._says_query(text) == says(text, query)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Caroline has a pet", True),
        ("CAROLINE's ｐｅｔ?", True),  # the same words, normalised
        ("Caroline has a pet dog", False),  # one word more
        ("a pet", False),  # one word less
        ("the pet of Caroline, the pet", True),  # repeated words and stopwords
    ],
)
def test_says_what_the_query_says(index: KeywordIndex, text: str, expected: bool) -> None:
    assert leg(index, "What pet does Caroline have?")._says_query(text) is expected


def test_each_word_is_words_one_at_a_time() -> None:
    text = "Zoe\u0308's ﬁsh, ＣＡＴ and the DOG!"
    assert list(each_word(text)) == words(text) == ["zoë", "s", "fish", "cat", "and", "the", "dog"]
