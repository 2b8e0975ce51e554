"""The evaluation harness behind ``hybrid-memory eval``.

It runs the protocol of the shared evaluation data on any folder in its format:

- ``corpus.jsonl``: one memory a line, ``{"_id", "text", "tags"?, "timestamp"?,
  "metadata"?}``;
- ``queries.jsonl``: one query a line, ``{"_id", "text", "filter"?, "now"?,
  "metadata"?}`` (``filter`` in Chroma's ``where`` syntax; ``metadata.category``
  gives a per-category breakdown);
- ``qrels.tsv``: a header line, then ``query-id<TAB>corpus-id<TAB>grade``; grade ≥ 1 is
  relevant.

Every memory is stored in a fresh in-memory :class:`~hybrid_memory.HybridMemory`
(its text exactly, its tags, metadata, and timestamp as creation time); every query
is searched with its filter and ``now`` at k = 10 and scored with the metrics below,
averaged over the queries that have at least one relevant judgment::

    from hybrid_memory.eval import evaluate, load_dataset
    result = evaluate(load_dataset("../shared/data/locomo"))
    result["ndcg@10"], result["recall@10"], result["p50_ms"]

or from the shell::

    hybrid-memory eval ../shared/data/locomo --json
    hybrid-memory eval ../shared/data/cranfield --sweep alpha=0.3,0.5,0.7 --peers

Metrics (``rel(d)`` is the judged grade, 0 when unjudged; a document listed twice in
a ranking counts once, at its first position):

- nDCG@k: DCG = Σ_{i=1..k} (2^rel(d_i) − 1) / log2(i + 1), divided by the DCG of the
  ideal ordering of the query's judged grades (Järvelin & Kekäläinen, 2002, with the
  exponential gain of Burges et al., 2005, as in trec_eval's ``ndcg_cut``).
- Recall@k: |relevant ∩ top k| / |relevant|.
- MRR@k: 1 / rank of the first relevant result in the top k, else 0.
"""

from __future__ import annotations

import itertools
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hybrid_memory.errors import InvalidInputError

if TYPE_CHECKING:
    from hybrid_memory.memory import HybridMemory
    from hybrid_memory.peers import EmbeddingLike, Peer

__all__ = [
    "Dataset",
    "Document",
    "Progress",
    "Query",
    "Run",
    "evaluate",
    "format_report",
    "load_dataset",
    "mrr_at_k",
    "ndcg_at_k",
    "parse_setting",
    "parse_sweep",
    "recall_at_k",
    "score_run",
]

CORPUS_FILE = "corpus.jsonl"
QUERIES_FILE = "queries.jsonl"
QRELS_FILE = "qrels.tsv"

# --- metrics ---------------------------------------------------------------------------


def _first_k(ranked_ids: Iterable[str], k: int) -> list[str]:
    """The first ``k`` distinct ids, in order (a repeated id counts once)."""
    if k < 1:
        raise InvalidInputError("k", f"must be at least 1, got {k}")
    seen: dict[str, None] = {}
    for doc_id in ranked_ids:
        if doc_id not in seen:
            seen[doc_id] = None
            if len(seen) == k:
                break
    return list(seen)


def _gain(grade: int) -> float:
    return 2.0 ** max(grade, 0) - 1.0


