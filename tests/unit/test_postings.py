"""The in-memory BM25 postings: hand-computed scores, and the same ranking as SQLite
FTS5's own bm25() through every kind of write, filter and reopen."""

from __future__ import annotations

import math
import random
import threading
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._keyword import memory_ids as memory_ids_module
from hybrid_memory._keyword import postings as postings_module
from hybrid_memory._keyword import row_names
from hybrid_memory._keyword.bm25_scores import best_first, bm25_idf
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._keyword.numpy_top import holding_all, holding_each
from hybrid_memory._keyword.postings import Postings
from hybrid_memory._keyword.query_words import query_words
from hybrid_memory._keyword.tokens import Tokens, term_frequencies
from hybrid_memory._keyword.writes import next_rowid
from hybrid_memory._model.filters import parse_filter
from hybrid_memory._model.records import IndexRow

TOKENIZER = "porter unicode61 remove_diacritics 2"
WORDS = [
    *("wing", "flow", "shock", "boundary", "layer", "heat", "transfer", "pressure"),
    *("laminar", "turbulent", "jet", "nozzle", "panel", "flutter", "cylinder", "cone"),
    *("plate", "supersonic", "hypersonic", "drag", "lift"),
]


def fts_ranking(index: KeywordIndex, text: str, limit: int, where: object = None) -> list:
    """The reference: FTS5 ranking the same query with its bm25()."""
    return index.keywords.search_fts(query_words(text), limit, parse_filter(where))


def assert_same(ours: list, reference: list) -> None:
    """Same scores position by position, and the same ids wherever a score is not tied:
    scores equal in exact arithmetic can differ in their last bits between numpy and
    FTS5's C, which may order such ties differently."""
    assert len(ours) == len(reference)
    for (_, a), (_, b) in zip(ours, reference, strict=True):
        assert a == pytest.approx(b, rel=1e-9)

    def groups(hits: list) -> list[set[str]]:
        out: list[set[str]] = []
        last = None
        for memory_id, score in hits:
            if last is None or not math.isclose(score, last, rel_tol=1e-9):
                out.append(set())
            out[-1].add(memory_id)
            last = score
        return out

    ours_groups, reference_groups = groups(ours), groups(reference)
    # The last group may be cut by the limit at different members of a tie.
    assert ours_groups[:-1] == reference_groups[:-1]


def random_rows(rng: random.Random, count: int, start: int = 0) -> list[IndexRow]:
    rows = []
    for n in range(start, start + count):
        words = [rng.choice(WORDS) for _ in range(rng.randint(1, 30))]
        user = f"u{n % 4}"
        rows.append(IndexRow(f"m{n}", " ".join(words), (), {"user": user, "n": n}, f"h{n}", n))
    return rows


QUERIES = [
    "shock wave boundary layer",
    "heat transfer in laminar flow",
    "wing flutter",
    "drag",
    "supersonic jet nozzle pressure panel cone",
    "flows flowing flow",  # one stem three times: FTS5 counts each quoted word
    "nothing matches this",
]


# --- the pure parts ------------------------------------------------------------------------


def tokens(occurrences: list[tuple[str, np.ndarray]]) -> Tokens:
    """:class:`Tokens` from ``[(term, row id per occurrence)]``: ``("flow", [3, 3, 7])``
    is "flow" twice in row 3 and once in row 7."""
    docs = [np.asarray(d, dtype=np.int64) for _, d in occurrences]
    return Tokens(
        [t for t, _ in occurrences],
        np.array([len(d) for d in docs], dtype=np.int64),
        np.concatenate(docs) if docs else np.zeros(0, dtype=np.int64),
    )


def test_idf_is_fts5s_with_its_floor() -> None:
    assert bm25_idf(1, 10) == pytest.approx(math.log(9.5 / 1.5))
    assert bm25_idf(5, 10) == 1e-6  # ln(5.5 / 5.5) = 0 -> FTS5's floor
    assert bm25_idf(9, 10) == 1e-6


