"""The default embedding model, loaded while a store opens: for a command that opens a
store, embeds one text (a query, a memory) and exits, loading the model (its runtime,
its tokenizer, its session) and opening the store (importing Chroma, starting it) are
the two largest parts of its time, and mostly separate work: done side by side here
instead of one after the other."""

from __future__ import annotations

import contextlib
import threading

from hybrid_memory._embedding.embedders import Embedder, resolve_embedding
from hybrid_memory._model.settings import HybridMemorySettings


def loading_default_model(settings: HybridMemorySettings, text: str) -> Embedder:
    """The embedder a store with ``settings`` and no embedding of its own gets, its model
    loading (by embedding ``text``) in a thread that this call does not wait for; pass it
    to :class:`HybridMemory` as its ``embedding``. A model that fails to load fails again,
    with its error, where the store first embeds. The thread is not a daemon: a process
    that ends without embedding (an add of a text already stored) waits for the load to
    finish rather than stopping the model's runtime half-way, which aborts the process."""
    embedder = resolve_embedding(None, settings)

    def load() -> None:
        with contextlib.suppress(Exception):
            embedder.embed_query(text)

    threading.Thread(target=load, name="hybrid-memory-model").start()
    return embedder
