"""Candidates for defaults that generalise (issue 13), measured across collections.

An extension of ``benchmarks/fusion_study.py`` (its legs, configurations and fusion),
adding, each against the defaults and plain RRF:

1. keyword-side pseudo-relevance feedback: the keyword leg re-run with a query expanded
   by terms of feedback memories (Bo1, Amati 2003, Terrier's default; or RM-style,
   Lavrenko & Croft 2001, interpolated with the original query as in RM3), the feedback
   memories from the keyword leg's own top, the bare query's vector top, or a first
   fusion of the two;
2. long texts: each memory's vector the mean of overlapping windows of the model's 256
   word pieces (and how many texts exceed it);
3. fusion robust to one weak leg: a per-query alpha from the legs' own score
   distributions, the bare vector ranking kept beside the refined one, per-leg depth
   cuts by the leg's own scores;
4. stopwords: the English list against a corpus document-frequency cut.

Keyword scoring uses the keyword index's own postings (FTS5's tokens and Porter stems,
the engine's BM25) with a weight per query term; at weight 1 it ranks exactly as the
engine's keyword leg (tests/integration/test_prf_study.py).

    python benchmarks/prf_study.py ../shared/data/cranfield ../shared/data/locomo \\
        ~/.cache/hybrid-memory/collections/* [--cache /tmp/prf] [--only TEXT] [--out t.json]

prints nDCG@10 / Recall@10 per collection for each configuration and the
leave-one-collection-out choice (chosen on the other collections' mean nDCG@10).
Results and conclusions: docs/quality-study.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import pickle
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hybrid_memory_eval import build_memory

from benchmarks.fusion_study import (
    DEFAULTS,
    PLAIN,
    Config,
    Prepared,
    QueryLegs,
    leave_one_out,
    mean_scores,
    per_query_ranked,
    prep_index,
    prepare,
    rank,
)
from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import BM25_B as B
from hybrid_memory.testing import BM25_K1 as K1
from hybrid_memory.testing import (
    STOPWORDS,
    bm25_idf,
    default_model_tokenizer_file,
    keyword_postings,
    keyword_terms,
    query_words,
)


@dataclass
class Terms:
    """The corpus as the keyword index sees it: each term's memories (positions in
    ``Prepared.ids``) and tfs, each memory's terms and tfs, document lengths, and each
    query's stemmed terms."""

    vocab: dict[str, int]
    postings: list[tuple[np.ndarray, np.ndarray]]  # term -> (memory positions, tfs)
    forward: list[tuple[np.ndarray, np.ndarray]]  # memory position -> (terms, tfs)
    length: np.ndarray
    df: np.ndarray
    cf: np.ndarray  # collection frequency (total occurrences) per term
    stop: np.ndarray  # bool per term: the stem of an English stopword
    query_terms: dict[str, list[int]]  # query id -> term indexes (stopwords dropped)
    all_query_terms: dict[str, list[int]]  # query id -> term indexes (stopwords kept)


def term_stats(path: str, prep: Prepared, embedding: CachedEmbedding) -> Terms:
    memory = build_memory(prep.dataset, {}, embedding=embedding)
    try:
        position = {d: i for i, d in enumerate(prep.ids)}
        vocab: dict[str, int] = {}
        rows_, cols_, vals_ = [], [], []
        for term, holders, tfs in keyword_postings(memory):
            t = vocab.setdefault(term, len(vocab))
            rows_.append(np.array([position[h] for h in holders], dtype=np.int64))
            cols_.append(np.full(len(holders), t, dtype=np.int64))
            vals_.append(tfs.astype(np.float64))
        stop_terms = {ts[0] for ts in keyword_terms(memory, sorted(STOPWORDS)) if ts}
        query_terms, all_query_terms = {}, {}
        for q in prep.queries:
            for drop, out in ((True, query_terms), (False, all_query_terms)):
                words = query_words(q.text, drop_stopwords=drop)
                terms = [ts[0] for ts in keyword_terms(memory, words) if ts]
                out[q.id] = [vocab[t] for t in terms if t in vocab]
    finally:
        memory.close()
    docs = np.concatenate(rows_)
    term_of = np.concatenate(cols_)
    tfs = np.concatenate(vals_)
    order = np.lexsort((term_of, docs))
    bounds = np.searchsorted(docs[order], np.arange(len(prep.ids) + 1))
    forward = [
        (term_of[order][a:b], tfs[order][a:b]) for a, b in itertools.pairwise(bounds.tolist())
    ]
    postings_ = list(zip(rows_, vals_, strict=True))
    stop = np.zeros(len(vocab), dtype=bool)
    for term in stop_terms:
        if term in vocab:
            stop[vocab[term]] = True
    return Terms(
        vocab,
        postings_,
        forward,
        np.bincount(docs, weights=tfs, minlength=len(prep.ids)),
        np.array([len(r) for r in rows_]),
        np.array([float(v.sum()) for v in vals_]),
        stop,
        query_terms,
        all_query_terms,
    )