def test_scores_by_hand() -> None:
    postings = Postings()
    # row 1: "a a b" (3 tokens), row 2: "b c" (2 tokens), row 3: "c" (1 token)
    postings.add(
        np.array([1, 2, 3]),
        tokens([("a", np.array([1, 1])), ("b", np.array([1, 2])), ("c", np.array([2, 3]))]),
    )
    avgdl = 6 / 3

    def part(tf: float, length: float, df: int) -> float:
        idf = bm25_idf(df, 3)
        return idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / avgdl))

    rows, scores = postings.scores(["a", "c"])
    assert rows.tolist() == [1, 2, 3]
    assert scores.tolist() == pytest.approx([part(2, 3, 1), part(1, 2, 2), part(1, 1, 2)])
    rows, scores = best_first(*postings.scores(["a", "c"]), 1)
    assert rows.tolist() == [1]


def test_term_frequencies_count_occurrences_in_any_order() -> None:
    given = tokens([("a", np.array([7, 3, 3, 7, 3])), ("b", np.array([])), ("c", np.array([5]))])
    term, rows, counts = term_frequencies(given.sizes, given.docs)
    assert term.tolist() == [0, 0, 2]
    assert rows.tolist() == [3, 7, 5]
    assert counts.tolist() == [3, 2, 1]
    nothing = tokens([])
    assert [a.tolist() for a in term_frequencies(nothing.sizes, nothing.docs)] == [[], [], []]


@settings(max_examples=200, deadline=None)
@given(
    batches=st.lists(
        st.dictionaries(
            st.sampled_from(["a", "b", "c", "d", "e"]),
            st.lists(st.integers(0, 3), max_size=6),  # a row per occurrence, of the batch's 4
        ),
        min_size=1,
        max_size=5,
    ),
    single=st.booleans(),
)
def test_a_few_tokens_are_added_as_numpy_adds_many(
    batches: list[dict[str, list[int]]], single: bool
) -> None:
    """The Python path for small batches (a memory added, or a few) leaves the postings
    exactly as the numpy path does."""
    few, many = Postings(), Postings()
    for n, batch in enumerate(batches):
        rows = np.arange(1 + 4 * n, 2 + 4 * n if single else 5 + 4 * n)
        # an occurrence's row: the batch's one row, or one of its four
        occurrences = [
            (t, [rows[0] + (0 if single else at) for at in ats]) for t, ats in batch.items()
        ]
        given = tokens([(term, np.array(at, dtype=np.int64)) for term, at in occurrences])
        for postings, limit in ((few, 10**9), (many, -1)):
            with patch.object(postings_module, "_FEW_TOKENS", limit):
                postings.add(rows, given)
    assert len(few) == len(many) and few.high == many.high
    every = ["a", "b", "c", "d", "e"]

    def held(postings: Postings) -> list[tuple[str, list[int], list[float]]]:
        return sorted((t, r.tolist(), f.tolist()) for t, r, f in postings.each_term())

    assert held(few) == held(many)
    assert [a.tolist() for a in few.scores(every)] == [a.tolist() for a in many.scores(every)]
    with pytest.raises(ValueError, match="not among the new rows"):
        few.add(np.array([few.high + 1]), tokens([("a", np.array([few.high + 2]))]))
    assert [a.tolist() for a in few.scores(every)] == [a.tolist() for a in many.scores(every)]


def test_best_first_breaks_ties_by_row_even_at_the_cut() -> None:
    rows = np.array([9, 4, 7, 1, 5])
    scores = np.array([1.0, 2.0, 1.0, 1.0, 3.0])
    got, got_scores = best_first(rows, scores, 3)
    assert got.tolist() == [5, 4, 1]
    assert got_scores.tolist() == [3.0, 2.0, 1.0]
    assert best_first(rows, scores, 0)[0].tolist() == []


