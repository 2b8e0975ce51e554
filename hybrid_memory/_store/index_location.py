"""Where a store's derived keyword index lives.

- ``index_path`` set: there.
- An embedded store (``path``): beside Chroma's files, one file per collection.
- A store on a Chroma server (``url``, or a client of a server or of a directory): a
  cache file under ``cache_dir``/indexes, so that a process that opens the store again
  (or another process on the same machine) reuses the index and catches up only what
  changed, instead of reading every memory from the server. The file is named by the
  server's address, tenant and database and by the collection's id (a UUID the server
  gives the collection when it is created): two servers or collections never share a
  file, and a collection deleted and created again under the same name starts a new one.
- An in-memory store: in memory.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from pathlib import Path
from typing import Any

from hybrid_memory._embedding.model_files import default_cache_dir
from hybrid_memory._model.settings import HybridMemorySettings

log = logging.getLogger("hybrid_memory")


def server_identity(settings: HybridMemorySettings, client: Any) -> str | None:
    """What names the Chroma a store talks to, when it outlives this process: the
    server's URL or the client's directory, with the tenant and database. None for an
    in-memory Chroma (nothing to cache)."""
    if settings.url:
        place = settings.url.rstrip("/").lower()
    else:
        try:
            chroma = client.get_settings()
        except Exception:  # a client that does not say where it is: no cache
            return None
        if chroma.chroma_server_host:
            scheme = "https" if chroma.chroma_server_ssl_enabled else "http"
            place = f"{scheme}://{chroma.chroma_server_host}:{chroma.chroma_server_http_port}"
        elif chroma.is_persistent:
            place = "file://" + os.path.realpath(chroma.persist_directory)
        else:
            return None
    tenant = getattr(client, "tenant", None) or "default_tenant"
    database = getattr(client, "database", None) or "default_database"
    return f"{place}|{tenant}|{database}"


def index_path(
    settings: HybridMemorySettings,
    collection_name: str,
    collection_id: str,
    server: str | None,
) -> str | None:
    """The keyword index file of a collection (None: in memory); see the module's text.

    ``server``: :func:`server_identity`, for stores not embedded by ``path``."""
    if settings.index_path:
        return settings.index_path
    if settings.path:
        return str(Path(settings.path) / f"keyword-{collection_name}.sqlite3")
    if server is None:
        return None
    root = Path(settings.cache_dir).expanduser() if settings.cache_dir else default_cache_dir()
    folder = root / "indexes"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(f"cannot write in {folder}")
    except OSError as exc:
        log.warning(
            "keyword index cache %s unusable (%s): the index of %r is kept in memory and "
            "rebuilt from the server on every open; set HYBRID_MEMORY_CACHE_DIR to a "
            "writable directory",
            folder,
            exc,
            collection_name,
        )
        return None
    key = hashlib.sha256(f"{server}|{collection_id}".encode()).hexdigest()[:24]
    readable = re.sub(r"[^a-zA-Z0-9._-]", "_", collection_name)[:64]
    return str(folder / f"{readable}-{key}.sqlite3")
