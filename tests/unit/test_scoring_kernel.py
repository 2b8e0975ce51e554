"""The keyword leg's compiled loops (numba) against its numpy path: the same rows and
the same scores to the bit, through every kind of write; numba loaded only when a store
is large, and the numpy path kept when it cannot be imported."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hybrid_memory._keyword import compiled_top, postings_file, scoring_kernel
from hybrid_memory._keyword.bm25_scores import best_first
from hybrid_memory._keyword.postings import Postings
from hybrid_memory._keyword.tokens import Tokens

WORDS = ["wing", "flow", "shock", "layer", "heat", "drag", "lift", "cone"]


@pytest.fixture(scope="module")
def loops() -> Iterator[ModuleType]:
    """The compiled loops: numba comes with the dev extra, so not having them here is a failure.
    Each test says which path ranks (:func:`both_paths`, :func:`compiled`); afterwards the
    process's other tests rank through numpy again, as they would have without these."""
    loaded = scoring_kernel.load(timeout=120)
    assert loaded is not None, scoring_kernel.status()
    scoring_kernel.use(None)
    yield loaded
    scoring_kernel.use(None)


@contextlib.contextmanager
def compiled(loops: ModuleType) -> Iterator[None]:
    previous = scoring_kernel.use(loops)
    try:
        yield
    finally:
        scoring_kernel.use(previous)


# The compiled top totals rows a block at a time: blocks of 4 rows (a query's rows over
# many blocks, rows of one term in several) and the default's (every row in one). Each
# posting keeps its row's length up to a cap, beyond which the loop reads the row's: a cap
# of 5 tokens (most of these texts' rows past it, others not) and the default's.
BLOCKS = pytest.mark.parametrize(
    ("block", "cap"),
    [(4, 5), (compiled_top._BLOCK, postings_file.LENGTH_CAP)],
    ids=["4 rows, lengths capped at 5", "default"],
)


def tokens_of(rows: np.ndarray, texts: list[list[str]]) -> Tokens:
    docs = [
        np.array([r for r, t in zip(rows, texts, strict=True) for x in t if x == w]) for w in WORDS
    ]
    return Tokens(
        list(WORDS),
        np.array([len(d) for d in docs], dtype=np.int64),
        np.concatenate(docs).astype(np.int64),
    )


def both_paths(postings: Postings, loops: ModuleType, call: str, *args: object) -> tuple:
    """``postings.<call>(*args)`` through numpy, then through the compiled loops."""
    previous = scoring_kernel.use(None)
    try:
        expected = getattr(postings, call)(*args)
        scoring_kernel.use(loops)
        got = getattr(postings, call)(*args)
    finally:
        scoring_kernel.use(previous)
    return expected, got


def assert_identical(expected: tuple, got: tuple) -> None:
    """Same rows in the same order, same dtypes, and the same floats to the bit."""
    assert got[0].tolist() == expected[0].tolist()
    assert got[0].dtype == expected[0].dtype and got[1].dtype == expected[1].dtype
    assert got[1].tobytes() == expected[1].tobytes()


# A store's life: batches of texts added (short and long ones, so the mean length moves),
# rows removed (a few: tombstones; many: a compaction), and queries asked after each step.
texts_strategy = st.lists(
    st.lists(st.sampled_from(WORDS), max_size=12)
    | st.lists(st.sampled_from(WORDS[:3]), min_size=20, max_size=60),
    min_size=1,
    max_size=25,
)
steps_strategy = st.lists(
    st.tuples(texts_strategy, st.lists(st.integers(0, 200), max_size=30)),
    min_size=1,
    max_size=6,
)
queries_strategy = st.lists(
    st.lists(st.sampled_from([*WORDS, "absent"]), min_size=1, max_size=6), min_size=1, max_size=4
)


@BLOCKS
@settings(max_examples=150, deadline=None)
@given(
    steps=steps_strategy,
    queries=queries_strategy,
    limit=st.integers(1, 40),
    within=st.none() | st.lists(st.integers(-3, 260), max_size=60),
)
def test_the_compiled_loops_give_the_numpy_paths_floats_to_the_bit(
    loops: ModuleType,
    block: int,
    cap: int,
    steps: list[tuple[list[list[str]], list[int]]],
    queries: list[list[str]],
    limit: int,
    within: list[int] | None,
) -> None:
    with (
        patch.object(compiled_top, "_BLOCK", block),
        patch.object(postings_file, "LENGTH_CAP", cap),
    ):
        run_store_life(loops, steps, queries, limit, within)


