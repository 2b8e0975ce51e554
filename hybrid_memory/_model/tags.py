"""Tags: normalisation, finding known tags in a query, and the TTL tag cache.

A tag is normalised with Unicode NFKC, case folding and whitespace collapsing, so
``"  New   York "`` and ``"new york"`` are one tag. A query mentions a tag when
the tag's words appear consecutively among the query's words ("where does Alice
live in New York?" mentions ``alice`` and ``new york``), with Unicode-aware word
splitting so ``"Zoë"`` and ``"東京"`` work as well as ASCII.
"""

from __future__ import annotations

import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Iterator

from hybrid_memory._model.encodable import encodable
from hybrid_memory._model.errors import InvalidInputError

_WORD = re.compile(r"\w+", re.UNICODE)
_SPACE = re.compile(r"\s+", re.UNICODE)


def normalise_tag(tag: object, *, max_length: int = 100, field: str = "tags") -> str:
    """The canonical form of one tag, or InvalidInputError saying what is wrong."""
    if not isinstance(tag, str):
        raise InvalidInputError(field, f"each tag must be a string, got {type(tag).__name__}")
    if tag.isascii():
        # The same steps, cheaper: NFKC leaves ASCII alone, str.split() splits at what
        # \s matches, casefold() is lower(), and once whitespace is collapsed, what is
        # not printable in ASCII is a control character.
        value = " ".join(tag.split()).lower()
        control = not value.isprintable()
    else:
        encodable(tag, field)
        value = _SPACE.sub(" ", unicodedata.normalize("NFKC", tag)).strip().casefold()
        control = any(unicodedata.category(ch) == "Cc" for ch in value)
    if not value:
        raise InvalidInputError(field, f"tags must not be empty or blank, got {tag!r}")
    if len(value) > max_length:
        raise InvalidInputError(
            field, f"a tag is at most {max_length} characters, got {len(value)}"
        )
    if control:
        raise InvalidInputError(field, f"tags must not contain control characters, got {tag!r}")
    return value


def normalise_tags(
    tags: Iterable[object] | str | None,
    *,
    max_tags: int = 64,
    max_length: int = 100,
    field: str = "tags",
) -> tuple[str, ...]:
    """Normalise, de-duplicate (keeping first-seen order) and bound a tag list."""
    if tags is None:
        return ()
    if isinstance(tags, str):
        raise InvalidInputError(field, f"expected a list of strings, got the string {tags!r}")
    try:
        items = list(tags)
    except TypeError:
        raise InvalidInputError(
            field, f"expected a list of strings, got {type(tags).__name__}"
        ) from None
    out = tuple(dict.fromkeys(normalise_tag(t, max_length=max_length, field=field) for t in items))
    if len(out) > max_tags:
        raise InvalidInputError(field, f"at most {max_tags} tags per memory, got {len(out)}")
    return out


def normalised(text: str) -> str:
    """``text`` as its words are read: NFKC, casefolded."""
    return unicodedata.normalize("NFKC", text).casefold()


def words(text: str) -> list[str]:
    """The normalised words of a text, as tags and queries are compared."""
    return _WORD.findall(normalised(text))


def each_word(text: str) -> Iterator[str]:
    """:func:`words`, one at a time: for a caller that can stop at the first word that
    settles its question."""
    for match in _WORD.finditer(normalised(text)):
        yield match.group()


class TagMatcher:
    """Finds known tags in query text by their word sequences."""

    def __init__(self, known_tags: Iterable[str]) -> None:
        self._by_words: dict[tuple[str, ...], list[str]] = {}
        for tag in known_tags:
            key = tuple(words(tag))
            if key:
                self._by_words.setdefault(key, []).append(tag)
        self._longest = max((len(k) for k in self._by_words), default=0)

    def __len__(self) -> int:
        return sum(len(v) for v in self._by_words.values())

    def extended(self, tags: Iterable[str]) -> TagMatcher:
        """A matcher that also knows ``tags`` (this one is left as it is: a search may be
        using it)."""
        out = TagMatcher(())
        out._by_words = dict(self._by_words)
        out._longest = self._longest
        for tag in tags:
            key = tuple(words(tag))
            if key and tag not in out._by_words.get(key, ()):
                out._by_words[key] = [*out._by_words.get(key, ()), tag]
                out._longest = max(out._longest, len(key))
        return out

    def find(self, query: str) -> tuple[str, ...]:
        """Known tags whose words occur consecutively in ``query``, in query order."""
        if not self._by_words:
            return ()
        tokens = words(query)
        found: dict[str, None] = {}
        for start in range(len(tokens)):
            for size in range(min(self._longest, len(tokens) - start), 0, -1):
                for tag in self._by_words.get(tuple(tokens[start : start + size]), ()):
                    found.setdefault(tag)
        return tuple(found)


class TagCache:
    """The known-tag set, loaded through ``loader`` and kept for ``ttl`` seconds.

    After this process writes, ``add(tags)`` merges the tags it wrote (cheap: a write
    can only make tags known), and ``invalidate()``, after a write that may have
    removed a tag's last carrier, makes the next read load at once. Writes by other
    processes show up within ``ttl`` (sooner when the store's periodic sync finds them
    and invalidates).
    """

    def __init__(
        self,
        loader: Callable[[], Iterable[str]],
        ttl: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._loader = loader
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._matcher: TagMatcher | None = None
        self._tags: frozenset[str] = frozenset()
        self._loaded_at = 0.0

    def invalidate(self) -> None:
        with self._lock:
            self._matcher = None

    def add(self, tags: Iterable[str]) -> None:
        """Know ``tags`` from now on, without a load (nothing loaded yet: nothing to do,
        the next read loads them). The TTL is not restarted."""
        with self._lock:
            if self._matcher is None:
                return
            new = frozenset(tags) - self._tags
            if new:
                self._tags |= new
                self._matcher = self._matcher.extended(sorted(new))

    def _current(self) -> tuple[frozenset[str], TagMatcher]:
        with self._lock:
            now = self._clock()
            if self._matcher is None or now - self._loaded_at >= self._ttl:
                self._tags = frozenset(self._loader())
                self._matcher = TagMatcher(self._tags)
                self._loaded_at = now
            return self._tags, self._matcher

    def tags(self) -> frozenset[str]:
        return self._current()[0]

    def find(self, query: str) -> tuple[str, ...]:
        return self._current()[1].find(query)
