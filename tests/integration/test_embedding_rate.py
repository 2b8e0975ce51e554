"""``benchmarks/embedding_rate.py`` runs end to end on a few texts (no rate is asserted):
the default model and the same without the length sort. Its sentence-transformers side
loads torch (~15 s on a busy CI machine) and is left to the benchmark's own runs; the
vectors of the two backends are compared by test_default_model.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.embedding_rate import main, padding_share

REPO = Path(__file__).resolve().parents[2]
DATA = REPO.parent / "shared" / "data"

pytestmark = pytest.mark.slow


def test_padding_share_with_and_without_the_sort() -> None:
    # Batches of 2: in the order given [1, 9] [1, 9] pad 16 of 36 slots; sorted [1, 1] [9, 9]
    # pad none.
    assert padding_share([1, 9, 1, 9], 2, by_length=False) == pytest.approx(16 / 36)
    assert padding_share([1, 9, 1, 9], 2, by_length=True) == 0.0
    assert padding_share([], 2, by_length=True) == 0.0


@pytest.mark.skipif(
    not (DATA / "longmemeval" / "corpus.jsonl").is_file(), reason=f"no data in {DATA}"
)
def test_the_benchmark_reports_every_backend_on_both_sets(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--short", "6", "--long", "3", "--repeats", "1", "--batch", "4", "--json"]
    args += ["--backends", "onnxruntime", "onnxruntime, order given"]
    assert main([*args, "--data", str(DATA)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report["sets"]) == {"short", "long"}
    for result in report["sets"].values():
        for backend in ("onnxruntime", "onnxruntime, order given"):
            assert result[backend]["texts_per_s"] > 0
        assert "sentence-transformers" not in result
        assert result["sort_max_abs_difference"] <= 1e-6  # the sort changes no vector
        assert 0 <= result["padding_share_sorted"] <= result["padding_share_order_given"]
    assert report["sets"]["long"]["mean_tokens"] > report["sets"]["short"]["mean_tokens"]
