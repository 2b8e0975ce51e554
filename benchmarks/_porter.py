"""Porter's stemmer as SQLite FTS5's default tokenizer applies it to a plain ASCII word,
for the studies that compare words by stem without an index (the keyword index takes a
question's terms from its own tokenizer).

The default tokenizer (``porter unicode61 remove_diacritics 2``) folds an ASCII word to
lower case and stems it with Porter's algorithm (M. F. Porter, "An algorithm for suffix
stripping", Program 14(3), 1980, with the two rules later added to it: "bli" -> "ble"
and "logi" -> "log"), as SQLite's FTS5 does: words shorter than 3 or longer than 64
characters are left as they are. Pure functions, no I/O: a test compares them with FTS5
on every word of the shared collections.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

DEFAULT_TOKENIZER = "porter unicode61 remove_diacritics 2"
_PLAIN = re.compile(r"[A-Za-z0-9]+\Z")  # one unicode61 token, folded by lower()
_SHORTEST, _LONGEST = 3, 64  # what FTS5's porter stems

_VOWELS = frozenset("aeiou")


def plain_term(word: str) -> str | None:
    """The default tokenizer's one term for ``word`` when it is a plain ASCII word
    (letters and digits); None for any other word (FTS5 tokenizes those)."""
    if not _PLAIN.match(word):
        return None
    return stem(word.lower())


def stem(word: str) -> str:
    """Porter's stem of a lower-case ASCII token, as FTS5's porter tokenizer makes it."""
    if not _SHORTEST <= len(word) <= _LONGEST:
        return word
    w = _step1a(word)
    w = _step1b(w)
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    w = _replace(w, _STEP2)
    w = _replace(w, _STEP3)
    w = _step4(w)
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _cvc(w[:-1])):
            w = w[:-1]
    if w.endswith("ll") and _measure(w[:-1]) > 1:
        w = w[:-1]
    return w


def _consonant(w: str, i: int) -> bool:
    c = w[i]
    if c in _VOWELS:
        return False
    if c == "y":
        return i == 0 or not _consonant(w, i - 1)
    return True


def _measure(w: str) -> int:
    """m in [C](VC)^m[V]: the vowel-consonant sequences of ``w``."""
    m, previous_vowel = 0, False
    for i in range(len(w)):
        vowel = not _consonant(w, i)
        if previous_vowel and not vowel:
            m += 1
        previous_vowel = vowel
    return m


def _has_vowel(w: str) -> bool:
    return any(not _consonant(w, i) for i in range(len(w)))


def _doubled(w: str) -> bool:
    """Ends in a doubled letter that is not a vowel (a "yy" counts, as in FTS5)."""
    return len(w) >= 2 and w[-1] == w[-2] and w[-1] not in _VOWELS


def _cvc(w: str) -> bool:
    """Ends consonant-vowel-consonant, the last not w, x or y."""
    n = len(w)
    return (
        n >= 3
        and _consonant(w, n - 3)
        and not _consonant(w, n - 2)
        and _consonant(w, n - 1)
        and w[-1] not in "wxy"
    )


def _step1a(w: str) -> str:
    # "sses" and "ies" lose two letters only after some stem ("ies" alone becomes "ie").
    if (w.endswith("sses") and len(w) > 4) or (w.endswith("ies") and len(w) > 3):
        return w[:-2]
    if w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _step1b(w: str) -> str:
    if w.endswith("eed") and len(w) > 3:  # "eed" alone is read as "e" + "ed"
        return w[:-1] if _measure(w[:-3]) > 0 else w
    for suffix in ("ed", "ing"):
        if w.endswith(suffix):
            stem_ = w[: -len(suffix)]
            if not _has_vowel(stem_):
                return w
            if stem_.endswith(("at", "bl", "iz")):
                return stem_ + "e"
            if _doubled(stem_) and stem_[-1] not in "lsz":
                return stem_[:-1]
            if _measure(stem_) == 1 and _cvc(stem_):
                return stem_ + "e"
            return stem_
    return w


# Steps 2 and 3: suffix → replacement, the stem before it of measure > 0. The longest
# suffix that matches is the one tried; if its stem is too short, the step does nothing.
_STEP2 = {
    "ational": "ate",
    "tional": "tion",
    "enci": "ence",
    "anci": "ance",
    "izer": "ize",
    "bli": "ble",
    "alli": "al",
    "entli": "ent",
    "eli": "e",
    "ousli": "ous",
    "ization": "ize",
    "ation": "ate",
    "ator": "ate",
    "alism": "al",
    "iveness": "ive",
    "fulness": "ful",
    "ousness": "ous",
    "aliti": "al",
    "iviti": "ive",
    "biliti": "ble",
    "logi": "log",
}
_STEP3 = {
    "icate": "ic",
    "ative": "",
    "alize": "al",
    "iciti": "ic",
    "ical": "ic",
    "ful": "",
    "ness": "",
}
_STEP4 = (
    "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
    "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
)  # fmt: skip


def _longest(w: str, suffixes: Iterable[str]) -> str | None:
    """The longest of ``suffixes`` that ``w`` ends with after a stem of one letter or
    more."""
    found = [s for s in suffixes if w.endswith(s) and len(w) > len(s)]
    return max(found, key=len) if found else None


def _replace(w: str, rules: dict[str, str]) -> str:
    suffix = _longest(w, rules)
    if suffix is None:
        return w
    stem_ = w[: -len(suffix)]
    return stem_ + rules[suffix] if _measure(stem_) > 0 else w


def _step4(w: str) -> str:
    suffix = _longest(w, _STEP4)
    if suffix is None:
        return w
    stem_ = w[: -len(suffix)]
    if suffix == "ion" and not stem_.endswith(("s", "t")):
        return w
    return stem_ if _measure(stem_) > 1 else w
