"""A memory's text with the query's words marked, safe to put in a page: the text is
escaped piece by piece and only the ``<mark>`` tags around matches are markup."""

from __future__ import annotations

import re
from html import escape

from markupsafe import Markup

_WORD = re.compile(r"\w+", re.UNICODE)
#: Words too common to be worth marking.
_SKIP = frozenset(
    {
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "he",
        "her",
        "his",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "she",
        "so",
        "than",
        "that",
        "the",
        "their",
        "them",
        "then",
        "there",
        "they",
        "this",
        "to",
        "us",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    }
)
_MIN_STEM = 4


def query_words(query: str) -> list[str]:
    """The query's words worth marking, lowercased, longest first."""
    words = {w.lower() for w in _WORD.findall(query)} - _SKIP
    return sorted(words, key=lambda w: (-len(w), w))


def highlight(text: str, query: str) -> Markup:
    """``text`` escaped, with every word that starts like a query word (its first
    letters: "cook" marks "cooking", "cooked") wrapped in ``<mark>``."""
    words = query_words(query)
    if not words:
        return Markup(escape(text))
    stems = [w[: max(_MIN_STEM, len(w) - 2)] if len(w) > _MIN_STEM else w for w in words]
    pattern = re.compile(
        r"\b(?:" + "|".join(re.escape(s) for s in stems) + r")\w*", re.IGNORECASE | re.UNICODE
    )
    out: list[str] = []
    last = 0
    for match in pattern.finditer(text):
        out.append(escape(text[last : match.start()]))
        out.append(f"<mark>{escape(match.group(0))}</mark>")
        last = match.end()
    out.append(escape(text[last:]))
    return Markup("".join(out))
