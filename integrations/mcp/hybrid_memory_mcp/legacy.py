"""Memories stored by the server's first namespace scheme, moved into their namespace.

Up to this release a namespaced server kept its memories in the store itself, under
the id ``<namespace>:<id>`` with ``metadata[namespace_key] = namespace``. That scheme
let namespaces collide (``"A"`` + ``"sub:k"`` was ``"A:sub"`` + ``"k"``) and leak tags,
counts and keyword statistics. A namespace is now a view of its own
(:meth:`hybrid_memory.HybridMemory.namespace`); a server opening a namespace moves that
namespace's old memories into it, once: same id (the prefix removed), text, tags,
metadata (the namespace field removed) and creation time. The move is idempotent: each
memory is written into the namespace before it is deleted from the store, so a server
stopped half-way finishes the move on its next start.
"""

from __future__ import annotations

from hybrid_memory import HybridMemory

__all__ = ["migrate_prefixed_namespace"]

_BATCH = 500


def migrate_prefixed_namespace(store: HybridMemory, namespace: str, key: str = "namespace") -> int:
    """Move the memories of ``namespace`` stored under the old scheme in ``store`` into
    ``store.namespace(namespace)``; returns how many moved (0: nothing to do, at the
    cost of one filtered count)."""
    scope = {key: namespace}
    if store.count(scope) == 0:
        return 0
    target = store.namespace(namespace)
    prefix = f"{namespace}:"
    # Both marks of the old scheme: a memory that only carries the field is the user's.
    old = [m for m in store.list_memories(scope) if m.id.startswith(prefix)]
    moved = 0
    for start in range(0, len(old), _BATCH):
        batch = old[start : start + _BATCH]
        target.add_many(
            [
                {
                    "id": m.id.removeprefix(prefix),
                    "text": m.text,
                    "tags": list(m.tags),
                    "metadata": {k: v for k, v in m.metadata.items() if k != key},
                    "created_at": m.created_at,
                }
                for m in batch
            ],
            upsert=True,
        )
        moved += store.delete([m.id for m in batch])
    return moved
