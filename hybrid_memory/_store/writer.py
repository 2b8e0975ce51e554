"""Writes, to the collection first and then the keyword index (docs/architecture.md,
"the add path"): dedup by content, embedding in batches, the collection's batches with
the index rows written beside each one, and the tag cache kept in step.

Every input has been validated before anything here runs, so an error cannot leave a
half-written memory; the index is derived, so a crash between the two writes loses
nothing acknowledged (the next check refills the index from the collection).
"""

from __future__ import annotations

import functools
import sqlite3
import threading
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from hybrid_memory._embedding.embedders import Embedder, document_matrix
from hybrid_memory._keyword.damage import is_full
from hybrid_memory._keyword.index import KeywordIndex
from hybrid_memory._model.errors import DuplicateIdError, InvalidInputError, MemoryNotFoundError
from hybrid_memory._model.filters import Node, chroma_part, matches, to_chroma
from hybrid_memory._model.inputs import Change, PendingMemories
from hybrid_memory._model.records import (
    CREATED_KEY,
    SUPERSEDES_KEY,
    TAGS_KEY,
    IndexRow,
    NewMemory,
    chroma_metadata,
    content_hash,
    stored_tags,
)
from hybrid_memory._model.tags import TagCache
from hybrid_memory._model.times import now_timestamp
from hybrid_memory._model.write_outcomes import (
    ADDED,
    DUPLICATE,
    REPLACED,
    AddResult,
    DeleteReport,
    WriteReport,
)
from hybrid_memory._process.heap import release_after_write
from hybrid_memory._store.collection import ChromaCollection
from hybrid_memory._store.recent_vectors import RecentVectors
from hybrid_memory._store.similar import SimilarCheck
from hybrid_memory._store.sync import IndexSync


