"""Searching any one of many namespaces whose memories fill the shared collection, in
minutes instead of the hour ``scale.py --namespaces 10000`` takes to create them one by one.

Usage::

    python benchmarks/tenants_search.py 10000          # under ulimit -n 256, on a path
    python benchmarks/tenants_search.py 10000 --url http://127.0.0.1:8000   # a server

The shared collection (``<store>.namespaces``) is filled directly with the records
10,000 namespaces of 10 memories would hold (the same texts, tags, metadata and vectors
as ``scale.py --namespaces``, each record marked and named as the store marks it); 400
of those namespaces are then opened once each by the store (their index files made and
filled), and 200 searches run, each in one of the 400 drawn at random. With
``open_namespaces`` at its default under ``ulimit -n 256`` (21), almost every search opens
its namespace again: what searching any one of ten thousand tenants costs. On a server
(``--url``, a new collection each run, the index files in a temporary cache directory)
nobody counts the writes, so each namespace opened again is compared with its share.
"""

from __future__ import annotations

import argparse
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _scale.measure import percentiles
from _scale.tenants import _texts, _Timed

from hybrid_memory import HybridMemory
from hybrid_memory.testing import namespace_records

OPENED, SEARCHES, PER = 400, 200, 10


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("n", nargs="?", type=int, default=10000, help="namespaces")
    parser.add_argument("--url", help="a Chroma server instead of a path")
    args = parser.parse_args()
    n = args.n
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
    import chromadb

    path = tempfile.mkdtemp(prefix="tenants-search-")
    embedding = _Timed()
    where: dict[str, Any] = {"path": path, "collection": "hybrid_memory"}
    client: Any
    if args.url:
        url = urlparse(args.url)
        where = {"url": args.url, "cache_dir": path, "collection": f"ts{int(time.time())}"}
        client = chromadb.HttpClient(host=url.hostname or "127.0.0.1", port=url.port or 8000)
    else:
        client = chromadb.PersistentClient(path)
    store = HybridMemory(embedding=embedding, embedding_name=embedding.name, **where)
    store.namespace("tenant-0").add_many(_texts(0, PER))  # makes the shared collections
    store.close()
    collection = where["collection"]
    now = time.time()
    shared_name = namespace_records(collection, "tenant-0", [], now)[0]
    shared = client.get_collection(shared_name)
    for start in range(1, n, 500):
        ids, texts, metadatas = [], [], []
        for tenant in range(start, min(start + 500, n)):
            items = [{**item, "id": str(j)} for j, item in enumerate(_texts(tenant, PER))]
            _, tenant_ids, tenant_metadatas = namespace_records(
                collection, f"tenant-{tenant}", items, now
            )
            ids += tenant_ids
            texts += [item["text"] for item in items]
            metadatas += tenant_metadatas
        vectors = embedding.embed_documents(texts)
        shared.add(ids=ids, embeddings=vectors, documents=texts, metadatas=metadatas)
    print(f"shared collection: {shared.count()} records", flush=True)
    store = HybridMemory(embedding=embedding, embedding_name=embedding.name, **where)
    rng = random.Random(44)
    chosen = rng.sample(range(1, n), min(OPENED, n - 1))
    for tenant in chosen:
        store.namespace(f"tenant-{tenant}")
    timed, wrong = [], 0
    for _ in range(SEARCHES):
        tenant = rng.choice(chosen)
        query = " ".join(_texts(tenant, PER)[rng.randrange(PER)]["text"].split()[3:6])
        before, start_time = embedding.seconds, time.perf_counter()
        hits = store.namespace(f"tenant-{tenant}").search(query, k=5)
        spent = time.perf_counter() - start_time - (embedding.seconds - before)
        timed.append(spent * 1000)
        wrong += (int(hits[0].text.split()[1]) if hits else -1) != tenant
    kept = store.settings.open_namespaces or "default"
    print(f"{n} namespaces, open_namespaces {kept}, ulimit -n 256, {args.url or 'a path'}")
    print(f"search ms: {percentiles(timed)}; wrong tenant: {wrong}")
    store.close()


if __name__ == "__main__":
    main()
