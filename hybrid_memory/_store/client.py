"""Making the Chroma client of a store: a server's (checked to answer, every request
given a deadline) or an in-memory one, with the hint a user needs when it fails."""

from __future__ import annotations

import random
import socket
import time
import urllib.error
import urllib.request
from typing import Any
from urllib.parse import urlparse

from hybrid_memory._model.errors import InvalidInputError, StoreError
from hybrid_memory._model.settings import HybridMemorySettings

SERVER_HINT = "start one with: chroma run --path DIR --host 127.0.0.1 --port 8000"


def make_client(settings: HybridMemorySettings, *, attempts: int) -> Any:
    """A Chroma client for the settings, its setup retried ``attempts`` times (see
    :meth:`ChromaCollection._open_with_retries`); StoreError with a hint when it fails."""
    for attempt in range(1, attempts + 1):
        try:
            return _new_client(settings)
        except (InvalidInputError, StoreError):
            raise
        except Exception as exc:
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
        _check_answers(settings.url, settings.request_timeout)
        try:
            client = chromadb.HttpClient(
                host=parsed.hostname,
                port=port,
                ssl=parsed.scheme == "https",
            )
            _set_timeout(client, settings.request_timeout)
            return client
        except Exception as exc:
            raise StoreError(
                f"could not reach the Chroma server at {settings.url}: {exc}. Is it running? "
                f"({SERVER_HINT})"
            ) from exc
    return chromadb.EphemeralClient()


def _check_answers(url: str, timeout: float) -> None:
    """Raise StoreError unless the server at ``url`` answers a heartbeat within
    ``timeout`` seconds: Chroma's client asks the server while it is made, with no
    deadline of its own, so a server that accepts connections and never answers would
    hang the opening of a store."""
    heartbeat = url.rstrip("/") + "/api/v2/heartbeat"
    try:
        with urllib.request.urlopen(heartbeat, timeout=timeout) as answer:
            answer.read(1024)
    except urllib.error.HTTPError:
        return  # it answered (an older server, a proxy's page): Chroma's client will tell
    except TimeoutError as exc:
        raise StoreError(
            f"the Chroma server at {url} accepted the connection but did not answer within "
            f"{timeout:g} s (request_timeout, HYBRID_MEMORY_REQUEST_TIMEOUT); is it stopped "
            f"or overloaded? ({SERVER_HINT})"
        ) from exc
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        if isinstance(reason, (TimeoutError, socket.timeout)):
            raise StoreError(
                f"the Chroma server at {url} did not answer within {timeout:g} s "
                f"(request_timeout, HYBRID_MEMORY_REQUEST_TIMEOUT) ({SERVER_HINT})"
            ) from exc
        raise StoreError(
            f"could not reach the Chroma server at {url}: {reason}. Is it running? ({SERVER_HINT})"
        ) from exc


def _set_timeout(client: Any, timeout: float) -> None:
    """Give every request of a Chroma HTTP client a deadline: chromadb makes its httpx
    session with ``timeout=None`` and has no setting for it."""
    session = getattr(getattr(client, "_server", None), "_session", None)
    if session is not None:
        session.timeout = timeout


def is_timeout(exc: BaseException) -> bool:
    """Whether a Chroma HTTP call failed for want of an answer in time (httpx's
    ReadTimeout, WriteTimeout, ConnectTimeout, PoolTimeout; or a plain TimeoutError)."""
    while exc is not None:
        if isinstance(exc, TimeoutError) or type(exc).__name__.endswith("Timeout"):
            return True
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return False
