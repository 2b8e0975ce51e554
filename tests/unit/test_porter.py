"""Porter's stem of a plain word as the studies compute it (benchmarks/_porter.py) is
exactly FTS5's: compared word by word with a real SQLite FTS5 table."""

from __future__ import annotations

import itertools
import random
import re
import sqlite3
from collections.abc import Iterable

import pytest

from benchmarks import _porter as porter
from benchmarks._porter import DEFAULT_TOKENIZER, plain_term, stem
from hybrid_memory._model.settings import HybridMemorySettings
from tests.conftest import SHARED_DATA


def fts5_terms(words: list[str]) -> list[list[str]]:
    """Each word's terms as SQLite FTS5 makes them with the default tokenizer."""
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(w, tokenize='{DEFAULT_TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t(rowid, w) VALUES (?, ?)", list(enumerate(words)))
    terms: list[list[str]] = [[] for _ in words]
    for term, doc in conn.execute("SELECT term, doc FROM v ORDER BY doc, offset"):
        terms[doc].append(term)
    conn.close()
    return terms


def mismatches(words: Iterable[str]) -> list[tuple[str, list[str], str | None]]:
    ordered = sorted(set(words))
    found = [
        (word, want, plain_term(word))
        for word, want in zip(ordered, fts5_terms(ordered), strict=True)
    ]
    return [(word, want, mine) for word, want, mine in found if [mine] != want]


def synthetic_words(seed: int, count: int) -> list[str]:
    """Words made to reach every rule: random stems (letters, digits, many vowels and
    y's) before one or two of the suffixes the steps test."""
    rng = random.Random(seed)
    endings = [
        *porter._STEP2,
        *porter._STEP3,
        *porter._STEP4,
        *("s", "es", "ies", "sses", "ss", "ed", "ing", "eed", "y", "e", "ll", "at", "bl"),
        *("iz", "ated", "izing", "ied", "ying", "ly", "ally"),
    ]
    pool = "aeiouybcdlmnrstwxz0123456789"
    words = []
    for _ in range(count):
        stem_ = "".join(rng.choice(pool) for _ in range(rng.randint(0, 7)))
        words.append(stem_ + rng.choice(endings) + rng.choice(["", "", *endings]))
    return words


def test_known_stems() -> None:
    assert stem("caresses") == "caress"
    assert stem("ponies") == "poni"
    assert stem("relational") == "relat"
    assert stem("hopping") == "hop"
    assert stem("generalizations") == "gener"
    assert plain_term("Running") == "run"
    assert plain_term("it") == "it"  # too short to stem
    assert plain_term("café") is None  # not plain ASCII: FTS5 tokenizes it
    assert plain_term("e-mail") is None  # two tokens


def test_edge_words_match_fts5() -> None:
    words = ["ies", "sses", "eed", "eeds", "yying", "oyying", "yyed", "a" * 64, "a" * 65]
    words += ["a" * 61 + "ing", "a" * 62 + "ing", "1990s", "2026", "ABC", "MiXeDcAsE"]
    words += ["".join(t) for n in range(1, 4) for t in itertools.product("aeyst", repeat=n)]
    assert mismatches(words) == []


@pytest.mark.parametrize("seed", [0, 1])
def test_synthetic_words_match_fts5(seed: int) -> None:
    assert mismatches(synthetic_words(seed, 60_000)) == []


def test_every_word_of_the_shared_collections_matches_fts5() -> None:
    files = sorted(SHARED_DATA.glob("*/*.jsonl"))
    if not files:
        pytest.skip(f"shared evaluation data not found in {SHARED_DATA}")
    words: set[str] = set()
    for path in files:
        words.update(re.findall(r"[A-Za-z0-9]+", path.read_text(encoding="utf-8")))
    assert len(words) > 10_000
    assert mismatches(words) == []


def test_the_default_setting_is_the_tokenizer_reproduced() -> None:
    assert HybridMemorySettings().keyword_tokenizer == DEFAULT_TOKENIZER


def test_search_with_words_first_seen_finds_their_stems(memory) -> None:
    """Through the store: the keyword leg matches inflected forms of new query words
    (computed here) and of non-ASCII ones (asked of FTS5) alike."""
    memory.add("Relational databases were normalized by the generalization rules")
    memory.add("Cafés serve espresso in Zürich")
    hits = memory.search("relations normalizing generalizations", k=2)
    assert "Relational" in hits[0].memory.text
    assert hits[0].ranks.get("keyword") == 1
    hits = memory.search("café zürich", k=2)
    assert "Cafés" in hits[0].memory.text
    assert hits[0].ranks.get("keyword") == 1
