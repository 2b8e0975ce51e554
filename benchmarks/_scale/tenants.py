"""Many tenants on one store (issue 44): ``benchmarks/scale.py --namespaces N``.

Usage::

    python benchmarks/scale.py --namespaces 300 1000              # ours and Chroma, on a path
    python benchmarks/scale.py --namespaces 10000 --ulimit 256    # under a descriptor limit
    python benchmarks/scale.py --namespaces 1000 --url http://127.0.0.1:8000
    python benchmarks/scale.py --namespaces 1000 --systems ours ours-one chroma chroma-one
    python benchmarks/scale.py --namespaces 300 --json            # one JSON document

Per N and system, in a fresh process whose ``RLIMIT_NOFILE`` soft limit is set to
``--ulimit`` before anything is imported (Chroma sizes its own caches from it):

- ``ours``: ``HybridMemory(path=...)`` (or ``url=``), then N namespaces
  (``memory.namespace("tenant-<i>")``), each given ``--per`` memories in one ``add_many``
  with tags and metadata, as a per-user agent memory does;
- ``chroma``: Chroma alone, N collections of the same vectors, ids, documents and
  metadata (vector search only: the floor under any store built on Chroma);
- ``ours-one`` and ``chroma-one``: the same N x ``--per`` memories in one store or one
  collection, a ``tenant`` metadata key telling them apart: the reference for the disk
  target (within 2x of the same memories in one collection).

Vectors come from the benchmark's cheap deterministic embedding
(:class:`_scale.embedding.HashingEmbedding`), and the time spent inside it is subtracted,
so that what is timed is the store. Printed: open file descriptors (``/proc/self/fd``)
after the last namespace and after the searches, RSS (current and peak), the size on disk
and the number of files, creating one namespace (open + ``add_many``) p50/p95, and
``--searches`` searches, each in a namespace drawn at random among all N (so most are
namespaces not used for a while), p50/p95. A namespace that cannot be created (a
descriptor limit hit, say) ends the run; the report says at which namespace and with
which error.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SYSTEMS = ("ours", "chroma", "ours-one", "chroma-one")
_WORDS = (  # noqa: SIM905 - a sentence reads better than a list of 70 strings
    "deploy vault key dark mode theme coffee tea meeting friday monday budget report "
    "travel paris berlin tokyo flight hotel dentist doctor gym running cycling piano "
    "guitar python rust database backup server laptop phone birthday anniversary gift "
    "allergy peanuts vegetarian sushi pizza garden tomatoes dog cat vet insurance tax "
    "invoice client project launch deadline review hiring interview salary holiday snow "
    "beach mountain museum concert novel podcast recipe bread pasta wine chess football"
).split()


def _texts(tenant: int, per: int) -> list[dict[str, Any]]:
    rng = random.Random(tenant * 7919 + 17)
    items = []
    for j in range(per):
        words = rng.sample(_WORDS, 7)
        items.append(
            {
                "text": f"tenant {tenant} note {j}: " + " ".join(words),
                "tags": words[:2],
                "metadata": {"kind": "note", "n": j},
            }
        )
    return items


def _fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the listing's own descriptor
    except OSError:
        return -1


class _Timed:
    """The cheap embedding, counting the seconds spent inside it (subtracted)."""

    def __init__(self) -> None:
        from .embedding import HashingEmbedding

        self._inner = HashingEmbedding()
        self.name = self._inner.name
        self.seconds = 0.0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        start = time.perf_counter()
        try:
            return self._inner.embed_documents(texts)
        finally:
            self.seconds += time.perf_counter() - start

    def embed_query(self, text: str) -> list[float]:
        start = time.perf_counter()
        try:
            return self._inner.embed_query(text)
        finally:
            self.seconds += time.perf_counter() - start

    def __call__(self, texts: list[str]) -> list[list[float]]:
        return self.embed_documents(texts)


def _run(
    create: Callable[[int], None],
    search: Callable[[int, str], int],
    n: int,
    per: int,
    searches: int,
    embedding: _Timed,
) -> dict[str, Any]:
    from .measure import percentiles

    out: dict[str, Any] = {}
    creates: list[float] = []
    started = time.perf_counter()
    for tenant in range(n):
        before = embedding.seconds
        t0 = time.perf_counter()
        try:
            create(tenant)
        except Exception as exc:  # the report says where and why the store gave up
            out["failed_at"] = tenant
            out["error"] = f"{type(exc).__name__}: {exc}"[:600]
            break
        creates.append((time.perf_counter() - t0 - (embedding.seconds - before)) * 1000)
        if (tenant + 1) % 1000 == 0:
            print(f"  {tenant + 1} namespaces, {_fds()} fds", file=sys.stderr, flush=True)
    out["created"] = len(creates)
    out["create_seconds"] = round(time.perf_counter() - started, 1)
    out["fds_after_create"] = _fds()
    out["create_ms"] = percentiles(creates)
    rng = random.Random(44)
    timed: list[float] = []
    misses = 0
    if creates and "failed_at" not in out:
        for _ in range(searches):
            tenant = rng.randrange(n)
            query = " ".join(_texts(tenant, per)[rng.randrange(per)]["text"].split()[3:6])
            before = embedding.seconds
            t0 = time.perf_counter()
            try:
                found = search(tenant, query)
            except Exception as exc:
                out["error"] = f"search: {type(exc).__name__}: {exc}"[:600]
                break
            timed.append((time.perf_counter() - t0 - (embedding.seconds - before)) * 1000)
            misses += found != tenant
    out["search_ms"] = percentiles(timed)
    out["search_wrong_tenant"] = misses
    out["fds_after_search"] = _fds()
    return out


def _ours(args: argparse.Namespace, where: dict[str, Any], one: bool) -> dict[str, Any]:
    from hybrid_memory import HybridMemory

    embedding = _Timed()
    memory = HybridMemory(embedding=embedding, embedding_name=embedding.name, **where)
    per = args.per

    def create(tenant: int) -> None:
        items = _texts(tenant, per)
        if one:
            for item in items:
                item["metadata"] = {**item["metadata"], "tenant": tenant}
            memory.add_many(items)
        else:
            memory.namespace(f"tenant-{tenant}").add_many(items)

    def search(tenant: int, query: str) -> int:
        if one:
            hits = memory.search(query, k=5, filter={"tenant": tenant})
        else:
            hits = memory.namespace(f"tenant-{tenant}").search(query, k=5)
        return int(hits[0].text.split()[1]) if hits else -1

    try:
        return _run(create, search, args.namespaces_n, per, args.searches, embedding)
    finally:
        memory.close()


def _chroma(args: argparse.Namespace, where: dict[str, Any], one: bool) -> dict[str, Any]:
    import chromadb

    embedding = _Timed()
    if "url" in where:
        from urllib.parse import urlparse

        url = urlparse(where["url"])
        client = chromadb.HttpClient(host=url.hostname or "127.0.0.1", port=url.port or 8000)
    else:
        client = chromadb.PersistentClient(path=str(where["path"]))
    prefix = where.get("collection", "tenants")
    shared = client.get_or_create_collection(prefix) if one else None

    def create(tenant: int) -> None:
        items = _texts(tenant, args.per)
        texts = [item["text"] for item in items]
        vectors = embedding.embed_documents(texts)
        metas = [{**item["metadata"], "tags": ",".join(item["tags"])} for item in items]
        ids = [f"{tenant}-{j}" for j in range(len(items))]
        if shared is not None:
            metas = [{**m, "tenant": tenant} for m in metas]
            shared.add(ids=ids, embeddings=vectors, documents=texts, metadatas=metas)
        else:
            collection = client.create_collection(f"{prefix}-{tenant}")
            collection.add(ids=ids, embeddings=vectors, documents=texts, metadatas=metas)

    def search(tenant: int, query: str) -> int:
        vector = embedding.embed_query(query)
        if shared is not None:
            got = shared.query(query_embeddings=[vector], n_results=5, where={"tenant": tenant})
        else:
            got = client.get_collection(f"{prefix}-{tenant}").query(
                query_embeddings=[vector], n_results=5
            )
        documents = got["documents"][0] if got["documents"] else []
        return int(documents[0].split()[1]) if documents else -1

    return _run(create, search, args.namespaces_n, args.per, args.searches, embedding)


def _worker(args: argparse.Namespace) -> dict[str, Any]:
    import resource

    from .measure import Rss, dir_mb

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if args.ulimit:
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.ulimit, hard))
    system = args.tenant_worker
    where: dict[str, Any]
    if args.url:
        where = {"url": args.url, "collection": f"t{os.getpid()}-{int(time.time())}"}
        if system.startswith("ours"):  # the keyword index files, measured and removed
            where["cache_dir"] = str(Path(args.workdir) / "cache")
    else:
        where = {"path": Path(args.workdir) / system}
    result: dict[str, Any] = {"system": system, "n": args.namespaces_n, "per": args.per}
    result["ulimit_n"] = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    result["fds_at_start"] = _fds()
    one = system.endswith("-one")
    measure = _ours if system.startswith("ours") else _chroma
    result.update(measure(args, where, one))
    result["rss_mb"] = Rss.current_mb()
    result["peak_rss_mb"] = Rss.peak_mb()
    if "cache_dir" in where:
        cache = Path(where["cache_dir"])
        result["index_cache_mb"] = dir_mb(cache)
        result["index_cache_files"] = sum(1 for p in cache.rglob("*") if p.is_file())
    if not args.url:
        path = Path(where["path"])
        result["disk_mb"] = dir_mb(path)
        result["files"] = sum(1 for p in path.rglob("*") if p.is_file())
    return result


def _row(r: dict[str, Any]) -> str:
    if "create_ms" not in r:
        return f"| {r.get('system')} | {r.get('n')} | error: {r.get('error')} |"
    c, s = r["create_ms"], r["search_ms"]
    failed = f" failed at {r['failed_at']}" if "failed_at" in r else ""
    failed += f": {r['error']}" if "error" in r else ""
    cells = [
        r["system"],
        f"{r['created']}/{r['n']}{failed}",
        r["ulimit_n"],
        f"{r['fds_after_create']} / {r['fds_after_search']}",
        f"{r['rss_mb']} / {r['peak_rss_mb']}",
        _disk(r),
        f"{c.get('p50', '-')} / {c.get('p95', '-')}",
        f"{s.get('p50', '-')} / {s.get('p95', '-')}",
        r["search_wrong_tenant"],
    ]
    return "| " + " | ".join(str(x) for x in cells) + " |"


def _disk(r: dict[str, Any]) -> str:
    if "index_cache_mb" in r:  # on a server: this process's keyword index files only
        return f"index {r['index_cache_mb']} ({r['index_cache_files']} files)"
    return f"{r.get('disk_mb', '-')} ({r.get('files', '-')} files)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--namespaces", type=int, nargs="+", required=True, metavar="N")
    parser.add_argument("--per", type=int, default=10, help="memories per namespace")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--systems", nargs="+", default=["ours", "chroma"], choices=SYSTEMS)
    parser.add_argument("--ulimit", type=int, default=0, help="RLIMIT_NOFILE soft limit")
    parser.add_argument("--url", default=None, help="a Chroma server instead of a path")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tenant-worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.tenant_worker:
        args.namespaces_n = args.namespaces[0]
        result = _worker(args)
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
        return 0
    from .constants import SCRIPT

    results = []
    for n in args.namespaces:
        for system in args.systems:
            with tempfile.TemporaryDirectory(prefix="tenants-") as workdir:
                out = Path(workdir) / "result.json"
                command = [sys.executable, str(SCRIPT), "--namespaces", str(n)]
                command += ["--per", str(args.per), "--searches", str(args.searches)]
                command += ["--tenant-worker", system, "--workdir", workdir, "--out", str(out)]
                command += ["--ulimit", str(args.ulimit)] if args.ulimit else []
                command += ["--url", args.url] if args.url else []
                env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
                proc = subprocess.run(command, env=env, stdout=sys.stderr)
                if proc.returncode == 0 and out.exists():
                    results.append(json.loads(out.read_text(encoding="utf-8")))
                else:
                    results.append({"system": system, "n": n, "error": f"exit {proc.returncode}"})
            print(f"{system} at {n}: done", file=sys.stderr, flush=True)
    if args.json:
        print(json.dumps({"namespaces": results}, indent=1))
        return 0
    print(f"\nNamespaces of {args.per} memories, {'server ' + args.url if args.url else 'path'}")
    print(
        "| system | created | ulimit -n | fds after create / search | RSS MB now / peak "
        "| disk MB | create ms p50 / p95 | search ms p50 / p95 | wrong tenant |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        print(_row(r))
    for line in _disk_ratios(results):
        print(line)
    return 0


def _disk_ratios(results: list[dict[str, Any]]) -> list[str]:
    """The disk target (issue 44: within 2x of the same memories in one collection):
    each N's namespaces against one store and one Chroma collection, when measured."""
    lines = []
    for n in dict.fromkeys(r["n"] for r in results):
        disk = {r["system"]: r["disk_mb"] for r in results if r["n"] == n and "disk_mb" in r}
        for many, one in (("ours", "ours-one"), ("ours", "chroma-one"), ("chroma", "chroma-one")):
            if disk.get(many) and disk.get(one):
                ratio = disk[many] / disk[one]
                lines.append(f"disk at {n}: {many} / {one} = {ratio:.2f}x")
    return lines
