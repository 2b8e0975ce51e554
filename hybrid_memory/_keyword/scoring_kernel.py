"""Whether the keyword leg scores through compiled loops (numba), and loading them.

At a million memories a question's terms have ~126,000 postings at the median and
~590,000 at p95; the numpy path (:meth:`~hybrid_memory._keyword.postings.Postings.top`)
goes over them in ~12 memory-bound passes. The loops of
:mod:`~hybrid_memory._keyword._scoring_loops` do it in one, with the same floats to the bit.

numba is an optional extra (``pip install "hybrid-agent-memory[large-stores]"``), and
never imported by ``import hybrid_memory``: importing it costs ~0.3-0.6 s and ~160 MB of
resident memory with the loops, and most processes (the CLI, an MCP server over a small
store, the test suite's many short processes) never hold enough memories for the loops
to matter. The
first search over a store of at least :data:`LOAD_FROM_ROWS` memories starts a background
thread that imports numba and loads the loops (compiled once, then read from numba's
on-disk cache); searches keep using numpy until the loops are ready, then switch, with
identical results. When numba cannot be imported (a platform without a wheel, a broken
install) or is told not to compile (``NUMBA_DISABLE_JIT=1``), the numpy path stays, and
:func:`status` says why.
"""

from __future__ import annotations

import importlib
import sys
import threading
from types import ModuleType

# A store this large gets the loops. numba costs a process ~160 MB of resident memory
# (measured: +114 MB importing it, 95 of them LLVM's shared library pages, +45 MB loading
# the loops) and ~1 s of CPU once, in the background (with the loops in numba's on-disk
# cache; 4 s compiling them); they save keyword-leg time in proportion to the store.
# At 100,000 memories they take the keyword leg from ~0.6 to ~0.45 ms of a ~4.5 ms search
# (stage means of four paired rounds: benchmarks/results/scale-100k-2026-11-29-*.json);
# the RSS peak growth stayed 1.16-1.20x Chroma's: they load at the first search, after a
# bulk add's peak (with them loading during the ingest, from 20,000, it was 1.67-1.73x:
# docs/performance.md). At 1,000,000 they save ~4 ms at p50 and ~13 ms at p95. Below
# 100,000 the saving shrinks with the postings while the 160 MB weigh more against a
# smaller process (and a short-lived one, the CLI, would pay the load for nothing).
LOAD_FROM_ROWS = 100_000

_loops: ModuleType | None = None
_failure: str | None = None
# numba caches compiled loops beside their source (``__pycache__``) or, where that is
# read-only (a system site-packages), in the user's cache directory; with neither
# writable it refuses ``cache=True``, and the loops are then compiled in each process.
_cache = True
_uncached: str | None = None
_started = False
_lock = threading.Lock()
_ready = threading.Event()


def loops() -> ModuleType | None:
    """The compiled loops when loaded, else None (the numpy path ranks)."""
    return _loops


def want(rows: int) -> ModuleType | None:
    """The loops for a store of ``rows`` live memories: starts loading them in the
    background the first time a store is large enough, and returns them once loaded."""
    if _loops is None and not _started and rows >= LOAD_FROM_ROWS:
        start_loading()
    return _loops


def start_loading() -> None:
    """Import numba and load the loops in a daemon thread (once per process)."""
    global _started
    with _lock:
        if _started:
            return
        _started = True
    threading.Thread(target=_load, name="hybrid-memory-kernel", daemon=True).start()


def load(timeout: float | None = None) -> ModuleType | None:
    """Load the loops now (or wait for the background load): for benchmarks and tests.
    Returns them, or None when numba is not usable (see :func:`status`)."""
    start_loading()
    _ready.wait(timeout)
    return _loops


def caching() -> bool:
    """Whether the loops are compiled with numba's on-disk cache (read at their import)."""
    return _cache


def status() -> str:
    """One line on the keyword leg's path: compiled, loading, or numpy and why."""
    if _loops is not None:
        if _uncached is not None:
            return f"compiled loops (numba, compiled in this process: {_uncached})"
        return "compiled loops (numba)"
    if _failure is not None:
        return f"numpy ({_failure})"
    return "numpy (compiled loops loading)" if _started else "numpy (store below the size)"


def _load() -> None:
    global _loops, _failure
    try:
        import numba
    except ImportError:
        _failure = 'numba is not installed: pip install "hybrid-agent-memory[large-stores]"'
        _ready.set()
        return
    try:
        if numba.config.DISABLE_JIT:  # type: ignore[attr-defined]  # loops run as Python: slow
            _failure = "NUMBA_DISABLE_JIT is set"
            return
        _loops = _import_loops()
    except Exception as e:  # any import or compile failure leaves the numpy path
        _failure = f"numba unavailable: {type(e).__name__}: {e}"
    finally:
        _ready.set()


def _import_loops() -> ModuleType:
    global _cache, _uncached
    name = "hybrid_memory._keyword._scoring_loops"
    try:
        return importlib.import_module(name)
    except RuntimeError as e:  # numba's "cannot cache function ...: no locator available"
        if "cannot cache" not in str(e):
            raise
        sys.modules.pop(name, None)
        _cache, _uncached = False, "no writable cache directory"
        return importlib.import_module(name)


def use(module: ModuleType | None) -> ModuleType | None:
    """Set the loops the postings use (None: numpy), returning the previous ones: for
    tests and benchmarks that compare the two paths in one process."""
    global _loops
    previous, _loops = _loops, module
    return previous
