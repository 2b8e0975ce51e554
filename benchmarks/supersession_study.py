"""Could supersession links be found without an LLM, and what do they do to LongMemEval?
(issue 43; docs/quality-study.md, "Supersession").

LongMemEval's knowledge-update questions have, nearly all, two judged turns: the old
value and the new one, in two sessions of one question. This study

1. reads the cosine of each such pair (the default model's vectors, from the disk cache
   of ``benchmarks/vector_cache.py``), the signal an automatic detector would use;
2. runs a conservative detector (a user turn links to the most similar earlier user
   turn, cosine >= threshold, sharing a capitalised word or number, a later session)
   and counts the links it proposes, how many are such an old/new pair (precision) and
   how many of the pairs it finds (recall);
3. writes copies of the collection with links in the memories' metadata
   (``supersedes``): ``oracle`` (the newer judged turn of each knowledge-update question
   supersedes the older) and ``detector-<t>``, for ``cached_eval`` to score end to end.

    python -m benchmarks.supersession_study ../shared/data/longmemeval --out /tmp/linked
    python -m benchmarks.cached_eval /tmp/linked/oracle --k 10 --by metadata.type
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.vector_cache import CachedEmbedding
from hybrid_memory.testing import default_embedder

_WORD = re.compile(r"\b(?:[A-Z][a-zA-Z]+|\d+(?:[.,:]\d+)?)\b")
# Sentence-initial and conversational capitals that name no subject.
_COMMON = {"I", "I'm", "I've", "Hi", "Hey", "Thanks", "Thank", "Can", "What", "How", "Do", "By"}


def _load(folder: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, set[str]]]:
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").open()]
    queries = [json.loads(line) for line in (folder / "queries.jsonl").open()]
    judged: dict[str, set[str]] = defaultdict(set)
    for line in (folder / "qrels.tsv").read_text().splitlines()[1:]:
        query, memory, score = line.split("\t")
        if float(score) > 0:
            judged[query].add(memory)
    return corpus, queries, judged


def _names(text: str) -> set[str]:
    return {w for w in _WORD.findall(text) if w not in _COMMON}


def oracle_pairs(
    corpus: list[dict[str, Any]], queries: list[dict[str, Any]], judged: dict[str, set[str]]
) -> list[tuple[str, str]]:
    """(older, newer) judged turns of each knowledge-update question, in two sessions."""
    by_id = {d["_id"]: d for d in corpus}
    pairs: list[tuple[str, str]] = []
    for query in queries:
        if query.get("metadata", {}).get("type") != "knowledge-update":
            continue
        turns = sorted(judged[query["_id"]], key=lambda i: (by_id[i]["timestamp"], i))
        for older, newer in itertools.pairwise(turns):
            if by_id[older]["metadata"]["session"] != by_id[newer]["metadata"]["session"]:
                pairs.append((older, newer))
    return pairs


def detect(
    corpus: list[dict[str, Any]], vectors: np.ndarray, threshold: float
) -> list[tuple[str, str]]:
    """(older, newer) links: each user turn to its most similar earlier user turn of
    another session, at cosine >= ``threshold``, sharing a capitalised word or number."""
    users = [n for n, d in enumerate(corpus) if "user" in (d.get("tags") or [])]
    matrix = vectors[users]
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    times = [corpus[n]["timestamp"] for n in users]
    sessions = [corpus[n]["metadata"]["session"] for n in users]
    names = [_names(corpus[n]["text"]) for n in users]
    links: list[tuple[str, str]] = []
    for row in range(len(users)):
        cosines = matrix @ matrix[row]
        for other in np.argsort(-cosines):
            if cosines[other] < threshold:
                break
            if times[other] >= times[row] or sessions[other] == sessions[row]:
                continue
            if names[row] & names[other]:
                links.append((corpus[users[other]]["_id"], corpus[users[row]]["_id"]))
            break  # only the most similar earlier turn is a candidate
    return links


def write_linked(
    folder: Path, target: Path, corpus: list[dict[str, Any]], links: list[tuple[str, str]]
) -> None:
    """A copy of the collection whose newer memories name the older in ``supersedes``."""
    target.mkdir(parents=True, exist_ok=True)
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copy(folder / name, target / name)
    supersedes = {newer: older for older, newer in links}
    with (target / "corpus.jsonl").open("w") as out:
        for doc in corpus:
            if doc["_id"] in supersedes:
                doc = {
                    **doc,
                    "metadata": {**doc.get("metadata", {}), "supersedes": supersedes[doc["_id"]]},
                }
            out.write(json.dumps(doc) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--out", type=Path, default=None, help="write linked copies here")
    parser.add_argument("--thresholds", default="0.7,0.8,0.9")
    args = parser.parse_args()
    corpus, queries, judged = _load(args.dataset)
    pairs = oracle_pairs(corpus, queries, judged)
    index = {d["_id"]: n for n, d in enumerate(corpus)}
    vectors = CachedEmbedding(default_embedder()).matrix([d["text"] for d in corpus])
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    cos = np.array([float(unit[index[a]] @ unit[index[b]]) for a, b in pairs])
    report: dict[str, Any] = {
        "knowledge_update_pairs": len(pairs),
        "pair_cosine": {
            "min": float(cos.min()),
            "median": float(np.median(cos)),
            "max": float(cos.max()),
            "share_at_least": {
                t: float((cos >= float(t)).mean()) for t in ("0.5", "0.6", "0.7", "0.8", "0.9")
            },
        },
        "detector": {},
    }
    wanted = set(pairs)
    for text in args.thresholds.split(","):
        threshold = float(text)
        links = detect(corpus, vectors, threshold)
        right = sum(1 for link in links if link in wanted)
        report["detector"][text] = {
            "links": len(links),
            "knowledge_update_pairs_found": right,
            "precision": right / len(links) if links else None,
            "recall": right / len(pairs) if pairs else None,
        }
        if args.out is not None:
            write_linked(args.dataset, args.out / f"detector-{text}", corpus, links)
    if args.out is not None:
        write_linked(args.dataset, args.out / "oracle", corpus, pairs)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
