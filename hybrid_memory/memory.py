"""HybridMemory: the memory store and its hybrid search.

Quick tour (runs as written; the first call loads the embedding model)::

    from hybrid_memory import HybridMemory

    memory = HybridMemory(path="./memory")          # embedded Chroma on disk; no server
    memory.add("Alice prefers dark mode", tags=["alice", "ui"], metadata={"user": "alice"})
    hits = memory.search("what theme does alice like?", k=5, filter={"user": "alice"})
    hits[0].text, hits[0].score, hits[0].ranks      # ranks: {"vector": 1, "keyword": 1, "tag": 1}

``HybridMemory()`` keeps everything in memory; ``HybridMemory(url="http://host:8000")``
or ``HybridMemory(client=chromadb.HttpClient(...))`` shares one memory through a
Chroma server.

State (docs/architecture.md): the Chroma collection holds everything (text, tags, metadata,
times, vectors). The SQLite keyword index is derived from it, checked against it
on open (count and write watermark) and repaired when it drifted, then kept in
step by every write of this process and by a periodic check for writes of other
processes (in the background: see :meth:`HybridMemory.sync`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import random
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import numpy as np

from hybrid_memory.embeddings import (
    Embedder,
    Matrix,
    QueryCache,
    Vector,
    document_matrix,
    nearest_by_cosine,
    resolve_embedding,
)
from hybrid_memory.errors import (
    DuplicateIdError,
    EmbeddingError,
    EmbeddingMismatchError,
    InvalidInputError,
    MemoryNotFoundError,
    StoreError,
)
from hybrid_memory.feedback import length_scaled_weight, rocchio
from hybrid_memory.filters import (
    ARRAY_OPS,
    CREATED_KEY,
    RESERVED_FIELDS,
    RESERVED_PREFIX,
    TAGS_KEY,
    UPDATED_KEY,
    Logical,
    Node,
    chroma_part,
    matches,
    parse_filter,
    tests_arrays,
    to_chroma,
)
from hybrid_memory.fusion import adaptive_alpha, leg_weights, order_by_score, reciprocal_rank_fusion
from hybrid_memory.keyword import (
    IndexRow,
    KeywordIndex,
    TagMatch,
    is_damage,
    query_words,
    tag_order,
)
from hybrid_memory.postings import IntArray
from hybrid_memory.recency import age_in_days, decay_factor
from hybrid_memory.settings import HybridMemorySettings, load_settings
from hybrid_memory.tags import TagCache, normalise_tags
from hybrid_memory.timeutil import now_timestamp, stored_datetime, to_timestamp
from hybrid_memory.tokens import count_tokens
from hybrid_memory.types import KEYWORD, TAG, VECTOR, Hit, Memory, SearchResult
from hybrid_memory.validation import encodable

# Collection-level metadata recording how the collection was built.
EMBEDDING_META = "hm:embedding"
DIMENSION_META = "hm:dimension"

_PAGE = 5000  # records per Chroma read while syncing
_TAGS_JSON = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps builds one per call
# A filter passing at most this many memories is resolved in the keyword index once,
# and the vector leg searches just those ids: Chroma's `where` scans its metadata on
# every query (55 ms at 100,000 memories for one user's 2,000), its `ids=` costs
# 12-20 ms for 2,000-20,000 ids, and below a few hundred ids its filtered graph search
# degrades (70 ms for 100 ids) while reading those vectors and comparing them all
# costs 5 ms.
_NARROW_FILTER = 20_000
_OPEN_PATIENCE = 10.0  # seconds to keep retrying the opening of a store
_EXACT_SEARCH = 256
_SEARCH_ONLY_FIELDS = frozenset(
    {
        "k",
        "max_k",
        "candidates",
        "rrf_k",
        "alpha",
        "alpha_thresholds",
        "alpha_values",
        "tag_weight",
        "tag_boost",
        "recency_decay",
        "feedback_docs",
        "feedback_weight",
        "feedback_full_words",
        "drop_stopwords",
        "keyword_max_df",
        "token_encoding",
        "sync_interval",
    }
)


_F = TypeVar("_F", bound=Callable[..., Any])


def _guarded(method: _F) -> _F:
    """A public operation that survives a damaged keyword index: the index is derived
    data, so when SQLite finds its file damaged (truncated, overwritten, deleted under
    this process), the index is rebuilt from the collection and the operation runs
    again, once. Other SQLite failures become :class:`StoreError`. Writes never run
    twice: :meth:`HybridMemory._index_write` repairs after Chroma took them."""

    @functools.wraps(method)
    def run(self: HybridMemory, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise StoreError(f"the keyword index failed: {exc}") from exc
            self._repair_index(exc)
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            raise StoreError(
                f"the keyword index {self._index.path} failed again after a rebuild: {exc}; "
                "check the disk, or delete the file (it is rebuilt from the collection)"
            ) from exc

    return run  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A validated memory, ready to be written."""

    id: str | None
    text: str
    tags: tuple[str, ...]
    metadata: dict[str, Any]
    created_at: float | None
    content_hash: str


@dataclass(slots=True)
class _SyncState:
    """When the index was last checked against the collection (monotonic clock), whether
    a background check is running, and a count of this process's writes."""

    last: float = -math.inf
    running: threading.Lock = field(default_factory=threading.Lock)
    writes: int = 0  # this process's writes, counted twice each (see HybridMemory._writing)


class _TagLeg:
    """The tag leg of one search: memories carrying the matched tags, ranked by how many
    they carry, then by their best rank in the other legs, then newest first.

    A search ranks twice (first without vector hits, to choose the feedback memories,
    then with them), so the SQL work is kept between the two: the newest carriers of
    each tag do not depend on the other legs and are read once, and carriers among the
    other legs' hits are read once per id, the second ranking asking only for the ids
    new to it.
    """

    def __init__(
        self,
        index: KeywordIndex,
        tags: tuple[str, ...],
        depth: int,
        node: Node | None,
        exclude: str | None,
        within: IntArray | None = None,
    ) -> None:
        self._index = index
        self._tags = tags
        self._depth = depth
        self._node = node
        self._exclude = exclude
        self._within = within  # the row ids passing node, when the index resolved it
        self._newest: list[TagMatch] | None = None
        self._asked: set[str] = set()
        self._carriers: dict[str, TagMatch] = {}  # of the ids asked, those carrying a tag

    def rank(self, evidence: Mapping[str, int]) -> dict[str, int]:
        """``{id: matched count}`` in rank order, given each id's best rank in the other
        legs (``evidence``)."""
        if not self._tags:
            return {}
        if self._newest is None:
            self._newest = self._index.tag_carriers(
                self._tags, self._depth, self._node, within=self._within
            )
        new = [i for i in evidence if i not in self._asked]
        if new:
            found = self._index.tag_carriers(
                self._tags, len(new), self._node, among=new, within=self._within
            )
            self._carriers.update((m.id, m) for m in found)
            self._asked.update(new)
        among = sorted((self._carriers[i] for i in evidence if i in self._carriers), key=tag_order)
        best: dict[str, TagMatch] = {}
        for match in (*self._newest, *among):
            if match.id != self._exclude:
                best[match.id] = match
        ordered = sorted(
            best.values(),
            key=lambda m: (-m.matched, evidence.get(m.id, math.inf), -m.created_at),
        )
        return {m.id: m.matched for m in ordered[: self._depth]}


