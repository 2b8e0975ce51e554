"""``benchmarks/role_subset.py`` keeps one role's memories and every judged one, and
``benchmarks/type_hits.py`` reads a leg's first judged rank (docs/quality-study.md,
"Issue 43, round four")."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.role_subset import judged_ids, main
from benchmarks.type_hits import MISSING, first_judged


def write_collection(folder: Path) -> None:
    folder.mkdir()
    turns = [
        {"_id": "u1", "text": "I like tea", "metadata": {"role": "user"}},
        {"_id": "a1", "text": "Tea is nice", "metadata": {"role": "assistant"}},
        {"_id": "a2", "text": "Try green tea", "metadata": {"role": "assistant"}},
        {"_id": "n1", "text": "no role", "metadata": {}},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(t) + "\n" for t in turns))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q", "text": "tea?"}) + "\n")
    (folder / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq\ta2\t1\nq\ta1\t0\n")


def test_judged_ids_are_the_positively_judged_memories(tmp_path: Path) -> None:
    write_collection(tmp_path / "c")
    assert judged_ids(tmp_path / "c" / "qrels.tsv") == {"a2"}


def test_the_subset_keeps_the_role_and_the_judged_turns_and_copies_the_rest(
    tmp_path: Path,
) -> None:
    write_collection(tmp_path / "c")
    assert main([str(tmp_path / "c"), str(tmp_path / "out" / "c"), "--role", "user"]) == 0
    lines = (tmp_path / "out" / "c" / "corpus.jsonl").read_text().splitlines()
    assert [json.loads(line)["_id"] for line in lines] == ["u1", "a2"]
    for name in ("queries.jsonl", "qrels.tsv"):
        assert (tmp_path / "out" / "c" / name).read_text() == (tmp_path / "c" / name).read_text()


def test_first_judged_rank() -> None:
    assert first_judged(["x", "a2", "y"], {"a2": 1}) == 2
    assert first_judged(["x", "y"], {"a2": 1}) == MISSING