def ndcg_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k with gain 2^rel − 1 and discount log2(i + 1); 0.0 when nothing is relevant."""
    top = _first_k(ranked_ids, k)
    dcg = sum(
        _gain(qrels_for_query.get(doc_id, 0)) / math.log2(i + 1)
        for i, doc_id in enumerate(top, start=1)
    )
    ideal_grades = sorted(qrels_for_query.values(), reverse=True)[:k]
    ideal = sum(_gain(g) / math.log2(i + 1) for i, g in enumerate(ideal_grades, start=1))
    return dcg / ideal if ideal > 0 else 0.0


def recall_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int) -> float:
    """|relevant ∩ top k| / |relevant| (relevant: grade ≥ 1); 0.0 when nothing is relevant."""
    relevant = {doc_id for doc_id, grade in qrels_for_query.items() if grade >= 1}
    if not relevant:
        return 0.0
    return len(relevant.intersection(_first_k(ranked_ids, k))) / len(relevant)


def mrr_at_k(ranked_ids: Sequence[str], qrels_for_query: Mapping[str, int], k: int = 10) -> float:
    """1 / rank of the first relevant (grade ≥ 1) id in the top k, else 0.0."""
    for rank, doc_id in enumerate(_first_k(ranked_ids, k), start=1):
        if qrels_for_query.get(doc_id, 0) >= 1:
            return 1.0 / rank
    return 0.0


# --- dataset ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Document:
    """One corpus line."""

    id: str
    text: str
    tags: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)
    timestamp: str | None = None


@dataclass(frozen=True)
class Query:
    """One query line."""

    id: str
    text: str
    filter: dict[str, Any] | None = None
    now: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def category(self) -> str | None:
        value = self.metadata.get("category")
        return None if value is None else str(value)


@dataclass(frozen=True)
class Dataset:
    """A corpus, its queries and their judgments (``qrels[query_id][doc_id] = grade``)."""

    name: str
    corpus: list[Document]
    queries: list[Query]
    qrels: dict[str, dict[str, int]]

    def storable(self) -> list[Document]:
        """The corpus lines a memory store can hold: all but blank texts, which
        hybrid-memory refuses. The peers get the same lines, so every system is
        measured on one corpus."""
        return [d for d in self.corpus if d.text.strip()]

    def judged_queries(self) -> list[Query]:
        """The queries that have at least one relevant judgment: the ones scored."""
        return [q for q in self.queries if any(g >= 1 for g in self.qrels.get(q.id, {}).values())]

    def limited(self, n: int | None) -> Dataset:
        """The same corpus with only the first ``n`` judged queries (all when None)."""
        if n is None:
            return self
        if n < 1:
            raise InvalidInputError("limit", f"must be at least 1, got {n}")
        return Dataset(self.name, self.corpus, self.judged_queries()[:n], self.qrels)


def _where(path: Path, line: int | None = None) -> str:
    return f"{path}:{line}" if line is not None else str(path)


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line; errors name the file and line."""
    if not path.is_file():
        raise InvalidInputError(
            str(path),
            f"missing: a dataset folder holds {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_FILE}",
        )
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InvalidInputError(_where(path, number), f"not UTF-8 ({exc})") from None
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(
                    _where(path, number), f"invalid JSON: {exc.msg} at column {exc.colno}"
                ) from None
            if not isinstance(obj, dict):
                raise InvalidInputError(
                    _where(path, number), f"expected a JSON object, got {type(obj).__name__}"
                )
            yield number, obj


def _identifier(obj: Mapping[str, Any], where: str) -> str:
    value = obj.get("_id")
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        raise InvalidInputError(where, f'"_id" must be a non-empty string, got {value!r}')
    return str(value)


def _text(obj: Mapping[str, Any], where: str, *, blank: bool = False) -> str:
    value = obj.get("text")
    if not isinstance(value, str) or (not blank and not value.strip()):
        kind = "a string" if blank else "a non-empty string"
        raise InvalidInputError(where, f'"text" must be {kind}, got {value!r}')
    return value


