"""Convert more test collections into the shared evaluation format, outside the repository.

The shared format (``../shared/data/README.md``): ``corpus.jsonl``, ``queries.jsonl`` and
``qrels.tsv`` in one folder. Converted collections go to
``~/.cache/hybrid-memory/collections/<name>/`` (``HYBRID_MEMORY_COLLECTIONS`` moves it),
never into the repository; ``hybrid-memory eval`` and ``benchmarks/fusion_study.py`` read
them like the shared ones, and the tests skip them with a reason when they are absent.

Sources:

- ``smart DIR NAME``: a classic SMART-format collection (CISI, MED/Medline, CACM, CRAN,
  ADI, TIME, NPL...) as its ``*.ALL`` (documents, ``.I``/``.T``/``.W``... fields),
  ``*.QRY`` (queries) and ``*.REL`` (``query doc [grade ...]`` lines) files.
- ``beir DIR NAME``: a BEIR folder (``corpus.jsonl`` with ``title``/``text``,
  ``queries.jsonl``, ``qrels/test.tsv``), e.g. SciFact or NFCorpus.
- ``locomo-untagged``: the shared LoCoMo collection without its speaker tags, so the
  same conversations measure the untagged conversational case (the tag leg idle).

Only what this machine can read offline can be converted: run-time downloads fail here,
so the files have to be present locally: no package on PyPI, npm or Debian was found to
ship a test collection's documents and judgments (``docs/collections.md`` lists what was
looked at).

    python benchmarks/collections.py smart ~/src/cisi cisi
    python benchmarks/collections.py beir ~/src/scifact scifact
    python benchmarks/collections.py locomo-untagged
    python benchmarks/collections.py list
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def cache_root() -> Path:
    """Where converted collections live."""
    configured = os.environ.get("HYBRID_MEMORY_COLLECTIONS")
    return Path(configured) if configured else Path.home() / ".cache/hybrid-memory/collections"


def shared_root() -> Path:
    """The shared evaluation data (``HYBRID_MEMORY_SHARED_DATA`` overrides)."""
    configured = os.environ.get("HYBRID_MEMORY_SHARED_DATA")
    if configured:
        return Path(configured)
    for candidate in (SHARED, Path("/work/shared/data")):
        if candidate.is_dir():
            return candidate
    return SHARED


def available() -> dict[str, Path]:
    """Every collection folder found: the shared ones, then the converted ones."""
    found: dict[str, Path] = {}
    for root in (shared_root(), cache_root()):
        if root.is_dir():
            for folder in sorted(root.iterdir()):
                if (folder / "corpus.jsonl").is_file() and (folder / "qrels.tsv").is_file():
                    found.setdefault(folder.name, folder)
    return found


def _write(
    name: str,
    corpus: list[dict[str, Any]],
    queries: list[dict[str, Any]],
    qrels: list[tuple[str, str, int]],
) -> Path:
    if not corpus or not queries or not qrels:
        raise SystemExit(f"{name}: nothing to write (corpus, queries or qrels empty)")
    folder = cache_root() / name
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "corpus.jsonl").open("w", encoding="utf-8") as out:
        for doc in corpus:
            out.write(json.dumps(doc, ensure_ascii=False) + "\n")
    with (folder / "queries.jsonl").open("w", encoding="utf-8") as out:
        for query in queries:
            out.write(json.dumps(query, ensure_ascii=False) + "\n")
    with (folder / "qrels.tsv").open("w", encoding="utf-8") as out:
        out.write("query-id\tcorpus-id\tscore\n")
        for query_id, doc_id, grade in qrels:
            out.write(f"{query_id}\t{doc_id}\t{grade}\n")
    print(
        f"{name}: {len(corpus)} documents, {len(queries)} queries, {len(qrels)} judgments "
        f"-> {folder}"
    )
    return folder


# --- SMART format ---------------------------------------------------------------------------

_FIELD = re.compile(r"^\.([A-Z])(?:\s+(\S+))?\s*$")


def _smart_records(path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """(id, {field letter: text}) for each ``.I`` record of a SMART file."""
    record_id: str | None = None
    fields: dict[str, list[str]] = {}
    current: str | None = None
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        match = _FIELD.match(line)
        if match and match.group(1) == "I":
            if record_id is not None:
                yield record_id, {k: " ".join(v).strip() for k, v in fields.items()}
            record_id, fields, current = match.group(2) or "", {}, None
        elif match:
            current = match.group(1)
            fields.setdefault(current, [])
        elif current is not None:
            fields[current].append(line.strip())
    if record_id is not None:
        yield record_id, {k: " ".join(v).strip() for k, v in fields.items()}


def _one(folder: Path, suffixes: Sequence[str]) -> Path:
    for path in sorted(folder.iterdir()):
        if any(path.name.upper().endswith(s) for s in suffixes):
            return path
    raise SystemExit(f"{folder}: no file ending in {' or '.join(suffixes)}")


def convert_smart(folder: Path, name: str) -> Path:
    docs = _one(folder, [".ALL", ".ALL.1400", ".ALL.TXT"])
    queries_file = _one(folder, [".QRY", ".QRY.TXT"])
    rels = _one(folder, [".REL", "QREL", ".REL.TXT"])
    corpus = []
    for doc_id, fields in _smart_records(docs):
        title, body = fields.get("T", ""), fields.get("W", "")
        text = f"{title} . {body}" if title and body else title or body
        corpus.append({"_id": doc_id, "text": text})
    # SMART query files number queries in order; .REL files use that order number.
    queries = []
    for number, (_, fields) in enumerate(_smart_records(queries_file), start=1):
        text = fields.get("W") or fields.get("T") or ""
        if text:
            queries.append({"_id": str(number), "text": text})
    known_docs = {d["_id"] for d in corpus}
    known_queries = {q["_id"] for q in queries}
    qrels: dict[tuple[str, str], int] = {}
    for line in rels.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        query_id, doc_id = str(int(parts[0])), str(int(parts[1]))
        if query_id in known_queries and doc_id in known_docs:
            qrels[(query_id, doc_id)] = 1
    return _write(name, corpus, queries, [(q, d, g) for (q, d), g in qrels.items()])


# --- BEIR format ----------------------------------------------------------------------------


def convert_beir(folder: Path, name: str, split: str = "test") -> Path:
    corpus = []
    for line in (folder / "corpus.jsonl").open(encoding="utf-8"):
        obj = json.loads(line)
        title, body = obj.get("title") or "", obj.get("text") or ""
        corpus.append({"_id": str(obj["_id"]), "text": f"{title}. {body}" if title else body})
    qrels = []
    judged: set[str] = set()
    with (folder / "qrels" / f"{split}.tsv").open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            parts = line.rstrip("\n").split("\t")
            if number == 0 and not parts[-1].lstrip("-").isdigit():
                continue
            qrels.append((parts[0], parts[1], int(parts[2])))
            judged.add(parts[0])
    queries = []
    for line in (folder / "queries.jsonl").open(encoding="utf-8"):
        obj = json.loads(line)
        if str(obj["_id"]) in judged:
            queries.append({"_id": str(obj["_id"]), "text": obj["text"]})
    return _write(name, corpus, queries, qrels)


# --- derived from the shared data ----------------------------------------------------------------


def convert_locomo_untagged(name: str = "locomo-untagged") -> Path:
    source = shared_root() / "locomo"
    if not source.is_dir():
        raise SystemExit(f"{source}: the shared LoCoMo collection is not here")
    corpus = []
    for line in (source / "corpus.jsonl").open(encoding="utf-8"):
        obj = json.loads(line)
        obj.pop("tags", None)
        corpus.append(obj)
    queries = [json.loads(line) for line in (source / "queries.jsonl").open(encoding="utf-8")]
    qrels = []
    for number, line in enumerate((source / "qrels.tsv").open(encoding="utf-8")):
        if number:
            query_id, doc_id, grade = line.rstrip("\n").split("\t")
            qrels.append((query_id, doc_id, int(grade)))
    return _write(name, corpus, queries, qrels)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    smart = commands.add_parser("smart", help="convert a SMART-format collection folder")
    smart.add_argument("folder", type=Path)
    smart.add_argument("name")
    beir = commands.add_parser("beir", help="convert a BEIR folder")
    beir.add_argument("folder", type=Path)
    beir.add_argument("name")
    beir.add_argument("--split", default="test")
    commands.add_parser("locomo-untagged", help="the shared LoCoMo without speaker tags")
    commands.add_parser("list", help="the collections found")
    args = parser.parse_args(argv)
    if args.command == "smart":
        convert_smart(args.folder, args.name)
    elif args.command == "beir":
        convert_beir(args.folder, args.name, args.split)
    elif args.command == "locomo-untagged":
        convert_locomo_untagged()
    else:
        for name, path in available().items():
            print(f"{name}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
