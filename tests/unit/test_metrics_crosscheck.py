"""The hand-written metrics against trec_eval and the MS MARCO scorer, through ir-measures.

``hybrid_memory_eval.metrics`` writes the protocol's definitions out by hand
(``../shared/data/README.md``): nDCG@10 with gain 2^rel − 1 and discount log2(i + 1),
Recall@k over grade ≥ 1, MRR@10. Here every figure is recomputed by well-kept evaluation
code and must agree per query to 1e-9:

- nDCG@10 and Recall@5/@10 by trec_eval (``pytrec_eval``), with the judged grades mapped
  to the exponential gains (trec_eval's own nDCG gain is the grade itself, linear);
- MRR@10 by the MS MARCO scorer's port (ir-measures' ``RR@10``), and again by trec_eval's
  ``recip_rank`` over the first ten distinct ids.

The runs are the shared collections' real judgments with seeded random rankings and
adversarial ones: empty rankings, ids nobody judged, repeated ids, grade ties, relevant
documents only past the cut-off, and ids whose sort order runs against their ranking.

A ranking is handed to the libraries as strictly decreasing scores, first occurrence
of an id kept: trec_eval orders a run by score and breaks ties by document id, and a
run is a map, so a repeated id cannot reach it. Both are the protocol's own rules (a
result list is ranked; an id repeated counts once, at its first position), so the
conversion is exact rather than a workaround.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence

import ir_measures
import pytest
from hybrid_memory_eval.datasets import Dataset, load_dataset
from hybrid_memory_eval.metrics import mrr_at_k, ndcg_at_k, recall_at_k
from ir_measures import RR, R, nDCG

from tests.conftest import SHARED_DATA

K = 10
TOLERANCE = 1e-9
COLLECTIONS = ("cranfield", "locomo")

Qrels = Mapping[str, Mapping[str, int]]
Runs = Mapping[str, Sequence[str]]


def _exponential_gains(qrels: Qrels) -> dict[int, int]:
    """Every grade in ``qrels`` mapped to 2^grade − 1 (a negative grade gains nothing)."""
    grades = {grade for judged in qrels.values() for grade in judged.values()}
    return {grade: 2 ** max(grade, 0) - 1 for grade in grades}


def _scored(ranked: Sequence[str]) -> dict[str, float]:
    """A ranking as a trec_eval run: strictly decreasing scores, an id's first place kept."""
    scores: dict[str, float] = {}
    for position, doc_id in enumerate(ranked):
        scores.setdefault(doc_id, -float(position))
    return scores


def _first_distinct(ranked: Sequence[str], k: int) -> list[str]:
    return list(dict.fromkeys(ranked))[:k]


def ours(qrels: Qrels, runs: Runs) -> dict[tuple[str, str], float]:
    figures: dict[tuple[str, str], float] = {}
    for query_id, judged in qrels.items():
        ranked = runs.get(query_id, [])
        figures[(query_id, "ndcg@10")] = ndcg_at_k(ranked, judged, K)
        figures[(query_id, "recall@5")] = recall_at_k(ranked, judged, 5)
        figures[(query_id, "recall@10")] = recall_at_k(ranked, judged, K)
        figures[(query_id, "mrr@10")] = mrr_at_k(ranked, judged, K)
        figures[(query_id, "mrr@10 (trec_eval)")] = figures[(query_id, "mrr@10")]
    return figures


def library(qrels: Qrels, runs: Runs) -> dict[tuple[str, str], float]:
    """The same figures from trec_eval and the MS MARCO scorer; every query must appear."""
    judged = {query_id: dict(grades) for query_id, grades in qrels.items()}
    run = {query_id: _scored(runs.get(query_id, [])) for query_id in judged}
    top_k = {query_id: _scored(_first_distinct(runs.get(query_id, []), K)) for query_id in judged}
    ndcg = nDCG(gains=_exponential_gains(qrels)) @ K
    names = {ndcg: "ndcg@10", R @ 5: "recall@5", R @ K: "recall@10"}
    figures: dict[tuple[str, str], float] = {}

    def collect(results: Iterator[ir_measures.Metric], name_of: Mapping[object, str]) -> None:
        for metric in results:
            key = (metric.query_id, name_of[metric.measure])
            assert key not in figures, f"{key} reported twice"
            figures[key] = metric.value

    collect(ir_measures.pytrec_eval.iter_calc(list(names), judged, run), names)
    collect(ir_measures.msmarco.iter_calc([RR @ K], judged, run), {RR @ K: "mrr@10"})
    collect(ir_measures.pytrec_eval.iter_calc([RR], judged, top_k), {RR: "mrr@10 (trec_eval)"})
    return figures


def assert_identical(qrels: Qrels, runs: Runs) -> None:
    expected, got = ours(qrels, runs), library(qrels, runs)
    assert set(got) == set(expected), "the libraries left out or added query/metric pairs"
    differing = {
        key: (expected[key], got[key])
        for key in expected
        if abs(expected[key] - got[key]) > TOLERANCE
    }
    assert not differing, f"{len(differing)} figures differ (ours, library): {differing}"


# --- the runs ------------------------------------------------------------------------------


def _shared(name: str) -> Dataset:
    folder = SHARED_DATA / name
    if not (folder / "qrels.tsv").is_file():
        pytest.skip(f"shared evaluation data not found in {folder} (HYBRID_MEMORY_SHARED_DATA)")
    return load_dataset(folder)