@settings(max_examples=300, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS[:6]), max_size=6), min_size=1, max_size=60),
    query=st.lists(st.sampled_from(WORDS[:8]), min_size=1, max_size=6),
    limit=st.integers(1, 30),
    removed=st.sets(st.integers(1, 60), max_size=20),
    within=st.none() | st.lists(st.integers(-3, 70), max_size=40),
)
def test_top_is_the_best_of_all_scores_exactly(
    texts: list[list[str]],
    query: list[str],
    limit: int,
    removed: set[int],
    within: list[int] | None,
) -> None:
    """``top`` looks only at the best postings (or at ``within``), yet returns exactly
    what ranking every matched row returns: the same rows, scores to the bit and tie
    order. Few words over short texts make many equal scores; a query word may repeat."""
    postings = Postings()
    rows = np.arange(1, len(texts) + 1)
    postings.add(
        rows,
        tokens(
            [
                (w, [r for r, t in zip(rows, texts, strict=True) for x in t if x == w])
                for w in WORDS[:6]
            ]
        ),
    )
    postings.remove(sorted(removed))
    expected_rows, expected_scores = postings.scores(query)
    if within is not None:
        keep = np.isin(expected_rows, within)
        expected_rows, expected_scores = expected_rows[keep], expected_scores[keep]
    expected = best_first(expected_rows, expected_scores, limit)
    got = postings.top(query, limit, None if within is None else np.array(within, dtype=np.int64))
    assert got[0].tolist() == expected[0].tolist()
    assert got[1].tolist() == expected[1].tolist()


def test_top_keeps_every_tie_of_its_cut() -> None:
    """Four rows tie, two of them in the postings listed first: the cut through the
    postings must not settle the tie by list order (row 1 is the best, by row id)."""
    postings = Postings()
    postings.add(np.array([1, 2, 3, 4]), tokens([("a", [1, 2]), ("b", [3, 4])]))
    assert postings.top(["b", "a"], 1)[0].tolist() == [1]
    assert postings.top(["b", "a"], 3)[0].tolist() == [1, 2, 3]


def test_the_rarest_terms_cut_keeps_better_rows_without_that_term() -> None:
    """The cut comes from the rarest term's rows ("x", in rows 5-7, long texts), but
    the best rows hold only the commoner term: they reach the cut and come first, in
    the order ranking every matched row gives. With row 6 removed, "x" matches two live
    rows, fewer than asked for, and the cut comes from all the matched rows instead."""
    postings = Postings()
    postings.add(
        np.arange(1, 31),
        tokens(
            [
                ("y", [1] * 6 + [2] * 5 + list(range(3, 9))),
                ("x", [5, 6, 7]),
                ("z", [5] * 20 + [6] * 20 + [7] * 20),
                ("w", list(range(9, 31))),
            ]
        ),
    )
    for limit in (1, 2, 3, 5, 8):
        expected = best_first(*postings.scores(["x", "y"]), limit)
        got = postings.top(["x", "y"], limit)
        assert got[0].tolist() == expected[0].tolist()
        assert got[1].tolist() == expected[1].tolist()
    assert postings.top(["x", "y"], 2)[0].tolist() == [1, 2]
    postings.remove([6])
    expected = best_first(*postings.scores(["x", "y"]), 3)
    assert postings.top(["x", "y"], 3)[0].tolist() == expected[0].tolist()


def test_row_ids_must_grow_so_a_removed_row_never_comes_back() -> None:
    postings = Postings()
    postings.add(np.array([1, 2]), tokens([("a", np.array([1, 2]))]))
    postings.remove([2])
    with pytest.raises(ValueError, match="must grow"):
        postings.add(np.array([2]), tokens([("a", np.array([2]))]))
    with pytest.raises(ValueError, match="not among the new rows"):
        postings.add(np.array([5]), tokens([("a", np.array([4, 5]))]))
    assert postings.scores(["a"])[0].tolist() == [1]


def test_rows_without_tokens_count_in_n() -> None:
    postings = Postings()
    postings.add(np.array([1, 2]), tokens([("a", np.array([1]))]))
    assert len(postings) == 2
    _, scores = postings.scores(["a"])
    assert scores[0] == pytest.approx(bm25_idf(1, 2) * 2.2 / (1 + 1.2 * (0.25 + 0.75 * 2)))


