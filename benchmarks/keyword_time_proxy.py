"""The time settings on a collection too large to embed here, keyword leg alone.

LongMemEval's 10,866 long turns take hours to embed on a loaded shared machine, so
this measures the time-aware settings (``time_phrases``, ``time_boost``,
``time_order_weight``) with the keyword and tag legs only (``alpha=0``; the vectors are
a hashed bag of words, stored but given no weight). It answers "does favouring the
named window help or hurt the keyword ranking, by question type", not "what does the
default configuration score": the full protocol is ``hybrid-memory eval``.

    python -m benchmarks.keyword_time_proxy ../shared/data/longmemeval \\
        --by metadata.type --sweep time_phrases=off,narrow --json
"""

from __future__ import annotations

import hashlib
import json
import math
import re
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


class HashedWords:
    """A 64-dimensional hashed bag of words: instant, deterministic, no model."""

    name = "hashed-words-64"

    def _vector(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in re.findall(r"\w+", text.lower()):
            vector[int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector] if any(vector) else [1.0] + [0.0] * 63

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def main(argv: Sequence[str] | None = None) -> int:
    args = eval_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    report = evaluate(
        load_dataset(args.dataset).limited(args.limit),
        k=args.k,
        overrides={"alpha": 0.0, **dict(parse_setting(t) for t in args.settings)},
        sweeps=[parse_sweep(text) for text in args.sweep],
        grid=args.grid,
        by=args.by,
        run_file=args.run_file,
        embedding=HashedWords(),
        progress=QUIET if args.quiet else Progress(sys.stderr),
    )
    print(json.dumps(report, indent=2, default=str) if args.json else format_report(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