class HybridMemory:
    """A memory store with hybrid (vector + BM25 keyword + tag) search.

    Args:
        path: directory for an embedded, persistent store. Exclusive with ``url``
            and ``client``. Neither: an in-memory store.
        url: a Chroma server (``http://127.0.0.1:8000``) shared by many agents.
        client: a ready Chroma client (``chromadb.HttpClient(...)``, ``PersistentClient``…).
        collection: the Chroma collection name (default ``hybrid_memory``; an
            in-memory store without one gets a private collection).
        embedding: a LangChain ``Embeddings``, a LlamaIndex embedding model, a
            Chroma embedding function or a ``callable(list[str]) -> vectors``;
            default all-MiniLM-L6-v2, offline.
        embedding_name: the name recorded with the collection for that embedding
            (default: derived from the object). Reopening a collection with another
            name fails with :class:`EmbeddingMismatchError`.
        settings: a :class:`HybridMemorySettings`; environment variables
            ``HYBRID_MEMORY_*`` fill what it does not set.
        **overrides: any settings field, beating both.
    """

    def __init__(
        self,
        path: str | PathLike[str] | None = None,
        *,
        url: str | None = None,
        client: Any = None,
        collection: str | None = None,
        embedding: Any = None,
        embedding_name: str | None = None,
        settings: HybridMemorySettings | None = None,
        **overrides: Any,
    ) -> None:
        if client is not None and (path is not None or url is not None):
            raise InvalidInputError("client", "pass either client, or path/url, not both")
        if path is not None:
            overrides["path"] = str(path)
        if url is not None:
            overrides["url"] = url
        if collection is not None:
            overrides["collection"] = collection
        self.settings = load_settings(settings, **overrides)
        s = self.settings
        self.embedder: Embedder = resolve_embedding(embedding, s, embedding_name)
        self._queries = QueryCache(self.embedder, s.query_cache_size)
        self._client = client if client is not None else _make_client(s, attempts=5)
        private = (
            client is None
            and s.path is None
            and s.url is None
            and "collection" not in s.model_fields_set
        )
        self._collection_name = f"hm-{uuid.uuid4().hex[:12]}" if private else s.collection
        self._drop_on_close = private
        self._collection = self._open_with_retries(own_client=client is None)
        self._dimension: int | None = (self._collection.metadata or {}).get(DIMENSION_META)
        self._index = KeywordIndex(_index_path(s, self._collection_name), s.keyword_tokenizer)
        self._write_lock = threading.RLock()
        self._tags = TagCache(self._index.all_tags, s.tag_cache_ttl)
        # Query embeddings of concurrent searches, and the periodic sync check (one at a
        # time, so it never queues the embeddings of two searches).
        self._pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="hybrid-memory")
        self._owner = True
        self._closed = False
        self._sync_state = _SyncState()  # shared with views: one clock, one check at a time
        # On open, compare ids too: an add and a delete made behind the index's back
        # (a crash, another tool) can leave the counts equal.
        self.sync(reconcile=True)

    # --- opening ----------------------------------------------------------------------

    def _open_with_retries(self, *, own_client: bool) -> Any:
        """The collection, retried for a while when opening it fails: processes that
        create a new store at the same moment race in Chroma's own setup (its SQLite
        schema: "database is locked", "table collections already exists"); each
        retry starts over with a fresh client."""
        deadline = time.monotonic() + _OPEN_PATIENCE
        delay = 0.05
        while True:
            try:
                return self._open_collection()
            except (EmbeddingMismatchError, InvalidInputError):
                raise
            except StoreError as exc:
                if time.monotonic() + delay > deadline:
                    raise StoreError(
                        f"{exc}. Tried for {_OPEN_PATIENCE:.0f} s; is another program holding "
                        f"the store ({self.settings.url or self.settings.path or 'in memory'}) "
                        "or is the Chroma server down? (start one with: chroma run --path DIR "
                        "--host 127.0.0.1 --port 8000)"
                    ) from exc.__cause__
            time.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 1.0)
            if own_client:
                _forget_client(self.settings)
                self._client = _make_client(self.settings, attempts=3)

    def _open_collection(self) -> Any:
        try:
            collection = self._client.get_or_create_collection(
                self._collection_name,
                configuration={"hnsw": {"space": "cosine"}},
                metadata={EMBEDDING_META: self.embedder.name},
                embedding_function=None,
            )
        except Exception as exc:
            raise StoreError(
                f"could not open Chroma collection {self._collection_name!r}: {exc}"
            ) from exc
        recorded = (collection.metadata or {}).get(EMBEDDING_META)
        try:
            fresh = recorded is None and collection.count() == 0
            if fresh:
                collection.modify(
                    metadata={**(collection.metadata or {}), EMBEDDING_META: self.embedder.name}
                )
        except Exception as exc:
            raise StoreError(
                f"could not open Chroma collection {self._collection_name!r}: {exc}"
            ) from exc
        if not fresh and recorded != self.embedder.name:
            raise EmbeddingMismatchError(
                f"collection {self._collection_name!r} was written with embedding "
                f"{recorded!r}, but this store embeds with {self.embedder.name!r}; vectors of "
                "different models are not comparable. Open it with the same embedding (or pass "
                "embedding_name= if only the name changed), or use another collection."
            )
        return collection

    # --- keeping the derived index in step --------------------------------------------------

    def _repair_index(self, cause: BaseException) -> None:
        """Reopen the keyword index after damage (:func:`is_damage`) and refill it from
        the collection (DESIGN.md: it is derived state)."""
        with self._write_lock:
            self._index.reset(cause)
            self._sync(reconcile=True)
            self._tags.invalidate()

    def _index_write(self, write: Callable[[], object]) -> None:
        """An index write that follows a Chroma write: on damage, the rebuild from the
        collection (which holds the write) stands in for it."""
        try:
            write()
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise StoreError(f"the keyword index failed: {exc}") from exc
            self._repair_index(exc)

    @_guarded
    def sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        """Bring the keyword index up to date with the collection.

        Cheap by default: picks up memories written after the index's watermark and
        reconciles ids when the counts differ. ``reconcile=True`` compares ids even
        when the counts agree; ``full=True`` also re-reads every memory (after another
        process updated memories in place with an older clock, for example).

        The store calls this by itself: on open, and then every ``sync_interval``
        seconds while it is used (searches, adds, filtered counts and ``tags()``
        notice the interval has passed). That periodic check runs in the background,
        so no call waits for it: writes of other processes (sharing a path or a
        Chroma server) become visible within about ``sync_interval`` of a check
        falling due. After the store sat unused for more than two intervals, the
        first call checks before it answers; with ``sync_interval=0`` every call
        does. Call ``sync()`` to see another process's write at once.
        """
        self._sync(full=full, reconcile=reconcile)

    def _sync(self, *, full: bool = False, reconcile: bool = False) -> None:
        with self._write_lock:
            index = self._index
            collection_id = str(self._collection.id)
            changed = False
            if index.get_state("collection_id") != collection_id:
                index.clear()
                index.set_state("collection_id", collection_id)
                changed = True
            watermark = None if full else index.watermark()
            where = None if watermark is None else {UPDATED_KEY: {"$gt": watermark}}
            for page in self._pages(where=where):
                index.upsert(page)
                changed = True
            if full or reconcile or index.count() != self._collection.count():
                changed = self._reconcile() or changed
            self._sync_state.last = time.monotonic()
            if changed:  # another process's write may have added or removed tags
                self._tags.invalidate()

    def _maybe_sync(self) -> None:
        """The periodic check (see :meth:`sync`): due every ``sync_interval``, run in the
        background unless the index may be far behind (no check started for two
        intervals) or the interval is 0."""
        state, interval = self._sync_state, self.settings.sync_interval
        now = time.monotonic()
        since = now - state.last
        if since < interval:
            return
        if interval == 0 or since >= 2 * interval:
            self.sync()
        elif state.running.acquire(blocking=False):  # at most one check in flight
            # The interval counts from the check's start, finished or not; a check
            # that fails or cannot tell gives the time back: the next call asks again.
            previous, state.last = state.last, now
            try:
                self._pool.submit(self._background_sync, previous, now)
            except RuntimeError:  # the store was closed
                state.last = previous
                state.running.release()

    def _background_sync(self, previous: float, started: float) -> None:
        state = self._sync_state
        try:
            if self._closed:
                return
            writes = state.writes
            behind = writes % 2 == 0 and self._index_behind()
            if writes % 2 or state.writes != writes:
                # This process wrote meanwhile, between the collection and the index:
                # the answer may be wrong either way. Ask again at the next call.
                if state.last == started:
                    state.last = previous
            elif behind:
                self.sync()
        except Exception:
            # Chroma unreachable, say: the next call starts another check, and once no
            # check succeeded for two intervals, calls check themselves and raise.
            if state.last == started:
                state.last = previous
        finally:
            state.running.release()

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Marks a write of this process to the collection and then the index (under the
        write lock): an odd count means one is under way, for the background check."""
        self._sync_state.writes += 1
        try:
            yield
        finally:
            self._sync_state.writes += 1

    def _index_behind(self) -> bool:
        """Whether :meth:`sync` would find anything to do, asked without the write lock,
        so that a check finding nothing (the usual answer) never holds up a write: its
        Chroma reads take ~20 ms at 100,000 memories, and far longer in a background
        thread while searches hold the index and the GIL. The answer holds only if
        this process wrote nothing meanwhile (see :meth:`_writing`)."""
        index = self._index
        if index.get_state("collection_id") != str(self._collection.id):
            return True
        watermark = index.watermark()
        if watermark is not None:
            where = {UPDATED_KEY: {"$gt": watermark}}
            if self._chroma("get", where=where, limit=1, include=[])["ids"]:
                return True
        return index.count() != self._chroma("count")

    def _pages(
        self, where: Mapping[str, Any] | None = None, ids: list[str] | None = None
    ) -> Iterable[list[IndexRow]]:
        if ids is not None:
            for start in range(0, len(ids), _PAGE):
                got = self._chroma(
                    "get", ids=ids[start : start + _PAGE], include=["documents", "metadatas"]
                )
                yield [
                    _index_row(*r)
                    for r in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
                ]
            return
        offset = 0
        while True:
            got = self._chroma(
                "get", where=where, limit=_PAGE, offset=offset, include=["documents", "metadatas"]
            )
            if not got["ids"]:
                return
            yield [
                _index_row(*r)
                for r in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
            ]
            offset += len(got["ids"])

    def _reconcile(self) -> bool:
        """Make the index hold exactly the collection's ids; True if it changed."""
        chroma_ids: set[str] = set()
        offset = 0
        while True:
            got = self._chroma("get", limit=_PAGE, offset=offset, include=[])
            if not got["ids"]:
                break
            chroma_ids.update(got["ids"])
            offset += len(got["ids"])
        indexed = self._index.ids()
        stale = indexed - chroma_ids
        if stale:
            self._index.delete(stale)
        missing = sorted(chroma_ids - indexed)
        for page in self._pages(ids=missing):
            self._index.upsert(page)
        return bool(stale or missing)

    def _chroma(self, operation: str, **kwargs: Any) -> Any:
        try:
            return getattr(self._collection, operation)(**kwargs)
        except InvalidInputError:
            raise
        except Exception as exc:
            raise StoreError(f"Chroma {operation} failed: {exc}") from exc

    # --- writing ------------------------------------------------------------------------

    @_guarded
    def add(
        self,
        text: str,
        *,
        id: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        created_at: datetime | str | float | None = None,
        upsert: bool = False,
        allow_duplicates: bool = False,
    ) -> str:
        """Store one memory and return its id.

        Without an ``id``, a memory whose exact text is already stored is not stored
        again: its existing id is returned (``allow_duplicates=True`` stores a copy).
        With an ``id`` that exists, :class:`DuplicateIdError` unless ``upsert=True``.
        """
        item = {
            "text": text,
            "id": id,
            "tags": tags,
            "metadata": metadata,
            "created_at": created_at,
        }
        prepared = [self._prepare(item, "")]
        return self._add(prepared, upsert=upsert, allow_duplicates=allow_duplicates)[0]

    @_guarded
    def add_many(
        self,
        items: Iterable[str | Mapping[str, Any]],
        *,
        upsert: bool = False,
        allow_duplicates: bool = False,
    ) -> list[str]:
        """Store many memories (embedded in batches); returns their ids in order.

        Each item is a text or a mapping with ``text`` and optionally ``id``,
        ``tags``, ``metadata``, ``created_at``. Everything is validated before
        anything is written.
        """
        if isinstance(items, (str, Mapping)):
            raise InvalidInputError("items", "expected a list of texts or dicts, not a single one")
        prepared = [self._prepare(item, f"items[{i}].") for i, item in enumerate(items)]
        return self._add(prepared, upsert=upsert, allow_duplicates=allow_duplicates)

    def _add(self, prepared: list[_Prepared], *, upsert: bool, allow_duplicates: bool) -> list[str]:
        explicit = [p.id for p in prepared if p.id is not None]
        if len(set(explicit)) != len(explicit) and not upsert:
            repeated = next(i for i in explicit if explicit.count(i) > 1)
            raise InvalidInputError("id", f"id {repeated!r} appears more than once in this call")
        with self._write_lock:
            self._maybe_sync()
            existing = self._existing_records(explicit)
            if existing and not upsert:
                raise DuplicateIdError(next(i for i in explicit if i in existing))
            known = (
                {}
                if allow_duplicates
                else self._index.ids_by_hash([p.content_hash for p in prepared if p.id is None])
            )
            ids: list[str] = []
            to_write: dict[str, _Prepared] = {}
            for p in prepared:
                if p.id is not None:
                    ids.append(p.id)
                    to_write[p.id] = p
                elif not allow_duplicates and p.content_hash in known:
                    ids.append(known[p.content_hash])
                else:
                    new_id = uuid.uuid4().hex
                    ids.append(new_id)
                    to_write[new_id] = p
                    if not allow_duplicates:
                        known[p.content_hash] = new_id
            if to_write:
                self._write(to_write, existing)
            return ids

    def _write(
        self, records: dict[str, _Prepared], existing: Mapping[str, Mapping[str, Any]]
    ) -> None:
        texts = [p.text for p in records.values()]
        vectors = document_matrix(self.embedder, texts)
        self._check_dimension(vectors)
        now = now_timestamp()
        rows: list[IndexRow] = []
        metadatas: list[dict[str, Any]] = []
        for memory_id, p in records.items():
            old_created = (existing.get(memory_id) or {}).get(CREATED_KEY)
            created = p.created_at if p.created_at is not None else (old_created or now)
            rows.append(
                IndexRow(memory_id, p.text, p.tags, p.metadata, p.content_hash, created, now)
            )
            metadatas.append(_chroma_metadata(rows[-1], existing.get(memory_id)))
        ids = list(records)
        # Ids this store generated (uuid4) cannot exist yet: Chroma's `add` is ~5% cheaper
        # than `upsert`. Ids the caller chose go through `upsert` (another process may
        # have written the same id since it was checked).
        generated = [i for i, p in enumerate(records.values()) if p.id is None]
        chosen = [i for i, p in enumerate(records.values()) if p.id is not None]
        step = self._max_batch()
        with self._writing():
            for operation, positions in (("add", generated), ("upsert", chosen)):
                for start in range(0, len(positions), step):
                    batch = positions[start : start + step]
                    # The index rows are written beside Chroma's write (in a thread: Chroma
                    # holds the GIL, SQLite does not), and committed once Chroma took them.
                    for attempt in (1, 2):
                        written = False
                        try:
                            with self._index.upserting([rows[i] for i in batch]):
                                self._chroma(
                                    operation,
                                    ids=[ids[i] for i in batch],
                                    embeddings=vectors[batch],
                                    documents=[texts[i] for i in batch],
                                    metadatas=[metadatas[i] for i in batch],
                                )
                                written = True
                            break
                        except sqlite3.DatabaseError as exc:
                            if attempt == 2 or not is_damage(exc):
                                raise
                            # Rebuilt from the collection, which holds the batch if
                            # Chroma took it; else the batch is written again.
                            self._repair_index(exc)
                            if written:
                                break
                    self._note_tags(
                        [rows[i].tags for i in batch],
                        [
                            tag
                            for i in batch
                            for tag in _stored_tags((existing.get(ids[i]) or {}).get(TAGS_KEY))
                            if tag not in rows[i].tags
                        ],
                    )

    def _note_tags(self, written: Iterable[Iterable[str]], removed: Sequence[str]) -> None:
        """Keep the tag cache in step with a write of this process: tags taken off a
        memory may have lost their last carrier (reload); added ones are merged in."""
        if removed:
            self._tags.invalidate()
        else:
            self._tags.add({tag for tags in written for tag in tags})

    def _max_batch(self) -> int:
        try:
            return max(1, int(self._client.get_max_batch_size()))
        except Exception:
            return 1000

    def _check_dimension(self, vectors: Matrix) -> None:
        if len(vectors) == 0:
            return
        dimension = int(vectors.shape[1])
        if self._dimension is None:
            self._dimension = dimension
            meta = {**(self._collection.metadata or {}), DIMENSION_META: dimension}
            self._chroma("modify", metadata=meta)
        elif dimension != self._dimension:
            raise EmbeddingMismatchError(
                f"embedding {self.embedder.name!r} produced {dimension}-dimensional vectors, but "
                f"collection {self._collection_name!r} holds {self._dimension}-dimensional ones"
            )

    def _existing_records(self, ids: Sequence[str]) -> dict[str, Mapping[str, Any]]:
        # In pages: one get with 100,000 ids exceeds SQLite's limit on bound variables.
        found: dict[str, Mapping[str, Any]] = {}
        ids = list(dict.fromkeys(ids))  # Chroma refuses a repeated id
        for start in range(0, len(ids), _PAGE):
            page = ids[start : start + _PAGE]
            got = self._chroma("get", ids=page, include=["metadatas"])
            found.update((i, m or {}) for i, m in zip(got["ids"], got["metadatas"], strict=True))
        return found

    def _prepare(self, item: str | Mapping[str, Any], prefix: str) -> _Prepared:
        """Validate one memory; error fields start with ``prefix`` (``items[3].``)."""
        where = prefix.rstrip(".") or "item"
        if isinstance(item, str):
            item = {"text": item}
        if not isinstance(item, Mapping):
            raise InvalidInputError(where, f"expected a text or a dict, got {type(item).__name__}")
        unknown = set(item) - {"text", "id", "tags", "metadata", "created_at"}
        if unknown:
            raise InvalidInputError(
                where,
                f"unknown keys {sorted(unknown)}; allowed: text, id, tags, metadata, created_at",
            )
        text = self._valid_text(item.get("text"), f"{prefix}text")
        memory_id = item.get("id")
        if memory_id is not None:
            memory_id = _valid_id(memory_id, f"{prefix}id")
        s = self.settings
        tags = normalise_tags(
            item.get("tags"),
            max_tags=s.max_tags,
            max_length=s.max_tag_length,
            field=f"{prefix}tags",
        )
        metadata = _valid_metadata(item.get("metadata"), f"{prefix}metadata")
        created = item.get("created_at")
        created_at = None if created is None else to_timestamp(created, field=f"{prefix}created_at")
        content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
        return _Prepared(memory_id, text, tags, metadata, created_at, content_hash)

    def _valid_text(self, text: Any, field: str = "text") -> str:
        if not isinstance(text, str):
            raise InvalidInputError(field, f"expected a string, got {type(text).__name__}")
        encodable(text, field)
        if not text.strip():
            raise InvalidInputError(field, "must not be empty or blank")
        if len(text) > self.settings.max_text_length:
            raise InvalidInputError(
                field,
                f"at most {self.settings.max_text_length} characters, got {len(text)} "
                "(raise HYBRID_MEMORY_MAX_TEXT_LENGTH)",
            )
        return text

    @_guarded
    def update(
        self,
        id: str,
        *,
        text: str | None = None,
        tags: Iterable[str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Memory:
        """Change a memory's text, tags and/or metadata (each replaces the old value).

        The memory is re-embedded only when its text changes. Returns the new memory.
        """
        memory_id = _valid_id(id)
        if text is None and tags is None and metadata is None:
            raise InvalidInputError("update", "give at least one of text, tags, metadata")
        s = self.settings
        new_text = None if text is None else self._valid_text(text)
        new_tags = (
            None
            if tags is None
            else normalise_tags(tags, max_tags=s.max_tags, max_length=s.max_tag_length)
        )
        new_meta = None if metadata is None else _valid_metadata(metadata)
        with self._write_lock:
            got = self._chroma(
                "get", ids=[memory_id], include=["documents", "metadatas", "embeddings"]
            )
            if not got["ids"]:
                raise MemoryNotFoundError(memory_id)
            old = _index_row(memory_id, got["documents"][0], got["metadatas"][0])
            final_text = old.text if new_text is None else new_text
            if new_text is not None and new_text != old.text:
                vector = document_matrix(self.embedder, [final_text])
                self._check_dimension(vector)
            else:
                vector = np.asarray(got["embeddings"][:1], dtype=np.float32)
            row = IndexRow(
                memory_id,
                final_text,
                old.tags if new_tags is None else new_tags,
                old.metadata if new_meta is None else new_meta,
                hashlib.sha256(final_text.encode("utf-8")).hexdigest(),
                old.created_at or now_timestamp(),
                max(now_timestamp(), old.updated_at),
            )
            with self._writing():
                self._chroma(
                    "upsert",
                    ids=[memory_id],
                    embeddings=vector,
                    documents=[final_text],
                    metadatas=[_chroma_metadata(row, got["metadatas"][0])],
                )
                self._index_write(lambda: self._index.upsert([row]))
            self._note_tags([row.tags], [t for t in old.tags if t not in row.tags])
            return _memory(row)

    @_guarded
    def delete(
        self, ids: str | Sequence[str] | None = None, *, filter: Mapping[str, Any] | None = None
    ) -> int:
        """Delete memories by id (all must exist) or by a metadata filter; returns how many."""
        if (ids is None) == (filter is None):
            raise InvalidInputError("delete", "give exactly one of ids or filter")
        with self._write_lock:
            if ids is not None:
                id_list = _valid_ids(ids)
                if not id_list:
                    return 0
                present = set(self._existing_records(id_list))
                missing = [i for i in id_list if i not in present]
                if missing:
                    raise MemoryNotFoundError(missing[0])
            else:
                node = self._parse_filter(filter)
                if node is None:
                    raise InvalidInputError(
                        "filter", "an empty filter would delete everything; pass ids instead"
                    )
                id_list = self._matching_ids(node)
                if not id_list:
                    return 0
            unique = list(dict.fromkeys(id_list))
            with self._writing():
                self._chroma("delete", ids=unique)
                self._index_write(lambda: self._index.delete(unique))
            self._tags.invalidate()
            return len(unique)

    def _parse_filter(self, filter: Mapping[str, Any] | None) -> Node | None:
        """:func:`parse_filter`, refusing ``$contains`` / ``$not_contains`` on a metadata
        field that holds single values only. Chroma (and so every leg here) reads them
        as list membership, never as a substring test: on a string field they would
        match nothing (or everything) without a word."""
        node = parse_filter(filter)
        fields = _array_tested_fields(node)
        if fields:
            single = self._index.single_valued(sorted(fields))
            if single:
                raise InvalidInputError(
                    "filter",
                    f"$contains / $not_contains test whether a list holds a value, but "
                    f"{single[0]!r} holds single values (no memory stores a list there); "
                    "they do not search within strings: use $eq or $in",
                )
        return node

    def _matching_ids(self, node: Node) -> list[str]:
        """The ids of the collection's memories passing ``node``. Chroma tests the part
        of the filter it can (see chroma_part); the rest is checked on its records."""
        part, exact = chroma_part(node)
        if exact:
            return list(self._chroma("get", where=to_chroma(part), include=[])["ids"])
        return [
            row.id
            for page in self._pages(where=to_chroma(part))
            for row in page
            if matches(node, row.metadata, row.tags, row.created_at, row.updated_at)
        ]

    # --- reading ---------------------------------------------------------------------------

    def get(self, id: str) -> Memory:
        """The memory with this id, or :class:`MemoryNotFoundError`."""
        return self.get_many([id])[0]

    @_guarded
    def get_many(self, ids: Sequence[str]) -> list[Memory]:
        """The memories with these ids, in the same order; every id must exist."""
        id_list = _valid_ids(ids)
        if not id_list:
            return []
        unique = list(dict.fromkeys(id_list))  # Chroma refuses a repeated id
        got = self._chroma("get", ids=unique, include=["documents", "metadatas"])
        found = {
            i: _memory(_index_row(i, d, m))
            for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True)
        }
        for memory_id in id_list:
            if memory_id not in found:
                raise MemoryNotFoundError(memory_id)
        return [found[i] for i in id_list]

    @_guarded
    def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """How many memories there are (matching ``filter``, when given)."""
        node = self._parse_filter(filter)
        if node is None:
            return int(self._chroma("count"))
        self._maybe_sync()
        return self._index.count(node)

    def __len__(self) -> int:
        return self.count()

    @_guarded
    def list_memories(
        self,
        filter: Mapping[str, Any] | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[Memory]:
        """The memories passing ``filter`` (all without one), oldest first: by
        ``created_at``, then by id. ``offset`` skips that many, ``limit`` (None: no
        limit) caps the answer: together they page through a listing with no query.

        The filter is applied before the paging, in the keyword index, like
        :meth:`count` with a filter (the index is checked against the collection
        every ``sync_interval``; call :meth:`sync` to see another process's write
        at once)."""
        if limit is not None and (
            isinstance(limit, bool) or not isinstance(limit, int) or limit < 0
        ):
            raise InvalidInputError("limit", f"expected None or an integer >= 0, got {limit!r}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInputError("offset", f"expected an integer >= 0, got {offset!r}")
        node = parse_filter(filter)
        if limit == 0:
            return []
        self._maybe_sync()
        ids = self._index.page(node, limit, offset)
        return self._hydrate(ids, len(ids))

    @_guarded
    def tags(self) -> list[str]:
        """Every tag in use, sorted."""
        self._maybe_sync()
        return sorted(self._index.all_tags())

    def with_settings(self, **overrides: Any) -> HybridMemory:
        """A view of this store with other search settings (k, alpha, tag_weight,
        recency_decay, candidates, rrf_k, …): same memories, index and embedder."""
        wrong = sorted(set(overrides) - _SEARCH_ONLY_FIELDS)
        if wrong:
            raise InvalidInputError(
                "with_settings",
                f"{', '.join(wrong)} cannot change on an open store; search settings that can: "
                f"{', '.join(sorted(_SEARCH_ONLY_FIELDS))}",
            )
        view = object.__new__(HybridMemory)
        view.__dict__.update(self.__dict__)
        view.settings = load_settings(self.settings, **overrides)
        view._owner = False
        return view

    # --- search -------------------------------------------------------------------------------

    @_guarded
    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        tags: Iterable[str] | None = None,
        alpha: float | None = None,
        now: datetime | str | float | None = None,
        max_tokens: int | None = None,
    ) -> SearchResult:
        """The ``k`` memories that best answer ``query``, best first.

        Args:
            query: free text.
            k: how many hits (1..max_k; default ``settings.k``).
            filter: Chroma-style metadata filter applied by every leg before its cut.
            tags: tags to match in the tag leg besides those found in the query text.
            alpha: vector share against the keyword leg, in [0, 1]; default adaptive.
            now: the current time for recency decay (default: now, UTC).
            max_tokens: stop adding hits once their texts would exceed this many tokens.
        """
        text = self._valid_text(query, "query")
        s = self.settings
        extra_tags = normalise_tags(tags, max_tags=s.max_tags, max_length=s.max_tag_length)
        matched = tuple(dict.fromkeys((*self._tags.find(text), *extra_tags)))
        return self._search(
            text=text,
            vector=None,
            matched_tags=matched,
            k=k,
            filter=filter,
            alpha=alpha,
            now=now,
            max_tokens=max_tokens,
            exclude=None,
        )

    @_guarded
    def related(
        self, id: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> SearchResult:
        """Memories near the one with ``id``: vector neighbours, shared tags and shared
        keywords, fused like a search (the memory itself excluded)."""
        memory_id = _valid_id(id)
        got = self._chroma("get", ids=[memory_id], include=["documents", "metadatas", "embeddings"])
        if not got["ids"]:
            raise MemoryNotFoundError(memory_id)
        row = _index_row(memory_id, got["documents"][0], got["metadatas"][0])
        return self._search(
            text=row.text,
            vector=list(got["embeddings"][0]),
            matched_tags=row.tags,
            k=k,
            filter=filter,
            alpha=None,
            now=None,
            max_tokens=None,
            exclude=memory_id,
        )

    def _search(
        self,
        *,
        text: str,
        vector: Vector | None,
        matched_tags: tuple[str, ...],
        k: int | None,
        filter: Mapping[str, Any] | None,
        alpha: float | None,
        now: datetime | str | float | None,
        max_tokens: int | None,
        exclude: str | None,
    ) -> SearchResult:
        s = self.settings
        k = s.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= s.max_k:
            raise InvalidInputError("k", f"expected an integer in 1..{s.max_k}, got {k!r}")
        if alpha is not None and (
            isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 <= alpha <= 1
        ):
            raise InvalidInputError("alpha", f"expected a number in [0, 1], got {alpha!r}")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1
        ):
            raise InvalidInputError(
                "max_tokens", f"expected a positive integer, got {max_tokens!r}"
            )
        now_ts = now_timestamp() if now is None else to_timestamp(now, field="now")
        node = self._parse_filter(filter)
        self._maybe_sync()
        scope = None if node is None else self._index.within(node, _NARROW_FILTER)
        scope_ids = None if scope is None else scope[1]

        depth = max(s.candidates, k) + (1 if exclude else 0)
        # The query embedding (a model call that releases the GIL) runs beside the
        # keyword leg; Chroma's query holds the GIL, so it runs here, after it.
        embedding: Future[Vector] | None = None
        if vector is None:
            vector = self._queries.cached(text)
            if vector is None:
                embedding = self._pool.submit(self._queries.embed, text)
        keyword_hits = self._index.search(
            text,
            depth,
            node,
            within=None if scope is None else scope[0],
            drop_stopwords=s.drop_stopwords,
            max_df=s.keyword_max_df,
        )
        fallback_reason = None
        if embedding is not None:
            try:
                vector = embedding.result()
            except EmbeddingError as exc:
                fallback_reason = (
                    f"query embedding failed, answered from keyword and tag legs: {exc}"
                )
        keyword_ids = [i for i, _ in keyword_hits if i != exclude]

        if alpha is None:
            alpha = s.alpha
        if alpha is None:
            size = self._index.count(node) if scope is None else len(scope[0])
            alpha = adaptive_alpha(size, s.alpha_thresholds, s.alpha_values)
        weights = leg_weights(alpha, s.tag_weight, s.tag_boost, len(matched_tags))
        if fallback_reason is not None:
            weights[VECTOR] = 0.0

        tag_leg = _TagLeg(
            self._index, matched_tags, depth, node, exclude, None if scope is None else scope[0]
        )

        def fuse(hits: Mapping[str, float]) -> tuple[dict[str, list[str]], dict[str, int]]:
            vector_ids = [i for i in hits if i != exclude]
            evidence: dict[str, int] = {}
            for ranking in (vector_ids, keyword_ids):
                for rank, memory_id in enumerate(ranking, start=1):
                    evidence[memory_id] = min(evidence.get(memory_id, rank), rank)
            counts = tag_leg.rank(evidence)
            return {VECTOR: vector_ids, KEYWORD: keyword_ids, TAG: list(counts)}, counts

        if vector is not None and s.feedback_docs and s.feedback_weight and weights[VECTOR]:
            # Pseudo-relevance feedback before the one vector query: the keyword and tag
            # legs' fused top moves the query vector towards itself (a second vector
            # query after a first fusion scored the same and cost a Chroma query more).
            rankings, _ = fuse({})
            fused = reciprocal_rank_fusion(rankings, weights, s.rrf_k)
            top = order_by_score(fused)[: s.feedback_docs]
            if top:
                got = self._chroma("get", ids=top, include=["embeddings"])
                weight = length_scaled_weight(
                    s.feedback_weight, len(query_words(text)), s.feedback_full_words
                )
                vector = rocchio(vector, got["embeddings"], weight)
        vector_hits = {} if vector is None else self._vector_leg(vector, depth, node, scope_ids)
        rankings, tag_counts = fuse(vector_hits)
        fused = reciprocal_rank_fusion(rankings, weights, s.rrf_k)
        if s.recency_decay > 0 and fused:
            created = self._index.created_at(list(fused))
            for memory_id in fused:
                age = age_in_days(created.get(memory_id, now_ts), now_ts)
                fused[memory_id] *= decay_factor(age, s.recency_decay)

        raw = {
            VECTOR: {i: vector_hits[i] for i in rankings[VECTOR]},
            KEYWORD: dict(keyword_hits),
            TAG: {i: float(c) for i, c in tag_counts.items()},
        }
        positions = {
            leg: {i: r for r, i in enumerate(ids, start=1)} for leg, ids in rankings.items()
        }
        hits = self._hydrate(order_by_score(fused), k)
        result: list[Hit] = []
        budget = 0
        for memory in hits:
            if max_tokens is not None:
                budget += count_tokens(memory.text, s.token_encoding)
                if budget > max_tokens:
                    break
            ranks = {leg: p[memory.id] for leg, p in positions.items() if memory.id in p}
            scores = {leg: raw[leg][memory.id] for leg in ranks}
            result.append(Hit(memory, fused[memory.id], ranks, scores))
        return SearchResult(
            result,
            alpha=float(alpha),
            matched_tags=matched_tags,
            fallback_mode=fallback_reason is not None,
            fallback_reason=fallback_reason,
        )

    def _vector_leg(
        self, vector: Vector, depth: int, node: Node | None, ids: list[str] | None = None
    ) -> dict[str, float]:
        """Chroma's nearest neighbours passing ``node``: ``{id: cosine similarity}`` in
        rank order. ``ids``: the memories passing ``node``, when the index resolved it."""
        if ids is not None:
            return self._vector_leg_among(vector, depth, ids)
        part, exact = chroma_part(node)
        where = to_chroma(part)
        if exact and not tests_arrays(node):
            return self._nearest(vector, depth, where)
        # Chroma cannot test tags (see chroma_part), and Chroma 1.5 keeps array-metadata
        # index entries of deleted collections, which a new collection's $contains can
        # match (seen here; scalar filters are unaffected): Chroma's hits for the part
        # it can test are checked against the keyword index's copy. When tags leave
        # the part looser than the filter, enough hits are asked for to keep ``depth``
        # at the filter's share of the part, and more while some are missing.
        pool = self._index.count(part)
        wanted = depth
        if not exact:
            share = self._index.count(node) / max(1, pool)
            wanted = min(pool, math.ceil(depth / max(share, 1e-9) * 1.2))
        while True:
            hits = self._nearest(vector, max(1, wanted), where)
            passing = self._index.passing(list(hits), node)
            kept = {i: s for i, s in hits.items() if i in passing}
            if len(kept) >= depth or len(hits) < wanted or wanted >= pool:
                return dict(list(kept.items())[:depth])
            wanted = min(pool, wanted * 2)

    def _nearest(self, vector: Vector, n: int, where: dict[str, Any] | None) -> dict[str, float]:
        got = self._chroma(
            "query",
            query_embeddings=[vector],
            n_results=n,
            where=where,
            # Distances only: every other include costs Chroma more than the search
            # itself; the few hits returned are read by id afterwards.
            include=["distances"],
        )
        return _similarities(got)

    def _vector_leg_among(self, vector: Vector, depth: int, ids: list[str]) -> dict[str, float]:
        """Nearest neighbours among ``ids`` only: compared one by one when they are few,
        else Chroma's graph search restricted to them."""
        if not ids:
            return {}
        if len(ids) <= _EXACT_SEARCH:
            got = self._chroma("get", ids=ids, include=["embeddings"])
            found = got["ids"]
            if not found:
                return {}
            nearest = nearest_by_cosine(got["embeddings"], vector, depth)
            return {found[row]: similarity for row, similarity in nearest}
        got = self._chroma(
            "query",
            query_embeddings=[vector],
            n_results=min(depth, len(ids)),
            ids=ids,
            include=["distances"],
        )
        return _similarities(got)

    def _hydrate(self, ordered: list[str], k: int) -> list[Memory]:
        """The first ``k`` of ``ordered`` as memories.

        They are read from the index, which holds a copy of every memory and is checked
        against the collection every ``sync_interval`` (reading the collection instead
        cost a Chroma call, ~1.2 ms at 100,000 memories, on every search). Ids the index
        lacks (a vector hit written by another process since the last check) are read
        from the collection; ids found in neither are skipped."""
        out: list[Memory] = []
        position = 0
        while len(out) < k and position < len(ordered):
            batch = ordered[position : position + (k - len(out))]
            position += len(batch)
            rows = self._index.rows(batch)
            unknown = [i for i in batch if i not in rows]
            if unknown:
                got = self._chroma("get", ids=unknown, include=["documents", "metadatas"])
                for i, d, m in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
                    rows[i] = _index_row(i, d, m)
            out.extend(_memory(rows[i]) for i in batch if i in rows)
        return out

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Release the keyword index and worker threads (a private in-memory collection is
        dropped). Views made by :meth:`with_settings` share them and close nothing."""
        if not self._owner or self._closed:
            return
        self._closed = True
        self._pool.shutdown(wait=True)
        self._index.close()
        if self._drop_on_close:
            with contextlib.suppress(Exception):  # it dies with the process anyway
                # Records first: Chroma 1.5 otherwise leaves their array-metadata index
                # entries behind to match in the next collection (see _vector_leg).
                while ids := self._collection.get(limit=_PAGE, include=[])["ids"]:
                    self._collection.delete(ids=ids)
                self._client.delete_collection(self._collection_name)

    def __enter__(self) -> HybridMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        s = self.settings
        where = s.url or s.path or "in-memory"
        return f"HybridMemory({where!r}, collection={self._collection_name!r})"


# --- record conversion -------------------------------------------------------------------


def _array_tested_fields(node: Node | None) -> set[str]:
    """The metadata fields (not tags) that ``node`` tests with $contains / $not_contains."""
    if node is None:
        return set()
    if isinstance(node, Logical):
        return set().union(*(_array_tested_fields(c) for c in node.children))
    if node.op in ARRAY_OPS and node.field not in RESERVED_FIELDS:
        return {node.field}
    return set()


def _similarities(got: Mapping[str, Any]) -> dict[str, float]:
    """A one-query Chroma result as ``{id: cosine similarity}`` in rank order (the
    collection's distance is cosine: 1 − similarity)."""
    return {i: 1.0 - float(d) for i, d in zip(got["ids"][0], got["distances"][0], strict=True)}


def _chroma_metadata(row: IndexRow, replacing: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The record's metadata as the collection holds it. ``replacing``: the metadata
    stored for this id so far, whose keys the write must remove (Chroma's upsert keeps
    the keys it is not given, and removes those given as None)."""
    meta: dict[str, Any] = dict(row.metadata)
    if row.tags:
        meta[TAGS_KEY] = _TAGS_JSON(row.tags)
    meta[CREATED_KEY] = row.created_at
    meta[UPDATED_KEY] = row.updated_at
    for key in replacing or ():
        meta.setdefault(key, None)
    return meta


def _index_row(
    memory_id: str, document: str | None, metadata: Mapping[str, Any] | None
) -> IndexRow:
    meta = dict(metadata or {})
    text = document or ""
    tags = _stored_tags(meta.pop(TAGS_KEY, None))
    created = float(meta.pop(CREATED_KEY, 0.0) or 0.0)
    updated = float(meta.pop(UPDATED_KEY, created) or created)
    # The content hash (for dedup) is derived from the text: it lives in the index only.
    content_hash = hashlib.sha256(text.encode("utf-8")).hexdigest()
    user = {k: v for k, v in meta.items() if not k.startswith(RESERVED_PREFIX)}
    return IndexRow(memory_id, text, tags, user, str(content_hash), created, updated)


def _stored_tags(value: Any) -> tuple[str, ...]:
    """A memory's tags as the collection holds them: a JSON array in one string, or a
    Chroma metadata array (as earlier versions wrote them; read as they are)."""
    if not value:
        return ()
    if isinstance(value, str):
        try:
            tags = json.loads(value)
        except ValueError:
            return (value,)  # not written by hybrid-memory: kept as one tag, not lost
        return tuple(str(t) for t in tags) if isinstance(tags, list) else (value,)
    return tuple(str(t) for t in value)


def _memory(row: IndexRow) -> Memory:
    return Memory(
        id=row.id,
        text=row.text,
        tags=row.tags,
        metadata=row.metadata,
        created_at=stored_datetime(row.created_at),
        updated_at=stored_datetime(row.updated_at),
    )


def _valid_id(value: Any, field: str = "id") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidInputError(field, f"expected a non-empty string, got {value!r}")
    if len(value) > 512:
        raise InvalidInputError(field, f"at most 512 characters, got {len(value)}")
    return encodable(value, field)


def _valid_ids(ids: Any, field: str = "ids") -> list[str]:
    """One id or a list (tuple, set…) of ids; bytes and other scalars are refused rather
    than iterated."""
    if isinstance(ids, str):
        return [_valid_id(ids, field)]
    if isinstance(ids, (bytes, bytearray, Mapping)) or not isinstance(ids, Iterable):
        raise InvalidInputError(
            field, f"expected an id (str) or a list of ids, got {type(ids).__name__}"
        )
    return [_valid_id(i, f"{field}[{n}]") for n, i in enumerate(ids)]


def _valid_metadata(metadata: Any, field: str = "metadata") -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(field, f"expected a dict, got {type(metadata).__name__}")
    allowed = (
        "str, int (64-bit), finite float, bool, or a non-empty list whose items are all "
        "str, all int, all float or all bool (Chroma's rule)"
    )
    out: dict[str, Any] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(field, f"keys must be non-empty strings, got {key!r}")
        encodable(key, f"{field} key")
        if key in RESERVED_FIELDS or key.startswith((RESERVED_PREFIX, "chroma:", "#", "$")):
            raise InvalidInputError(
                f"{field}[{key!r}]",
                f"reserved name; {', '.join(sorted(RESERVED_FIELDS))} are memory fields and "
                f"keys may not start with {RESERVED_PREFIX!r}, 'chroma:', '#' or '$'",
            )
        where = f"{field}[{key!r}]"
        if _metadata_scalar(value, where):
            out[key] = value
        elif (
            isinstance(value, (list, tuple))
            and value
            and all(_metadata_scalar(v, where) for v in value)
            and len({_metadata_kind(v) for v in value}) == 1
        ):
            out[key] = list(value)
        else:
            raise InvalidInputError(where, f"expected {allowed}, got {value!r}")
    return out


def _metadata_kind(value: Any) -> type:
    return next(t for t in (bool, int, float, str) if isinstance(value, t))


def _metadata_scalar(value: Any, where: str) -> bool:
    """Whether ``value`` is a storable metadata scalar; InvalidInputError for a scalar
    no store can hold (an int beyond SQLite's 64 bits, a lone surrogate)."""
    if isinstance(value, str):
        encodable(value, where)
        return True
    if isinstance(value, bool):
        return True
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise InvalidInputError(
                where, f"integers must fit in 64 bits (SQLite's and Chroma's limit), got {value}"
            )
        return True
    return isinstance(value, float) and math.isfinite(value)


def _forget_client(settings: HybridMemorySettings) -> None:
    """Drop Chroma's cached system for an embedded store's path, after its setup failed:
    Chroma keeps one system per path, a half-started one included, and would hand it
    to the next client."""
    if not settings.path or settings.url:
        return
    from chromadb.api.shared_system_client import SharedSystemClient

    with contextlib.suppress(Exception):
        SharedSystemClient._identifier_to_system.pop(str(settings.path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(settings.path), None)


def _make_client(settings: HybridMemorySettings, *, attempts: int) -> Any:
    """A Chroma client for the settings, its setup retried ``attempts`` times (see
    :meth:`HybridMemory._open_with_retries`); StoreError with a hint when it fails."""
    for attempt in range(1, attempts + 1):
        try:
            return _new_client(settings)
        except (InvalidInputError, StoreError):
            raise
        except Exception as exc:
            _forget_client(settings)
            if attempt < attempts:
                time.sleep(0.05 * attempt * (0.5 + random.random()))
                continue
            where = f"path {settings.path!r}" if settings.path else "an in-memory store"
            raise StoreError(f"could not set up Chroma for {where}: {exc}") from exc
    raise AssertionError("unreachable")


def _new_client(settings: HybridMemorySettings) -> Any:
    import chromadb

    # Chroma's default settings: Chroma keeps one system per path and refuses a second
    # client with different settings, so anything custom here would break users who
    # also open the same path with a plain chromadb.PersistentClient.
    if settings.url:
        parsed = urlparse(settings.url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise InvalidInputError(
                "HYBRID_MEMORY_URL (url)",
                f"expected http(s)://host[:port], got {settings.url!r}",
            )
        port = parsed.port or (443 if parsed.scheme == "https" else 8000)
        try:
            return chromadb.HttpClient(
                host=parsed.hostname,
                port=port,
                ssl=parsed.scheme == "https",
            )
        except Exception as exc:
            raise StoreError(
                f"could not reach the Chroma server at {settings.url}: {exc}. Is it running? "
                "(start one with: chroma run --path DIR --host 127.0.0.1 --port 8000)"
            ) from exc
    if settings.path:
        Path(settings.path).mkdir(parents=True, exist_ok=True)
        return chromadb.PersistentClient(path=settings.path)
    return chromadb.EphemeralClient()


def _index_path(settings: HybridMemorySettings, collection: str) -> str | None:
    if settings.index_path:
        return settings.index_path
    if settings.path:
        return str(Path(settings.path) / f"keyword-{collection}.sqlite3")
    return None