def run_store_life(
    loops: ModuleType,
    steps: list[tuple[list[list[str]], list[int]]],
    queries: list[list[str]],
    limit: int,
    within: list[int] | None,
) -> None:
    postings = Postings()
    for texts, removed in steps:
        rows = np.arange(postings.high + 1, postings.high + 1 + len(texts))
        postings.add(rows, tokens_of(rows, texts))
        postings.remove(removed)
        if removed and len(postings) and postings.dead and removed[0] % 3 == 0:
            postings.compact()  # a compaction at any size, not only past the threshold
        for query in queries:
            expected, got = both_paths(postings, loops, "scores", query)
            assert_identical(expected, got)
            with compiled(loops):
                assert_identical(best_first(*expected, limit), postings.top(query, limit))
            asked = None if within is None else np.array(within, dtype=np.int64)
            expected, got = both_paths(postings, loops, "top", query, limit, asked)
            assert_identical(expected, got)
            # The totals are left all zeros: the next search starts clean.
            assert not postings.scratch.totals.any() and not postings.scratch.block.any()


@BLOCKS
def test_hand_made_cases_where_a_wrong_loop_would_differ(
    loops: ModuleType, block: int, cap: int
) -> None:
    """Rows far apart, a row in every list, a term repeated, tombstones within a list,
    scores that tie: each checked against the numpy path."""
    with (
        patch.object(compiled_top, "_BLOCK", block),
        patch.object(postings_file, "LENGTH_CAP", cap),
    ):
        check_hand_made_cases(loops)


@pytest.mark.parametrize("many", [False, True], ids=["one at a time", "in a batch"])
def test_rows_longer_than_a_postings_length_cap_score_as_the_numpy_path(
    loops: ModuleType, many: bool
) -> None:
    """Texts of 65,534 to 65,536 tokens and more (a row's length kept with each posting
    only below 65,535), added alone (counted in Python) or in a batch, and compacted."""
    postings = Postings()
    sizes = [3, 65_534, 65_535, 65_536, 70_001, 9]
    rows = np.arange(1, 1 + len(sizes))
    # Row r holds "wing" r times and "flow" for the rest of its length; row 1 also "cone".
    texts = [["wing"] * r + ["flow"] * (size - r) for r, size in zip(rows, sizes, strict=True)]
    texts[0].append("cone")
    batches = [rows] if many else [rows[i : i + 1] for i in range(len(rows))]
    for batch in batches:
        postings.add(batch, tokens_of(batch, [texts[r - 1] for r in batch]))
    assert kept_lengths(postings, "wing") == [4, 65_534, 65_535, 65_535, 65_535, 9]
    for query, limit in ((["wing"], 6), (["flow", "wing"], 3), (["cone", "wing"], 2)):
        with compiled(loops):
            assert compiled_top._best_rows(postings, loops, query, limit)[0].size  # the loop
        assert_identical(*both_paths(postings, loops, "top", query, limit))
    postings.remove([2, 5])
    postings.compact()
    assert kept_lengths(postings, "wing") == [4, 65_535, 65_535, 9]
    assert_identical(*both_paths(postings, loops, "top", ["wing", "flow"], 4))


def check_hand_made_cases(loops: ModuleType) -> None:
    postings = Postings()
    postings.add(
        np.array([1, 2, 3, 500, 501, 9000]),
        Tokens(
            ["a", "b", "c"],
            np.array([5, 4, 3]),
            np.array([1, 1, 2, 500, 9000, 1, 3, 501, 9000, 2, 9000, 9000]),
        ),
    )
    for query, limit in ((["a"], 1), (["a", "b"], 2), (["b", "a", "b"], 3), (["c", "a"], 10)):
        assert_identical(*both_paths(postings, loops, "top", query, limit))
    postings.remove([1, 501])
    for query, limit in ((["a", "b"], 1), (["a", "b", "c"], 4), (["b"], 2)):
        assert_identical(*both_paths(postings, loops, "top", query, limit))
        assert_identical(*both_paths(postings, loops, "scores", query))
    assert_identical(
        *both_paths(postings, loops, "top", ["a", "c"], 2, np.array([9000, 3, 2, 2, -1, 10**7]))
    )


