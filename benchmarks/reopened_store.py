"""A new process on a kept store: how soon it answers its first search with every leg
(vector, keyword, tag), that search against the same search asked again, and its memory
while it warms and once settled; as the path's owner, as a second process on the same
path, and on a Chroma server with the machine's index cache warm; beside Chroma alone's
open and first query of the same store.

Each case runs in a fresh process that times ``HybridMemory(...)`` from its start to the
end of its first search (a question naming one of the store's most carried tags, so that
the tag leg answers), asks the same question again, then waits for the background work
of the open to settle and reads its resident memory: after the open, at its peak (the
kernel's high-water mark) and settled. The second process opens the path while an
owner process holds it; its growth is what its open and searches added to a process
that had imported everything. The server case serves the store's Chroma files with
``chroma run`` and opens it twice through a cache directory of its own: the first open
fills the cache, the second is timed. Figures only, no assertions; the load average is
printed beside them. Prints a JSON document (``--out`` writes it to a file too).

Run it on a store kept by the scale benchmark (its hashing vectors; no model needed):

    python benchmarks/scale.py --n 200000 --systems ours-disk --keep /tmp/kept
    python benchmarks/reopened_store.py /tmp/kept/ours-disk-200000/store --out result.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

QUESTION = "What did {tag} say about the trip last weekend?"
LEGS = {"vector", "keyword", "tag"}


def memory_kb(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field):
                return int(line.split()[1])
    return 0


def most_carried(store: Path, count: int) -> list[str]:
    """The ``count`` tags with the most carriers, read from the store's index file."""
    index = next(store.glob("keyword-*.sqlite3"))
    with sqlite3.connect(f"file:{index}?mode=ro", uri=True) as conn:
        rows = conn.execute(
            "SELECT tag, COUNT(*) AS n FROM memory_tags GROUP BY tag ORDER BY n DESC LIMIT ?",
            (count,),
        ).fetchall()
    return [tag for tag, _ in rows]


def child(args: argparse.Namespace) -> None:
    """One case, in this process: open, first search, the same again, settle."""
    from _scale.embedding import HashingEmbedding, TableEmbedding

    from hybrid_memory import HybridMemory

    embedding_name = f"{TableEmbedding.__module__}.{TableEmbedding.__qualname__}"
    embedding = HashingEmbedding()
    embedding.embed_query("warm the embedding's own code paths")
    before = memory_kb("VmRSS")
    peak = [0]

    def watch() -> None:  # the high-water mark, sampled (VmHWM covers the imports too)
        while True:
            peak[0] = max(peak[0], memory_kb("VmRSS"))
            time.sleep(0.02)

    threading.Thread(target=watch, daemon=True).start()
    where: dict[str, Any] = (
        {"url": args.url, "cache_dir": args.cache_dir} if args.url else {"path": args.store}
    )
    start = time.perf_counter()
    memory = HybridMemory(embedding=embedding, embedding_name=embedding_name, **where)
    opened = time.perf_counter() - start
    rss_open = memory_kb("VmRSS")
    out: dict[str, Any] = {"open_s": round(opened, 3)}
    firsts, agains = [], []
    for n, tag in enumerate(args.tags):
        question = QUESTION.format(tag=tag)
        t = time.perf_counter()
        hits = memory.search(question, k=10)
        first = time.perf_counter() - t
        if n == 0:
            out["first_search_done_s"] = round(time.perf_counter() - start, 3)
            out["first_search_legs"] = sorted({leg for h in hits for leg in h.ranks})
            out["first_search_tag_matched"] = tag in hits.matched_tags
        t = time.perf_counter()
        memory.search(question, k=10)
        agains.append((time.perf_counter() - t) * 1e3)
        firsts.append(first * 1e3)
    out["first_ms"] = [round(x, 2) for x in firsts]
    out["again_ms"] = [round(x, 2) for x in agains]
    out["first_over_again_median"] = round(statistics.median(firsts) / statistics.median(agains), 2)
    if args.fill:  # the machine's cache filled whole before this process closes
        t = time.perf_counter()
        memory.sync()
        out["fill_waited_s"] = round(time.perf_counter() - t, 1)
    time.sleep(args.settle)  # the open's background work (a comparison, a build) ends
    out["rss_before_open_mb"] = round(before / 1024)
    out["rss_after_open_mb"] = round(rss_open / 1024)
    out["rss_peak_mb"] = round(max(peak[0], memory_kb("VmRSS")) / 1024)
    out["rss_settled_mb"] = round(memory_kb("VmRSS") / 1024)
    out["rss_growth_mb"] = out["rss_settled_mb"] - out["rss_before_open_mb"]
    out["peak_over_settled"] = round(out["rss_peak_mb"] / max(1, out["rss_settled_mb"]), 2)
    memory.close()
    print(json.dumps(out), flush=True)


