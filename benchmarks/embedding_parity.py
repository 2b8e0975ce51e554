"""The default embedding on onnxruntime against sentence-transformers' all-MiniLM-L6-v2.

Embeds every text (corpus and queries) of the shared evaluation collections twice, with
hybrid-memory's default embedder (onnxruntime) and with sentence-transformers (the
backend before it, same model files), in the same process, and prints:

- the cosine between the two vectors of each text: minimum, mean, the share below the
  bar (``--bar``, 0.999) and the worst text;
- the throughput of each, texts per second, at the store's batch size.

Exit status 1 when a cosine falls below the bar, 0 otherwise; the script says it skipped
(exit 0) when sentence-transformers is not installed (``pip install
'hybrid-agent-memory[sentence-transformers]'``) or the data folder is missing::

    python benchmarks/embedding_parity.py [--data ../shared/data] [--batch 32] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DEFAULT_DATA = REPO.parent / "shared" / "data"
COLLECTIONS = ("locomo", "cranfield")


def texts_of(folder: Path) -> list[str]:
    """Every text of a collection: corpus lines, then queries."""
    texts = []
    for name in ("corpus.jsonl", "queries.jsonl"):
        with (folder / name).open(encoding="utf-8") as handle:
            texts.extend(json.loads(line)["text"] for line in handle if line.strip())
    return texts


def measure(texts: list[str], onnx: Any, reference: Any) -> dict[str, Any]:
    start = time.perf_counter()
    ours = onnx.embed_matrix(texts)
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = reference.embed_matrix(texts)
    theirs_s = time.perf_counter() - start
    cosine = (ours * theirs).sum(axis=1) / (
        np.linalg.norm(ours, axis=1) * np.linalg.norm(theirs, axis=1)
    )
    worst = int(np.argmin(cosine))
    return {
        "texts": len(texts),
        "cosine_min": float(cosine.min()),
        "cosine_mean": float(cosine.mean()),
        "below_bar": 0,  # filled in by the caller, which knows the bar
        "worst_text": texts[worst][:80],
        "onnx_texts_per_s": round(len(texts) / ours_s, 1),
        "sentence_transformers_texts_per_s": round(len(texts) / theirs_s, 1),
        "_cosine": cosine,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    parser.add_argument("--batch", type=int, default=32, help="texts per model call")
    parser.add_argument("--bar", type=float, default=0.999, help="lowest acceptable cosine")
    parser.add_argument("--limit", type=int, default=None, help="first N texts per collection")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import sentence_transformers  # noqa: F401
    except ImportError:
        print(
            "skipped: sentence-transformers is not installed "
            "(pip install 'hybrid-agent-memory[sentence-transformers]')"
        )
        return 0
    missing = [c for c in COLLECTIONS if not (args.data / c / "corpus.jsonl").is_file()]
    if missing:
        print(f"skipped: {', '.join(missing)} not found in {args.data}")
        return 0

    from hybrid_memory.testing import default_embedder, sentence_transformers_embedder

    onnx = default_embedder(args.batch)
    reference = sentence_transformers_embedder(args.batch)
    for model in (onnx, reference):  # load both before timing
        model.embed_matrix(["warm-up"] * args.batch)

    report: dict[str, Any] = {
        "bar": args.bar,
        "batch": args.batch,
        "load_average_start": round(os.getloadavg()[0], 2),
        "collections": {},
    }
    failed = False
    for name in COLLECTIONS:
        texts = texts_of(args.data / name)[: args.limit]
        result = measure(texts, onnx, reference)
        cosine = result.pop("_cosine")
        result["below_bar"] = int((cosine < args.bar).sum())
        failed |= result["below_bar"] > 0
        report["collections"][name] = result
    report["load_average_end"] = round(os.getloadavg()[0], 2)

    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(
            f"all-MiniLM-L6-v2, onnxruntime vs sentence-transformers, batch {args.batch} "
            f"(load average {report['load_average_start']}-{report['load_average_end']})"
        )
        for name, r in report["collections"].items():
            print(
                f"  {name:<10} {r['texts']:>5} texts  cosine min {r['cosine_min']:.6f} "
                f"mean {r['cosine_mean']:.6f}  below {args.bar}: {r['below_bar']}  "
                f"texts/s onnxruntime {r['onnx_texts_per_s']:.1f}, "
                f"sentence-transformers {r['sentence_transformers_texts_per_s']:.1f}"
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