def kept_lengths(postings: Postings, term: str) -> list[int]:
    """The row lengths kept with ``term``'s postings."""
    return np.concatenate([part.lengths for part in postings.parts(term)]).tolist()


def test_a_search_cut_short_leaves_no_totals_behind(loops: ModuleType) -> None:
    """Scores summed into the kept totals and never cleared (a search interrupted between
    the two loops) must not reach the next search."""
    postings = Postings()
    rows = np.arange(1, 41)
    postings.add(rows, tokens_of(rows, [WORDS[: 1 + r % 8] for r in range(40)]))
    expected = both_paths(postings, loops, "top", ["wing", "cone"], 5)[0]
    with compiled(loops):
        assert compiled_top._totals(postings, loops, ["wing", "flow"])  # scored, not cleared
        assert postings.scratch.totals.any()
        assert_identical(expected, postings.top(["wing", "cone"], 5))


def run_python(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_numba_is_imported_only_for_a_large_store() -> None:
    """``import hybrid_memory`` and searches over a small store leave numba unimported;
    so does filling a store past ``LOAD_FROM_ROWS`` memories (numba's memory must not
    stack on a bulk add's peak); its first search loads the loops in the background."""
    out = run_python(
        "import sys, numpy as np\n"
        "import hybrid_memory\n"
        "from hybrid_memory._keyword import scoring_kernel\n"
        "from hybrid_memory._keyword.postings import Postings\n"
        "from hybrid_memory._keyword.tokens import Tokens\n"
        "p = Postings()\n"
        "p.add(np.arange(1, 101), Tokens(['a'], np.array([100]), np.arange(1, 101)))\n"
        "p.top(['a'], 5)\n"
        "print('numba' in sys.modules, scoring_kernel.status())\n"
        "n = scoring_kernel.LOAD_FROM_ROWS\n"
        "p.add(np.arange(101, 101 + n), Tokens(['a'], np.array([n]), np.arange(101, 101 + n)))\n"
        "print('numba' in sys.modules, scoring_kernel.status())\n"
        "p.top(['a'], 5)\n"
        "print(scoring_kernel.status())\n"
        "print(scoring_kernel.load(timeout=120) is not None, scoring_kernel.status())\n"
    )
    lines = out.splitlines()
    assert lines[:2] == ["False numpy (store below the size)"] * 2
    # The search started the load (it may even have finished by the next line).
    assert lines[2] in ("numpy (compiled loops loading)", "compiled loops (numba)")
    assert lines[3:] == ["True compiled loops (numba)"]


def test_without_numba_the_numpy_path_ranks_and_says_why() -> None:
    """numba that cannot be imported (not installed: here, blocked in ``sys.modules``)
    leaves the numpy path, with the same results, and the status says what to install."""
    out = run_python(
        "import sys, numpy as np\n"
        "sys.modules['numba'] = None\n"
        "from hybrid_memory._keyword import scoring_kernel\n"
        "from hybrid_memory._keyword.postings import Postings\n"
        "from hybrid_memory._keyword.tokens import Tokens\n"
        "n = scoring_kernel.LOAD_FROM_ROWS + 10\n"
        "p = Postings()\n"
        "p.add(np.arange(1, n + 1), Tokens(['a', 'b'], np.array([n, 7]),"
        " np.concatenate([np.arange(1, n + 1), np.arange(1, 8)])))\n"
        "print(scoring_kernel.load(timeout=120))\n"
        "print(scoring_kernel.status())\n"
        "print(p.top(['b', 'a'], 3)[0].tolist())\n"
    )
    assert out.splitlines() == [
        "None",
        'numpy (numba is not installed: pip install "hybrid-agent-memory[large-stores]")',
        "[1, 2, 3]",
    ]


def test_numba_told_not_to_compile_leaves_the_numpy_path() -> None:
    out = run_python(
        "import os\n"
        "os.environ['NUMBA_DISABLE_JIT'] = '1'\n"
        "from hybrid_memory._keyword import scoring_kernel\n"
        "print(scoring_kernel.load(timeout=120), scoring_kernel.status())\n"
    )
    assert out == "None numpy (NUMBA_DISABLE_JIT is set)"