def _optional_mapping(obj: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidInputError(where, f'"{key}" must be a JSON object, got {value!r}')
    return value


def _optional_time(obj: Mapping[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(where, f'"{key}" must be an ISO 8601 string, got {value!r}')
    try:
        datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidInputError(
            where,
            f'"{key}" must be an ISO 8601 time like "2023-05-08T13:56:00+00:00", got {value!r}',
        ) from None
    return value


def _unique_records(path: Path) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """(file:line, "_id", object) for each JSONL line; a repeated "_id" is an error."""
    lines: dict[str, int] = {}
    for number, obj in _jsonl(path):
        where = _where(path, number)
        record_id = _identifier(obj, where)
        if record_id in lines:
            raise InvalidInputError(
                where, f'duplicate "_id" {record_id!r} (first on line {lines[record_id]})'
            )
        lines[record_id] = number
        yield where, record_id, obj


def _load_corpus(path: Path) -> list[Document]:
    documents: list[Document] = []
    for where, doc_id, obj in _unique_records(path):
        tags = obj.get("tags") or []
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise InvalidInputError(where, f'"tags" must be a list of strings, got {tags!r}')
        documents.append(
            Document(
                id=doc_id,
                # Real collections hold blank documents (Cranfield 471 and 995): kept
                # here, left out of the stores by Dataset.storable().
                text=_text(obj, where, blank=True),
                tags=tuple(tags),
                metadata=_optional_mapping(obj, "metadata", where) or {},
                timestamp=_optional_time(obj, "timestamp", where),
            )
        )
    if not documents:
        raise InvalidInputError(str(path), "the corpus is empty")
    return documents


def _load_queries(path: Path) -> list[Query]:
    queries: list[Query] = []
    for where, query_id, obj in _unique_records(path):
        queries.append(
            Query(
                id=query_id,
                text=_text(obj, where),
                filter=_optional_mapping(obj, "filter", where),
                now=_optional_time(obj, "now", where),
                metadata=_optional_mapping(obj, "metadata", where) or {},
            )
        )
    if not queries:
        raise InvalidInputError(str(path), "there are no queries")
    return queries


def _load_qrels(path: Path) -> dict[str, dict[str, int]]:
    if not path.is_file():
        raise InvalidInputError(
            str(path),
            f"missing: a dataset folder holds {CORPUS_FILE}, {QUERIES_FILE} and {QRELS_FILE}",
        )
    qrels: dict[str, dict[str, int]] = {}
    with path.open(encoding="utf-8", errors="strict") as handle:
        try:
            lines = handle.read().splitlines()
        except UnicodeDecodeError as exc:
            raise InvalidInputError(str(path), f"not UTF-8 ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 3:
            raise InvalidInputError(
                _where(path, number),
                f"expected query-id<TAB>corpus-id<TAB>grade, got {len(fields)} tab-separated "
                f"field(s): {line!r}",
            )
        query_id, doc_id, grade_text = (f.strip() for f in fields)
        try:
            grade = int(grade_text)
        except ValueError:
            if number == 1:  # the header line
                continue
            raise InvalidInputError(
                _where(path, number), f"grade must be an integer, got {grade_text!r}"
            ) from None
        if not query_id or not doc_id:
            raise InvalidInputError(_where(path, number), "empty query id or corpus id")
        judged = qrels.setdefault(query_id, {})
        if doc_id in judged and judged[doc_id] != grade:
            raise InvalidInputError(
                _where(path, number),
                f"conflicting grades for ({query_id!r}, {doc_id!r}): {judged[doc_id]} and {grade}",
            )
        judged[doc_id] = grade
    if not qrels:
        raise InvalidInputError(str(path), "there are no judgments")
    return qrels


def load_dataset(path: str | Path) -> Dataset:
    """Read a dataset folder; a malformed or missing file raises ``InvalidInputError``
    whose field is ``file`` or ``file:line``."""
    folder = Path(path)
    if not folder.is_dir():
        raise InvalidInputError(str(folder), "no such dataset folder")
    corpus = _load_corpus(folder / CORPUS_FILE)
    queries = _load_queries(folder / QUERIES_FILE)
    qrels = _load_qrels(folder / QRELS_FILE)
    known = {q.id for q in queries}
    unknown = sorted(set(qrels) - known)
    if unknown:
        raise InvalidInputError(
            str(folder / QRELS_FILE),
            f"judgments for {len(unknown)} query id(s) not in {QUERIES_FILE}, e.g. {unknown[0]!r}",
        )
    dataset = Dataset(folder.resolve().name, corpus, queries, qrels)
    if not dataset.judged_queries():
        raise InvalidInputError(str(folder / QRELS_FILE), "no query has a relevant judgment")
    return dataset


# --- progress --------------------------------------------------------------------------


class Progress:
    """Counter lines on a stream (stderr): ``label: done/total`` every ``every`` steps."""

    def __init__(self, stream: TextIO | None = sys.stderr, every: int = 100) -> None:
        self.stream = stream
        self.every = max(1, every)

    def message(self, text: str) -> None:
        if self.stream is not None:
            print(text, file=self.stream, flush=True)

    def counter(self, label: str, total: int) -> Callable[[int], None]:
        """A callback taking the number done so far; prints at steps and at the end."""
        start = time.perf_counter()
        state = {"printed": 0}

        def update(done: int) -> None:
            if done - state["printed"] < self.every and done != total:
                return
            state["printed"] = done
            elapsed = time.perf_counter() - start
            self.message(f"{label}: {done}/{total} ({elapsed:.1f} s)")

        return update


QUIET = Progress(stream=None)


# --- runs ------------------------------------------------------------------------------


@dataclass
class Run:
    """The ranked ids a system returned for each query, and each query's latency."""

    name: str
    ranked: dict[str, list[str]] = field(default_factory=dict)
    latencies_ms: list[float] = field(default_factory=list)


def build_memory(
    dataset: Dataset,
    overrides: Mapping[str, Any] | None = None,
    *,
    embedding: Any = None,
    batch_size: int = 256,
    progress: Progress = QUIET,
) -> HybridMemory:
    """A fresh in-memory store holding every corpus line (text, tags, metadata,
    timestamp as creation time)."""
    from hybrid_memory.memory import HybridMemory

    documents = dataset.storable()
    memory = HybridMemory(embedding=embedding, **dict(overrides or {}))
    try:
        tick = progress.counter("ingest", len(documents))
        for start in range(0, len(documents), batch_size):
            batch = documents[start : start + batch_size]
            items: list[dict[str, Any]] = []
            for doc in batch:
                item: dict[str, Any] = {"id": doc.id, "text": doc.text}
                if doc.tags:
                    item["tags"] = list(doc.tags)
                if doc.metadata:
                    item["metadata"] = doc.metadata
                if doc.timestamp is not None:
                    item["created_at"] = doc.timestamp
                items.append(item)
            # Identical texts under different ids are different memories here.
            memory.add_many(items, allow_duplicates=True)
            tick(start + len(batch))
    except BaseException:
        memory.close()
        raise
    return memory


def run_memory(
    memory: HybridMemory,
    dataset: Dataset,
    *,
    k: int = 10,
    progress: Progress = QUIET,
    name: str = "hybrid-memory",
) -> Run:
    """Search every judged query with its filter and ``now``."""
    run = Run(name)
    queries = dataset.judged_queries()
    tick = progress.counter(f"queries ({name})", len(queries))
    for done, query in enumerate(queries, start=1):
        started = time.perf_counter()
        hits = memory.search(query.text, k=k, filter=query.filter, now=query.now)
        run.latencies_ms.append((time.perf_counter() - started) * 1000.0)
        run.ranked[query.id] = [hit.id for hit in hits]
        tick(done)
    return run


class _DocumentCache:
    """Reuses document vectors across peers (the same model, so the same vectors);
    queries are always embedded afresh so peer latencies stay honest."""

    def __init__(self, embedder: EmbeddingLike) -> None:
        self._embedder = embedder
        self._vectors: dict[str, list[float]] = {}
        self.name = embedder.name

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        if missing:
            self._vectors.update(zip(missing, self._embedder.embed_documents(missing), strict=True))
        return [self._vectors[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed_query(text)


def run_peer(
    factory: Callable[[EmbeddingLike], Peer],
    embedding: EmbeddingLike,
    dataset: Dataset,
    *,
    k: int = 10,
    progress: Progress = QUIET,
) -> Run:
    """Run a peer on the dataset: one peer per distinct query filter, built over the
    corpus lines that filter selects (a peer cannot filter both of its legs)."""
    from hybrid_memory.peers import PeerRecord, matches_filter

    records = [PeerRecord(d.id, d.text, d.tags, d.metadata) for d in dataset.storable()]
    queries = dataset.judged_queries()
    groups: dict[str, list[Query]] = {}
    for query in queries:
        groups.setdefault(json.dumps(query.filter or {}, sort_keys=True), []).append(query)
    run = Run("")
    tick: Callable[[int], None] | None = None
    for key, group in groups.items():
        where = json.loads(key) or None
        subset = [r for r in records if matches_filter(where, r.metadata, r.tags)]
        peer = factory(embedding)
        try:
            if tick is None:
                run.name = peer.name
                tick = progress.counter(f"queries ({peer.name})", len(queries))
            label = f" matching {key}" if where else ""
            progress.message(f"{peer.name}: indexing {len(subset)} records{label}")
            peer.add(subset)
            for query in group:
                started = time.perf_counter()
                ranked = peer.search(query.text, k)
                run.latencies_ms.append((time.perf_counter() - started) * 1000.0)
                run.ranked[query.id] = ranked
                tick(len(run.ranked))
        finally:
            peer.close()
    return run


# --- scoring ---------------------------------------------------------------------------


def _metric_names(k: int) -> tuple[str, str, str, str]:
    return f"ndcg@{k}", "recall@5", f"recall@{k}", f"mrr@{k}"


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 4) if values else 0.0


def score_run(run: Run, dataset: Dataset, *, k: int = 10) -> dict[str, Any]:
    """Mean metrics of a run over its queries, p50 latency, and per-category means."""
    ndcg, r5, rk, mrr = _metric_names(k)
    per_query: dict[str, dict[str, float]] = {}
    for query_id, ranked in run.ranked.items():
        judged = dataset.qrels.get(query_id, {})
        per_query[query_id] = {
            ndcg: ndcg_at_k(ranked, judged, k),
            r5: recall_at_k(ranked, judged, min(5, k)),
            rk: recall_at_k(ranked, judged, k),
            mrr: mrr_at_k(ranked, judged, k),
        }

    def means(ids: Iterable[str]) -> dict[str, Any]:
        rows = [per_query[i] for i in ids]
        out: dict[str, Any] = {
            name: _mean([row[name] for row in rows]) for name in (ndcg, r5, rk, mrr)
        }
        out["n_queries"] = len(rows)
        return out

    result = means(per_query)
    result["p50_ms"] = round(statistics.median(run.latencies_ms), 2) if run.latencies_ms else 0.0
    by_category: dict[str, list[str]] = {}
    for query in dataset.queries:
        if query.id in per_query and query.category is not None:
            by_category.setdefault(query.category, []).append(query.id)
    if by_category:
        result["categories"] = {
            name: means(by_category[name]) for name in sorted(by_category, key=_natural)
        }
    return result


def _natural(name: str) -> tuple[int, float, str]:
    try:
        return (0, float(name), name)
    except ValueError:
        return (1, 0.0, name)


# --- settings from the command line ------------------------------------------------------


def _value(text: str) -> Any:
    """JSON when it parses (numbers, true/false/null, lists), else the string itself."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_setting(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` → (key, value), the value parsed as JSON when possible."""
    key, sep, raw = text.partition("=")
    if not sep or not key.strip():
        raise InvalidInputError("--set", f"expected KEY=VALUE, got {text!r}")
    return key.strip(), _value(raw.strip())


def parse_sweep(text: str) -> tuple[str, list[Any]]:
    """``KEY=v1,v2,...`` → (key, values). A value list given as one JSON array
    (``alpha_values=[[0.5,0.7,0.8],[0.6,0.8,0.9]]``) is taken as it is."""
    key, sep, raw = text.partition("=")
    raw = raw.strip()
    if not sep or not key.strip() or not raw:
        raise InvalidInputError("--sweep", f"expected KEY=v1,v2,..., got {text!r}")
    if raw.startswith("["):
        parsed = _value(raw)
        if not isinstance(parsed, list) or not parsed:
            raise InvalidInputError("--sweep", f"{raw!r} is not a non-empty JSON list")
        return key.strip(), parsed
    return key.strip(), [_value(part.strip()) for part in raw.split(",")]


# --- the whole evaluation ----------------------------------------------------------------


def _sweep_points(sweeps: Sequence[tuple[str, list[Any]]], grid: bool) -> list[dict[str, Any]]:
    if not sweeps:
        return []
    if grid:
        keys = [key for key, _ in sweeps]
        return [
            dict(zip(keys, combo, strict=True))
            for combo in itertools.product(*(v for _, v in sweeps))
        ]
    return [{key: value} for key, values in sweeps for value in values]


def _search_view(memory: HybridMemory, point: Mapping[str, Any]) -> HybridMemory | None:
    """The store seen with ``point``'s search settings, or None when ``point`` changes
    something fixed at ingest (tokenizer, embedding model, ...) and needs a new store."""
    try:
        return memory.with_settings(**point)
    except InvalidInputError as exc:
        if exc.field == "with_settings":  # the engine's word for "not a search setting"
            return None
        raise


def evaluate(
    dataset: Dataset,
    *,
    k: int = 10,
    overrides: Mapping[str, Any] | None = None,
    sweeps: Sequence[tuple[str, list[Any]]] = (),
    grid: bool = False,
    peers: bool = False,
    embedding: Any = None,
    progress: Progress = QUIET,
) -> dict[str, Any]:
    """Run the protocol; returns the JSON-ready report.

    Top-level keys are our default-or-``overrides`` run (``ndcg@10``, ``recall@5``,
    ``recall@10``, ``mrr@10``, ``p50_ms``, ``n_queries``, ``categories`` when queries
    carry ``metadata.category``), plus ``sweep`` (one entry per swept point, each with
    its ``settings``) and ``peers`` (name → the same metrics) when asked for. The store
    is built once and reused through ``with_settings`` for every search-time point;
    a point that changes an ingest-time setting builds its own store.
    """
    if peers:
        from hybrid_memory.peers import require_frameworks

        require_frameworks()  # before the long run, not after it
    base = dict(overrides or {})
    stored = len(dataset.storable())
    report: dict[str, Any] = {
        "dataset": dataset.name,
        "n_memories": stored,
        "k": k,
        "settings": base,
    }
    blank = len(dataset.corpus) - stored
    if blank:
        report["blank_texts_skipped"] = blank
    progress.message(
        f"{dataset.name}: {stored} memories"
        + (f" ({blank} blank corpus lines left out)" if blank else "")
        + f", {len(dataset.judged_queries())} judged queries"
    )
    memory = build_memory(dataset, base, embedding=embedding, progress=progress)
    try:
        report.update(score_run(run_memory(memory, dataset, k=k, progress=progress), dataset, k=k))
        points = _sweep_points(sweeps, grid)
        if points:
            rows: list[dict[str, Any]] = []
            for point in points:
                progress.message(f"sweep: {json.dumps(point)}")
                view = _search_view(memory, point)
                if view is None:  # an ingest-time setting: this point needs its own store
                    same_model = not {"embedding_model", "embedding_batch_size"} & set(point)
                    rebuilt = build_memory(
                        dataset,
                        base | point,
                        # the loaded model serves the new store too, unless it is the point
                        embedding=memory.embedder if same_model else embedding,
                        progress=progress,
                    )
                    try:
                        run = run_memory(rebuilt, dataset, k=k, progress=progress)
                    finally:
                        rebuilt.close()
                else:
                    run = run_memory(view, dataset, k=k, progress=progress)
                rows.append({"settings": point, **score_run(run, dataset, k=k)})
            report["sweep"] = rows
        if peers:
            from hybrid_memory.peers import PEERS

            cached = _DocumentCache(memory.embedder)
            report["peers"] = {}
            for name, factory in PEERS.items():
                progress.message(f"peer: {name}")
                run = run_peer(factory, cached, dataset, k=k, progress=progress)
                report["peers"][name] = score_run(run, dataset, k=k)
    finally:
        memory.close()
    return report


# --- text report -----------------------------------------------------------------------


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows, strict=True)]
    lines = [
        "  ".join(
            str(cell).ljust(w) if i == 0 else str(cell).rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in [header, *rows]
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _figures(result: Mapping[str, Any], k: int) -> list[str]:
    return [f"{result[name]:.3f}" for name in _metric_names(k)] + [f"{result['p50_ms']:.1f}"]


def format_report(report: Mapping[str, Any]) -> str:
    """The human-readable report: a table of systems, a per-category table, sweeps."""
    k = int(report["k"])
    names = _metric_names(k)
    header = ["system", *[n.replace("recall", "R") for n in names], "p50 ms"]
    settings = ", ".join(f"{key}={value!r}" for key, value in report["settings"].items())
    out = [
        f"dataset {report['dataset']}: {report['n_memories']} memories"
        + (
            f" ({report['blank_texts_skipped']} blank lines left out)"
            if report.get("blank_texts_skipped")
            else ""
        )
        + ", "
        f"{report['n_queries']} queries, k={k}, settings: {settings or 'defaults'}",
        "",
    ]
    systems: list[tuple[str, Mapping[str, Any]]] = [("hybrid-memory", report)]
    systems += list(report.get("peers", {}).items())
    out.append(_table(header, [[name, *_figures(res, k)] for name, res in systems]))
    if "categories" in report:
        categories = list(report["categories"])
        cat_header = ["category", "n", *[f"{name} nDCG/R@{k}" for name, _ in systems]]
        cat_rows = []
        for cat in categories:
            row = [cat, str(report["categories"][cat]["n_queries"])]
            for _, res in systems:
                figures = res.get("categories", {}).get(cat)
                row.append(f"{figures[names[0]]:.3f}/{figures[names[2]]:.3f}" if figures else "-")
            cat_rows.append(row)
        out += ["", _table(cat_header, cat_rows)]
    if report.get("sweep"):
        keys = list(dict.fromkeys(key for row in report["sweep"] for key in row["settings"]))
        sweep_header = [*keys, *header[1:]]
        sweep_rows = [
            [json.dumps(row["settings"][key]) if key in row["settings"] else "" for key in keys]
            + _figures(row, k)
            for row in report["sweep"]
        ]
        base = ["(base)"] + [""] * (len(keys) - 1) + _figures(report, k)
        out += [
            "",
            "sweep (rows on the base store reuse its cached query vectors: their p50 "
            "compares with each other, not with the base):",
            _table(sweep_header, [base, *sweep_rows]),
        ]
    return "\n".join(out)


if __name__ == "__main__":
    from hybrid_memory.cli import main

    raise SystemExit(main(["eval", *sys.argv[1:]]))
