"""Fusion chosen on three collections by leave-one-collection-out (issue 24, item 3).

Extends ``benchmarks/fusion_study.py`` (its legs computed once per collection with the
engine's own parts, every configuration fused from them in Python) with:

- the engine's defaults as they are today: the adaptive alpha by corpus size after
  filtering (0.5 below 5,000 memories, 0.4 from there) and the feedback weight scaled
  down for queries of more than ``feedback_full_words`` content words;
- a small grid of the settings that matter: alpha (fixed or by size), tag_weight,
  feedback_weight, rrf_k;
- a query router (:func:`routed_alpha`): alpha moved up for long natural-language
  queries and down for short keyword-like ones, a pure function of the query's words;
- score-aware fusion: a convex combination of min-max normalised leg scores (what
  mcp-memory-service does, bm25 0.3 / vectors 0.7), with and without the feedback.

The time settings (``time_phrases``, ``recency_decay``) need the memories' times, which
this study's legs do not model; they are measured end to end with
``benchmarks/cached_eval.py --sweep`` instead (docs/quality-study.md).

    python -m benchmarks.loo_study ../shared/data/locomo ../shared/data/cranfield \\
        ../shared/data/longmemeval --out loo.json

prints nDCG@10 / Recall@10 per collection for every configuration, then for each
collection held out: the configuration with the best mean nDCG@10 over the other two,
its figures on the held-out collection against the defaults', with the p-value of a
paired randomisation test of per-query nDCG@10.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from hybrid_memory_eval.significance import paired_randomisation_test

from benchmarks.fusion_study import Config, Prepared, QueryLegs, per_query_ranked, prepare, rank
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import adaptive_alpha, default_embedder, query_words


@dataclass(frozen=True)
class Router:
    """How :func:`routed_alpha` moves alpha by query kind (None: no routing)."""

    long_from: int = 10  # content words from which a query counts as natural-language prose
    long_shift: float = 0.2  # alpha added for such queries
    short_upto: int = 0  # queries of at most this many words, all content, count as keywords
    short_shift: float = 0.0  # alpha taken away for those
    min_stop_share: float = 0.0  # prose also needs this share of stopwords among its words


def routed_alpha(alpha: float, text: str, router: Router) -> float:
    """alpha for one query: raised for long natural-language queries (their content is in
    their wording, which the vector leg reads and BM25 scatters over many weak terms),
    lowered for short keyword-like ones (names, identifiers: exact terms); in [0, 1]."""
    words = query_words(text, drop_stopwords=False)
    content = query_words(text)
    stop_share = 1 - len(content) / len(words) if words else 0.0
    if len(content) >= router.long_from and stop_share >= router.min_stop_share:
        alpha += router.long_shift
    elif router.short_upto and len(words) <= router.short_upto and len(content) == len(words):
        alpha -= router.short_shift
    return min(1.0, max(0.0, alpha))


@dataclass(frozen=True)
class Variant:
    """A configuration of the study: fusion settings plus how alpha is chosen per query."""

    name: str
    config: Config
    size_alphas: tuple[float, float, float] | None = (0.5, 0.5, 0.4)  # None: config.alpha
    router: Router | None = None


def query_alpha(prep: Prepared, q: QueryLegs, variant: Variant) -> float:
    alpha = variant.config.alpha
    if variant.size_alphas is not None:
        alpha = adaptive_alpha(len(q.rows), [500, 5000], list(variant.size_alphas))
    if variant.router is not None:
        alpha = routed_alpha(alpha, q.text, variant.router)
    return alpha


def ranked(prep: Prepared, q: QueryLegs, variant: Variant) -> list[str]:
    return rank(prep, q, replace(variant.config, alpha=query_alpha(prep, q, variant)))


ENGINE = Config("defaults", feedback_words=10)  # the engine's feedback_full_words = 10
DEFAULTS = Variant("defaults", ENGINE)


def variants() -> list[Variant]:
    out = [DEFAULTS]

    def add(name: str, **changes: object) -> None:
        size = changes.pop("size_alphas", DEFAULTS.size_alphas)
        router = changes.pop("router", None)
        out.append(Variant(name, replace(ENGINE, **changes), size, router))  # type: ignore[arg-type]

    for alpha in (0.3, 0.4, 0.5, 0.6, 0.7):
        add(f"alpha {alpha} at every size", alpha=alpha, size_alphas=None)
    add("size alphas 0.5/0.5/0.5", size_alphas=(0.5, 0.5, 0.5))
    add("size alphas 0.5/0.6/0.6", size_alphas=(0.5, 0.6, 0.6))
    for tag in (0.5, 0.75):
        add(f"tag_weight {tag}", tag_weight=tag)
    for fb in (0.0, 0.25, 0.75):
        add(f"feedback_weight {fb}", feedback_weight=fb)
    add("feedback_full_words 0 (whole weight always)", feedback_words=None)
    for k in (20, 40, 100):
        add(f"rrf_k {k}", rrf_k=float(k))
    for long_from, shift in [(8, 0.1), (10, 0.1), (10, 0.2), (12, 0.2), (14, 0.3)]:
        add(f"router: >= {long_from} content words +{shift}", router=Router(long_from, shift))
    add(
        "router: >= 10 content words +0.2, stopword share >= 0.3",
        router=Router(10, 0.2, min_stop_share=0.3),
    )
    add(
        "router: >= 10 content words +0.1; <= 3 all-content words -0.1",
        router=Router(10, 0.1, short_upto=3, short_shift=0.1),
    )
    for alpha in (0.5, 0.6, 0.7):
        for fb in (0, 3):
            add(
                f"convex (min-max scores) alpha {alpha}, feedback {fb}",
                fusion="convex",
                alpha=alpha,
                feedback_docs=fb,
                size_alphas=None,
            )
    return out


def mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--out", help="write every per-collection figure and the choice as JSON")
    args = parser.parse_args(argv)
    embedding = CachedEmbedding(default_embedder())
    preps = []
    for path in args.datasets:
        print(f"preparing {path}", file=sys.stderr, flush=True)
        preps.append(prepare(path, embedding))
    names = [p.name for p in preps]
    per_query: dict[str, dict[str, dict[str, tuple[float, float]]]] = {}
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for variant in variants():
        per_query[variant.name] = {
            p.name: per_query_ranked(p, lambda q, p=p, v=variant: ranked(p, q, v)) for p in preps
        }
        table[variant.name] = {
            n: (mean([r[0] for r in rows.values()]), mean([r[1] for r in rows.values()]))
            for n, rows in per_query[variant.name].items()
        }
        print(
            f"{variant.name:62s} "
            + "  ".join(
                f"{n}: {table[variant.name][n][0]:.4f}/{table[variant.name][n][1]:.4f}"
                for n in names
            ),
            flush=True,
        )
    folds = []
    for held in names:
        others = [n for n in names if n != held]
        best = max(table, key=lambda v: statistics.fmean(table[v][n][0] for n in others))
        ids = sorted(per_query[best][held])
        p = paired_randomisation_test(
            [per_query[best][held][i][0] for i in ids],
            [per_query["defaults"][held][i][0] for i in ids],
        )
        fold = {
            "held_out": held,
            "chosen": best,
            "chosen_mean_on_others": mean([table[best][n][0] for n in others]),
            "defaults_mean_on_others": mean([table["defaults"][n][0] for n in others]),
            "chosen_on_held_out": table[best][held],
            "defaults_on_held_out": table["defaults"][held],
            "p": round(p, 4),
        }
        folds.append(fold)
        print(json.dumps(fold))
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {
                    "collections": names,
                    "table": table,
                    "folds": folds,
                    "variants": {
                        v.name: {
                            **v.config.describe(),
                            "size_alphas": v.size_alphas,
                            "router": None if v.router is None else v.router.__dict__,
                        }
                        for v in variants()
                    },
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