def test_remove_and_compaction_keep_the_scores_of_the_rest() -> None:
    rng = np.random.default_rng(3)
    postings, fresh = Postings(), Postings()
    occurrences = {w: rng.integers(1, 3001, size=400) for w in WORDS}
    postings.add(np.arange(1, 3001), tokens(list(occurrences.items())))
    gone = set(rng.choice(np.arange(1, 3001), size=1500, replace=False).tolist())
    postings.remove(sorted(gone)[:100])  # below the compaction threshold
    postings.remove(sorted(gone)[100:])  # above it
    kept = np.array(sorted(set(range(1, 3001)) - gone))
    fresh.add(kept, tokens([(w, d[np.isin(d, kept)]) for w, d in occurrences.items()]))
    for query in (["wing"], ["flow", "drag", "lift"], WORDS):
        a, b = postings.scores(query), fresh.scores(query)
        assert a[0].tolist() == b[0].tolist()
        assert a[1] == pytest.approx(b[1], rel=1e-12)


def test_which_rows_hold_each_term_as_holding_all_says_term_by_term() -> None:
    rng = np.random.default_rng(8)
    postings = Postings()
    occurrences = {w: rng.integers(1, 500, size=300) for w in WORDS}
    postings.add(np.arange(1, 500), tokens(list(occurrences.items())))
    postings.remove(list(range(1, 500, 3)))  # some rows gone
    asked = np.array([*rng.integers(-5, 520, size=200), 0, 499, 10**6])
    terms = [*WORDS, "never"]
    each = holding_each(postings, terms, asked)
    assert each.shape == (len(terms), len(asked))
    gone = set(range(1, 500, 3))
    for position, term in enumerate(terms):
        expected = np.isin(asked, holding_all(postings, [term], asked))
        assert each[position].tolist() == expected.tolist()
        # and what was written says the same (int64 rows, some out of range, against
        # the postings' narrower row ids)
        truth = set(occurrences.get(term, np.zeros(0)).tolist()) - gone
        assert each[position].tolist() == [int(r) in truth for r in asked]
    assert not each[-1].any()
    assert holding_each(postings, terms, np.zeros(0, dtype=np.int64)).shape == (len(terms), 0)


# --- the same ranking as FTS5 --------------------------------------------------------------


@pytest.fixture
def index() -> KeywordIndex:
    idx = KeywordIndex(None, TOKENIZER)
    idx.upsert(random_rows(random.Random(1), 300))
    return idx


def test_same_ranking_and_scores_as_fts5(index: KeywordIndex) -> None:
    for query in QUERIES:
        for limit in (1, 10, 1000):
            assert_same(index.search(query, limit), fts_ranking(index, query, limit))


def test_same_ranking_after_updates_and_deletes(index: KeywordIndex) -> None:
    rng = random.Random(2)
    index.search("warm up the postings", 5)
    for step in range(6):
        index.upsert(random_rows(rng, 40, start=1000 + 40 * step))  # new
        index.upsert(random_rows(rng, 20, start=rng.randrange(0, 250)))  # replaced texts
        index.delete([f"m{rng.randrange(0, 1200)}" for _ in range(30)])
        for query in QUERIES:
            assert_same(index.search(query, 50), fts_ranking(index, query, 50))


@pytest.mark.parametrize(
    "where",
    [
        {"user": "u1"},
        {"n": {"$gte": 290}},  # passes 10 of 300: several rounds of candidates
        {"n": {"$gt": 10_000}},  # passes nothing
        {"$or": [{"user": "u2"}, {"n": {"$lt": 5}}]},
    ],
)
def test_filtered_search_is_fts5s_filtered_ranking(index: KeywordIndex, where: dict) -> None:
    for query in QUERIES:
        for limit in (3, 100):
            node = parse_filter(where)
            reference = fts_ranking(index, query, limit, where)
            assert_same(index.search(query, limit, node), reference)
            resolved = index.within(node, 1000)
            assert resolved is not None
            assert_same(index.search(query, limit, node, within=resolved[0]), reference)


def test_within_resolves_narrow_filters_only(index: KeywordIndex) -> None:
    node = parse_filter({"user": "u1"})
    resolved = index.within(node, 75)
    assert resolved is not None
    rowids, ids = resolved
    assert len(rowids) == len(ids) == 75
    assert set(ids) == {f"m{n}" for n in range(1, 300, 4)}
    assert index.within(node, 74) is None
    nothing = index.within(parse_filter({"n": {"$gt": 10_000}}), 0)
    assert nothing is not None
    assert nothing[0].tolist() == nothing[1] == []


