"""The derived keyword index: SQLite FTS5 BM25, tags and metadata tables."""

from __future__ import annotations

import sqlite3
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.query_words import match_expression, query_words
from hybrid_memory._keyword.schema import SCHEMA_VERSION
from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.filters import parse_filter
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
ROWS = [
    IndexRow("fr", "Paris is the capital of France", ("geo", "europe"), {"lang": "en"}, "h1", 1.0),
    IndexRow("de", "Berlin is the capital of Germany", ("geo",), {"lang": "en"}, "h2", 2.0),
    IndexRow("cat", "The cat sat on the mat", ("pets",), {"lang": "en", "n": 1}, "h3", 3.0),
    IndexRow("jp", "東京 is big; Zoë lives there", ("geo", "東京"), {"lang": "mixed"}, "h4", 4.0),
    IndexRow("stop", "of the, of the, of the and it is to", (), {}, "h5", 5.0),
]


def ids(hits: list[tuple[str, float]]) -> list[str]:
    return [h[0] for h in hits]


@pytest.fixture
def index() -> Iterator[KeywordIndex]:
    idx = KeywordIndex(None, TOKENIZER)
    idx.upsert(ROWS)
    yield idx
    idx.close()


# --- the MATCH expression: user text never reaches FTS5's query syntax ----------------------


def match_query(text: str, *, drop_stopwords: bool = True) -> str | None:
    """The MATCH expression FTS5 ranks a query by (when it ranks one itself)."""
    return match_expression(query_words(text, drop_stopwords=drop_stopwords))


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ("cats and dogs", '"cats" OR "dogs"'),
        ("Cats CATS cats", '"Cats"'),  # distinct words, first spelling kept
        ('say "hi" (now)', '"say" OR "hi"'),  # "now" is a stopword
        ("title:secret", '"title" OR "secret"'),  # no column filter
        ("fish* NEAR(a b)", '"fish" OR "NEAR" OR "b"'),
        ("x AND y OR NOT z", '"x" OR "y" OR "z"'),  # and/or/not are stopwords
        ("the of", '"the" OR "of"'),  # only stopwords: they are searched
        ("", None),
        ("  \n\t", None),
        ('"*:()^-+', None),
    ],
)
def test_match_query(text: str, expression: str | None) -> None:
    assert match_query(text) == expression


def test_match_query_can_keep_stopwords() -> None:
    assert match_query("the cat", drop_stopwords=False) == '"the" OR "cat"'
    assert match_query("the cat") == '"cat"'


@pytest.mark.parametrize(
    "text",
    [
        'he said "AND" OR',
        "NEAR(one two, 3)",
        "col:value",
        "prefix*",
        "^start",
        "a - b + c",
        "(((",
        '"unbalanced',
        "🙂🙂 emoji only",
        "🙂",
        "\x00\x01 control",
        "'; DROP TABLE memories; --",
        "",
    ],
)
def test_search_with_hostile_text_never_raises(index: KeywordIndex, text: str) -> None:
    hits = index.search(text, 10)
    assert set(ids(hits)) <= {r.id for r in ROWS}
    assert index.count() == len(ROWS)  # nothing was dropped


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=80))
def test_any_text_searches_safely_and_still_finds_its_words(text: str) -> None:
    idx = KeywordIndex(None, TOKENIZER)
    try:
        idx.upsert([IndexRow("z", "a zebra crossing"), IndexRow("q", "quiet quokka")])
        hits = idx.search(text, 5)
        assert set(ids(hits)) <= {"z", "q"}
        assert all(score > 0 for _, score in hits)
        # The same text with a real word added always finds that word's memory.
        assert "z" in ids(idx.search(text + " zebra", 5))
    finally:
        idx.close()


