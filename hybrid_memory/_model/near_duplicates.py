"""What counts as two memories saying nearly the same thing: the rule shared by the
write-time report (``AddResult.similar``) and the search-time collapse (``Hit.similar_ids``).

Two memories whose words differ by a negation ("not", "never", "didn"...) are never
near-duplicates (their vectors are close, their facts opposite), nor are two that each
hold a number the other lacks ("note 07" / "note 09", "600 requests" / "500 requests":
a vector barely moves with a number, a fact does). A number one of them adds (a date
put in front) does not count. Otherwise they are near-duplicates when either

    cosine(a, b) >= similar_cosine
    (the same meaning, whatever the words), or
    cosine(a, b) >= similar_words_cosine, the content words of one are all words of
    the other, and the other has at most ``similar_extra_words`` more
    (the same fact restated: a date put in front, "(confirmed again)", "per the chat
    on ...", its words reordered).

The second arm is there because a short memory's vector moves a long way when a few
words are added to it (a date in front of a six-word fact: cosine 0.5-0.8 with the
all-MiniLM-L6-v2 model), while its words stay all there. The thresholds and how they
were measured are in docs/concepts/near-duplicates.md. Pure: the callers give the
cosine and each memory's content words (the keyword tokenizer's query words, folded).
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

#: Words that turn a statement around: stopwords elsewhere, but two memories whose words
#: differ by one of them do not say the same thing ("is allergic" / "is not allergic").
NEGATIONS = frozenset(
    """
    no nor not never neither none nobody nothing nowhere cannot don didn doesn isn wasn
    aren weren won wouldn shouldn couldn hasn haven hadn mustn needn
    """.split()  # noqa: SIM905 - a word list reads better as prose
)


def comparable_words(words: Iterable[str], stopwords: AbstractSet[str]) -> frozenset[str]:
    """A memory's ``words`` (its tokens) as the rule compares them: case-folded, the
    ``stopwords`` left out except :data:`NEGATIONS`."""
    folded = {word.casefold() for word in words}
    return frozenset(w for w in folded if w not in stopwords or w in NEGATIONS)


@dataclass(frozen=True, slots=True)
class NearDuplicateRule:
    """The two thresholds and the allowance of extra words (see the module docstring)."""

    cosine: float
    words_cosine: float
    extra_words: int

    @classmethod
    def of(cls, settings: Any) -> NearDuplicateRule:
        """The rule a store's settings (``HybridMemorySettings``) set."""
        return cls(
            settings.similar_cosine, settings.similar_words_cosine, settings.similar_extra_words
        )

    @property
    def floor(self) -> float:
        """The lowest cosine at which two memories can be near-duplicates."""
        return min(self.cosine, self.words_cosine)

    def holds(self, cosine: float, words: AbstractSet[str], other_words: AbstractSet[str]) -> bool:
        """Whether two memories with this ``cosine`` and these content words are
        near-duplicates."""
        only, other_only = set(words) - set(other_words), set(other_words) - set(words)
        if (only | other_only) & NEGATIONS:
            return False  # one denies what the other says
        if _has_number(only) and _has_number(other_only):
            return False  # each names a number the other lacks: two values, two facts
        if cosine >= self.cosine:
            return True
        if cosine < self.words_cosine or not words or not other_words:
            return False
        fewer, more = (
            (words, other_words) if len(words) <= len(other_words) else (other_words, words)
        )
        return len(more) - len(fewer) <= self.extra_words and fewer <= more


def _has_number(words: AbstractSet[str]) -> bool:
    return any(any(c.isdigit() for c in word) for word in words)