def test_an_updated_memory_is_found_by_its_new_words_only(index: KeywordIndex) -> None:
    index.search("wing", 5)
    index.upsert([IndexRow("m7", "quasar telescope", (), {}, "x", 7.0)])
    assert [i for i, _ in index.search("quasar", 5)] == ["m7"]
    assert "m7" not in [i for i, _ in index.search(" ".join(WORDS), 1000)]


def test_words_fts5_reads_as_phrases_are_ranked_by_fts5() -> None:
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(
        [
            IndexRow("a", "snake_case names and snake case words", (), {}, "a", 1.0),
            IndexRow("b", "case snake, reversed", (), {}, "b", 2.0),
        ]
    )
    # "snake_case" is one word to the query parser and two tokens to FTS5: a phrase,
    # which only "a" contains.
    assert [i for i, _ in index.search("snake_case", 10)] == ["a"]
    assert_same(index.search("snake_case", 10), fts_ranking(index, "snake_case", 10))


def test_trigram_tokenizer_ranks_through_fts5() -> None:
    index = KeywordIndex(None, "trigram")
    index.upsert(
        [
            IndexRow("a", "aerodynamic heating", (), {}, "a", 1.0),
            IndexRow("b", "dynamic range", (), {}, "b", 2.0),
            IndexRow("c", "static loads", (), {}, "c", 3.0),
            IndexRow("d", "wind tunnels", (), {}, "d", 4.0),
            IndexRow("e", "heat shields", (), {}, "e", 5.0),
            IndexRow("f", "rocket motors", (), {}, "f", 6.0),
        ]
    )
    assert [i for i, _ in index.search("dynamic", 10)] == ["b", "a"]  # "b" is shorter
    assert index.keywords.postings is None  # never built: every word is a phrase


def test_another_connections_writes_are_seen(tmp_path: Path) -> None:
    path = str(tmp_path / "shared.sqlite3")
    writer, reader = KeywordIndex(path, TOKENIZER), KeywordIndex(path, TOKENIZER)
    writer.upsert(random_rows(random.Random(4), 100))
    assert_same(reader.search("shock wave", 20), fts_ranking(reader, "shock wave", 20))
    # The reader's postings exist now; everything the writer does next must reach them.
    writer.upsert([IndexRow("new", "quasar pulsar", (), {}, "n", 1.0)])
    writer.upsert([IndexRow("m3", "pulsar only", (), {}, "p", 1.0)])
    writer.delete(["m5", "m6"])
    assert [i for i, _ in reader.search("pulsar", 10)] == ["new", "m3"]  # a tie: older row first
    for query in QUERIES:
        assert_same(reader.search(query, 200), fts_ranking(reader, query, 200))
    # ...and the reader's own writes land after the writer's, not over them.
    reader.upsert([IndexRow("mine", "pulsar pulsar pulsar", (), {}, "r", 1.0)])
    writer.upsert([IndexRow("theirs", "pulsar quasar", (), {}, "t", 1.0)])
    assert {i for i, _ in reader.search("pulsar", 10)} == {"m3", "new", "mine", "theirs"}
    assert_same(reader.search("pulsar", 10), fts_ranking(reader, "pulsar", 10))
    writer.close()
    reader.close()


