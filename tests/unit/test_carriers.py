"""Tag carriers held in memory (pure numpy): the order, counts and upkeep the tag leg
relies on, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from hybrid_memory._keyword.tag_carriers import TagCarriers


def ints(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


def floats(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float64)


def held() -> TagCarriers:
    carriers = TagCarriers()
    carriers.put("a", ints(1, 2, 3, 5, 8), floats(10.0, 30.0, 30.0, 20.0, 5.0))
    carriers.put("b", ints(2, 5, 9), floats(30.0, 20.0, 40.0))
    return carriers


def test_newest_first_ties_in_time_later_row_first() -> None:
    rows, created = held().newest("a", 3)
    assert rows.tolist() == [3, 2, 5]
    assert created.tolist() == [30.0, 30.0, 20.0]
    assert held().newest("a", 10)[0].tolist() == [3, 2, 5, 1, 8]


def test_newest_within_given_rows() -> None:
    rows, _ = held().newest("a", 2, within=ints(8, 1, 5))
    assert rows.tolist() == [5, 1]
    assert held().newest("a", 2, within=ints())[0].tolist() == []


def test_counts_and_creation_times_of_any_rows() -> None:
    matched, created = held().counts(ints(5, 2, 4, 9, 1), ["a", "b", "a"])
    assert matched.tolist() == [2, 2, 0, 1, 1]  # a tag asked twice counts once
    assert created.tolist() == [20.0, 30.0, 0.0, 40.0, 10.0]


def test_added_rows_join_only_the_held_tags_they_carry() -> None:
    carriers = held()
    carriers.add([10, 11], [("a", "c"), ("b",)], [50.0, 1.0])
    assert "c" not in carriers
    assert carriers.newest("a", 1)[0].tolist() == [10]
    assert carriers.newest("b", 10)[0].tolist() == [9, 2, 5, 11]
    # Rows held already, or below the highest held row, keep the order and count once.
    carriers.add_rows([(5, "a", 20.0), (4, "a", 25.0), (4, "a", 25.0)])
    matched, created = carriers.counts(ints(4, 5), ["a"])
    assert matched.tolist() == [1, 1]
    assert created.tolist() == [25.0, 20.0]
    assert carriers.newest("a", 10)[0].tolist() == [10, 3, 2, 4, 5, 1, 8]


def test_removed_rows_leave_every_tag() -> None:
    carriers = held()
    carriers.remove([2, 5, 7])
    assert carriers.newest("a", 10)[0].tolist() == [3, 1, 8]
    assert carriers.newest("b", 10)[0].tolist() == [9]
    assert carriers.counts(ints(2, 5), ["a", "b"])[0].tolist() == [0, 0]


def test_capacity_drops_the_tags_asked_for_least_recently() -> None:
    carriers = TagCarriers(capacity=6)
    carriers.put("a", ints(1, 2, 3), floats(1, 2, 3))
    carriers.put("b", ints(4, 5), floats(4, 5))
    carriers.newest("a", 1)  # "a" was asked for after "b" was read
    carriers.put("c", ints(6, 7), floats(6, 7))
    assert carriers.missing(["a", "b", "c"]) == ["b"]
    assert len(carriers) == 2
    carriers.clear()
    assert carriers.missing(["a", "a"]) == ["a"]


def test_rows_added_after_the_order_was_read_keep_it_exact() -> None:
    rng = np.random.default_rng(3)
    carriers = TagCarriers()
    rows = np.arange(1, 301, dtype=np.int64)
    created = rng.integers(0, 40, size=300).astype(np.float64)  # many ties
    carriers.put("t", rows[:200], created[:200])
    carriers.newest("t", 5)  # the order exists now and is merged into from here on
    for start in range(200, 300, 25):
        batch = slice(start, start + 25)
        carriers.add(rows[batch].tolist(), [("t",)] * 25, created[batch].tolist())
        fresh = TagCarriers()
        fresh.put("t", rows[: start + 25], created[: start + 25])
        got, expected = carriers.newest("t", 1000), fresh.newest("t", 1000)
        assert got[0].tolist() == expected[0].tolist()
        assert got[1].tolist() == expected[1].tolist()


def test_rows_removed_after_the_order_was_made_keep_it_exact() -> None:
    """Removed rows (deletes, updates' replaced rows) leave the time order of the rest as
    it was, without sorting again: the same answers as the carriers read afresh."""
    rng = np.random.default_rng(11)
    rows = np.unique(rng.integers(0, 5_000, size=600)).astype(np.int64)
    created = rng.integers(0, 30, size=len(rows)).astype(np.float64)  # many ties
    carriers = TagCarriers()
    carriers.put("t", rows, created)
    alive = np.ones(len(rows), dtype=bool)
    for _ in range(8):
        gone = rng.choice(rows, size=40)  # some twice, some gone already, some never held
        carriers.remove([*gone.tolist(), 6_000])
        alive &= ~np.isin(rows, gone)
        fresh = TagCarriers()
        fresh.put("t", rows[alive], created[alive])
        for got, expected in zip(
            carriers.newest("t", 1_000), fresh.newest("t", 1_000), strict=True
        ):
            assert got.tolist() == expected.tolist()
        within = np.unique(rng.choice(rows, size=100))
        for got, expected in zip(
            carriers.newest("t", 30, within=within),
            fresh.newest("t", 30, within=within),
            strict=True,
        ):
            assert got.tolist() == expected.tolist()
    # A tag whose order is not made yet (rows merged in below its highest row start it
    # afresh): removals leave it to be made when asked, from the rows left.
    unordered = TagCarriers()
    unordered.put("t", rows[1:], created[1:])
    unordered.add_rows([(int(rows[0]), "t", float(created[0]))])
    unordered.remove(rows[~alive].tolist())
    for got, expected in zip(
        unordered.newest("t", 1_000), carriers.newest("t", 1_000), strict=True
    ):
        assert got.tolist() == expected.tolist()


def answers_as_read_afresh(
    carriers: TagCarriers, rows: np.ndarray, created: np.ndarray, asked: list[tuple[int, object]]
) -> None:
    """Every ``(limit, within)`` in ``asked`` gets from ``carriers`` the answer of tag "t"
    read afresh from ``rows`` and their times ``created``."""
    fresh = TagCarriers()
    fresh.put("t", rows, created)
    for limit, within in asked:
        for got, expected in zip(
            carriers.newest("t", limit, within), fresh.newest("t", limit, within), strict=True
        ):
            assert got.tolist() == expected.tolist()


def test_tags_started_by_writes_keep_their_order_through_writes_in_time_order() -> None:
    """A store filled in this process: a tag gets its time order when a write starts it,
    and batches newer than every carrier keep it without a sort (the first search naming
    a tag used to sort its carriers, among the slowest of a benchmark's first pass). A
    batch with older times starts a run of its own (the newest carriers come from the
    runs' tails; a filtered search merges them), runs are merged while the last is at
    least half the one before, and every answer stays that of the carriers read
    afresh."""
    rng = np.random.default_rng(17)
    rows = np.arange(1, 1_201, dtype=np.int64)
    created = np.repeat(np.arange(60, dtype=np.float64), 20)  # in time order, with ties
    created[600:700] -= 30.0  # a batch of older memories (an import, say)
    created[900:1_000] -= 45.0  # another, once the first run has grown
    created[1_100:1_150] -= 50.0  # and two more, small ones
    created[1_150:1_200] -= 55.0

    def write(carriers: TagCarriers, start: int, size: int = 100) -> None:
        batch = slice(start, start + size)
        carriers.add(rows[batch].tolist(), [("t",)] * size, created[batch].tolist())

    def newest_only(carriers: TagCarriers, upto: int) -> None:
        asked = [(limit, None) for limit in (1, 7, 150, 2_000)]
        answers_as_read_afresh(carriers, rows[:upto], created[:upto], asked)

    def filtered_too(carriers: TagCarriers, upto: int) -> None:
        within = np.unique(rng.choice(rows[:upto], size=50))
        asked = [(2_000, None), (30, within)]
        answers_as_read_afresh(carriers, rows[:upto], created[:upto], asked)

    carriers = TagCarriers(complete=True)
    for start in range(0, 600, 100):
        write(carriers, start)
        assert carriers._tags["t"]._oldest is not None  # kept, no sort waiting
    write(carriers, 600)
    assert carriers._tags["t"]._runs == [0, 600]  # a run of its own: no sort
    for start in range(700, 900, 100):
        newest_only(carriers, start)  # from the runs' tails: the runs stay
        write(carriers, start)
    assert carriers._tags["t"]._runs == [0, 600]  # the later batches went on the last
    write(carriers, 900)  # the last run (300) is half the first (600): merged first
    assert carriers._tags["t"]._runs == [0, 900]
    newest_only(carriers, 1_000)
    write(carriers, 1_000)
    write(carriers, 1_100, 50)
    assert carriers._tags["t"]._runs == [0, 900, 1_100]
    write(carriers, 1_150, 50)  # as large as the run before: merged, and again (100, 200)
    assert carriers._tags["t"]._runs == [0, 900]
    newest_only(carriers, 1_200)
    filtered_too(carriers, 1_200)  # a filtered search merges the runs
    assert carriers._tags["t"]._runs == [0]
    newest_only(carriers, 1_200)


def test_batches_in_any_time_order_and_removals_keep_every_answer_exact() -> None:
    """Batches of random times (each one older or newer than the last), removals between
    them and questions with and without a set of rows to choose from, in any order: the
    runs a tag's order is held in (up to a few, then let go) give the answers of the
    carriers read afresh."""
    for seed in range(40):
        rng = np.random.default_rng(seed)
        carriers = TagCarriers(complete=True)
        rows = np.arange(1, 2_001, dtype=np.int64)
        created = np.zeros(len(rows), dtype=np.float64)
        alive = np.zeros(len(rows), dtype=bool)
        written = 0
        for _ in range(int(rng.integers(4, 30))):
            size = int(rng.integers(1, 60))
            batch = slice(written, written + size)
            base = float(rng.integers(0, 500))
            created[batch] = np.sort(base + rng.integers(0, 40, size=size))
            if rng.random() < 0.3:
                created[batch] = rng.permutation(created[batch])  # not in time order
            carriers.add(rows[batch].tolist(), [("t",)] * size, created[batch].tolist())
            alive[batch] = True
            written += size
            if rng.random() < 0.2:
                gone = rng.choice(rows[:written], size=int(rng.integers(1, 20)))
                carriers.remove(gone.tolist())
                alive[np.isin(rows, gone)] = False
            if rng.random() < 0.5:
                limit = int(rng.integers(1, 80))
                within = None
                if rng.random() < 0.2:
                    within = np.unique(rng.choice(rows[:written], size=30))
                answers_as_read_afresh(carriers, rows[alive], created[alive], [(limit, within)])
        held = carriers._tags["t"]
        assert len(held._runs) <= 1 + int(np.log2(max(2, written)))  # a few at most
        answers_as_read_afresh(carriers, rows[alive], created[alive], [(3_000, None)])


def test_tags_a_search_is_reading_are_kept_past_capacity() -> None:
    carriers = TagCarriers(capacity=4)
    carriers.put("a", ints(1, 2, 3), floats(1, 2, 3), keep=["a", "b"])
    carriers.put("b", ints(4, 5, 6), floats(4, 5, 6), keep=["a", "b"])
    assert carriers.missing(["a", "b"]) == []  # both stay while the search needs them
    carriers.put("c", ints(7), floats(7))
    assert carriers.missing(["a", "b", "c"]) == ["a"]  # the oldest goes, till it fits


def test_memories_added_one_at_a_time_keep_every_answer_exact() -> None:
    """Rows appended one by one, as adds do: mostly the newest (written in place, at the
    end of the time order), sometimes older or tied (merged into it), the order read
    at any point, and the capacity counting every carrier once."""
    rng = np.random.default_rng(5)
    carriers = TagCarriers(capacity=10_000)
    rows = np.arange(1, 402, dtype=np.int64)
    created = np.cumsum(rng.integers(0, 3, size=401)).astype(np.float64)  # ties too
    older = rng.random(401) < 0.1
    created[older] -= rng.integers(1, 50, size=int(older.sum()))
    carriers.put("t", rows[:1], created[:1])
    carriers.put("u", ints(), floats())
    for n in range(1, 401):
        carriers.add([int(rows[n])], [("t", "u")], [float(created[n])])
        if n % 7 == 0 or n > 390:
            fresh = TagCarriers()
            fresh.put("t", rows[: n + 1], created[: n + 1])
            for got, expected in zip(
                carriers.newest("t", 1000), fresh.newest("t", 1000), strict=True
            ):
                assert got.tolist() == expected.tolist()
            asked = rng.integers(0, n + 3, size=20)
            for got, expected in zip(
                carriers.counts(asked, ["t"]), fresh.counts(asked, ["t"]), strict=True
            ):
                assert got.tolist() == expected.tolist()
    assert carriers._size == 401 + 400  # "t" holds 401, "u" 400


def test_complete_carriers_start_the_tags_rows_bring_and_know_the_rest_are_empty() -> None:
    carriers = TagCarriers(complete=True)
    assert carriers.missing(["a", "b"]) == []  # nothing to read: no tag has carriers yet
    assert carriers.newest("a", 5)[0].tolist() == []
    carriers.add([3, 4], [("a",), ("a", "b")], [7.0, 9.0])
    carriers.add_rows([(6, "c", 8.0)])
    assert carriers.newest("a", 5)[0].tolist() == [4, 3]
    assert carriers.newest("c", 5)[1].tolist() == [8.0]
    matched, created = carriers.counts(ints(4, 3, 6, 5, -1, 2**40), ["a", "b", "zzz"])
    assert matched.tolist() == [2, 1, 0, 0, 0, 0]
    assert created.tolist() == [9.0, 7.0, 0.0, 0.0, 0.0, 0.0]


def test_carriers_that_no_longer_fit_are_no_longer_complete() -> None:
    carriers = TagCarriers(capacity=4, complete=True)
    carriers.add([1, 2, 3], [("a",), ("a",), ("b",)], [1.0, 2.0, 3.0])
    assert carriers.complete
    carriers.add([4, 5], [("c",), ("c",)], [4.0, 5.0])  # 5 entries: "a" (asked least) goes
    assert not carriers.complete
    assert carriers.missing(["a", "b", "c"]) == ["a"]
    with pytest.raises(KeyError):  # neither held nor known to be empty: read it first
        carriers.newest("a", 1)


def test_every_tag_put_makes_them_complete_if_they_fit() -> None:
    carriers = held()
    assert carriers.missing(["a", "zzz"]) == ["zzz"]
    carriers.held_all()
    assert carriers.complete and carriers.missing(["a", "zzz"]) == []
    small = TagCarriers(capacity=3)
    small.put("a", ints(1, 2, 3), floats(1, 2, 3))
    small.put("b", ints(4), floats(4), keep=["a", "b"])  # kept past capacity
    small.held_all()
    assert not small.complete


def test_row_ids_beyond_the_carriers_width_are_refused() -> None:
    with pytest.raises(ValueError, match="row ids"):
        TagCarriers().put("a", ints(1, 2**31), floats(1, 2))