def bm25(prep: Prepared, terms: Terms, q: QueryLegs, weights: dict[int, float], depth: int):
    """The weighted BM25 ranking of ``q``'s filtered rows: ``[(id, score)]`` best first."""
    n = len(prep.ids)
    avgdl = terms.length.mean()
    scores = np.zeros(n)
    for t, w in weights.items():
        rows, tf = terms.postings[t]
        idf = bm25_idf(int(terms.df[t]), n)
        norm = K1 * (1 - B + B * terms.length[rows] / avgdl)
        scores[rows] += w * idf * tf * (K1 + 1) / (tf + norm)
    allowed = q.rows
    s = scores[allowed]
    keep = s > 0
    allowed, s = allowed[keep], s[keep]
    order = np.lexsort((allowed, -s))[:depth]
    return [(prep.ids[allowed[i]], float(s[i])) for i in order]


# --- expansion term weighting ------------------------------------------------------------


def bo1(terms: Terms, docs: Sequence[int], n_terms: int) -> dict[int, float]:
    """Bo1 (Bose-Einstein, Amati 2003): w(t) = tf_x·log2((1+Pn)/Pn) + log2(1+Pn), Pn = cf/N,
    tf_x = occurrences of t in the feedback memories. Normalised to a maximum of 1."""
    tfx = np.zeros(len(terms.vocab))
    for d in docs:
        t, tf = terms.forward[d]
        tfx[t] += tf
    cand = np.flatnonzero((tfx > 0) & ~terms.stop)
    pn = terms.cf[cand] / len(terms.forward)
    w = tfx[cand] * np.log2((1 + pn) / pn) + np.log2(1 + pn)
    top = np.argsort(-w, kind="stable")[:n_terms]
    if not len(top):
        return {}
    wmax = w[top[0]]
    return {int(cand[i]): float(w[i] / wmax) for i in top}


def rm(terms: Terms, docs: Sequence[int], n_terms: int) -> dict[int, float]:
    """RM1-style: mean of the feedback memories' term distributions tf/|d|, times idf (so
    corpus-common words do not dominate), normalised to a maximum of 1."""
    dist = np.zeros(len(terms.vocab))
    for d in docs:
        t, tf = terms.forward[d]
        dist[t] += tf / max(float(terms.length[d]), 1.0) / len(docs)
    n = len(terms.forward)
    idf = np.log((n - terms.df + 0.5) / (terms.df + 0.5)).clip(min=0)
    w = dist * idf
    w[terms.stop] = 0
    cand = np.flatnonzero(w > 0)
    top = cand[np.argsort(-w[cand], kind="stable")[:n_terms]]
    if not len(top):
        return {}
    return {int(t): float(w[t] / w[top[0]]) for t in top}


EXPANDERS: dict[str, Callable[[Terms, Sequence[int], int], dict[int, float]]] = {
    "bo1": bo1,
    "rm": rm,
}


def query_weights(
    terms: Terms, q: QueryLegs, *, stopwords: bool = False, max_df: float = 1.0
) -> dict[int, float]:
    """The query's own terms, 1 each (a stem two query words share counts twice, as in
    the engine, where each word is a phrase of its own). ``stopwords``: keep English
    stopwords; ``max_df``: leave out terms in more than that share of memories (unless
    none would be left)."""
    weights: dict[int, float] = {}
    chosen = (terms.all_query_terms if stopwords else terms.query_terms)[q.id]
    if max_df < 1.0:
        n = len(terms.forward)
        kept = [t for t in chosen if terms.df[t] <= max_df * n]
        chosen = kept or chosen
    for t in chosen:
        weights[t] = weights.get(t, 0.0) + 1.0
    return weights


@dataclass(frozen=True)
class Expansion:
    name: str
    source: str  # "keyword" | "vector" | "fused"
    method: str = "bo1"
    docs: int = 3
    n_terms: int = 10
    beta: float = 0.5  # weight of the expansion terms (max 1) against the query terms (1)
    # scale beta by min(1, full_words / content words) (long queries carry their content)
    full_words: int | None = None