def chroma_alone(args: argparse.Namespace) -> None:
    """Chroma's own open and first query of the same store, in this process: what a
    first answer costs before anything of ours (its HNSW index is read at the first
    query), for the same questions' vectors."""
    from _scale.embedding import HashingEmbedding

    embedding = HashingEmbedding()
    start = time.perf_counter()
    import chromadb

    client = chromadb.PersistentClient(path=args.store)
    collection = client.get_collection("hybrid_memory")
    opened = time.perf_counter() - start
    firsts, agains = [], []
    for n, tag in enumerate(args.tags):
        vector = embedding.embed_query(QUESTION.format(tag=tag))
        for timed in (firsts, agains):
            t = time.perf_counter()
            collection.query(query_embeddings=[vector], n_results=10, include=["documents"])
            timed.append((time.perf_counter() - t) * 1e3)
        if n == 0:
            done = time.perf_counter() - start
    print(
        json.dumps(
            {
                "open_s": round(opened, 3),
                "first_search_done_s": round(done, 3),
                "first_ms": [round(x, 2) for x in firsts],
                "again_ms": [round(x, 2) for x in agains],
                "rss_settled_mb": round(memory_kb("VmRSS") / 1024),
            }
        ),
        flush=True,
    )


def run_child(extra: list[str], timeout: float) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", *extra],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"the case failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def hold_owner(store: str) -> subprocess.Popen[str]:
    """A process that opens the store (owning its path) and waits to be stopped."""
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from _scale.embedding import HashingEmbedding, TableEmbedding\n"
        "from hybrid_memory import HybridMemory\n"
        "name = f'{TableEmbedding.__module__}.{TableEmbedding.__qualname__}'\n"
        f"m = HybridMemory(path={store!r}, embedding=HashingEmbedding(), embedding_name=name)\n"
        "m.search('a quiet evening walk', k=10)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "m.close()\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert owner.stdout is not None
    if owner.stdout.readline().strip() != "ready":
        raise SystemExit("the owner process did not open the store")
    return owner


def serve(store: str) -> tuple[subprocess.Popen[bytes], str]:
    """``chroma run`` on the store's Chroma files, on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    chroma = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    server = subprocess.Popen(
        [chroma, "run", "--path", store, "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    import chromadb

    deadline = time.monotonic() + 120
    while True:
        try:
            chromadb.HttpClient(host="127.0.0.1", port=port).heartbeat()
            return server, f"http://127.0.0.1:{port}"
        except Exception:
            if server.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the Chroma server did not start") from None
            time.sleep(0.5)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("store", type=Path, nargs="?", help="a store directory (scale.py --keep)")
    parser.add_argument("--tags", type=int, default=5, help="most carried tags to ask about")
    parser.add_argument(
        "--cases",
        nargs="+",
        default=["chroma", "owner", "second", "server"],
        help="which cases, in order (one may come again: owner owner); chroma: Chroma "
        "alone's open and first query of the same store",
    )
    parser.add_argument("--settle", type=float, default=15.0, help="seconds to let it settle")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per case")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", help=argparse.SUPPRESS)
    parser.add_argument("--fill", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--chroma-alone", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tag", dest="tag_list", action="append", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.store = str(args.store) if args.store else None
        args.tags = args.tag_list
        (chroma_alone if args.chroma_alone else child)(args)
        return
    if args.store is None:
        parser.error("the store directory is required")
    store = str(args.store)
    tags = most_carried(args.store, args.tags)
    common = ["--settle", str(args.settle), *(a for t in tags for a in ("--tag", t))]
    import hybrid_memory

    report: dict[str, Any] = {
        "benchmark": "reopened store",
        "store": store,
        "date": time.strftime("%Y-%m-%d"),
        "hybrid_memory": str(Path(hybrid_memory.__file__).parent),
        "tags": tags,
        "cases": {},
    }
    with contextlib.suppress(OSError):
        report["commit"] = subprocess.run(
            ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
    for case in args.cases:
        load = os.getloadavg()[0]
        if case == "owner":
            result = run_child([store, *common], args.timeout)
        elif case == "chroma":
            result = run_child([store, "--chroma-alone", *common], args.timeout)
        elif case == "second":
            owner = hold_owner(store)
            try:
                result = run_child([store, *common], args.timeout)
            finally:
                assert owner.stdin is not None
                owner.stdin.write("\n")
                owner.stdin.flush()
                owner.wait(timeout=600)
        elif case == "server":
            server, url = serve(store)
            cache = tempfile.mkdtemp(prefix="reopened-cache-")
            try:
                where = ["--url", url, "--cache-dir", cache]
                fill = run_child([*where, "--fill", *common], args.timeout)  # the cache
                result = run_child([*where, *common], args.timeout)
                result["cache_fill"] = fill
            finally:
                server.terminate()
                server.wait(timeout=60)
                shutil.rmtree(cache, ignore_errors=True)
        else:
            raise SystemExit(f"unknown case {case!r}")
        result["load_average"] = [round(load, 2), round(os.getloadavg()[0], 2)]
        name, again = case, 2
        while name in report["cases"]:  # a case asked for again (the first open builds)
            name, again = f"{case} #{again}", again + 1
        report["cases"][name] = result
        print(f"{case}: {json.dumps(result)}", file=sys.stderr, flush=True)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