def random_runs(dataset: Dataset, seed: int) -> dict[str, list[str]]:
    """Rankings of 0-30 ids mixing the query's judged documents, random corpus documents,
    ids nobody judged and repeats, in a seeded random order."""
    rng = random.Random(seed)
    corpus = [doc.id for doc in dataset.corpus]
    runs: dict[str, list[str]] = {}
    for query_id, judged in sorted(dataset.qrels.items()):
        pool = list(judged) + rng.sample(corpus, 20) + [f"unjudged-{rng.random()}"] * 2
        rng.shuffle(pool)
        ranked = pool[: rng.randint(0, 30)]
        for _ in range(rng.randint(0, 3)):  # repeats, earlier or later than the first
            if ranked:
                ranked.insert(rng.randrange(len(ranked) + 1), rng.choice(ranked))
        runs[query_id] = ranked
    return runs


def adversarial_runs(qrels: Qrels) -> Iterator[tuple[str, dict[str, list[str]]]]:
    """Named families of runs, each one ranking for every judged query."""

    def per_query(make: Callable[[str, Mapping[str, int]], list[str]]) -> dict[str, list[str]]:
        return {query_id: make(query_id, judged) for query_id, judged in sorted(qrels.items())}

    def ideal(judged: Mapping[str, int]) -> list[str]:
        return sorted(judged, key=lambda doc_id: (-judged[doc_id], doc_id))

    yield "empty", per_query(lambda q, j: [])
    yield "only ids nobody judged", per_query(lambda q, j: [f"nobody-{q}-{i}" for i in range(12)])
    yield "ideal order", per_query(lambda q, j: ideal(j))
    yield "worst order of the judged", per_query(lambda q, j: ideal(j)[::-1])
    yield (
        "relevant only past the cut-off",
        per_query(lambda q, j: [f"filler-{i}" for i in range(K)] + ideal(j)),
    )
    yield (
        "relevant straddling the cut-off",
        per_query(lambda q, j: [f"filler-{i}" for i in range(K - 1)] + ideal(j)),
    )
    yield (
        "every id twice in a row",
        per_query(lambda q, j: [d for d in ideal(j)[::-1] for _ in (0, 1)]),
    )
    yield (
        "the best document repeated past the cut-off",
        per_query(lambda q, j: [ideal(j)[0]] * (K + 2) + ideal(j)[1:]),
    )
    yield (
        "one relevant, repeated, then unjudged",
        per_query(lambda q, j: ["x", ideal(j)[-1], "x", ideal(j)[-1], "y"]),
    )
    # Ids that sort against their ranking: a library that reordered tied or equal scores
    # by id would move them.
    yield (
        "ids sorting against the ranking",
        per_query(lambda q, j: sorted(list(j) + [f"zz-{i}" for i in range(5)], reverse=True)),
    )
    # Best grade first, equal grades in descending id order (a stable sort of a
    # reverse-sorted list): ties inside the ideal ordering, ranked the other way round.
    yield (
        "grade ties in reverse id order",
        per_query(lambda q, j: sorted(sorted(j, reverse=True), key=lambda d: -j[d])),
    )


# --- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", COLLECTIONS)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_runs_on_the_shared_judgments_match_trec_eval(name: str, seed: int) -> None:
    dataset = _shared(name)
    assert_identical(dataset.qrels, random_runs(dataset, seed))


@pytest.mark.parametrize("name", COLLECTIONS)
def test_adversarial_runs_on_the_shared_judgments_match_trec_eval(name: str) -> None:
    dataset = _shared(name)
    for family, runs in adversarial_runs(dataset.qrels):
        try:
            assert_identical(dataset.qrels, runs)
        except AssertionError as exc:
            raise AssertionError(f"{name}, {family}: {exc}") from None


def test_judged_non_relevant_and_queries_without_relevant_documents() -> None:
    """Grade 0 (judged, not relevant) and a query with nothing relevant score 0 everywhere."""
    qrels = {
        "mixed": {"a": 3, "b": 0, "c": 1, "d": 0, "e": 2},
        "none relevant": {"a": 0, "b": 0},
        "one": {"z": 1},
    }
    runs = {
        "mixed": ["b", "d", "a", "unjudged", "c", "b", "e"],
        "none relevant": ["a", "b", "c"],
        "one": [],
    }
    assert_identical(qrels, runs)
    assert ours(qrels, runs)[("none relevant", "ndcg@10")] == 0.0


def test_trec_eval_linear_gain_is_not_the_protocols_ndcg() -> None:
    """The cross-check can tell: trec_eval's default nDCG (gain = grade) differs from ours
    on Cranfield's graded judgments, so the gain mapping above is what makes them agree."""
    dataset = _shared("cranfield")
    runs = random_runs(dataset, 0)
    judged = {query_id: dict(grades) for query_id, grades in dataset.qrels.items()}
    linear = {
        metric.query_id: metric.value
        for metric in ir_measures.pytrec_eval.iter_calc(
            [nDCG @ K], judged, {q: _scored(runs[q]) for q in judged}
        )
    }
    ours_ndcg = {q: ndcg_at_k(runs[q], judged[q], K) for q in judged}
    differing = [q for q in judged if abs(linear[q] - ours_ndcg[q]) > 1e-6]
    assert len(differing) > len(judged) // 10