def expanded_keyword(
    prep: Prepared, terms: Terms, q: QueryLegs, e: Expansion, depth: int, index: dict[str, int]
) -> list[tuple[str, float]]:
    base = q.keyword[True]
    if e.source == "keyword":
        top = [d for d, _ in base[: e.docs]]
    elif e.source == "vector":
        top = [d for d, _ in prep.nearest(q, q.vector, e.docs)]
    else:  # first equal-weight RRF of bare vector and keyword
        fused: dict[str, float] = {}
        for hits in (prep.nearest(q, q.vector, 100), base[:100]):
            for r, (d, _) in enumerate(hits, start=1):
                fused[d] = fused.get(d, 0.0) + 1 / (60 + r)
        top = sorted(fused, key=fused.__getitem__, reverse=True)[: e.docs]
    if not top:
        return base
    weights = query_weights(terms, q)
    beta = e.beta
    if e.full_words:
        beta *= min(1.0, e.full_words / max(q.words, 1))
    for t, w in EXPANDERS[e.method](terms, [index[d] for d in top], e.n_terms).items():
        weights[t] = weights.get(t, 0.0) + beta * w
    return bm25(prep, terms, q, weights, depth)


# --- long texts: the model's window -------------------------------------------------------

WINDOW = 254  # word pieces of a window: the model's 256 less [CLS] and [SEP]


