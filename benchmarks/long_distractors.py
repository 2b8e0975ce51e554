"""A copy of a collection with long, unjudged distractor memories added to each session.

Used in docs/quality-study.md ("Issue 43, round five") to ask whether BM25's length
normalisation b tracks the mechanism behind LongMemEval's weak question types (long
assistant turns that repeat the question's words outrank the user's short turns): the
copy of LoCoMo it makes has such long turns, and the same queries and judgments.

Each session (``metadata.session`` within ``metadata.conversation``) gets ``--per-session``
distractors, each the concatenation of ``--turns`` turns drawn (seeded, reproducible) from
the *other* sessions of the same conversation, so they carry the conversation's names and
topics, as an assistant's long answer repeats the user's words. A distractor keeps the
session's conversation, session and timestamp, has no tags (``--tagged``: its turns'
speakers) and no query judges it.

    python -m benchmarks.long_distractors ../shared/data/locomo /tmp/locomo-long/locomo-long
    python -m benchmarks.long_distractors ../shared/data/locomo \\
        /tmp/locomo-long/locomo-runs --contiguous
    python -m benchmarks.long_distractors ../shared/data/locomo \\
        /tmp/locomo-long/locomo-runs-tagged --contiguous --tagged
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def with_distractors(
    docs: list[dict[str, Any]],
    per_session: int,
    turns: int,
    seed: int,
    contiguous: bool = False,
    tagged: bool = False,
) -> list[dict[str, Any]]:
    """``docs`` followed by the distractors, each session's after its own turns.
    ``contiguous``: each distractor is a run of ``turns`` consecutive turns of one other
    session (one topic, its words repeated), not turns drawn from all of them; ``tagged``:
    a distractor carries its turns' tags (their speakers), as a real turn does."""
    rng = random.Random(seed)
    sessions: dict[tuple[str, Any], list[dict[str, Any]]] = defaultdict(list)
    for doc in docs:
        meta = doc.get("metadata", {})
        sessions[(meta.get("conversation"), meta.get("session"))].append(doc)
    out = list(docs)
    for (conversation, session), own in sessions.items():
        others = [
            d for (c, s), ds in sessions.items() if c == conversation and s != session for d in ds
        ]
        if len(others) < turns:
            continue
        other_sessions = [
            ds for (c, s), ds in sessions.items() if c == conversation and s != session
        ]
        for n in range(per_session):
            if contiguous:
                source = rng.choice([ds for ds in other_sessions if len(ds) >= turns])
                start = rng.randrange(len(source) - turns + 1)
                picked = source[start : start + turns]
            else:
                picked = rng.sample(others, turns)
            distractor: dict[str, Any] = {
                "_id": f"{conversation}:S{session}:distractor{n}",
                "text": " ".join(d["text"] for d in picked),
                "metadata": {
                    "conversation": conversation,
                    "session": session,
                    "dia_id": f"S{session}:X{n}",
                },
            }
            if tagged:
                distractor["tags"] = sorted({t for d in picked for t in d.get("tags", [])})
            if "timestamp" in own[0]:
                distractor["timestamp"] = own[0]["timestamp"]
            out.append(distractor)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--per-session", type=int, default=3)
    parser.add_argument("--turns", type=int, default=8, help="turns per distractor")
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument(
        "--contiguous",
        action="store_true",
        help="each distractor a run of consecutive turns of one other session",
    )
    parser.add_argument("--tagged", action="store_true", help="distractors keep their turns' tags")
    args = parser.parse_args(argv)
    docs = [json.loads(line) for line in (args.source / "corpus.jsonl").read_text().splitlines()]
    out = with_distractors(
        docs, args.per_session, args.turns, args.seed, args.contiguous, args.tagged
    )
    args.target.mkdir(parents=True, exist_ok=True)
    with (args.target / "corpus.jsonl").open("w") as f:
        for doc in out:
            f.write(json.dumps(doc) + "\n")
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copyfile(args.source / name, args.target / name)
    print(f"{len(docs)} memories and {len(out) - len(docs)} distractors in {args.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
