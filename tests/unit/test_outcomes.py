"""The values a write hands back: the old value (an id, a list of ids, a count) and what
happened besides."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from hybrid_memory import AddResult, DeleteReport, SimilarMemory, WriteReport


def test_an_add_result_is_its_id() -> None:
    result = AddResult("m1", "added")
    assert result == "m1" and isinstance(result, str)
    assert hash(result) == hash("m1")
    assert {result: 1}["m1"] == 1
    assert result.outcome == "added"
    assert type(result.id) is str and result.id == "m1"
    assert json.dumps([result]) == '["m1"]'
    assert f"{result}" == "m1" and repr(result) == "'m1'"


@pytest.mark.parametrize("outcome", ["added", "duplicate", "replaced"])
def test_an_add_result_survives_pickle_and_copy(outcome: str) -> None:
    result = AddResult("m1", outcome)  # type: ignore[arg-type]
    for again in (pickle.loads(pickle.dumps(result)), copy.copy(result), copy.deepcopy(result)):
        assert type(again) is AddResult
        assert (again, again.outcome) == ("m1", outcome)


def test_an_unknown_outcome_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="outcome: expected one of added, duplicate, replaced"):
        AddResult("m1", "skipped")  # type: ignore[arg-type]


def test_a_write_report_is_the_list_of_ids_grouped_by_outcome() -> None:
    report = WriteReport(
        [
            AddResult("a", "added"),
            AddResult("b", "duplicate"),
            AddResult("c", "replaced"),
            AddResult("a", "duplicate"),
            AddResult("d", "added"),
        ]
    )
    assert report == ["a", "b", "c", "a", "d"]
    assert report.added == ("a", "d")
    assert report.duplicates == ("b", "a")
    assert report.replaced == ("c",)
    assert report.written == 3
    assert [r.outcome for r in report.results] == [
        "added",
        "duplicate",
        "replaced",
        "duplicate",
        "added",
    ]
    again = pickle.loads(pickle.dumps(report))
    assert type(again) is WriteReport and again.duplicates == ("b", "a")
    assert WriteReport() == [] and WriteReport().written == 0
    report.append("edited")  # a list the caller may change: the record of the write stays
    assert len(report.results) == 5 and report.added == ("a", "d")


def test_a_delete_report_is_the_count_with_the_ids() -> None:
    report = DeleteReport(["a", "b", "a"])
    assert report == 2 and isinstance(report, int)
    assert report.ids == ("a", "b")
    assert f"{report} deleted" == "2 deleted" and report + 1 == 3
    again = pickle.loads(pickle.dumps(report))
    assert type(again) is DeleteReport and (again, again.ids) == (2, ("a", "b"))
    assert DeleteReport(()) == 0 and DeleteReport(()).ids == ()


def test_a_similar_result_names_what_it_found_and_whether_it_stored() -> None:
    kept = AddResult("new", "similar", [("old", 0.97)], stored=True)
    assert kept == "new" and kept.outcome == "similar" and kept.stored
    assert kept.similar == (SimilarMemory("old", 0.97),)
    assert kept.similar[0].id == "old" and kept.similar[0].similarity == 0.97
    skipped = AddResult("old", "similar", [SimilarMemory("old", 0.97)], stored=False)
    for again in (pickle.loads(pickle.dumps(skipped)), copy.deepcopy(skipped)):
        assert type(again) is AddResult
        assert (again, again.outcome, again.similar, again.stored) == skipped_fields(skipped)
    # The stored flag follows the outcome when not given.
    assert AddResult("a", "added").stored and AddResult("a", "replaced").stored
    assert not AddResult("a", "duplicate").stored and AddResult("a", "added").similar == ()


def skipped_fields(result: AddResult) -> tuple[object, ...]:
    return (result.id, result.outcome, result.similar, result.stored)


def test_a_write_report_gathers_the_similar_and_counts_what_was_stored() -> None:
    report = WriteReport(
        [
            AddResult("a", "added"),
            AddResult("b", "similar", [("a", 0.99)], stored=True),
            AddResult("a", "similar", [("a", 0.98)], stored=False),
        ]
    )
    assert report.added == ("a",) and report.similar == ("b", "a")
    assert report.written == 2
    again = pickle.loads(pickle.dumps(report))
    assert again.results[1].similar == (SimilarMemory("a", 0.99),)
