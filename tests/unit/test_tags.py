"""Tag normalisation, finding known tags in queries, and the TTL tag cache."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.tags import TagCache, TagMatcher, normalise_tag, normalise_tags, words

WHITESPACE = re.compile(r"\s+")  # any run of Unicode whitespace: one space in a tag

# --- normalisation ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "tag"),
    [
        ("UI", "ui"),
        ("  New   York ", "new york"),
        ("new\tyork\n", "new york"),
        ("New\u00a0York", "new york"),  # no-break space is whitespace too
        ("Zoë", "zoë"),
        ("Zoe\u0308", "zoë"),  # decomposed ë composes under NFKC
        ("ＡＢＣ", "abc"),  # full-width letters
        ("ﬁle", "file"),  # ligature
        ("Straße", "strasse"),  # case folding, not just lower()
        ("東京", "東京"),
        ("c++", "c++"),
        ("x²", "x2"),
    ],
)
def test_normalise_tag(raw: str, tag: str) -> None:
    assert normalise_tag(raw) == tag


def test_equivalent_spellings_are_one_tag() -> None:
    assert (
        len({normalise_tag(t) for t in ["New York", " new york", "NEW  YORK", "new\u3000york"]})
        == 1
    )


@pytest.mark.parametrize("value", [3, 1.5, None, b"ui", ["ui"], True])
def test_non_string_tag_is_rejected(value: Any) -> None:
    with pytest.raises(InvalidInputError, match="must be a string") as info:
        normalise_tag(value)
    assert info.value.field == "tags"
    assert type(value).__name__ in str(info.value)


@pytest.mark.parametrize("value", ["", " ", "\t\n", "\u3000"])
def test_blank_tag_is_rejected(value: str) -> None:
    with pytest.raises(InvalidInputError, match="empty or blank"):
        normalise_tag(value)


def test_tag_length_is_measured_after_normalisation() -> None:
    assert normalise_tag("  " + "a" * 100 + "  ") == "a" * 100
    with pytest.raises(InvalidInputError, match="at most 100 characters, got 101"):
        normalise_tag("a" * 101)
    assert normalise_tag("abcd", max_length=4) == "abcd"
    with pytest.raises(InvalidInputError, match="at most 3"):
        normalise_tag("abcd", max_length=3)


@pytest.mark.parametrize("value", ["ui\x00", "a\x07b", "a\x1bb", "x\x7f"])
def test_control_characters_are_rejected(value: str) -> None:
    with pytest.raises(InvalidInputError, match="control characters"):
        normalise_tag(value)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=12))
def test_ascii_tags_take_a_shortcut_to_the_same_result(tag: str) -> None:
    """ASCII tags skip NFKC and the per-character category check: same tag, same errors."""
    value = WHITESPACE.sub(" ", unicodedata.normalize("NFKC", tag)).strip().casefold()
    control = any(unicodedata.category(ch) == "Cc" for ch in value)
    if not value or len(value) > 10 or control:
        with pytest.raises(InvalidInputError):
            normalise_tag(tag, max_length=10)
    else:
        assert normalise_tag(tag, max_length=10) == value


def test_error_names_the_given_field() -> None:
    with pytest.raises(InvalidInputError) as info:
        normalise_tag(7, field="filter.tags.$contains")
    assert str(info.value).startswith("filter.tags.$contains: ")


def test_normalise_tags_dedupes_keeping_first_seen_order() -> None:
    assert normalise_tags(["UI", "alice", "ui ", "Alice", "new  york"]) == (
        "ui",
        "alice",
        "new york",
    )
    assert normalise_tags(("b", "a")) == ("b", "a")
    assert normalise_tags(t for t in ["x", "X"]) == ("x",)


def test_no_tags() -> None:
    assert normalise_tags(None) == ()
    assert normalise_tags([]) == ()


@pytest.mark.parametrize("value", ["ui", "alice,ui", ""])
def test_a_bare_string_is_not_a_tag_list(value: str) -> None:
    # Iterating a string would silently make one tag per character.
    with pytest.raises(InvalidInputError, match="expected a list of strings") as info:
        normalise_tags(value)
    assert info.value.field == "tags"


def test_non_iterable_tags_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="expected a list of strings, got int"):
        normalise_tags(5)  # type: ignore[arg-type]


def test_invalid_item_inside_a_list_is_rejected() -> None:
    with pytest.raises(InvalidInputError, match="must be a string"):
        normalise_tags(["ok", 3])
    with pytest.raises(InvalidInputError, match="blank"):
        normalise_tags(["ok", "  "])


def test_tag_count_limit_counts_distinct_tags() -> None:
    assert len(normalise_tags([f"t{i}" for i in range(64)])) == 64
    assert normalise_tags(["a", "A", "a "], max_tags=1) == ("a",)
    with pytest.raises(InvalidInputError, match="at most 64 tags per memory, got 65"):
        normalise_tags([f"t{i}" for i in range(65)])
    with pytest.raises(InvalidInputError, match="at most 2 tags"):
        normalise_tags(["a", "b", "c"], max_tags=2)


def test_max_length_is_passed_through() -> None:
    with pytest.raises(InvalidInputError, match="at most 5 characters"):
        normalise_tags(["short", "toolong"], max_length=5)


# --- words and the matcher ---------------------------------------------------------------


def test_words_split_on_unicode_word_boundaries() -> None:
    assert words("Where does Zoë live? In 東京, near the C++ meetup!") == [
        "where", "does", "zoë", "live", "in", "東京", "near", "the", "c", "meetup",
    ]  # fmt: skip


@pytest.fixture
def matcher() -> TagMatcher:
    return TagMatcher(["alice", "new york", "zoë", "東京", "ui", "c++", "new", "york city"])


def test_matcher_len(matcher: TagMatcher) -> None:
    assert len(matcher) == 8
    assert len(TagMatcher([])) == 0


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("where does Alice live?", ("alice",)),
        ("ALICE!!!", ("alice",)),
        ("alice's flat", ("alice",)),  # apostrophe splits words
        ("alicent and malice", ()),  # whole words only
        ("moving to New York", ("new york", "new")),  # the longer tag and the tag inside it
        ("New  York", ("new york", "new")),
        ("new\nyork", ("new york", "new")),
        ("york new", ("new",)),  # words out of order are not the tag
        ("new york city", ("new york", "new", "york city")),  # overlapping multi-word tags
        ("Zoë's birthday", ("zoë",)),
        ("ZOË", ("zoë",)),
        ("Zoe\u0308", ("zoë",)),  # decomposed input
        ("Zoe", ()),  # the diacritic is part of the word
        ("我住在 東京 附近", ("東京",)),
        ("東京の天気", ()),  # no word boundary inside a run of CJK letters
        ("dark-mode UI, please", ("ui",)),
        ("(ui)", ("ui",)),
        ("c++ question", ("c++",)),  # punctuation-only differences: words "c"
        ("c programming", ("c++",)),
        ("", ()),
        ("?!", ()),
    ],
)
def test_matcher_finds_tags_by_word_sequence(
    matcher: TagMatcher, query: str, found: tuple[str, ...]
) -> None:
    assert matcher.find(query) == found


def test_matcher_reports_tags_in_query_order_without_duplicates(matcher: TagMatcher) -> None:
    assert matcher.find("ui for alice, then alice again, then ui") == ("ui", "alice")
    assert matcher.find("alice in 東京 and alice") == ("alice", "東京")


def test_tags_with_the_same_words_are_all_reported() -> None:
    # "c++" and "c#" both have the words ["c"]; a query mentioning c finds both.
    assert TagMatcher(["c++", "c#", "go"]).find("learning C today") == ("c++", "c#")


def test_tags_without_words_never_match() -> None:
    m = TagMatcher(["!!!", "?"])
    assert len(m) == 0
    assert m.find("!!! ?") == ()


def test_empty_matcher() -> None:
    assert TagMatcher([]).find("anything at all") == ()


# --- the TTL cache ---------------------------------------------------------------------------


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Source:
    """The known tags as the store would load them; counts loads."""

    def __init__(self, tags: list[str]) -> None:
        self.tags = tags
        self.loads = 0

    def __call__(self) -> list[str]:
        self.loads += 1
        return list(self.tags)


def test_cache_loads_lazily_and_once_within_ttl() -> None:
    source, clock = Source(["alice"]), FakeClock()
    cache = TagCache(source, ttl=60.0, clock=clock)
    assert source.loads == 0
    assert cache.tags() == frozenset({"alice"})
    assert cache.find("hi alice") == ("alice",)
    clock.now += 59.9
    assert cache.tags() == frozenset({"alice"})
    assert source.loads == 1


def test_cache_reloads_when_ttl_expires() -> None:
    source, clock = Source(["alice"]), FakeClock()
    cache = TagCache(source, ttl=60.0, clock=clock)
    cache.tags()
    source.tags.append("bob")  # another process writes
    clock.now += 30
    assert cache.find("bob and alice") == ("alice",)  # not yet visible
    clock.now += 30  # exactly ttl after the load
    assert cache.find("bob and alice") == ("bob", "alice")
    assert source.loads == 2
    clock.now += 59
    cache.tags()
    assert source.loads == 2  # the TTL restarts at each load


def test_invalidate_makes_the_next_read_load() -> None:
    source, clock = Source(["alice"]), FakeClock()
    cache = TagCache(source, ttl=3600.0, clock=clock)
    cache.tags()
    source.tags.remove("alice")
    source.tags.append("new york")
    assert cache.find("alice in new york") == ("alice",)
    cache.invalidate()
    assert source.loads == 1  # invalidate itself does not load
    assert cache.find("alice in new york") == ("new york",)
    assert cache.tags() == frozenset({"new york"})
    assert source.loads == 2


def test_zero_ttl_loads_on_every_read() -> None:
    source = Source(["a"])
    cache = TagCache(source, ttl=0.0, clock=FakeClock())
    cache.tags()
    cache.find("a")
    cache.tags()
    assert source.loads == 3


def test_cache_uses_a_monotonic_clock_by_default() -> None:
    source = Source(["alice"])
    cache = TagCache(source, ttl=3600.0)
    assert cache.find("alice") == ("alice",)
    assert cache.find("alice") == ("alice",)
    assert source.loads == 1


def test_add_merges_written_tags_without_a_load() -> None:
    source, clock = Source(["alice"]), FakeClock()
    cache = TagCache(source, ttl=3600.0, clock=clock)
    assert cache.find("bob in new york") == ()
    source.tags += ["bob", "new york"]  # this process writes them ...
    cache.add(["bob", "new york", "alice"])  # ... and tells the cache
    assert cache.find("bob in new york") == ("bob", "new york")
    assert cache.tags() == frozenset({"alice", "bob", "new york"})
    assert source.loads == 1


def test_add_before_the_first_load_leaves_loading_to_the_read() -> None:
    source = Source(["alice"])
    cache = TagCache(source, ttl=3600.0, clock=FakeClock())
    cache.add(["bob"])
    assert source.loads == 0
    source.tags.append("bob")
    assert cache.tags() == frozenset({"alice", "bob"})
    assert source.loads == 1


def test_add_does_not_restart_the_ttl() -> None:
    source, clock = Source(["alice"]), FakeClock()
    cache = TagCache(source, ttl=60.0, clock=clock)
    cache.tags()
    clock.now += 59
    cache.add(["bob"])
    source.tags.append("carol")  # another process
    clock.now += 1
    assert cache.find("carol") == ("carol",)
    assert source.loads == 2


def test_add_after_invalidate_waits_for_the_load() -> None:
    source = Source(["alice"])
    cache = TagCache(source, ttl=3600.0, clock=FakeClock())
    cache.tags()
    cache.invalidate()
    source.tags.remove("alice")
    cache.add(["bob"])  # must not resurrect the dropped set
    source.tags.append("bob")
    assert cache.tags() == frozenset({"bob"})


def test_extended_matcher_leaves_the_original_alone(matcher: TagMatcher) -> None:
    more = matcher.extended(["c#", "new york city", "alice"])
    assert matcher.find("c# in new york city") == ("c++", "new york", "new", "york city")
    assert more.find("c# in new york city") == (
        "c++",
        "c#",
        "new york city",
        "new york",
        "new",
        "york city",
    )
    assert len(more) == len(matcher) + 2  # "alice" was known
    assert more.find("alice") == ("alice",)