def test_one_view_looks_for_other_connections_writes_once(tmp_path: Path) -> None:
    """A search's reads see other connections' writes as of its start, each thread its
    own view; the next view sees them."""
    path = str(tmp_path / "shared.sqlite3")
    writer = KeywordIndex(path, TOKENIZER)
    writer.upsert(random_rows(random.Random(8), 50))
    reader = KeywordIndex(path, TOKENIZER)
    while reader.keywords.postings is None:  # built aside from the file
        reader.search("wing", 1)
    looks: list[str] = []
    reader.file.conn.set_trace_callback(
        lambda sql: looks.append(sql) if sql == "PRAGMA data_version" else None
    )
    with reader.one_view():
        assert reader.search("pulsar", 10) == []
        writer.upsert([IndexRow("new", "pulsar", (), {}, "n", 1.0)])
        assert reader.search("pulsar", 10) == []
        assert reader.count() == 50
        assert reader.rows(["m3"]).keys() == {"m3"}
        assert len(looks) == 1  # the view's start
        other: list[list] = []  # another thread, outside any view: sees the write
        thread = threading.Thread(target=lambda: other.append(reader.search("pulsar", 10)))
        thread.start()
        thread.join()
        assert [i for i, _ in other[0]] == ["new"]
    assert [i for i, _ in reader.search("pulsar", 10)] == ["new"]
    assert reader.count() == 51
    reader.file.conn.set_trace_callback(None)
    writer.close()
    reader.close()


def test_a_reopened_index_builds_the_same_postings(tmp_path: Path) -> None:
    path = str(tmp_path / "index.sqlite3")
    first = KeywordIndex(path, TOKENIZER)
    first.upsert(random_rows(random.Random(5), 200))
    first.delete(["m1", "m2"])
    first.upsert(random_rows(random.Random(6), 10, start=50))
    before = {q: first.search(q, 30) for q in QUERIES}
    first.close()
    again = KeywordIndex(path, TOKENIZER)
    for query in QUERIES:
        assert_same(again.search(query, 30), before[query])
    # Row ids stay unique after reopening: a new memory never takes a deleted one's.
    again.upsert([IndexRow("fresh", "wing", (), {}, "f", 1.0)])
    assert_same(again.search("wing", 300), fts_ranking(again, "wing", 300))
    again.close()


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=12), max_size=25),
    query=st.lists(st.sampled_from(WORDS), min_size=1, max_size=5),
    deleted=st.sets(st.integers(0, 24), max_size=10),
)
def test_any_corpus_ranks_like_fts5(
    texts: list[list[str]], query: list[str], deleted: set[int]
) -> None:
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(
        [IndexRow(f"d{i}", " ".join(t) or "!", (), {}, f"h{i}", i) for i, t in enumerate(texts)]
    )
    text = " ".join(query)
    index.search(text, 5)
    index.delete([f"d{i}" for i in deleted])
    assert_same(index.search(text, 10), fts_ranking(index, text, 10))