# Letters, digits, spaces, ASCII punctuation and combining accents. Symbols, marks and
# punctuation newer than SQLite's Unicode tables are left out: FTS5 indexes some of
# them as words (it keeps "🙂" but not "🚀") where Python sees no word characters.
_WORDY_TEXT = st.text(
    st.one_of(
        st.characters(categories=("L", "N", "Zs")),
        st.sampled_from(string.punctuation + " \t\n\u0301\u0308"),
    ),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(text=_WORDY_TEXT)
def test_a_memory_is_found_by_its_own_text(text: str) -> None:
    # Whenever FTS5 indexed at least one term of a memory, querying the memory's own
    # text finds it: query and index normalise and fold text the same way.
    idx = KeywordIndex(None, TOKENIZER)
    try:
        idx.upsert([IndexRow("m", text)])
        idx.file.conn.execute("CREATE VIRTUAL TABLE vocab USING fts5vocab(memories_fts, 'row')")
        indexed_terms = idx.file.conn.execute("SELECT COUNT(*) FROM vocab").fetchone()[0]
        assert (ids(idx.search(text, 5)) == ["m"]) == (indexed_terms > 0)
    finally:
        idx.close()


@pytest.mark.parametrize(
    ("memory", "queries"),
    [
        ("Straße", ["Straße", "straße", "STRAßE"]),  # FTS5 folds case, not ß to ss
        ("ﬁle cabinet", ["ﬁle", "file"]),  # ligature
        ("ＡＢＣ corp", ["ＡＢＣ", "abc", "ABC"]),  # full-width letters
        ("x² formula", ["x²", "x2"]),
        ("İstanbul trip", ["İstanbul", "istanbul"]),
        ("Zoë", ["Zoë", "zoe", "ZOE"]),  # diacritics removed on both sides
        ("running shoes", ["run", "runs"]),  # Porter stemming
    ],
)
def test_unicode_and_stemming_variants_match(memory: str, queries: list[str]) -> None:
    idx = KeywordIndex(None, TOKENIZER)
    try:
        idx.upsert([IndexRow("m", memory), IndexRow("other", "unrelated words here")])
        for q in queries:
            assert ids(idx.search(q, 5)) == ["m"], q
    finally:
        idx.close()


# --- ranking and stopwords -------------------------------------------------------------------


def test_bm25_ranking_and_positive_scores(index: KeywordIndex) -> None:
    hits = index.search("capital of France", 10)
    assert ids(hits)[0] == "fr"
    assert set(ids(hits)) == {"fr", "de"}  # "of" is dropped, so "stop" is not a hit
    assert hits[0][1] > hits[1][1] > 0


def test_stopwords_count_when_kept(index: KeywordIndex) -> None:
    assert "stop" in ids(index.search("capital of France", 10, drop_stopwords=False))


def test_stopword_only_query_still_searches(index: KeywordIndex) -> None:
    hits = index.search("the of", 10)
    assert ids(hits)[0] == "stop"
    assert {"fr", "de", "cat"} <= set(ids(hits))


def test_limit(index: KeywordIndex) -> None:
    assert len(index.search("the capital cat", 1)) == 1
    assert index.search("nothing matches xyzzy", 5) == []


def test_filter_applies_before_the_limit(index: KeywordIndex) -> None:
    # "cat" ranks below "fr" and "de" for this text but is the only one passing the
    # filter; a filter applied after the top-1 cut would have returned nothing.
    where = parse_filter({"n": 1})
    assert ids(index.search("the capital of France and the cat", 1, where)) == ["cat"]
    assert index.count(where) == 1
    assert index.count(parse_filter({"lang": "en"})) == 3


def test_unicode_words(index: KeywordIndex) -> None:
    assert ids(index.search("東京", 5)) == ["jp"]
    assert ids(index.search("zoe", 5)) == ["jp"]


# --- writes --------------------------------------------------------------------------------


def test_upsert_and_delete_are_visible_at_once(index: KeywordIndex) -> None:
    index.upsert([IndexRow("new", "a brand new armadillo", ("animals",), {"k": "v"})])
    assert ids(index.search("armadillo", 5)) == ["new"]
    assert index.count() == len(ROWS) + 1
    assert "animals" in index.all_tags()
    assert index.count(parse_filter({"k": "v"})) == 1

    assert index.delete(["new", "never-existed"]) == 1
    assert index.search("armadillo", 5) == []
    assert index.count() == len(ROWS)
    assert "animals" not in index.all_tags()
    assert index.count(parse_filter({"k": "v"})) == 0
    assert index.delete(["new"]) == 0


def test_reupsert_replaces_text_tags_and_metadata(index: KeywordIndex) -> None:
    index.upsert(
        [IndexRow("cat", "A dog barked loudly", ("dogs",), {"lang": "fr"}, "h9", 3.0, 9.0)]
    )
    assert index.count() == len(ROWS)
    assert index.search("mat", 5) == []  # the old text is gone from FTS
    assert ids(index.search("dog", 5)) == ["cat"]
    assert index.tag_carriers(["pets"], 5) == []
    assert [m.id for m in index.tag_carriers(["dogs"], 5)] == ["cat"]
    assert "pets" not in index.all_tags()
    assert index.count(parse_filter({"n": 1})) == 0  # old metadata gone
    assert index.count(parse_filter({"lang": "fr"})) == 1
    row = index.rows(["cat"])["cat"]
    assert row == IndexRow("cat", "A dog barked loudly", ("dogs",), {"lang": "fr"}, "h9", 3.0, 9.0)
    assert index.watermark() == 9.0


def test_repeated_id_in_one_batch_last_one_wins() -> None:
    idx = KeywordIndex(None, TOKENIZER)
    try:
        idx.upsert(
            [IndexRow("x", "first version", ("a",)), IndexRow("x", "second version", ("b",))]
        )
        assert idx.count() == 1
        assert idx.search("first", 5) == []
        assert ids(idx.search("second", 5)) == ["x"]
        assert idx.all_tags() == ["b"]
    finally:
        idx.close()


def test_empty_upsert_and_clear(index: KeywordIndex) -> None:
    index.upsert([])
    assert index.count() == len(ROWS)
    index.clear()
    assert index.count() == 0
    assert index.search("capital", 5) == []
    assert index.all_tags() == []
    assert index.watermark() is None


def test_failed_upsert_rolls_back(index: KeywordIndex) -> None:
    bad = IndexRow("bad", "text", (), {"obj": object()})  # metadata that cannot be stored
    with pytest.raises(TypeError):
        index.upsert([IndexRow("good", "armadillo"), bad])
    assert index.rows(["good", "bad"]) == {}
    assert index.search("armadillo", 5) == []
    index.upsert([IndexRow("good", "armadillo")])  # the connection is usable again
    assert ids(index.search("armadillo", 5)) == ["good"]


# --- reads -----------------------------------------------------------------------------


def tag_matches(index: KeywordIndex, *args: Any, **kwargs: Any) -> list[tuple[str, int, float]]:
    return [m[:3] for m in index.tag_carriers(*args, **kwargs)]


def test_tag_carriers_order_by_matched_count_then_newest(index: KeywordIndex) -> None:
    got = tag_matches(index, ["geo", "europe", "東京"], 10)
    # fr and jp match two tags (jp is newer), de one.
    assert got == [("jp", 2, 4.0), ("fr", 2, 1.0), ("de", 1, 2.0)]
    assert tag_matches(index, ["geo"], 10, among=["de", "cat"]) == [("de", 1, 2.0)]
    assert tag_matches(index, ["geo"], 10, among=[]) == []
    assert tag_matches(index, [], 10) == []
    where = parse_filter({"lang": "mixed"})
    assert tag_matches(index, ["geo"], 10, where) == [("jp", 1, 4.0)]
    assert len(tag_matches(index, ["geo"], 1)) == 1


def test_lookups(index: KeywordIndex) -> None:
    assert index.ids() == {r.id for r in ROWS}
    assert set(index.rows(["fr", "nope"])) == {"fr"}
    assert index.ids_by_hash(["h2", "h3", "missing"]) == {"h2": "de", "h3": "cat"}
    assert index.created_at(["fr", "jp", "nope"]) == {"fr": 1.0, "jp": 4.0}
    assert index.rows(["jp"])["jp"] == ROWS[3]
    assert sorted(index.all_tags()) == ["europe", "geo", "pets", "東京"]
    assert index.watermark() == 0.0  # updated_at defaults to 0
    assert index.get_state("nothing") is None
    index.set_state("collection_id", "abc")
    assert index.get_state("collection_id") == "abc"


def test_lookups_beyond_one_sql_chunk() -> None:
    idx = KeywordIndex(None, TOKENIZER)
    try:
        rows = [IndexRow(f"id{i}", f"word{i}", (), {}, f"h{i}", float(i)) for i in range(1200)]
        idx.upsert(rows)
        wanted = [r.id for r in rows]
        assert len(idx.rows(wanted)) == 1200
        assert idx.created_at(wanted)["id1199"] == 1199.0
        assert len(idx.ids_by_hash([r.content_hash for r in rows])) == 1200
        assert idx.delete(wanted[:700]) == 700
        assert idx.count() == 500
    finally:
        idx.close()


# --- files: persistence and tokenizer changes ---------------------------------------------------


def test_file_index_persists_across_reopen(tmp_path: Path) -> None:
    path = str(tmp_path / "kw.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    assert first.count() == 0  # a new file starts empty
    first.upsert(ROWS)
    first.set_state("collection_id", "c1")
    first.close()

    again = KeywordIndex(path, TOKENIZER)
    try:
        assert again.count() == len(ROWS)
        assert ids(again.search("capital of France", 1)) == ["fr"]
        assert again.rows(["jp"])["jp"] == ROWS[3]
        assert again.get_state("collection_id") == "c1"
        again.upsert([IndexRow("late", "armadillo")])
    finally:
        again.close()
    third = KeywordIndex(path, TOKENIZER)
    try:
        assert ids(third.search("armadillo", 5)) == ["late"]
    finally:
        third.close()


def test_changing_the_tokenizer_rebuilds_a_file_index(tmp_path: Path) -> None:
    path = str(tmp_path / "kw.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    first.upsert(ROWS)
    first.close()
    changed = KeywordIndex(path, "unicode61")
    try:
        assert changed.count() == 0  # to be refilled from the collection
        assert changed.get_state("collection_id") is None
        changed.upsert([IndexRow("r", "running shoes")])
        assert changed.search("run", 5) == []  # no Porter stemming any more
        assert ids(changed.search("running", 5)) == ["r"]
    finally:
        changed.close()
    same = KeywordIndex(path, "unicode61")
    try:
        assert same.count() == 1
    finally:
        same.close()


def test_an_index_of_another_schema_version_is_rebuilt(tmp_path: Path) -> None:
    path = str(tmp_path / "kw.sqlite3")
    idx = KeywordIndex(path, TOKENIZER)
    idx.upsert(ROWS)
    idx.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE index_state SET value = 'old' WHERE key = 'schema'")
    reopened = KeywordIndex(path, TOKENIZER)
    try:
        assert reopened.count() == 0
        assert reopened.get_state("schema") == SCHEMA_VERSION
    finally:
        reopened.close()


@pytest.mark.parametrize("tokenizer", ["no_such_tokenizer", "porter nonsense", "unicode61 foo 1"])
def test_bad_tokenizer_names_the_setting(tmp_path: Path, tokenizer: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        KeywordIndex(str(tmp_path / "kw.sqlite3"), tokenizer)
    assert "HYBRID_MEMORY_KEYWORD_TOKENIZER" in info.value.field
    assert repr(tokenizer) in str(info.value)
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_KEYWORD_TOKENIZER"):
        KeywordIndex(None, tokenizer)


def test_tokenizer_with_quote_is_rejected_cleanly() -> None:
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_KEYWORD_TOKENIZER"):
        KeywordIndex(None, "unicode61'); DROP TABLE memories; --")


def test_common_words_are_left_out_of_the_query_above_max_df() -> None:
    index = KeywordIndex(None, "porter unicode61 remove_diacritics 2")
    rows = [IndexRow(f"c{i}", f"common flows everywhere {i}") for i in range(20)]
    rows.append(IndexRow("rare", "a rare flowing word: zeppelin"))
    index.upsert(rows)
    # "flows" and "flowing" stem to one term through the index's own tokenizer.
    common = index.keywords.common_words(["flow", "zeppelin", "everywhere"], 0.5, index.count())
    assert common == {"flow", "everywhere"}
    everything = index.search("zeppelin flow", 100)
    pruned = index.search("zeppelin flow", 100, max_df=0.5)
    assert len(everything) == 21 and [i for i, _ in pruned] == ["rare"]
    # Dropping every word would leave nothing to search: then all are kept.
    assert len(index.search("flow everywhere", 100, max_df=0.5)) == 21


def test_counts_kept_between_writes_follow_every_write(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    index, other = KeywordIndex(path, TOKENIZER), KeywordIndex(path, TOKENIZER)
    index.upsert(
        [IndexRow(f"m{i}", "text", ("t",), {"flag": i % 2 == 0}, "", 1.0, 1.0) for i in range(6)]
    )
    index.upsert([IndexRow("one", "text", (), {"flag": 1}, "", 1.0, 1.0)])
    true, one = parse_filter({"flag": True}), parse_filter({"flag": 1})
    assert (index.count(true), index.count(one), index.count()) == (3, 1, 7)  # True is not 1
    assert (index.count(true), index.count(one)) == (3, 1)  # kept, still apart
    index.delete(["m0"])
    assert (index.count(true), index.count()) == (2, 6)
    other.upsert([IndexRow("x", "text", ("t",), {"flag": True}, "", 2.0, 2.0)])
    assert (index.count(true), index.count(parse_filter({"tags": {"$contains": "t"}}))) == (3, 6)
    index.clear()
    assert (index.count(true), index.count()) == (0, 0)
    index.close()
    other.close()


def test_row_ids_kept_between_searches_follow_every_write(tmp_path: Path) -> None:
    """The tag leg asks for the row ids of the other legs' hits on every search; those
    kept from earlier reads must follow updates (a new row id), deletes and another
    connection's writes, always as the table says."""
    path = str(tmp_path / "shared.sqlite3")
    index, other = KeywordIndex(path, TOKENIZER), KeywordIndex(path, TOKENIZER)
    ids = [f"m{i}" for i in range(5)]
    index.upsert([IndexRow(i, f"text {i}", (), {}, i, 1.0, 1.0) for i in ids])

    def truth() -> dict[str, int]:
        rows = index.file.conn.execute("SELECT id, rowid FROM memories").fetchall()
        return {memory_id: row for memory_id, row in rows if memory_id in ids}

    def kept() -> dict[str, int]:
        with index.file.lock:
            index.tag_carriers(["any"], 1)  # brings the index in step, as a search does
            return index.ids_cache.rowids_of(ids)

    assert kept() == truth()  # read, then kept
    index.upsert([IndexRow("m1", "new text", (), {}, "n", 2.0, 2.0)])  # a new row id
    assert kept() == truth()
    index.delete(["m2"])
    assert "m2" not in kept() and kept() == truth()
    other.upsert([IndexRow("m3", "theirs", (), {}, "t", 3.0, 3.0)])
    other.delete(["m4"])
    assert kept() == truth()
    assert set(kept()) == {"m0", "m1", "m3"}
    index.close()
    other.close()


def test_rows_and_texts_read_by_row_id_stay_those_of_the_table(tmp_path: Path) -> None:
    """Rows, texts and which ids are indexed are read by the row ids the index knows
    (cheaper than by id). Whatever it knew, they are what the table holds now: after its
    own update (a new row id), another connection's update and delete, and when a row it
    knew was replaced between its lookup and its read."""
    path = str(tmp_path / "shared.sqlite3")
    index, other = KeywordIndex(path, TOKENIZER), KeywordIndex(path, TOKENIZER)
    try:
        ids = [f"m{i}" for i in range(4)]
        index.upsert([IndexRow(i, f"text {i}", (), {}, i, 1.0, 1.0) for i in ids])

        def texts() -> dict[str, str]:
            return dict(index.texts([*ids, "nope"]))

        def rows() -> dict[str, str]:
            return {i: row.text for i, row in index.rows([*ids, "nope"]).items()}

        assert texts() == rows() == {i: f"text {i}" for i in ids}
        index.upsert([IndexRow("m1", "mine", (), {}, "n", 2.0, 2.0)])
        other.upsert([IndexRow("m2", "theirs", (), {}, "t", 3.0, 3.0)])
        other.delete(["m3"])
        expected = {"m0": "text m0", "m1": "mine", "m2": "theirs"}
        assert texts() == rows() == expected
        assert index.passing([*ids, "nope"], None) == set(expected)
        other.upsert([IndexRow("m4", "new", (), {}, "x", 5.0, 5.0)])
        index.delete(["m2"])
        assert index.passing(["m0", "m1", "m2", "m4", "nope"], None) == {"m0", "m1", "m4"}
        index.upsert([IndexRow("m2", "back", (), {}, "b", 6.0, 6.0)])
        assert index.passing(["m2", "m3"], None) == {"m2"}
        assert index.passing(["m2", "m3"], parse_filter({"lang": "x"})) == set()

        # The race: the known row of m0 is replaced after the lookup, before the read.
        known = index._known_rowids  # the seam between lookup and read

        def replaced_meanwhile(wanted: Any) -> dict[str, int]:
            found = known(wanted)
            other.upsert([IndexRow("m0", "replaced", (), {}, "r", 4.0, 4.0)])
            return found

        index._known_rowids = replaced_meanwhile  # type: ignore[method-assign]
        assert rows()["m0"] == "replaced"
        assert dict(index.texts(["m0"]))["m0"] == "replaced"
    finally:
        index.close()
        other.close()