def window_matrix(prep: Prepared, embedding: CachedEmbedding) -> tuple[np.ndarray, dict]:
    """Each memory's vector as the mean of its overlapping windows' vectors (windows of
    254 word pieces, stride 127; a memory that fits is one window, its usual vector),
    and how many memories exceed the window."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(default_model_tokenizer_file()))
    tok.no_padding()
    tok.no_truncation()
    texts = [d.text for d in prep.dataset.storable()]
    windows: list[list[str]] = []
    pieces = []
    for text in texts:
        enc = tok.encode(text, add_special_tokens=False)
        n = len(enc.ids)
        pieces.append(n)
        if n <= WINDOW:
            windows.append([text])
            continue
        out, start = [], 0
        while True:
            end = min(start + WINDOW, n)
            out.append(text[enc.offsets[start][0] : enc.offsets[end - 1][1]])
            if end >= n:
                break
            start += WINDOW // 2
        windows.append(out)
    flat = [w for ws in windows for w in ws]
    vectors = embedding.matrix(flat).astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owner = np.repeat(np.arange(len(texts)), [len(w) for w in windows])
    mean = np.zeros((len(texts), vectors.shape[1]))
    np.add.at(mean, owner, vectors)
    mean /= np.linalg.norm(mean, axis=1, keepdims=True)
    lengths = np.array(pieces)
    stats = {
        "memories": len(texts),
        "over_window": int((lengths > WINDOW).sum()),
        "pieces_cut_share": round(float(np.maximum(lengths - WINDOW, 0).sum() / lengths.sum()), 4),
        "windows": len(flat),
    }
    return mean, stats


# --- study ------------------------------------------------------------------------------


KeywordFn = Callable[[Prepared, "Terms", QueryLegs, dict[str, int]], list[tuple[str, float]]]


@dataclass(frozen=True)
class Row:
    """One configuration of the study: fusion settings, and optionally another keyword
    ranking (expansion, stopword handling) or the windowed memory vectors."""

    label: str
    cfg: Config
    keyword: KeywordFn | None = None
    windows: bool = False


def _expansion(e: Expansion) -> KeywordFn:
    return lambda prep, terms, q, index: expanded_keyword(prep, terms, q, e, 200, index)


def _query_terms(stopwords: bool, max_df: float) -> KeywordFn:
    return lambda prep, terms, q, index: bm25(
        prep, terms, q, query_weights(terms, q, stopwords=stopwords, max_df=max_df), 200
    )


def rows() -> list[Row]:
    out = [
        Row("defaults", DEFAULTS),
        Row("plain RRF", PLAIN),
        Row("keyword alone", replace(DEFAULTS, alpha=0.0, feedback_docs=0, tag_weight=0)),
        Row("vector alone", replace(DEFAULTS, alpha=1.0, feedback_docs=0, tag_weight=0)),
    ]
    # 1. keyword-side pseudo-relevance feedback
    for source in ("keyword", "vector", "fused"):
        for method in ("bo1", "rm"):
            for docs, n_terms, beta in [(3, 10, 0.5), (5, 10, 0.5), (3, 20, 0.5), (3, 10, 1.0)]:
                e = Expansion(
                    f"{source} {method} {docs}d {n_terms}t b{beta}",
                    source,
                    method,
                    docs,
                    n_terms,
                    beta,
                )
                out.append(Row(f"defaults + kwprf {e.name}", DEFAULTS, _expansion(e)))
        e = Expansion(f"{source} bo1 3d 10t b0.5 w<=10", source, full_words=10)
        out.append(Row(f"defaults + kwprf {e.name}", DEFAULTS, _expansion(e)))
        e = Expansion(f"{source} bo1 3d 10t b0.5", source)
        out.append(Row(f"plain + kwprf {e.name}", PLAIN, _expansion(e)))
        out.append(
            Row(f"defaults-fb + kwprf {e.name}", replace(DEFAULTS, feedback_docs=0), _expansion(e))
        )
    # 2. long texts: the mean of overlapping windows' vectors
    out.append(Row("defaults, windowed vectors", DEFAULTS, windows=True))
    out.append(Row("plain, windowed vectors", PLAIN, windows=True))
    out.append(
        Row(
            "vector alone, windowed",
            replace(DEFAULTS, alpha=1.0, feedback_docs=0, tag_weight=0),
            windows=True,
        )
    )
    # 3. robust to one weak leg: a per-query alpha from the legs' score distributions,
    # the bare vector ranking kept beside the feedback-refined one
    for depth in (20, 100):
        for share in (0.5, 1.0):
            z = replace(DEFAULTS, adaptive="zscore", z_depth=depth, z_share=share)
            out.append(Row(f"defaults, z-score router @{depth} share {share}", z))
            out.append(
                Row(
                    f"plain, z-score router @{depth} share {share}",
                    replace(PLAIN, adaptive="zscore", z_depth=depth, z_share=share),
                )
            )
    for share in (0.25, 0.5):
        out.append(
            Row(f"defaults, bare vector leg kept {share}", replace(DEFAULTS, keep_bare=share))
        )
        out.append(
            Row(
                f"defaults, bare vector leg kept {share}, feedback 1.0",
                replace(DEFAULTS, keep_bare=share, feedback_weight=1.0),
            )
        )
    for cut in (0.1, 0.2, 0.3, 0.4, 0.5, 0.6):
        out.append(
            Row(f"defaults, keyword cut at {cut} of top", replace(DEFAULTS, keyword_cut=cut))
        )
        out.append(Row(f"plain, keyword cut at {cut} of top", replace(PLAIN, keyword_cut=cut)))
    for cut in (0.7, 0.8, 0.9):
        out.append(Row(f"defaults, vector cut at {cut} of top", replace(DEFAULTS, vector_cut=cut)))
    # 4. stopwords: the English list against a corpus document-frequency cut
    for max_df in (0.05, 0.1, 0.2, 0.3, 0.5):
        out.append(
            Row(f"defaults, stopwords kept, max_df {max_df}", DEFAULTS, _query_terms(True, max_df))
        )
    for max_df in (0.05, 0.1, 0.2):
        out.append(
            Row(f"defaults, English list + max_df {max_df}", DEFAULTS, _query_terms(False, max_df))
        )
    out.append(Row("defaults, stopwords kept", DEFAULTS, _query_terms(True, 1.0)))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--cache", help="folder to keep the prepared legs in between runs")
    parser.add_argument("--only", help="only the rows whose label contains this")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    embedding = CachedEmbedding()
    preps: list[tuple[Prepared, Terms, np.ndarray]] = []
    for path in args.datasets:
        cached = Path(args.cache, Path(path).name + ".v3.pkl") if args.cache else None
        if cached is not None and cached.exists():
            preps.append(pickle.loads(cached.read_bytes()))
            continue
        print(f"preparing {path}", file=sys.stderr, flush=True)
        prep = prepare(path, embedding)
        windowed, stats = window_matrix(prep, embedding)
        print(f"  {prep.name}: long texts {stats}", file=sys.stderr, flush=True)
        triple = (prep, term_stats(path, prep, embedding), windowed)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            prep._vector_cache = {}
            cached.write_bytes(pickle.dumps(triple))
        preps.append(triple)
    names = [p.name for p, _, _ in preps]
    table: dict[str, dict[str, tuple[float, float]]] = {}
    for row in rows():
        if args.only and args.only not in row.label and row.label != "defaults":
            continue
        table[row.label] = {}
        for prep, terms, windowed in preps:
            index = prep_index(prep)
            target = replace(prep, matrix=windowed, _vector_cache={}) if row.windows else prep

            def ranker(q, prep=target, terms=terms, row=row, index=index):
                if row.keyword is not None:
                    kw = row.keyword(prep, terms, q, index)
                    q = replace(q, keyword={True: kw, False: kw})
                return rank(prep, q, row.cfg)

            table[row.label][prep.name] = mean_scores(per_query_ranked(target, ranker))
        print(
            f"{row.label:58s} "
            + "  ".join(
                f"{n}: {table[row.label][n][0]:.4f}/{table[row.label][n][1]:.4f}" for n in names
            ),
            flush=True,
        )
    if len(names) > 1:
        print("\nleave-one-collection-out (best mean nDCG@10 on the others):")
        for held, best in leave_one_out(table, names).items():
            print(
                f"  without {held}: {best} -> on {held}: {table[best][held]} "
                f"(defaults {table['defaults'][held]})"
            )
    if args.out:
        Path(args.out).write_text(json.dumps(table, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