@pytest.mark.parametrize("by_rows", [False, True], ids=["batch statement", "row by row"])
def test_postings_follow_every_write_from_an_empty_index(
    tmp_path: Path, by_rows: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store filled from scratch has its postings when the first search comes (each
    batch's tokens are added as it commits); they rank like postings built afterwards."""
    if by_rows:  # values JSON cannot carry take this path
        monkeypatch.setattr("hybrid_memory._keyword.index.batch_json", lambda rows: None)
    path = str(tmp_path / "index.sqlite3")
    index = KeywordIndex(path, TOKENIZER)
    assert index.keywords.postings is not None  # empty, like the index
    rng = random.Random(8)
    index.upsert(random_rows(rng, 150))
    index.upsert(random_rows(rng, 60, start=100))  # 50 of them replace rows
    with index.upserting(random_rows(rng, 30, start=400)):
        pass
    postings = index.keywords.postings
    assert postings is not None and postings.high == next_rowid(index.file.conn) - 1
    for query in QUERIES:
        assert_same(index.search(query, 40), fts_ranking(index, query, 40))
    assert index.keywords.postings is postings  # followed, not rebuilt by the search
    index.close()
    built = KeywordIndex(path, TOKENIZER)
    assert built.keywords.postings is None  # a filled index builds them on the first search
    for query in QUERIES:
        assert_same(built.search(query, 40), fts_ranking(built, query, 40))
    built.close()


def test_a_cleared_index_starts_empty_postings_again() -> None:
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(random_rows(random.Random(9), 50))
    index.search("wing", 5)
    index.clear()
    assert index.search("wing", 5) == []
    index.upsert(random_rows(random.Random(10), 40, start=500))
    for query in QUERIES:
        assert_same(index.search(query, 20), fts_ranking(index, query, 20))
    index.close()


def test_holding_every_is_the_memories_whose_text_has_every_word(index: KeywordIndex) -> None:
    """The tag leg's first cut: exactly the memories whose text holds every word (as the
    tokenizer stems them: "flows" is held by a text saying "flow"), after updates and
    deletes too (tombstoned rows are not held)."""
    index.search("warm up the postings", 5)
    rng = random.Random(3)
    index.upsert(random_rows(rng, 40, start=0))  # new rows for m0..m39
    index.delete([f"m{n}" for n in range(40, 80)])
    ids = [f"m{n}" for n in range(300)]
    texts = dict(index.texts(ids))
    for words in (["flows", "wing"], ["heat"], ["boundary", "layer", "laminar"], ["absent"]):
        stems = [w.removesuffix("s") for w in words]
        expected = [i for i in ids if i in texts and all(s in texts[i].split() for s in stems)]
        assert index.holding_every(words, ids) == expected


def test_row_ids_beyond_32_bits_are_refused_and_nothing_changes() -> None:
    """Row ids are kept in 32 bits (8 bytes a posting with its tf, not 12)."""
    postings = Postings()
    postings.add(np.array([1, 2]), tokens([("a", np.array([1, 2]))]))
    with pytest.raises(ValueError, match="above the postings'"):
        postings.add(np.array([2**31]), tokens([("a", np.array([2**31]))]))
    assert postings.high == 2 and len(postings) == 2
    assert postings.scores(["a"])[0].tolist() == [1, 2]


def test_rows_are_named_by_their_memory_ids_whatever_their_length() -> None:
    ids = {
        1: "9f1c2e3d4b5a69788796a5b4c3d2e1f0",  # a generated id: 32 bytes, the array's width
        2: "m2",
        3: "é" * 16,  # 32 bytes of UTF-8
        4: "é" * 17,  # 34: kept aside
        5: "ends with a NUL\0",  # numpy would drop the NUL: kept aside
        6: "x" * 200,
    }
    postings = Postings()
    postings.add(np.array(list(ids)), tokens([("a", np.array(list(ids)))]))
    postings.name(list(ids), list(ids.values()))
    assert postings.ids_of([6, 5, 4, 3, 2, 1]) == {r: ids[r] for r in (6, 5, 4, 3, 2, 1)}
    postings.remove([2, 4])
    assert postings.ids_of([1, 2, 3, 4, 99, -1]) == {1: ids[1], 3: ids[3]}
    # Names survive the arrays' growth; a row added without one is not named.
    many = np.arange(10, 5000)
    postings.add(many, tokens([("b", many)]))
    assert postings.ids_of([1, 5, 10]) == {1: ids[1], 5: ids[5]}
    with pytest.raises(ValueError, match="not in the postings"):
        postings.name([5001], ["later"])
    # An id whose first 32 bytes are a stored one's is not that one, before the recent
    # ids are merged into the sorted ones and after.
    alone = Postings()
    alone.add(np.array([1]), tokens([("a", np.array([1]))]))
    alone.name([1], ["x" * 32])
    assert alone.rows_of(["x" * 32, "x" * 40]) == {"x" * 32: 1}
    alone.names._merge_recent(alone.live)
    assert alone.rows_of(["x" * 32, "x" * 40]) == {"x" * 32: 1}
    with pytest.raises(ValueError, match="2 rows but 1 ids"):
        postings.name([10, 11], ["m10"])


# Ids of every kind: short, 32 bytes of UTF-8, longer than 32 bytes, one whose first 32
# bytes are another's, one ending with a NUL.
IDS = ["a", "b", "d", "é" * 20, "x" * 32, "x" * 40, "y\0"]


@settings(max_examples=150, deadline=None)
@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["write", "remove"]),
            st.lists(st.sampled_from(IDS), max_size=4),
        ),
        max_size=25,
    ),
)
def test_ids_and_rows_follow_every_write_as_a_dict_would(
    steps: list[tuple[str, list[str]]],
) -> None:
    """Named rows looked up both ways through writes (an id written again moves to a new
    row), removals, and merges of the recent ids into the sorted ones."""
    postings, model, row = Postings(), {}, 0
    with patch.object(row_names, "_MERGE_MIN", 3):
        for action, ids in steps:
            ids = list(dict.fromkeys(ids))
            if action == "remove":
                postings.remove([model.pop(i) for i in ids if i in model])
                continue
            postings.remove([model[i] for i in ids if i in model])
            rows = list(range(row + 1, row + 1 + len(ids)))
            row += len(ids)
            postings.add(np.array(rows), tokens([("t", np.array(rows))]) if rows else tokens([]))
            postings.name(rows, ids)
            model.update(zip(ids, rows, strict=True))
            assert postings.rows_of([*IDS, "never"]) == model
            assert postings.ids_of(list(range(-1, row + 2))) == {r: i for i, r in model.items()}


