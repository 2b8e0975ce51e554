"""Memories longer than the embedding model reads: how much of their evidence it saw.

An embedding model reads the start of a text (all-MiniLM-L6-v2: 256 word pieces, about
1,200 characters of English prose) and its vector stands for that part alone; the
keyword index reads every word. For a memory within that window the two legs judge the
same text. For a longer one they need not: a long answer can match a question's words
all through its length while its vector says what its opening says. Two consequences,
both read from each memory itself:

- **its keyword hit counts by the share of its keyword evidence in the part the model
  read.** The evidence is BM25's saturating term-frequency part with one weight per
  query word (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
  Beyond", 2009)::

      evidence(counts, length) = Σ_words c (k1 + 1) / (c + k1 (1 - b + b length / mean))

  ``share = min(1, evidence(in the window) / evidence(in the whole memory))``, lengths in
  characters, ``mean`` the mean length of the keyword leg's hits; its RRF contribution
  in the keyword leg is multiplied by that share. A memory whose matches
  lie in its opening keeps its whole share (a longer abstract: its window's shorter
  length makes up for the words beyond it); one whose matches run on past the window
  (a long answer repeating the question's words) keeps the part the vector can vouch for.
- **as a feedback memory, its vector counts by the share of the memory the model read**
  (``min(1, window / length)``, :func:`read_share`) in the pseudo-relevance feedback
  centroid: the keyword leg chose it for words its vector may not hold.

Memories within the window are untouched, so a store of short memories ranks as
without this. Pure, but for the index's tokenizer, which the caller passes in.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

# BM25's usual constants (the keyword index's own): saturation and length normalisation.
K1 = 1.2
B = 0.75

TermsOf = Callable[[Sequence[str]], list[tuple[str, ...]]]


def read_share(length: int, window: int) -> float:
    """The share of a memory of ``length`` characters that a model reading ``window``
    characters sees: 1 within the window."""
    if window <= 0 or length <= window:
        return 1.0
    return window / length


def feedback_weight(length: int, window: int) -> float:
    """How much a feedback memory's vector counts in the centroid: its :func:`read_share`,
    the part of what the keyword leg chose it for that its vector stands for."""
    return read_share(length, window)


def evidence(counts: Iterable[int], length: float, mean_length: float) -> float:
    """BM25's term-frequency part, summed over the query's words with one weight each:
    ``counts`` holds how often each word occurs in a text of ``length``."""
    if mean_length <= 0:
        raise ValueError(f"mean_length must be positive, got {mean_length}")
    norm = K1 * (1.0 - B + B * length / mean_length)
    return sum(c * (K1 + 1.0) / (c + norm) for c in counts if c > 0)


def window_share(
    in_window: Sequence[int],
    in_whole: Sequence[int],
    window: int,
    length: int,
    mean_length: float,
) -> float:
    """The share of a memory's keyword evidence that lies in its first ``window``
    characters: ``in_window`` and ``in_whole`` count each query word there and in the
    whole memory of ``length`` characters. 1 when the memory fits the window or holds
    none of the words."""
    if length <= window:
        return 1.0
    whole = evidence(in_whole, length, mean_length)
    if whole <= 0:
        return 1.0
    return min(1.0, evidence(in_window, window, mean_length) / whole)


class QueryWordCounter:
    """Counts a query's words in texts, each word compared as the keyword index's
    tokenizer makes it (``terms_of``: stemmed, folded), so what counts is what the
    keyword leg matched.

    A text is scanned once for words that begin like a query word (a prefix of both the
    word and its term, so inflected forms are found); only those are handed to the
    tokenizer, whose answers are remembered for the search."""

    def __init__(self, words: Sequence[str], terms_of: TermsOf) -> None:
        self._terms_of = terms_of
        self._slot: dict[tuple[str, ...], int] = {}
        prefixes: set[str] = set()
        for word, terms in zip(words, terms_of(words), strict=True):
            if not terms:
                continue
            self._slot.setdefault(terms, len(self._slot))
            prefixes.add(_prefix(word.lower(), terms))
        self.size = len(self._slot)
        self._seen: dict[str, int | None] = {}
        self._pattern = (
            re.compile(r"(?<!\w)(?:" + "|".join(re.escape(p) for p in sorted(prefixes)) + r")\w*")
            if prefixes
            else None
        )

    def counts(self, text: str, window: int) -> tuple[list[int], list[int]]:
        """How often each query word occurs in the first ``window`` characters of
        ``text`` and in all of it."""
        in_window = [0] * self.size
        in_whole = [0] * self.size
        if self._pattern is None:
            return in_window, in_whole
        found = [(m.start(), m.group()) for m in self._pattern.finditer(text.lower())]
        self._learn(word for _, word in found)
        for start, word in found:
            slot = self._seen[word]
            if slot is not None:
                in_whole[slot] += 1
                if start < window:
                    in_window[slot] += 1
        return in_window, in_whole

    def _learn(self, words: Iterable[str]) -> None:
        new = list(dict.fromkeys(w for w in words if w not in self._seen))
        if new:
            for word, terms in zip(new, self._terms_of(new), strict=True):
                self._seen[word] = self._slot.get(terms)


def window_shares(
    texts: Mapping[str, str], counter: QueryWordCounter, window: int, mean_length: float
) -> dict[str, float]:
    """:func:`window_share` of each memory in ``texts`` (``{id: text}``: the keyword
    leg's hits longer than the window, or all of them), ``mean_length`` the mean length
    of all its hits: ``{id: share}``, those within the window left out (their share
    is 1)."""
    if window <= 0 or not texts:
        return {}
    shares: dict[str, float] = {}
    for memory_id, text in texts.items():
        if len(text) > window:
            in_window, in_whole = counter.counts(text, window)
            shares[memory_id] = window_share(in_window, in_whole, window, len(text), mean_length)
    return shares


def _prefix(word: str, terms: tuple[str, ...]) -> str:
    """The start every form of ``word`` shares: what it has in common with its one
    term (Porter's stem, a prefix of the word but for its last letters), less a letter
    ("happi" for "happy": "happ"), at least three letters; the word less two letters
    for a tokenizer with several terms a word (trigrams)."""
    if len(terms) == 1:
        term = terms[0]
        same = next((i for i, (x, y) in enumerate(zip(word, term, strict=False)) if x != y), None)
        common = word[: min(len(word), len(term)) if same is None else same] or word
        cut = common[:-1] if len(common) > 3 else common
    else:
        cut = word[:-2] if len(word) > 5 else word
    return cut if len(cut) >= 3 else word


def by_share(
    multipliers: Sequence[float] | None, ids: Sequence[str], shares: Mapping[str, float]
) -> list[float]:
    """The keyword leg's per-rank multipliers (None: all 1) scaled by each hit's read
    share (1 for a hit not in ``shares``), ``ids`` the leg's ranking."""
    base = multipliers or [1.0] * len(ids)
    return [m * shares.get(i, 1.0) for m, i in zip(base, ids, strict=True)]
