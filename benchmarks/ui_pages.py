"""The web page's server time at scale (issue 42): hybrid-memory-ui's browse and search
pages over a store of N memories, against the library's own calls.

    python benchmarks/ui_pages.py                 # N = 100,000 (the store is built once,
                                                  # then kept in --workdir for reruns)
    python benchmarks/ui_pages.py --n 2000        # the fast mode (CI size)

The store holds the scale benchmark's synthetic memories (benchmarks/_scale/data.py:
LoCoMo turns and Cranfield sentences, with tags, metadata and two years of creation
times) embedded by its cheap hashing embedding, so the model is not what is timed. The
page is the real Starlette application (the same routes, middleware and templates as
``hybrid-memory ui``), called in this process as the ASGI server calls it, without a
socket: what is timed is the server's work for a request (the security checks, the
store's calls, the HTML), from the request to the last byte of the response.

Printed (milliseconds, p50 / p95 over the requests):

- browse: ``GET /`` pages of 50 newest first, at the first page and at pages spread over
  the whole store (the last one included), and with a tag filter. Target: p95 <= 100 ms
  at 100,000.
- search: ``GET /?q=...`` (20 hits with each leg's rank and score, highlighted) beside
  the library's ``memory.search(q, k=20)`` for the same queries, interleaved (the page
  reads time words in the query, ``time_phrases="narrow"``; the library's default reads
  none). Target: the page's p50 <= 2x the library's.
- stats: ``GET /stats`` once (counts per day, per tag and per namespace).
- tags: ``GET /tags`` once (every tag counted, up to 300).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from _scale.constants import DEFAULT_DATA  # noqa: E402
from _scale.data import generate_memories, load_sources  # noqa: E402
from _scale.embedding import HashingEmbedding  # noqa: E402

PAGE = 50
K = 20
TARGET_BROWSE_P95_MS = 100.0
TARGET_SEARCH_RATIO = 2.0


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return statistics.median(ordered), p95


def timed(call: Callable[[], Any]) -> float:
    start = time.perf_counter()
    call()
    return (time.perf_counter() - start) * 1000


class AsgiClient:
    """GET requests straight into an ASGI application, on one event loop (what uvicorn
    does once it has parsed a request)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.loop = asyncio.new_event_loop()

    def get(self, address: str) -> int:
        return self.loop.run_until_complete(self._get(address))

    async def _get(self, address: str) -> int:
        path, _, query = address.partition("?")
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query.encode(),
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8777"), (b"accept", b"text/html")],
            "client": ("127.0.0.1", 50000),
            "server": ("127.0.0.1", 8777),
        }
        status = 0
        body = bytearray()

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body":
                body.extend(message.get("body", b""))

        await self.app(scope, receive, send)
        return status

    def close(self) -> None:
        self.loop.close()


def build(path: Path, n: int, data: Path) -> None:
    """The store of ``n`` synthetic memories at ``path`` (kept: a rerun reuses it)."""
    from hybrid_memory import HybridMemory

    marker = path / f"built-{n}"
    if marker.exists():
        return
    pools, _ = load_sources(data)
    memories = generate_memories(pools, n)
    memory = HybridMemory(path=str(path), embedding=HashingEmbedding())
    start = time.perf_counter()
    try:
        memory.add_many(
            {
                "id": m["id"],
                "text": m["text"],
                "tags": m["tags"],
                "metadata": m["metadata"],
                "created_at": datetime.fromisoformat(m["created_at"]),
            }
            for m in memories
        )
        assert memory.count() == n, memory.count()
    finally:
        memory.close()
    print(f"built {n:,} memories in {time.perf_counter() - start:.0f} s at {path}")
    marker.touch()