def test_ranked_rows_are_named_without_sql(tmp_path: Path) -> None:
    """The postings name the rows they rank, and find the rows of memory ids, however
    they got them: written by this connection, by another one, or read when a reopened
    index builds them."""
    path = str(tmp_path / "index.sqlite3")
    writer = KeywordIndex(path, TOKENIZER)
    writer.upsert(random_rows(random.Random(7), 300))
    reader = KeywordIndex(path, TOKENIZER)
    mine = "mine-" + "é" * 40

    def lookups(index: KeywordIndex, query: str) -> list[str]:
        seen: list[str] = []
        index.ids_cache.clear()  # nothing remembered: every row is named afresh
        index.file.conn.set_trace_callback(seen.append)
        try:
            hits = index.search(query, 50)
            index.ids_cache.clear()
            held = index.holding_every(["quasar"], ["m1", "theirs", mine, "absent"])
        finally:
            index.file.conn.set_trace_callback(None)
        assert_same(hits, fts_ranking(index, query, 50))
        assert held == ["theirs", mine]
        naming = ("SELECT rowid, id FROM memories WHERE", "SELECT id, rowid FROM memories WHERE")
        return [s for s in seen if s.startswith(naming)]

    while reader.keywords.postings is None:  # built aside from the file
        reader.search("wing", 1)
    writer.upsert([IndexRow("theirs", "quasar wing", (), {}, "t", 1.0)])
    reader.upsert([IndexRow(mine, "quasar flow", (), {}, "q", 1.0)])
    for index in (writer, reader):
        for query in QUERIES:
            # Only the id nobody wrote is looked for in the table.
            assert lookups(index, query) == [
                "SELECT id, rowid FROM memories WHERE id IN ('absent')"
            ]
        assert {i for i, _ in index.search("quasar", 10)} == {"theirs", mine}
    # Without postings (being built), the rows are named from the table.
    writer.keywords.postings = None
    writer.keywords.keeper._built = None
    assert writer.ids_cache.ids_of([1, 2]) == {1: "m0", 2: "m1"}
    assert writer.ids_cache.rowids_of(["m1", "theirs"]) == {"m1": 2, "theirs": 301}
    writer.close()
    reader.close()


def test_a_full_id_cache_still_answers_every_id() -> None:
    """When the remembered ids fill up during a look-up (and are emptied), the answer
    still holds the ids that were remembered before it."""
    index = KeywordIndex(None, TOKENIZER)
    index.upsert(random_rows(random.Random(9), 6))
    index.keywords.postings = None  # nothing named by the postings: remembered, else read
    index.keywords.keeper._built = None
    ids = index.ids_cache
    with patch.object(memory_ids_module, "_KEPT_IDS", 4):
        assert ids.ids_of([1, 2, 3]) == {1: "m0", 2: "m1", 3: "m2"}
        assert ids.ids_of([1, 2, 3, 4, 5]) == {1: "m0", 2: "m1", 3: "m2", 4: "m3", 5: "m4"}
        ids.clear()
        assert ids.rowids_of(["m0", "m1", "m2"]) == {"m0": 1, "m1": 2, "m2": 3}
        assert ids.rowids_of(["m0", "m1", "m4", "m5"]) == {"m0": 1, "m1": 2, "m4": 5, "m5": 6}
    index.close()