class Writer:
    """Adds, updates and deletes memories in one collection and its keyword index."""

    def __init__(
        self,
        collection: ChromaCollection,
        index: KeywordIndex,
        sync: IndexSync,
        tags: TagCache,
        embedder: Embedder,
        lock: threading.RLock,
        recent: RecentVectors,
    ) -> None:
        self._collection = collection
        self._index = index
        self._sync = sync
        self._tags = tags
        self._embedder = embedder
        self._lock = lock
        self._recent = recent

    def add(
        self,
        memories: PendingMemories,
        *,
        upsert: bool,
        allow_duplicates: bool,
        sync_interval: float,
        similar: SimilarCheck | None = None,
    ) -> WriteReport:
        """Store ``memories``; their ids in order, each with what was done with it
        (decided here, under the write lock, so two writers of one text cannot both be
        told "added"). Without an id, a memory whose exact text is stored already is not
        stored again (unless ``allow_duplicates``): its id is returned as a
        ``"duplicate"``; one written by the same call counts too. With an id that
        exists (``upsert``), the memory is ``"replaced"``; the rest are ``"added"``, or
        ``"similar"`` when ``similar`` finds memories saying nearly the same."""
        explicit = [i for i in memories.ids if i is not None]
        if not upsert:
            seen: set[str] = set()
            for memory_id in explicit:
                if memory_id in seen:
                    raise InvalidInputError(
                        "id", f"id {memory_id!r} appears more than once in this call"
                    )
                seen.add(memory_id)
        hashes = [h for i, h in zip(memories.ids, memories.hashes, strict=True) if i is None]
        if hashes and not allow_duplicates:
            # Dedup needs every stored memory's hash; waited for outside the write lock,
            # which the warming fill takes for each page.
            self._sync.wait_warm()
        with self._lock:
            self._sync.maybe_sync(sync_interval)  # dedup against other processes' writes
            existing = self._collection.metadata_by_id(explicit)
            if existing and not upsert:
                raise DuplicateIdError(next(i for i in explicit if i in existing))
            known = {} if allow_duplicates else self._index.ids_by_hash(hashes)
            results: list[AddResult] = []
            to_write: dict[str, int] = {}  # id → position in ``memories``
            for position, (given, digest) in enumerate(
                zip(memories.ids, memories.hashes, strict=True)
            ):
                if given is not None:
                    # A repeat of an id in one upsert call replaces the earlier item.
                    before = given in existing or given in to_write
                    results.append(AddResult(given, REPLACED if before else ADDED))
                    to_write[given] = position
                elif not allow_duplicates and digest in known:
                    results.append(AddResult(known[digest], DUPLICATE))
                else:
                    new_id = uuid.uuid4().hex
                    results.append(AddResult(new_id, ADDED))
                    to_write[new_id] = position
                    if not allow_duplicates:
                        known[digest] = new_id
            if to_write:
                self._write(memories, to_write, existing, similar)
            return WriteReport(results if similar is None else similar.told(results))

    def _write(
        self,
        memories: PendingMemories,
        to_write: dict[str, int],
        existing: Mapping[str, Mapping[str, Any]],
        similar: SimilarCheck | None = None,
    ) -> None:
        """Write the memories ``to_write`` (id → position) one Chroma batch at a time:
        each batch is validated again, embedded, turned into index rows and written
        before the next, so a call's memory use is one batch's, whatever the number of
        memories (a million memories in one call held every vector, row and metadata at
        once: gigabytes).

        Ids this store generated (uuid4) cannot exist yet: Chroma's ``add`` is cheaper
        than ``upsert``. Ids the caller chose go through ``upsert`` (another process may
        have written the same id since it was checked). A failure part-way (the model,
        the store) leaves the earlier batches stored; the same call again stores the
        rest, as memories without ids are deduplicated by content and ids are upserted.
        """
        generated = [(i, p) for i, p in to_write.items() if memories.ids[p] is None]
        chosen = [(i, p) for i, p in to_write.items() if memories.ids[p] is not None]
        step = self._collection.max_batch()
        created: float | None = None  # one call's new memories share one creation time
        for operation, part in (("add", generated), ("upsert", chosen)):
            for start in range(0, len(part), step):
                batch = [(i, memories.memory(p)) for i, p in part[start : start + step]]
                created = self._write_records(operation, batch, existing, created, similar)
                # What the batch freed in C goes back to the OS before the next one,
                # rather than staying resident as free heap (hybrid_memory._process.heap).
                release_after_write(len(batch))

    def _write_records(
        self,
        operation: str,
        batch: Sequence[tuple[str, NewMemory]],
        existing: Mapping[str, Mapping[str, Any]],
        created_at: float | None,
        similar: SimilarCheck | None = None,
    ) -> float:
        """Embed, store and index one batch, and note its tags. Stamped (``updated_at``)
        once embedded, just before its one Chroma request (what the catch-up of other
        processes relies on: :class:`~hybrid_memory._store.sync.IndexSync`). New memories are
        created at ``created_at``, the call's first stamp (this one's when None), which
        is returned. ``similar`` checks the batch once embedded."""
        vectors = document_matrix(self._embedder, [m.text for _, m in batch])
        self._collection.check_dimension(vectors)
        if similar is not None:
            batch, vectors = similar.check(self._collection, batch, vectors, existing)
            if not batch:  # every one skipped
                return now_timestamp() if created_at is None else created_at
        now = now_timestamp()
        first = now if created_at is None else created_at
        rows: list[IndexRow] = []
        metadatas: list[dict[str, Any]] = []
        removed_tags: list[str] = []
        for memory_id, m in batch:
            before = existing.get(memory_id)
            old_created = (before or {}).get(CREATED_KEY)
            created = m.created_at if m.created_at is not None else (old_created or first)
            row = IndexRow(memory_id, m.text, m.tags, m.metadata, m.content_hash, created, now)
            rows.append(row)
            metadatas.append(chroma_metadata(row, before))
            if before:
                removed_tags.extend(
                    t for t in stored_tags(before.get(TAGS_KEY)) if t not in row.tags
                )
        # Marked as a write only now, not while embedding (which can take minutes): a
        # background check that finds nothing to do never waits for the model.
        with self._sync.writing():
            self._write_batch(operation, rows, vectors, metadatas)
            self._note_tags([row.tags for row in rows], removed_tags)
        self._recent.add([row.id for row in rows], vectors)
        return first

    def _write_batch(
        self,
        operation: str,
        rows: list[IndexRow],
        vectors: np.ndarray,
        metadatas: list[dict[str, Any]],
    ) -> None:
        """One batch: the index rows are written beside the collection's write (in a
        thread: Chroma holds the GIL, SQLite does not), and committed once the
        collection took them."""
        for attempt in (1, 2):
            written = False
            try:
                with self._index.upserting(rows, vectors):
                    self._collection.write(operation, rows, vectors, metadatas)
                    written = True
                return
            except sqlite3.DatabaseError as exc:
                if written and is_full(exc):  # the collection took it: the write stands
                    self._sync.index_lags([row.id for row in rows], exc)
                    return
                if attempt == 2:
                    raise
                # Rebuilt from the collection, which holds the batch if it took it;
                # else the batch is written again.
                self._sync.recover(exc)
                if written:
                    return

    def restore(self, rows: Sequence[IndexRow], vectors: np.ndarray | None) -> set[str]:
        """Write memories exactly as given (an import): their ids, texts, tags, metadata
        and both times, and their ``vectors`` (one row each) when given, else the texts
        embedded by this store's model. ``rows``: one Chroma batch at most
        (:meth:`ChromaCollection.max_batch`), distinct ids, validated already. A memory
        with an id that exists is replaced. Returns the ids that existed before."""
        if vectors is None:
            vectors = document_matrix(self._embedder, [row.text for row in rows])
        self._collection.check_dimension(vectors)
        ids = [row.id for row in rows]
        with self._lock:
            existing = self._collection.metadata_by_id(ids)
            metadatas = [chroma_metadata(row, existing.get(row.id)) for row in rows]
            removed_tags = [
                tag
                for row in rows
                for tag in stored_tags(existing.get(row.id, {}).get(TAGS_KEY))
                if tag not in row.tags
            ]
            with self._sync.writing():
                self._write_batch("upsert", list(rows), vectors, metadatas)
                self._note_tags([row.tags for row in rows], removed_tags)
            self._recent.add(ids, vectors)
        return set(existing)

    def update(self, changes: Sequence[Change]) -> list[IndexRow]:
        """Replace what each change gives of a stored memory (distinct ids, all stored,
        else :class:`MemoryNotFoundError` and nothing changes); the new rows in order.
        Only the memories whose text changed are re-embedded (in one call); the rest
        keep their stored vectors. One read of the stored memories, then one write a
        Chroma batch at a time, however many memories."""
        with self._lock:
            stored = self._collection.stored_many([c.id for c in changes])
            retext = [c for c in changes if c.text is not None and c.text != stored[c.id][0].text]
            new_vectors: dict[str, np.ndarray] = {}
            if retext:
                matrix = document_matrix(self._embedder, [c.text or "" for c in retext])
                self._collection.check_dimension(matrix)
                new_vectors = {c.id: matrix[i] for i, c in enumerate(retext)}
            rows: list[IndexRow] = []
            removed_tags: list[str] = []
            vectors = np.asarray(
                [new_vectors.get(c.id, stored[c.id][2]) for c in changes], dtype=np.float32
            )
            step = self._collection.max_batch()
            for start in range(0, len(changes), step):
                # Each batch stamped just before its one Chroma request (see _write_records).
                now = now_timestamp()
                part: list[IndexRow] = []
                metadatas: list[dict[str, Any]] = []
                for c in changes[start : start + step]:
                    old, stored_metadata, _ = stored[c.id]
                    text = old.text if c.text is None else c.text
                    metadata = old.metadata if c.metadata is None else c.metadata
                    if c.supersedes is not None:
                        metadata = {**metadata, SUPERSEDES_KEY: c.supersedes}
                    row = IndexRow(
                        c.id,
                        text,
                        old.tags if c.tags is None else c.tags,
                        metadata,
                        content_hash(text, metadata),
                        old.created_at or now,
                        max(now, old.updated_at),
                    )
                    part.append(row)
                    metadatas.append(chroma_metadata(row, stored_metadata))
                    removed_tags.extend(t for t in old.tags if t not in row.tags)
                rows.extend(part)
                block = vectors[start : start + step]
                with self._sync.writing():
                    self._collection.write("upsert", part, block, metadatas)
                    self._sync.after_collection_write(
                        [row.id for row in part], functools.partial(self._index.upsert, part, block)
                    )
                self._recent.add([row.id for row in part], block)
            self._note_tags([row.tags for row in rows], removed_tags)
            return rows

    def delete(self, ids: Sequence[str]) -> DeleteReport:
        """Delete the memories with these ids, which must all exist; how many."""
        with self._lock:
            present = self._collection.metadata_by_id(ids)
            missing = [i for i in ids if i not in present]
            if missing:
                raise MemoryNotFoundError.of(list(dict.fromkeys(missing)))
            return self._delete(ids)

    def delete_matching(self, node: Node) -> DeleteReport:
        """Delete the memories passing the filter ``node``; how many. Chroma tests the part
        of the filter it can (see :func:`chroma_part`); the rest is checked on its records."""
        with self._lock:
            part, exact = chroma_part(node)
            if exact:
                ids = self._collection.ids_matching(to_chroma(part))
            else:
                ids = [
                    row.id
                    for page in self._collection.rows(to_chroma(part))
                    for row in page
                    if matches(node, row.metadata, row.tags, row.created_at, row.updated_at)
                ]
            return self._delete(ids)

    def _delete(self, ids: Sequence[str]) -> DeleteReport:
        if not ids:
            return DeleteReport(())
        unique = list(dict.fromkeys(ids))
        with self._sync.writing():
            self._collection.delete(unique)
            self._recent.forget(unique)
            self._sync.after_collection_write(unique, lambda: self._index.delete(unique))
        self._tags.invalidate()
        return DeleteReport(unique)

    def _note_tags(self, written: Iterable[Iterable[str]], removed: Sequence[str]) -> None:
        note_tags(self._tags, written, removed)


def note_tags(cache: TagCache, written: Iterable[Iterable[str]], removed: Sequence[str]) -> None:
    """Keep the tag ``cache`` in step with a write of this process: tags taken off a
    memory may have lost their last carrier (reload); added ones are merged in."""
    if removed:
        cache.invalidate()
    else:
        cache.add({tag for tags in written for tag in tags})
