"""A question's words as the keyword leg takes them: split as FTS5's unicode61 tokenizer
splits text, each word once, stopwords dropped; and the FTS5 expression that matches any
of them. Pure, no I/O.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

# Dropped from keyword *queries* only: they match most memories and drown the terms
# that carry the question. Memories keep them, so phrase-like evidence survives.
STOPWORDS = frozenset(
    """
    a about above after again against all am an and any are as at be because been
    before being below between both but by can could did do does doing down during
    each few for from further had has have having he her here hers herself him
    himself his how i if in into is it its itself just me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where
    which while who whom why will with would you your yours yourself yourselves s t
    don didn doesn isn wasn aren weren
    """.split()  # noqa: SIM905 - a word list reads better as prose
)

# Words as FTS5's unicode61 tokenizer sees them: letters, numbers and private use,
# with the combining accents inside a word (remove_diacritics folds "0\u03010" into
# "00"). Erring towards longer words is safe: FTS5 splits a quoted word into a phrase.
_WORD_CHARS = r"\w\ue000-\uf8ff\U000f0000-\U0010fffd"
_TOKEN = re.compile(rf"[{_WORD_CHARS}][{_WORD_CHARS}\u0300-\u036f]*", re.UNICODE)


def query_words(text: str, *, drop_stopwords: bool = True) -> list[str]:
    """The distinct words of a query, stopwords dropped unless nothing else is left."""
    return list(_words(text, drop_stopwords))


@functools.lru_cache(maxsize=4096)
def _words(text: str, drop_stopwords: bool) -> tuple[str, ...]:
    # Kept: a search asks for the words of its query and of each hit's text (relevance)
    # several times, and the same hits come back across searches.
    # No case folding here: FTS5 folds each quoted word with the same tokenizer as the
    # indexed text, whereas str.casefold() differs from it ("Straße" -> "strasse").
    distinct: dict[str, str] = {}
    for token in _TOKEN.findall(unicodedata.normalize("NFKC", text)):
        distinct.setdefault(token.casefold(), token)
    tokens = list(distinct.values())
    if drop_stopwords:
        content = [t for t in tokens if t.casefold() not in STOPWORDS]
        tokens = content or tokens  # a query of only stopwords still searches them
    return tuple(tokens)


def match_expression(words: Sequence[str]) -> str | None:
    """An FTS5 MATCH expression for query words: ``"w1" OR "w2" …``, every word quoted as
    an FTS5 string, so no character of user text can reach FTS5's query syntax (``AND``,
    ``NEAR``, ``*``, ``:``, ``"``, parentheses…). None for no words."""
    if not words:
        return None
    return " OR ".join('"' + w.replace('"', '""') + '"' for w in words)
