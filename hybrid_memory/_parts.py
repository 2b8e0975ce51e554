"""The parts of one open store and how they are wired together: the Chroma collection,
its keyword index, the tag cache, the sync with the collection, the writer, the
searcher, the worker threads and the lock that orders writes."""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from hybrid_memory._collection import ChromaCollection
from hybrid_memory._embeddings import Embedder, QueryCache, resolve_embedding
from hybrid_memory._index.index import KeywordIndex
from hybrid_memory._index.location import index_path, server_identity
from hybrid_memory._search import Searcher
from hybrid_memory._settings import HybridMemorySettings
from hybrid_memory._sync import IndexSync
from hybrid_memory._tags import TagCache
from hybrid_memory._writes import Writer


class StoreParts:
    """What a store and the views made by ``HybridMemory.with_settings`` share."""

    def __init__(
        self,
        settings: HybridMemorySettings,
        client: Any,
        embedding: Any,
        embedding_name: str | None,
    ) -> None:
        s = settings
        self.embedder: Embedder = resolve_embedding(embedding, s, embedding_name)
        # A store held in memory only, without a collection name, gets a private one,
        # dropped on close.
        self.private = (
            client is None
            and s.path is None
            and s.url is None
            and "collection" not in s.model_fields_set
        )
        name = f"hm-{uuid.uuid4().hex[:12]}" if self.private else s.collection
        self.collection = ChromaCollection(s, name, self.embedder.name, client)
        # What the store talks to, when that outlives this process and is not a ``path``
        # (whose index lives beside it): the index is then kept in a cache file.
        self.server = None if self.private else server_identity(s, self.collection.client)
        if s.path:
            self.server = None
        self.index = KeywordIndex(
            index_path(s, name, self.collection.id, self.server), s.keyword_tokenizer
        )
        self.tags = TagCache(self.index.all_tags, s.tag_cache_ttl)
        self.lock = threading.RLock()
        # Query embeddings of concurrent searches, and the periodic sync check (one at a
        # time, so it never queues the embeddings of two searches).
        self.pool = ThreadPoolExecutor(max_workers=3, thread_name_prefix="hybrid-memory")
        self.sync = IndexSync(self.collection, self.index, self.tags, self.lock, self.pool)
        self.writer = Writer(
            self.collection, self.index, self.sync, self.tags, self.embedder, self.lock
        )
        self.searcher = Searcher(
            self.collection, self.index, QueryCache(self.embedder, s.query_cache_size), self.pool
        )

    def close(self) -> None:
        self.sync.stop()
        self.pool.shutdown(wait=True)
        self.index.close()
        if self.private:
            self.collection.drop()
