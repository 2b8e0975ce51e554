"""Opening a store's Chroma collection: created when new, checked to hold the vectors of
the store's embedding, retried while processes that create a new store at the same
moment race in Chroma's own setup."""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from typing import Any

from hybrid_memory._model.errors import EmbeddingMismatchError, StoreError
from hybrid_memory._model.settings import HybridMemorySettings
from hybrid_memory._process.descriptors import descriptor_exhaustion
from hybrid_memory._store.client import SERVER_HINT, make_client

# Collection-level metadata recording how the collection was built.
EMBEDDING_META = "hm:embedding"
DIMENSION_META = "hm:dimension"

_OPEN_PATIENCE = 10.0  # seconds to keep retrying the opening of a store


class DescriptorsExhausted(StoreError):
    """Opening a collection failed for want of file descriptors: retrying cannot help."""


def open_with_retries(
    client: Any,
    settings: HybridMemorySettings,
    chroma_name: str,
    labels: Mapping[str, Any],
    embedding_name: str,
    *,
    own_client: bool,
) -> tuple[Any, Any]:
    """The client and the collection, retried for a while when opening it fails
    (Chroma's SQLite schema: "database is locked", "table collections already exists");
    each retry starts over with a fresh client when the client is the store's own."""
    deadline = time.monotonic() + _OPEN_PATIENCE
    delay = 0.05
    while True:
        try:
            return client, _open(client, chroma_name, labels, embedding_name)
        except DescriptorsExhausted:
            raise
        except StoreError as exc:
            if time.monotonic() + delay > deadline:
                s = settings
                raise StoreError(
                    f"{exc}. Tried for {_OPEN_PATIENCE:.0f} s; is another program holding "
                    f"the store ({s.url or s.path or 'in memory'}) or is the Chroma server "
                    f"down? ({SERVER_HINT})"
                ) from exc.__cause__
        time.sleep(delay * (0.5 + random.random()))
        delay = min(delay * 2, 1.0)
        if own_client:
            client = make_client(settings, attempts=3)


def _open(client: Any, chroma_name: str, labels: Mapping[str, Any], embedding_name: str) -> Any:
    failed = f"could not open Chroma collection {chroma_name!r}"
    try:
        collection = client.get_or_create_collection(
            chroma_name,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={**labels, EMBEDDING_META: embedding_name},
            embedding_function=None,
        )
    except Exception as exc:
        exhausted = descriptor_exhaustion(exc)
        if exhausted:  # not a race to wait out: say which limit
            raise DescriptorsExhausted(f"{failed}: {exhausted} ({exc})") from exc
        raise StoreError(f"{failed}: {exc}") from exc
    recorded = (collection.metadata or {}).get(EMBEDDING_META)
    try:
        fresh = recorded is None and collection.count() == 0
        if fresh:
            collection.modify(
                metadata={**(collection.metadata or {}), EMBEDDING_META: embedding_name}
            )
    except Exception as exc:
        raise StoreError(f"{failed}: {exc}") from exc
    if not fresh and recorded != embedding_name:
        raise EmbeddingMismatchError(
            f"collection {chroma_name!r} was written with embedding {recorded!r}, but "
            f"this store embeds with {embedding_name!r}; vectors of different models are "
            "not comparable. Open it with the same embedding (or pass embedding_name= if "
            "only the name changed), or use another collection."
        )
    return collection
