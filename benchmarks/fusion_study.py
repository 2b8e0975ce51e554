"""Fusion study: how each search setting fares across collections, query by query.

The engine's legs are computed once per collection with the engine's own parts (the
SQLite FTS5 keyword index, its tag matcher, the same vectors), then every candidate
configuration is fused from them in Python, so a sweep of dozens of configurations over
several collections takes seconds rather than a store rebuild each. The vector leg is
an exact cosine search (the engine's Chroma HNSW search is exact at these sizes up to
ties); pseudo-relevance feedback re-runs it with the refined vector. The chosen
configuration is then checked end to end with ``hybrid-memory eval`` (the real engine).

    python benchmarks/fusion_study.py ../shared/data/cranfield ../shared/data/locomo \\
        ~/.cache/hybrid-memory/collections/* --out /tmp/study.json

prints, per collection, nDCG@10 and Recall@10 of every configuration, a
leave-one-collection-out choice, and (``--per-query NAME``) the per-query comparison of
two configurations by query length.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hybrid_memory_eval import (
    Dataset,
    build_memory,
    load_dataset,
    matches_filter,
    ndcg_at_k,
    recall_at_k,
)

from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import keyword_leg, known_tags, normalise_tag, query_words, rocchio

DEPTH = 200  # the deepest candidate list any configuration asks for


@dataclass(frozen=True)
class Config:
    """One candidate search configuration (the fusion-relevant settings)."""

    name: str
    fusion: str = "rrf"  # "rrf" | "convex"
    rrf_k: float = 60.0
    alpha: float = 0.5
    candidates: int = 100
    drop_stopwords: bool = True
    feedback_docs: int = 3
    feedback_weight: float = 0.5
    # feedback only when the keyword leg and the bare-query vector leg share at least
    # this share of their top `gate_depth` (None: always)
    feedback_gate: float | None = None
    gate_depth: int = 10
    # "overlap": share of the two legs' top `gate_depth` in common; "docs": share of the
    # feedback memories found in the bare vector leg's top `gate_depth`
    gate_mode: str = "overlap"
    # feedback memories from the keyword leg alone ("keyword", the engine's way since
    # 2026-11-26), the keyword and tag legs' fusion ("keyword+tag", its way before) or a
    # first fusion with the bare query's vector leg ("fused")
    feedback_source: str = "keyword"
    # feedback weight scaled by min(1, feedback_words / content words of the query)
    feedback_words: int | None = None
    tag_weight: float = 1.0
    tag_boost: float = 0.5
    # per-query alpha: None, or "length" (alpha grows with the query's content words)
    adaptive: str | None = None
    long_query: int = 8  # content words from which a query counts as long
    long_alpha: float = 0.6
    z_depth: int = 100  # "zscore": the depth of each leg's list the estimate reads
    z_share: float = 1.0  # "zscore": share of the per-query estimate in alpha
    keep_bare: float = 0.0  # share of the vector weight kept by the bare query's ranking
    keyword_cut: float = 0.0  # keyword hits below this share of the leg's top score dropped
    vector_cut: float = 0.0  # vector hits below this share of the leg's top similarity dropped
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def describe(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k not in ("name", "extra")}
        return out


@dataclass
class QueryLegs:
    id: str
    text: str
    rows: np.ndarray  # corpus rows passing the filter
    vector: np.ndarray
    keyword: dict[bool, list[tuple[str, float]]]  # drop_stopwords -> hits
    tags: tuple[str, ...]
    words: int  # content words


@dataclass
class Prepared:
    name: str
    dataset: Dataset
    ids: list[str]
    matrix: np.ndarray
    tags: list[frozenset[str]]
    created: list[float]
    queries: list[QueryLegs]
    _vector_cache: dict[tuple[str, int], list[tuple[str, float]]] = field(default_factory=dict)

    def nearest(self, query: QueryLegs, vector: np.ndarray, depth: int) -> list[tuple[str, float]]:
        # an unfiltered query reads the matrix in place: a copy of 10,866 rows per call
        # (LongMemEval) costs more than the product itself
        whole = len(query.rows) == len(self.ids)
        sims = (self.matrix if whole else self.matrix[query.rows]) @ vector
        order = np.lexsort((query.rows, -sims))[:depth]
        return [(self.ids[query.rows[i]], float(sims[i])) for i in order]


def prepare(path: str, embedding: CachedEmbedding) -> Prepared:
    dataset = load_dataset(path)
    docs = dataset.storable()
    memory = build_memory(dataset, {}, embedding=embedding)
    try:
        matrix = embedding.matrix([d.text for d in docs]).astype(np.float64)
        matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
        ids = [d.id for d in docs]
        tags = [frozenset(normalise_tag(t) for t in d.tags) for d in docs]
        created = [float(i) for i in range(len(docs))]  # insertion order stands in for time
        queries: list[QueryLegs] = []
        for q in dataset.judged_queries():
            rows = np.array(
                [i for i, d in enumerate(docs) if matches_filter(q.filter, d.metadata, d.tags)],
                dtype=np.int64,
            )
            keyword = {
                drop: keyword_leg(memory, q.text, DEPTH, q.filter, drop_stopwords=drop)
                for drop in (True, False)
            }
            vec = embedding.matrix([q.text])[0].astype(np.float64)
            vec /= max(float(np.linalg.norm(vec)), 1e-12)
            queries.append(
                QueryLegs(
                    q.id,
                    q.text,
                    rows,
                    vec,
                    keyword,
                    known_tags(memory, q.text),
                    len(query_words(q.text)),
                )
            )
    finally:
        memory.close()
    return Prepared(dataset.name, dataset, ids, matrix, tags, created, queries)


# --- fusion ------------------------------------------------------------------------------


def _weights(cfg: Config, alpha: float, matched: int) -> dict[str, float]:
    tag = cfg.tag_weight * (1 + cfg.tag_boost * max(matched - 1, 0)) if matched else 0.0
    total = alpha + (1 - alpha) + tag
    return {"vector": alpha / total, "keyword": (1 - alpha) / total, "tag": tag / total}


def _tag_leg(
    prep: Prepared, q: QueryLegs, evidence: dict[str, int], depth: int
) -> list[tuple[str, int]]:
    if not q.tags:
        return []
    wanted = set(q.tags)
    carriers = []
    for row in q.rows.tolist():
        count = len(wanted & prep.tags[row])
        if count:
            doc = prep.ids[row]
            carriers.append((-count, evidence.get(doc, math.inf), -prep.created[row], doc, count))
    carriers.sort()
    return [(c[3], c[4]) for c in carriers[:depth]]


def _fuse(
    cfg: Config,
    legs: dict[str, list[tuple[str, float]]],
    weights: dict[str, float],
) -> dict[str, float]:
    fused: dict[str, float] = {}
    if cfg.fusion == "rrf":
        for leg, hits in legs.items():
            w = weights[leg]
            if not w:
                continue
            for rank, (doc, _) in enumerate(hits, start=1):
                fused[doc] = fused.get(doc, 0.0) + w / (cfg.rrf_k + rank)
        return fused
    if cfg.fusion == "convex":
        for leg, hits in legs.items():
            w = weights[leg]
            if not w or not hits:
                continue
            scores = [s for _, s in hits]
            top, low = max(scores), min(scores)
            span = top - low
            for doc, s in hits:
                norm = 1.0 if span == 0 else (s - low) / span
                fused[doc] = fused.get(doc, 0.0) + w * norm
        return fused
    raise ValueError(cfg.fusion)


def _order(scores: dict[str, float]) -> list[str]:
    return sorted(scores, key=scores.__getitem__, reverse=True)


def _overlap(a: Sequence[str], b: Sequence[str]) -> float:
    if not a or not b:
        return 0.0
    return len(set(a) & set(b)) / min(len(a), len(b))


def rank(prep: Prepared, q: QueryLegs, cfg: Config) -> list[str]:
    depth = cfg.candidates
    keyword = q.keyword[cfg.drop_stopwords][:depth]
    alpha = cfg.alpha
    if cfg.adaptive == "length" and q.words >= cfg.long_query:
        alpha = cfg.long_alpha
    weights = _weights(cfg, alpha, len(q.tags))
    key = (q.id, depth)
    bare = prep._vector_cache.get(key)
    if bare is None:
        bare = prep.nearest(q, q.vector, depth)
        prep._vector_cache[key] = bare

    def legs_with(vector_hits: list[tuple[str, float]]) -> dict[str, list[tuple[str, float]]]:
        evidence: dict[str, int] = {}
        for ranking in (vector_hits, keyword):
            for r, (doc, _) in enumerate(ranking, start=1):
                evidence[doc] = min(evidence.get(doc, r), r)
        tag = [(d, float(c)) for d, c in _tag_leg(prep, q, evidence, depth)]
        return {"vector": vector_hits, "keyword": keyword, "tag": tag}

    vector_hits = bare
    use_feedback = cfg.feedback_docs > 0 and cfg.feedback_weight > 0 and weights["vector"] > 0
    if use_feedback and cfg.feedback_gate is not None and cfg.gate_mode == "overlap":
        n = cfg.gate_depth
        agreement = _overlap([d for d, _ in keyword[:n]], [d for d, _ in bare[:n]])
        use_feedback = agreement >= cfg.feedback_gate
    if use_feedback:
        if cfg.feedback_source == "keyword":
            top = [d for d, _ in keyword[: cfg.feedback_docs]]
        else:
            first = _fuse(cfg, legs_with(bare if cfg.feedback_source == "fused" else []), weights)
            top = _order(first)[: cfg.feedback_docs]
        if top and cfg.feedback_gate is not None and cfg.gate_mode == "docs":
            near = {d for d, _ in bare[: cfg.gate_depth]}
            if sum(d in near for d in top) / len(top) < cfg.feedback_gate:
                top = []
        if top:
            index = prep_index(prep)
            rows = [index[d] for d in top]
            weight = cfg.feedback_weight
            if cfg.feedback_words:
                weight *= min(1.0, cfg.feedback_words / max(q.words, 1))
            refined = np.asarray(rocchio(q.vector.tolist(), prep.matrix[rows].tolist(), weight))
            vector_hits = prep.nearest(q, refined, depth)
    if cfg.adaptive == "zscore" and weights["vector"] and weights["keyword"]:
        # per query: each leg's top score in standard deviations above its own list's
        # mean (a score-distribution quality estimate), their ratio setting alpha
        zv, zk = top_z(vector_hits, cfg.z_depth), top_z(keyword, cfg.z_depth)
        if zv + zk > 0:
            mix = cfg.z_share
            alpha = (1 - mix) * alpha + mix * zv / (zv + zk)
            weights = _weights(cfg, alpha, len(q.tags))
    legs = legs_with(vector_hits)
    if cfg.keyword_cut and legs["keyword"]:
        # per-leg depth by the leg's own scores: keyword hits scoring below this share of
        # the leg's best are left out of the fusion
        floor = cfg.keyword_cut * legs["keyword"][0][1]
        legs["keyword"] = [(d, s) for d, s in legs["keyword"] if s >= floor]
    if cfg.vector_cut and legs["vector"]:
        floor = cfg.vector_cut * legs["vector"][0][1]
        legs["vector"] = [(d, s) for d, s in legs["vector"] if s >= floor]
    if cfg.keep_bare and vector_hits is not bare:
        # the bare query's vector ranking fused beside the refined one, each with a share
        # of the vector weight: feedback that went wrong costs at most its share
        weights = dict(weights)
        share = cfg.keep_bare
        vector = weights["vector"]
        weights["bare"], weights["vector"] = vector * share, vector * (1 - share)
        legs["bare"] = bare
    return _order(_fuse(cfg, legs, weights))


def top_z(hits: Sequence[tuple[str, float]], depth: int) -> float:
    scores = np.array([s for _, s in hits[:depth]], dtype=np.float64)
    if len(scores) < 3:
        return 0.0
    sd = float(scores.std())
    return 0.0 if sd == 0 else max(0.0, float((scores[0] - scores.mean()) / sd))


_INDEX: dict[int, dict[str, int]] = {}


def prep_index(prep: Prepared) -> dict[str, int]:
    found = _INDEX.get(id(prep))
    if found is None:
        found = {d: i for i, d in enumerate(prep.ids)}
        _INDEX[id(prep)] = found
    return found


def per_query_ranked(
    prep: Prepared, ranker: Callable[[QueryLegs], list[str]], k: int = 10
) -> dict[str, tuple[float, float]]:
    """nDCG@k and Recall@k of each query as ``ranker`` orders it."""
    out = {}
    for q in prep.queries:
        ranked = ranker(q)[:k]
        judged = prep.dataset.qrels.get(q.id, {})
        out[q.id] = (ndcg_at_k(ranked, judged, k), recall_at_k(ranked, judged, k))
    return out


def per_query(prep: Prepared, cfg: Config, k: int = 10) -> dict[str, tuple[float, float]]:
    return per_query_ranked(prep, lambda q: rank(prep, q, cfg), k)


def mean_scores(rows: dict[str, tuple[float, float]]) -> tuple[float, float]:
    """The mean nDCG and Recall of per-query rows, to four decimals."""
    values = rows.values()
    return (
        round(statistics.fmean(r[0] for r in values), 4),
        round(statistics.fmean(r[1] for r in values), 4),
    )


def score(prep: Prepared, cfg: Config) -> tuple[float, float]:
    return mean_scores(per_query(prep, cfg))


# --- configurations ----------------------------------------------------------------------

DEFAULTS = Config("defaults")
PLAIN = Config("plain RRF", drop_stopwords=False, feedback_docs=0, tag_weight=0.0, candidates=100)


def diagnosis_configs() -> list[Config]:
    return [
        DEFAULTS,
        PLAIN,
        replace(DEFAULTS, name="defaults - feedback", feedback_docs=0),
        replace(DEFAULTS, name="defaults - stopword drop", drop_stopwords=False),
        replace(DEFAULTS, name="defaults, alpha 0.6", alpha=0.6),
        replace(DEFAULTS, name="defaults, alpha 0.4", alpha=0.4),
        replace(DEFAULTS, name="defaults, candidates 20", candidates=20),
        replace(DEFAULTS, name="defaults, candidates 50", candidates=50),
        replace(DEFAULTS, name="defaults, candidates 200", candidates=200),
        replace(DEFAULTS, name="defaults, rrf_k 20", rrf_k=20),
        replace(DEFAULTS, name="defaults, rrf_k 120", rrf_k=120),
        replace(DEFAULTS, name="defaults, feedback weight 0.25", feedback_weight=0.25),
        replace(DEFAULTS, name="defaults, feedback 1 doc", feedback_docs=1),
        replace(DEFAULTS, name="defaults, feedback 5 docs", feedback_docs=5),
        replace(PLAIN, name="plain + stopword drop", drop_stopwords=True),
        replace(PLAIN, name="plain + feedback", feedback_docs=3),
        replace(PLAIN, name="plain + tags", tag_weight=1.0),
    ]


def candidate_configs() -> list[Config]:
    configs: list[Config] = [DEFAULTS, PLAIN]
    for mode, depth, gate in [
        ("overlap", 10, 0.1),
        ("overlap", 10, 0.2),
        ("overlap", 10, 0.3),
        ("overlap", 20, 0.2),
        ("docs", 10, 0.34),
        ("docs", 20, 0.34),
        ("docs", 20, 0.67),
        ("docs", 50, 0.34),
        ("docs", 50, 0.67),
        ("docs", 100, 0.67),
    ]:
        configs.append(
            replace(
                DEFAULTS,
                name=f"defaults gate {mode}@{depth}>={gate}",
                feedback_gate=gate,
                gate_depth=depth,
                gate_mode=mode,
            )
        )
    for source in ("keyword", "keyword+tag", "fused"):
        for docs, weight in [(3, 0.5), (3, 0.3), (5, 0.5), (2, 0.5)]:
            configs.append(
                replace(
                    DEFAULTS,
                    name=f"defaults fb {source} {docs}x{weight}",
                    feedback_source=source,
                    feedback_docs=docs,
                    feedback_weight=weight,
                )
            )
        for words in (6, 10):
            configs.append(
                replace(
                    DEFAULTS,
                    name=f"defaults fb {source} words<={words}",
                    feedback_source=source,
                    feedback_words=words,
                )
            )
        configs.append(
            replace(PLAIN, name=f"plain + fb {source}", feedback_docs=3, feedback_source=source)
        )
    for long_query, long_alpha in [(10, 0.6), (13, 0.6), (13, 0.7), (8, 0.6)]:
        configs.append(
            replace(
                DEFAULTS,
                name=f"defaults length>={long_query} a={long_alpha}",
                adaptive="length",
                long_query=long_query,
                long_alpha=long_alpha,
            )
        )
    for fb in (0, 3):
        for alpha in (0.4, 0.5, 0.6, 0.7):
            configs.append(
                Config(f"convex a={alpha} fb={fb}", fusion="convex", alpha=alpha, feedback_docs=fb)
            )
    return configs


def _unused_grid() -> list[Config]:
    configs: list[Config] = []
    for fusion in ("rrf", "convex"):
        for alpha in (0.4, 0.5, 0.6):
            for fb in (0, 3):
                for gate in (None, 0.2, 0.3) if fb else (None,):
                    for tw in (0.5, 1.0):
                        for k in (60,):
                            name = (
                                f"{fusion} a={alpha} fb={fb}"
                                + (f" gate={gate}" if gate is not None else "")
                                + f" tag={tw}"
                            )
                            configs.append(
                                Config(
                                    name,
                                    fusion=fusion,
                                    alpha=alpha,
                                    feedback_docs=fb,
                                    feedback_gate=gate,
                                    tag_weight=tw,
                                    rrf_k=k,
                                )
                            )
    return configs


def leave_one_out(
    table: dict[str, dict[str, tuple[float, float]]], names: list[str]
) -> dict[str, str]:
    """For each collection, the configuration with the best mean nDCG@10 over the others."""
    chosen = {}
    for held in names:
        others = [n for n in names if n != held]
        best = max(table, key=lambda c: statistics.fmean(table[c][n][0] for n in others))
        chosen[held] = best
    return chosen


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--set", choices=["diagnosis", "candidates"], default="candidates")
    parser.add_argument("--per-query", metavar="NAME", help="per-query table for this dataset")
    parser.add_argument("--out", help="write the full table as JSON")
    args = parser.parse_args(argv)
    embedding = CachedEmbedding()
    preps = []
    for path in args.datasets:
        print(f"preparing {path}", file=sys.stderr, flush=True)
        preps.append(prepare(path, embedding))
    configs = diagnosis_configs() if args.set == "diagnosis" else candidate_configs()
    names = [p.name for p in preps]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for cfg in configs:
        table[cfg.name] = {p.name: score(p, cfg) for p in preps}
        print(
            f"{cfg.name:45s} "
            + "  ".join(
                f"{n}: {table[cfg.name][n][0]:.4f}/{table[cfg.name][n][1]:.4f}" for n in names
            ),
            flush=True,
        )
    if len(names) > 1:
        chosen = leave_one_out(table, names)
        print("\nleave-one-collection-out:")
        for held, best in chosen.items():
            print(f"  without {held}: {best} -> on {held}: {table[best][held]}")
    if args.per_query:
        prep = next(p for p in preps if p.name == args.per_query)
        a, b = per_query(prep, DEFAULTS), per_query(prep, PLAIN)
        bins: dict[str, list[str]] = {}
        for q in prep.queries:
            label = (
                "<=5"
                if q.words <= 5
                else "6-8"
                if q.words <= 8
                else "9-12"
                if q.words <= 12
                else ">12"
            )
            bins.setdefault(label, []).append(q.id)
        print(f"\nper query on {prep.name}: defaults vs plain RRF by content words")
        for label in ("<=5", "6-8", "9-12", ">12"):
            ids = bins.get(label, [])
            if ids:
                da = statistics.fmean(a[i][0] for i in ids)
                db = statistics.fmean(b[i][0] for i in ids)
                wins = sum(a[i][0] > b[i][0] + 1e-9 for i in ids)
                losses = sum(a[i][0] < b[i][0] - 1e-9 for i in ids)
                print(
                    f"  {label:5s} n={len(ids):3d} defaults {da:.4f} plain {db:.4f} "
                    f"defaults better on {wins}, worse on {losses}"
                )
    if args.out:
        Path(args.out).write_text(
            json.dumps(
                {"table": table, "configs": {c.name: c.describe() for c in configs}}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
