"""A copy of a collection keeping the memories of one speaker's role, and every judged one.

Used in docs/quality-study.md ("Issue 43, round four") to ask whether the keyword score
lift gains on LongMemEval because its long assistant turns crowd the vector leg: the
copy without the assistant's unjudged turns has the memory lengths of an ordinary store.

    python -m benchmarks.role_subset ../shared/data/longmemeval /tmp/user-turns/longmemeval \\
        --role user
"""

from __future__ import annotations

import argparse
import json
import shutil
from collections.abc import Sequence
from pathlib import Path


def judged_ids(qrels: Path) -> set[str]:
    """The memory ids any query judges (``qrels.tsv``: query-id, corpus-id, score)."""
    ids = set()
    for line in qrels.read_text().splitlines()[1:]:
        parts = line.split("\t")
        if len(parts) >= 3 and float(parts[2]) > 0:
            ids.add(parts[1])
    return ids


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("target", type=Path)
    parser.add_argument("--role", required=True, help="the metadata.role value to keep")
    args = parser.parse_args(argv)
    judged = judged_ids(args.source / "qrels.tsv")
    args.target.mkdir(parents=True, exist_ok=True)
    kept = total = 0
    with (args.target / "corpus.jsonl").open("w") as out:
        for line in (args.source / "corpus.jsonl").read_text().splitlines():
            total += 1
            doc = json.loads(line)
            if doc.get("metadata", {}).get("role") == args.role or doc["_id"] in judged:
                out.write(line + "\n")
                kept += 1
    for name in ("queries.jsonl", "qrels.tsv"):
        shutil.copyfile(args.source / name, args.target / name)
    print(f"kept {kept} of {total} memories in {args.target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
