"""Speed at scale: hybrid-memory against Chroma and the peers' hybrid retrievers (issue 5).

Usage::

    python benchmarks/scale.py --n 10000 100000            # hybrid-memory + Chroma's own add
    python benchmarks/scale.py --n 10000 100000 --peers    # + LangChain and LlamaIndex
    python benchmarks/scale.py --n 100000 --model          # + the default embedding model
    python benchmarks/scale.py --n 2000 --queries 50       # the CI size (no timing checks)
    python benchmarks/scale.py --n 10000 --json            # one JSON document on stdout
    python benchmarks/scale.py --n 100000 --systems ours-disk chroma-disk --paired --rounds 2

What it does, per N:

1. Builds N distinct memories from real sentences: LoCoMo dialogue turns and Cranfield
   abstract sentences from ``../shared/data`` (``--data``), recombined by a seeded
   generator into one to three sentences each, with tags (speakers, topics) and
   metadata (user, source, session, importance) like a real agent store, and creation
   times spread over two years. The same seed gives the same store, and the first
   10,000 memories of the 100,000 store are the 10,000 store.
2. Embeds everything once with a fixed, cheap, deterministic embedding
   (:class:`HashingEmbedding`: hashed words and character trigrams, 384 dimensions,
   L2-normalised) and hands every system a lookup table of those vectors, so what is
   timed is the engine, not a model. Time spent inside embedding calls is measured and
   subtracted anyway.
3. Measures every system in a fresh subprocess, one after the other (never in
   parallel), so peak resident memory is the system's own and nothing is warm; with
   ``--paired`` the systems' subprocesses start together and take turns, one block of
   work at a time (:mod:`_scale.turns`), so that they meet the same minutes of a
   machine whose speed drifts, still never sharing the cores:

   - bulk ingest: one call with all N memories (Chroma: its maximal batches);
     memories/s excluding embedding calls; peak RSS of the process and its growth
     over the baseline taken after imports and data loading (the kernel's high-water
     mark is reset at the baseline through ``/proc/self/clear_refs``);
   - add one memory to the store of N (``--adds`` times, peers ``--peer-adds``): the
     ``add`` call plus whatever the next search still has to do before the memory is
     searchable (an index built lazily on the next search, say), taken as first
     search minus an immediate repeat of it (the same settling is added to the ingest);
     every added memory is checked to come back in the top 10 for its own text and,
     for hybrid-memory, from each leg (a search filtered to that one memory, so the
     fusion cannot hide a leg's miss);
   - search: ``--queries`` distinct real questions (LoCoMo and Cranfield, interleaved;
     five more as untimed warm-up), k = 10, each asked once so no query or result cache
     helps; the time spent embedding the query is subtracted. hybrid-memory and Chroma
     also run the same queries restricted to one user's memories (a metadata filter).

Systems: ``hybrid-memory`` on disk (``HybridMemory(path=...)``, the default embedded
use) and in memory (``HybridMemory()``), given no ids (the store assigns them and skips
exact duplicates, as when an agent adds memories); Chroma's own ``collection.add`` of the same
ids, vectors, documents and metadata on disk and in memory (vector search only, the
floor under any Chroma-based store); with ``--peers`` LangChain ``EnsembleRetriever``
(rank_bm25 ``BM25Retriever`` + Chroma) and LlamaIndex ``QueryFusionRetriever`` (bm25s
``BM25Retriever`` + Chroma vector index) from :mod:`hybrid_memory_eval.peers`, both
in memory (Chroma's ephemeral client), both indexing ``"<tags>: <text>"``. LangChain's
``Chroma.add_texts`` sends one batch, which Chroma refuses above its maximal batch size
(5,461): the LangChain peer's ingest then falls back to adds of that size, each
rebuilding BM25 over all records so far, as its user would have to (the JSON says how
many calls it took).

``--model`` separately measures the default embedding model (all-MiniLM-L6-v2 on
onnxruntime, as hybrid-memory runs it, CPU): throughput at the store's embedding batch size,
single-query latency, and end-to-end search on the largest on-disk store with the query
embedded by the model (documents keep the cheap vectors: same dimension, same cost for
the engine), first asked and repeated (the query-embedding cache).

The code, one module per concern (``benchmarks/scale.py`` is only the entry point, run
again with ``--worker`` for each system):

- :mod:`_scale.constants`: sizes, paths, the systems' names and labels;
- :mod:`_scale.embedding`: the cheap embedding and the lookup table of its vectors;
- :mod:`_scale.data`: the memories and queries, prepared once per N, loaded per worker;
- :mod:`_scale.measure`: resident memory, percentiles, size on disk;
- :mod:`_scale.systems`: hybrid-memory, Chroma and the peers behind one small shape;
- :mod:`_scale.worker`: one system (or the model, ``--model``) measured in its process;
- :mod:`_scale.turns`: the ring of turns of a ``--paired`` run;
- :mod:`_scale.compare`: ratios ours/theirs, ingest over rounds, issue 5's targets;
- :mod:`_scale.render`: the tables;
- :mod:`_scale.cli`: the flags, the orchestration, the report.
"""
