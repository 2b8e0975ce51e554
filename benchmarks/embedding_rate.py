"""The default model's embedding rate beside sentence-transformers', on the same texts.

Two sets of texts from ``../shared/data`` (``--data``): short ones (LoCoMo dialogue turns,
~30 tokens) and long ones (LongMemEval session texts, cut at the model's 256 tokens), an
evenly spaced sample of each (``--short``, ``--long``). Each is embedded by:

- ``onnxruntime``: hybrid-memory's default embedder as the store runs it
  (the default embedder's ``embed_matrix``: every text of a call sorted by token count, then
  batched, so a batch is padded to little more than its own length);
- ``onnxruntime, order given``: the same model with the texts batched in the order
  given (``MiniLM.embed(..., by_length=False)``): what the sort saves;
- ``sentence-transformers``: ``SentenceTransformer.encode(texts, batch_size)`` on the same
  model files (it sorts by length inside ``encode`` too), torch on the CPU.

All at the same batch size (the store's, ``--batch``); torch runs ``--threads`` intra-op
threads (default 2), onnxruntime its default, one per core (2 on the machine measured
here, as the store runs it); the three take turns, ``--repeats`` times,
so a machine whose speed drifts meets them alike; the median rate is reported. Also: the
share of each batch that is padding with and without the sort, and how far the vectors of
the three agree (the sort changes no vector: max |difference| ~1e-7; sentence-transformers'
cosine 0.9999+). Offline: the model's files come from the ``offline-model`` extra (or any
source hybrid-memory finds without a download); nothing is downloaded at run time::

    python benchmarks/embedding_rate.py                   # 512 short, 160 long texts
    python benchmarks/embedding_rate.py --json --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run from a checkout without installing the package
    sys.path.insert(0, str(REPO))
DEFAULT_DATA = REPO.parent / "shared" / "data"
SETS = {"short": "locomo", "long": "longmemeval"}
ONNX, ONNX_GIVEN, ST = "onnxruntime", "onnxruntime, order given", "sentence-transformers"


def sample(folder: Path, count: int) -> list[str]:
    """``count`` corpus texts evenly spaced over the collection (all if fewer)."""
    with (folder / "corpus.jsonl").open(encoding="utf-8") as handle:
        texts = [json.loads(line)["text"] for line in handle if line.strip()]
    if count >= len(texts):
        return texts
    step = len(texts) / count
    return [texts[int(i * step)] for i in range(count)]


def padding_share(lengths: list[int], batch: int, by_length: bool) -> float:
    """The share of the token slots run that are padding, each batch padded to its
    longest text (pure arithmetic on the token counts)."""
    order = sorted(lengths) if by_length else list(lengths)
    slots = sum(
        max(order[i : i + batch]) * len(order[i : i + batch]) for i in range(0, len(order), batch)
    )
    return 1 - sum(lengths) / slots if slots else 0.0


def embedders(batch: int, backends: list[str]) -> dict[str, Callable[[list[str]], np.ndarray]]:
    """One ``texts -> vectors`` function per backend, each loaded and warmed up."""
    from hybrid_memory.testing import default_embedder, default_model, sentence_transformers_model

    onnx = default_embedder(batch)
    found: dict[str, Callable[[list[str]], np.ndarray]] = {}
    if ONNX in backends:
        found[ONNX] = onnx.embed_matrix
    if ONNX_GIVEN in backends:
        model_itself = default_model(batch)
        found[ONNX_GIVEN] = lambda texts: model_itself.embed(texts, batch, by_length=False)
    if ST in backends:
        # Loaded the way the store's sentence-transformers backend loads it: the same
        # files, checked, found without a download.
        model = sentence_transformers_model(batch)
        found[ST] = lambda texts: np.asarray(
            model.encode(
                texts, batch_size=batch, normalize_embeddings=True, show_progress_bar=False
            ),
            dtype=np.float32,
        )
    for embed in found.values():
        embed(["a warm-up text, to load the model before the clock starts"] * batch)
    return found


def measure(
    texts: list[str], found: dict[str, Callable[[list[str]], np.ndarray]], repeats: int
) -> dict[str, Any]:
    rates: dict[str, list[float]] = {name: [] for name in found}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(repeats):
        for name, embed in found.items():  # in turn: drift meets every backend alike
            start = time.perf_counter()
            vectors[name] = embed(texts)
            rates[name].append(len(texts) / (time.perf_counter() - start))
    out: dict[str, Any] = {
        name: {"texts_per_s": round(statistics.median(r), 1), "each": [round(x, 1) for x in r]}
        for name, r in rates.items()
    }
    if ONNX in vectors and ONNX_GIVEN in vectors:
        diff = float(np.abs(vectors[ONNX] - vectors[ONNX_GIVEN]).max())
        out["sort_max_abs_difference"] = diff
    if ONNX in vectors and ST in vectors:
        cosine = (vectors[ONNX] * vectors[ST]).sum(axis=1)
        out["cosine_min_onnx_vs_sentence_transformers"] = round(float(cosine.min()), 6)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="shared data folder")
    parser.add_argument("--short", type=int, default=512, help="LoCoMo texts (default 512)")
    parser.add_argument("--long", type=int, default=160, help="LongMemEval texts (default 160)")
    parser.add_argument(
        "--batch", type=int, default=None, help="texts per batch (default: the store's)"
    )
    parser.add_argument("--threads", type=int, default=2, help="torch's CPU threads (default 2)")
    parser.add_argument("--repeats", type=int, default=3, help="timed passes (default 3)")
    parser.add_argument(
        "--backends",
        nargs="+",
        choices=(ONNX, ONNX_GIVEN, ST),
        default=[ONNX, ONNX_GIVEN, ST],
        help="what to measure (default: all three)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)

    missing = [c for c in SETS.values() if not (args.data / c / "corpus.jsonl").is_file()]
    if missing:
        parser.error(f"{', '.join(missing)} not found in {args.data} (pass --data)")
    if ST in args.backends:
        try:
            import sentence_transformers  # noqa: F401
        except ImportError:
            parser.error(
                "sentence-transformers is not installed: pip install -e '.[bench]' "
                "(or leave it out: --backends onnxruntime)"
            )
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # never a download at run time
    if ST in args.backends:
        import torch

        torch.set_num_threads(args.threads)
    from hybrid_memory import HybridMemorySettings

    batch = args.batch or HybridMemorySettings().embedding_batch_size
    found = embedders(batch, args.backends)
    tokenizer = None
    if ONNX in found:
        from hybrid_memory.testing import default_model

        tokenizer = default_model(batch).tokenizer
    report: dict[str, Any] = {
        "model": "all-MiniLM-L6-v2",
        "batch": batch,
        "threads": args.threads,
        "cpus": os.cpu_count(),
        "repeats": args.repeats,
        "load_average_start": round(os.getloadavg()[0], 2),
        "sets": {},
    }
    for name, collection in SETS.items():
        texts = sample(args.data / collection, args.short if name == "short" else args.long)
        result: dict[str, Any] = {"collection": collection, "texts": len(texts)}
        if tokenizer is not None:
            lengths = [len(e.ids) for e in tokenizer.encode_batch(texts)]
            result["mean_tokens"] = round(statistics.fmean(lengths), 1)
            result["padding_share_sorted"] = round(padding_share(lengths, batch, True), 3)
            result["padding_share_order_given"] = round(padding_share(lengths, batch, False), 3)
        result.update(measure(texts, found, args.repeats))
        report["sets"][name] = result
    report["load_average_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"all-MiniLM-L6-v2, batch {batch}, {args.threads} threads on {report['cpus']} CPUs, "
        f"median of {args.repeats} passes (load average {report['load_average_start']}-"
        f"{report['load_average_end']})"
    )
    for name, r in report["sets"].items():
        tokens = f", {r['mean_tokens']} tokens on average" if "mean_tokens" in r else ""
        print(f"  {name} texts ({r['collection']}, {r['texts']}{tokens}):")
        for backend in found:
            print(f"    {backend:<26} {r[backend]['texts_per_s']:>7.1f} texts/s")
        if "padding_share_sorted" in r:
            print(
                f"    padding: {r['padding_share_sorted']:.1%} of token slots sorted, "
                f"{r['padding_share_order_given']:.1%} in the order given"
            )
        if "sort_max_abs_difference" in r:
            print(f"    sorted vs order given: max |difference| {r['sort_max_abs_difference']:.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