def run(args: argparse.Namespace) -> dict[str, Any]:
    from hybrid_memory_ui import UIConfig, create_app

    from hybrid_memory import HybridMemory

    path = args.workdir / f"store-{args.n}"
    path.mkdir(parents=True, exist_ok=True)
    build(path, args.n, args.data)
    _, queries = load_sources(args.data)
    rng = random.Random(7)
    chosen = queries[: args.queries + 5]
    memory = HybridMemory(path=str(path), embedding=HashingEmbedding())
    try:
        client = AsgiClient(create_app(memory, UIConfig()))

        def get(address: str) -> None:
            status = client.get(address)
            assert status == 200, (address, status)

        pages = -(-memory.count() // PAGE)
        tag = memory.tags()[0]
        warm = ("/", f"/?page={pages}", f"/?{urlencode({'q': chosen[0]})}", f"/?tags={tag}")
        for address in warm:
            get(address)  # warm: the first request of each kind
        first = [timed(lambda: get("/")) for _ in range(args.requests)]
        spread = [
            timed(lambda p=p: get(f"/?page={p}"))
            for p in [pages, *(rng.randint(1, pages) for _ in range(args.requests - 1))]
        ]
        tagged = [timed(lambda: get(f"/?{urlencode({'tags': tag})}")) for _ in range(args.requests)]
        library: list[float] = []
        page: list[float] = []
        for query in chosen[:5]:  # warm both
            memory.search(query, k=K)
            get(f"/?{urlencode({'q': query})}")
        for query in chosen[5:]:
            address = f"/?{urlencode({'q': query, 'k': K})}"
            library.append(timed(lambda q=query: memory.search(q, k=K)))
            page.append(timed(lambda a=address: get(a)))
        stats_ms = timed(lambda: get("/stats"))
        get("/tags")  # warm
        tags_ms = timed(lambda: get("/tags"))
        n = memory.count()
        client.close()
    finally:
        memory.close()
    return {
        "n": n,
        "browse_first": percentiles(first),
        "browse_spread": percentiles(spread),
        "browse_tag": percentiles(tagged),
        "search_library": percentiles(library),
        "search_page": percentiles(page),
        "stats": stats_ms,
        "tags": tags_ms,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100,000)")
    parser.add_argument("--requests", type=int, default=60, help="browse requests per kind")
    parser.add_argument("--queries", type=int, default=50, help="search queries timed")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="evaluation data")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=Path("/tmp/hybrid-memory-ui-bench"),
        help="where the store is built and kept for reruns",
    )
    args = parser.parse_args(argv)
    if not (args.data / "locomo" / "corpus.jsonl").exists():
        parser.error(f"no evaluation data in {args.data} (pass --data)")
    found = run(args)

    def ms(pair: tuple[float, float]) -> str:
        return f"p50 {pair[0]:7.1f} ms   p95 {pair[1]:7.1f} ms"

    ratio = found["search_page"][0] / found["search_library"][0]
    browse_p95 = max(found["browse_first"][1], found["browse_spread"][1])
    print(f"hybrid-memory-ui pages at {found['n']:,} memories (server time, in process)")
    print(f"  browse, first page of {PAGE}      {ms(found['browse_first'])}")
    print(f"  browse, pages across the store  {ms(found['browse_spread'])}")
    print(f"  browse, one tag                 {ms(found['browse_tag'])}")
    print(f"  search, library search(k={K})   {ms(found['search_library'])}")
    print(f"  search, the page /?q=           {ms(found['search_page'])}")
    print(f"  stats page                      {found['stats']:7.1f} ms")
    print(f"  tags page                       {found['tags']:7.1f} ms")
    browse_ok = "meets" if browse_p95 <= TARGET_BROWSE_P95_MS else "MISSES"
    search_ok = "meets" if ratio <= TARGET_SEARCH_RATIO else "MISSES"
    print(f"  browse p95 {browse_p95:.1f} ms: {browse_ok} the target <= {TARGET_BROWSE_P95_MS:g}")
    print(f"  search page / library p50 = {ratio:.2f}x: {search_ok} the target <= 2x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
