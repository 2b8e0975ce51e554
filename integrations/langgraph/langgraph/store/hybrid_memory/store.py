"""``HybridMemoryStore``: a LangGraph ``BaseStore`` whose items are hybrid-memory memories.

The layout of an item as a memory is in :mod:`._layout`, the filters in
:mod:`._filters`, the checks of what LangGraph hands over in :mod:`._checks`, and the
asyncio form in :mod:`._async_store`.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from os import PathLike
from typing import Any, TypedDict, cast

from hybrid_memory import (
    HybridMemory,
    InvalidInputError,
    Memory,
    MissingDependencyError,
)

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
    )
    from langgraph.store.base.embed import ensure_embeddings
except ImportError as exc:  # pragma: no cover - langgraph is a declared dependency
    raise MissingDependencyError("langgraph", "langgraph-store-hybrid-memory") from exc

from langgraph.store.hybrid_memory._checks import (
    check_op,
    index_config,
    index_fields,
    sweep_minutes,
    ttl_config,
    tuple_namespace,
)
from langgraph.store.hybrid_memory._filters import engine_scalar, passes, translate_filter
from langgraph.store.hybrid_memory._layout import (
    DEPTH,
    EXPIRES,
    HAS_TTL,
    INDEXED,
    ITEM,
    KEY,
    NAMESPACE,
    TTL_MINUTES,
    UPDATED,
    VALUE,
    VALUE_FIELD,
    alive,
    all_of,
    current_time,
    item_id,
    label_from_end_key,
    label_key,
    match_filter,
    prefix_filter,
    to_item,
)

__all__ = ["HybridIndexConfig", "HybridMemoryStore"]


class HybridIndexConfig(TypedDict, total=False):
    """How items are made searchable by text, LangGraph's ``IndexConfig``: ``fields``
    are LangGraph JSON paths (``"text"``, ``"meta.title"``, ``"notes[*].body"``; ``"$"``
    is the whole value, the default; ``text_fields`` is accepted as the SQLite store's
    name for them). ``embed`` is the embedding (a LangChain ``Embeddings``, a function of
    a list of texts, or a ``"provider:model"`` string as in LangGraph), default the
    :class:`~hybrid_memory.HybridMemory`'s own; ``dims`` its dimension, checked to be
    a positive integer and otherwise informative (Chroma learns it from the vectors);
    ``distance_type`` only ``"cosine"``, the one the vector leg uses."""

    fields: list[str] | None
    text_fields: list[str] | None
    embed: Any
    dims: int
    distance_type: str


class HybridMemoryStore(BaseStore):
    """A LangGraph store backed by :class:`hybrid_memory.HybridMemory`: ``get``,
    ``put``, ``delete``, ``search`` (hybrid vector + BM25 + tag search with a
    ``query``, a listing without one), ``list_namespaces``, their async forms, and TTL.

    Example (runs as written; the first put loads the embedding model)::

        from langgraph.store.hybrid_memory import HybridMemoryStore

        store = HybridMemoryStore(path="./memory")
        store.put(("users", "alice"), "theme", {"text": "Alice prefers dark mode"})
        store.search(("users", "alice"), query="what theme does alice like?")
        graph = builder.compile(store=store)    # nodes take `store: BaseStore`

    Args:
        memory: a ready :class:`HybridMemory` (not closed by :meth:`close`). Exclusive
            with ``path`` and ``memory_options``.
        path: a directory for an embedded, persistent store (neither: in memory).
        index: LangGraph's index configuration (:class:`HybridIndexConfig`):
            ``{"fields": [...]}``, what part of a value is searchable by text (default
            the whole value), and optionally ``embed``/``dims`` (the embedding, when
            not the memory's default). Kept as :attr:`index_config`.
        ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes, ``refresh_on_read``,
            ``sweep_interval_minutes`` for :meth:`start_ttl_sweeper`).
        **memory_options: passed to ``HybridMemory(...)`` (``url``, ``collection``,
            ``embedding``, settings fields...).

    Reads never return an expired item (as with ``omit_expired``); expired items are
    deleted by :meth:`sweep_ttl` or the sweeper thread.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        memory: HybridMemory | None = None,
        *,
        path: str | PathLike[str] | None = None,
        index: HybridIndexConfig | None = None,
        ttl: TTLConfig | None = None,
        **memory_options: Any,
    ) -> None:
        if memory is not None and (path is not None or memory_options):
            raise InvalidInputError(
                "memory", "pass either memory, or path/HybridMemory options, not both"
            )
        self.index_config: IndexConfig | None = index_config(index)
        self._fields = index_fields(self.index_config)
        self.ttl_config = ttl_config(ttl)
        embed = (self.index_config or {}).get("embed")
        if embed is not None:
            if memory is not None or "embedding" in memory_options:
                raise InvalidInputError(
                    "index.embed",
                    "the store embeds with the HybridMemory's embedding: pass embed, or "
                    "memory=/embedding=, not both",
                )
            memory_options["embedding"] = ensure_embeddings(embed)
        #: the index's embedding as LangChain ``Embeddings`` (None without ``index.embed``)
        self.embeddings = memory_options.get("embedding") if embed is not None else None
        self._owns_memory = memory is None
        self._warm = False
        self.memory = memory if memory is not None else HybridMemory(path, **memory_options)
        self._lock = threading.RLock()
        self._sweeper: threading.Thread | None = None
        self._sweeper_stop = threading.Event()

    # --- BaseStore ---------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations; reads see the store as it was before the batch's writes,
        and of several puts of one key the last wins (as in LangGraph's own stores).
        Every operation is checked first: a bad one raises and nothing is written."""
        op_list = [tuple_namespace(op) for op in ops]
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for position, op in enumerate(op_list):
            check_op(op, position)
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
        prepared = [self._prepare_put(op) for op in puts.values()]
        results: list[Result] = [None] * len(op_list)
        with self._lock:
            now = current_time()
            refresh: dict[str, Memory] = {}
            gets = [(i, op) for i, op in enumerate(op_list) if isinstance(op, GetOp)]
            if gets:
                self._get(gets, results, refresh, now)
            for i, op in enumerate(op_list):
                if isinstance(op, SearchOp):
                    results[i] = self._search(op, refresh, now)
                elif isinstance(op, ListNamespacesOp):
                    results[i] = self._list_namespaces(op, now)
            self._refresh_ttl(refresh, now)
            if prepared:
                self._warm_up()
                self._write(prepared, current_time())
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread: the embedding and Chroma calls never block
        the event loop."""
        return await asyncio.to_thread(self.batch, list(ops))

    # --- reads -------------------------------------------------------------------------

    def _get(
        self,
        gets: list[tuple[int, GetOp]],
        results: list[Result],
        refresh: dict[str, Memory],
        now: float,
    ) -> None:
        wanted = {item_id(op.namespace, op.key) for _, op in gets}
        found = {
            str(m.metadata[ITEM]): m
            for m in self.memory.list_memories(all_of({ITEM: {"$in": sorted(wanted)}}, alive(now)))
        }
        for i, op in gets:
            memory = found.get(item_id(op.namespace, op.key))
            if memory is None:
                continue
            results[i] = to_item(memory)
            if op.refresh_ttl and memory.metadata.get(HAS_TTL):
                refresh[memory.id] = memory

    def _search(self, op: SearchOp, refresh: dict[str, Memory], now: float) -> list[SearchItem]:
        pushed, residual = translate_filter(op.filter)
        scope = all_of(prefix_filter(op.namespace_prefix), alive(now), *pushed)
        found: list[tuple[Memory, float | None]]
        if not op.query:
            if residual:
                listed = [m for m in self.memory.list_memories(scope) if _passes(m, residual)]
                page = listed[op.offset : op.offset + op.limit]
            else:
                page = self.memory.list_memories(scope, limit=op.limit, offset=op.offset)
            found = [(m, None) for m in page]
        else:
            found = self._query(op, scope, residual)
        if op.refresh_ttl:
            refresh.update((m.id, m) for m, _ in found if m.metadata.get(HAS_TTL))
        return [cast(SearchItem, to_item(m, search=True, score=score)) for m, score in found]

    def _query(
        self, op: SearchOp, scope: dict[str, Any], residual: dict[str, Any]
    ) -> list[tuple[Memory, float | None]]:
        """Hybrid search over the indexed items in scope, best first, followed (as
        LangGraph's InMemoryStore does) by the items in scope stored with
        ``index=False``, unscored, oldest first; ``offset``/``limit`` page through
        that one sequence."""
        indexed = all_of(scope, {INDEXED: True})
        unindexed_memories: list[Memory] | None = None
        if residual:
            # A condition the engine cannot test (a nested value, say): the items
            # passing the whole filter are found first, and the search is restricted
            # to them, so no result is lost to the search's cut.
            passing = [m for m in self.memory.list_memories(scope) if _passes(m, residual)]
            indexed_ids = [m.id for m in passing if m.metadata.get(INDEXED)]
            indexed = all_of(scope, {ITEM: {"$in": indexed_ids or [""]}})
            unindexed_memories = [m for m in passing if not m.metadata.get(INDEXED)]
            total = len(indexed_ids)
        else:
            total = self.memory.count(indexed)
        wanted = min(op.offset + op.limit, total)
        found: list[tuple[Memory, float | None]] = []
        if wanted > op.offset:
            # Every item matching stays a result of its own, as in LangGraph's stores:
            # near-duplicates are not collapsed into one.
            memory = self.memory.with_settings(collapse_similar=False)
            if wanted > memory.settings.max_k:
                memory = memory.with_settings(max_k=wanted)
            hits = memory.search(cast(str, op.query), k=wanted, filter=indexed)
            scores = langgraph_scores(hits)
            found = [(hit.memory, score) for hit, score in zip(hits, scores, strict=True)]
            found = found[op.offset :]
        missing = op.limit - len(found)
        if missing <= 0:
            return found
        skip = max(0, op.offset - total)
        if unindexed_memories is None:
            unindexed = all_of(scope, {INDEXED: False})
            rest = self.memory.list_memories(unindexed, limit=missing, offset=skip)
        else:
            rest = unindexed_memories[skip : skip + missing]
        return found + [(m, None) for m in rest]

    def _list_namespaces(self, op: ListNamespacesOp, now: float) -> list[tuple[str, ...]]:
        clauses: list[dict[str, Any]] = [alive(now), {DEPTH: {"$gte": 1}}]
        for condition in op.match_conditions or ():
            clauses.append(match_filter(condition))
        namespaces = {
            tuple(json.loads(str(m.metadata[NAMESPACE])))
            for m in self.memory.list_memories(all_of(*clauses))
        }
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # --- TTL ---------------------------------------------------------------------------

    def _refresh_ttl(self, refresh: Mapping[str, Memory], now: float) -> None:
        """Push back the expiry of the items just read that have a TTL, in one write
        (their ``updated_at`` stays: reading is not an update)."""
        updates: list[dict[str, Any]] = []
        for memory_id, memory in refresh.items():
            metadata = dict(memory.metadata)
            metadata[EXPIRES] = now + float(metadata[TTL_MINUTES]) * 60.0
            updates.append({"id": memory_id, "metadata": metadata})
        if updates:
            self.memory.update_many(updates)

    def sweep_ttl(self) -> int:
        """Delete the expired items now; returns how many."""
        with self._lock:
            expired = {"$and": [{HAS_TTL: True}, {EXPIRES: {"$lte": current_time()}}]}
            return self.memory.delete(filter=expired)

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Run :meth:`sweep_ttl` every ``sweep_interval_minutes`` (default: the TTL
        config's, else 5) in a daemon thread, until :meth:`stop_ttl_sweeper`."""
        minutes = sweep_minutes(sweep_interval_minutes, self.ttl_config)
        if self._sweeper is not None and self._sweeper.is_alive():
            return
        self._sweeper_stop.clear()

        def sweep() -> None:
            while not self._sweeper_stop.wait(minutes * 60.0):
                try:
                    self.sweep_ttl()
                except Exception:  # a failed sweep is retried at the next interval
                    continue

        self._sweeper = threading.Thread(target=sweep, daemon=True, name="hybrid-memory-ttl")
        self._sweeper.start()

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it has stopped (or none ran)."""
        if self._sweeper is None:
            return True
        self._sweeper_stop.set()
        self._sweeper.join(timeout)
        stopped = not self._sweeper.is_alive()
        if stopped:
            self._sweeper = None
        return stopped

    # --- writes ------------------------------------------------------------------------

    def _prepare_put(self, op: PutOp) -> tuple[PutOp, str, str | None, dict[str, Any] | None]:
        """``(op, memory id, text, metadata)``, text and metadata None for a delete.
        Validates the value and index (every put of a batch before any is written)."""
        memory_id = item_id(op.namespace, op.key)
        if op.value is None:
            return op, memory_id, None, None
        value = op.value
        try:
            encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                "value", f"must be JSON-serialisable (str keys, finite numbers): {exc}"
            ) from exc
        paths = self._fields if op.index is None else op.index
        texts: list[str] = []
        if paths is not False:
            for path in paths:
                for text in get_text_at_path(value, "$" if path == "$" else tokenize_path(path)):
                    if text.strip():
                        texts.append(text)
        indexed = bool(texts)
        # The text of an unsearchable item is never matched (searches leave lg_indexed
        # False to the end), but the engine wants one: the item's path.
        text = "\n".join(texts) if indexed else "/".join((*op.namespace, op.key))
        text = text[: self.memory.settings.max_text_length]
        metadata: dict[str, Any] = {
            ITEM: memory_id,
            KEY: op.key,
            NAMESPACE: json.dumps(list(op.namespace), ensure_ascii=False),
            DEPTH: len(op.namespace),
            VALUE: encoded,
            INDEXED: indexed,
            HAS_TTL: op.ttl is not None,
        }
        for position, label in enumerate(op.namespace):
            metadata[label_key(position)] = label
        for position, label in enumerate(reversed(op.namespace)):
            metadata[label_from_end_key(position)] = label
        if op.ttl is not None:
            metadata[TTL_MINUTES] = float(op.ttl)
        for field, field_value in value.items():
            scalar = engine_scalar(field_value)
            if scalar is not None:
                metadata[VALUE_FIELD + field] = scalar
        return op, memory_id, text, metadata

    def _warm_up(self) -> None:
        """Load the embedding model before the first write: an item's TTL counts from
        its write, and a model loading inside it (a second or more) would eat a short
        TTL before the item is even stored."""
        if not self._warm:
            self.memory.embedder.embed_query("warm up")
            self._warm = True

    def _write(
        self, prepared: list[tuple[PutOp, str, str | None, dict[str, Any] | None]], now: float
    ) -> None:
        ids = [memory_id for _, memory_id, _, _ in prepared]
        # Asked of the collection (the core's one door), so another process's put counts.
        existing = self.memory.existing(ids) if ids else set()
        deletes = [memory_id for op, memory_id, _, _ in prepared if op.value is None]
        gone = [i for i in deletes if i in existing]
        if gone:
            self.memory.delete(gone)
        items: list[dict[str, Any]] = []
        for position, (op, memory_id, text, metadata) in enumerate(prepared):
            if text is None or metadata is None:
                continue
            metadata[UPDATED] = now
            if op.ttl is not None:
                metadata[EXPIRES] = now + float(op.ttl) * 60.0
            item: dict[str, Any] = {"text": text, "id": memory_id, "metadata": metadata}
            if memory_id not in existing:
                # A new item's creation time, a microsecond apart within a batch, keeps
                # the batch's order in listings (oldest first).
                item["created_at"] = now + position * 1e-6
            items.append(item)
        if items:
            # A put is an upsert by key, whatever else says the same: a LangGraph store
            # keeps every item it is given (near-duplicates are for the caller, LangMem's
            # memory manager for one, to consolidate by key).
            self.memory.add_many(items, upsert=True, on_similar="keep")

    # --- lifecycle ---------------------------------------------------------------------

    def close(self) -> None:
        """Stop the TTL sweeper and close the memory this store opened."""
        self.stop_ttl_sweeper()
        if self._owns_memory:
            self.memory.close()

    def __enter__(self) -> HybridMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HybridMemoryStore({self.memory!r})"


def _passes(memory: Memory, residual: Mapping[str, Any]) -> bool:
    """Whether the item a memory holds passes the residual filter (:func:`passes`)."""
    return passes(str(memory.metadata[VALUE]), residual)


# --- scores -------------------------------------------------------------------------------


def langgraph_scores(hits: Sequence[Any]) -> list[float]:
    """The scores of a query search's hits, best first: each hit's relevance
    (``Hit.score``, in [0, 1]), except that a hit without any positive evidence (relevance
    0) reports its cosine similarity when that is negative, as LangGraph's own stores
    report cosine; made non-increasing down the list, so the order stays the fused one."""
    out: list[float] = []
    lowest = math.inf
    for hit in hits:
        score = float(hit.score)
        cosine = hit.scores.get("vector")
        if score == 0.0 and cosine is not None and cosine < 0.0:
            score = float(cosine)
        lowest = min(lowest, score)
        out.append(lowest)
    return out
