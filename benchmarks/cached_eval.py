"""``hybrid-memory eval`` with the default model's vectors cached on disk.

The same arguments and report as ``hybrid-memory eval`` (the same protocol, model and
settings), but document and query vectors go through
:class:`benchmarks.vector_cache.CachedEmbedding` around the default ONNX model, so a
second run on a collection (LongMemEval: 10,866 long turns, most of an hour to embed on
a shared 2-core machine) costs only its searches. Query latencies (``p50_ms``) of a
cached run are not comparable with an uncached one.

    python -m benchmarks.cached_eval ../shared/data/longmemeval --peers --by metadata.type
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from hybrid_memory_eval import (
    QUIET,
    Progress,
    evaluate,
    format_report,
    load_dataset,
    parse_setting,
    parse_sweep,
)
from hybrid_memory_eval.cli import eval_parser

from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import default_embedder


def main(argv: Sequence[str] | None = None) -> int:
    args = eval_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    dataset = load_dataset(args.dataset).limited(args.limit)
    report = evaluate(
        dataset,
        k=args.k,
        overrides=dict(parse_setting(text) for text in args.settings),
        sweeps=[parse_sweep(text) for text in args.sweep],
        grid=args.grid,
        peers=args.peers,
        by=args.by,
        run_file=args.run_file,
        embedding=CachedEmbedding(default_embedder()),
        progress=QUIET if args.quiet else Progress(sys.stderr),
    )
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
