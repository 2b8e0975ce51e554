"""Peers that cannot share hybrid-memory's environment: each in its own virtual
environment, driven as a subprocess over JSON lines.

mem0 (``mem0ai``) pins a protobuf older than ours, and mcp-memory-service needs
``mcp<2`` where hybrid-memory's MCP plugin needs ``mcp>=2.3``; so each is installed in
a virtual environment of its own (``hybrid-memory peers install``) and run there by a
small driver script (``hybrid_memory_eval/drivers/``, standard library plus the
peer library; each driver's docstring says exactly how it uses its library and which
defaults apply)::

    from hybrid_memory_eval.foreign import foreign_peer

    make = foreign_peer("mem0")            # a Peer factory, like the entries of PEERS
    peer = make(embedding)                 # starts <venv>/bin/python mem0_driver.py
    peer.add([PeerRecord("m1", "Alice prefers dark mode")])
    peer.search("which theme does alice like?", k=10)   # -> ["m1"]
    peer.close()                           # the driver deletes its temporary store

- Vectors are computed here, with the harness's embedding (the same all-MiniLM-L6-v2
  vectors every other peer gets), and sent with each text; the driver replaces its
  library's embedding model with a lookup of those vectors. A peer venv needs no torch
  and no model download.
- The protocol (one JSON object a line, one reply per request; see
  ``drivers/_protocol.py``): ``add`` -> ``{"ok": true}``, ``search`` -> ``{"ids": [...]}``,
  ``close`` -> ``{"ok": true}`` (and for the scale benchmark a single add, a filtered
  search, the library's own seconds per call and the driver's ``rss``), any failure ->
  ``{"error": "..."}``, which raises :class:`ForeignPeerError` naming the peer. The
  driver's stderr goes to a log file (deleted when the peer closes cleanly); a driver
  that dies is reported with its exit code and the last lines of that log.
- Peers cannot use tags: a record is indexed as :func:`peer_text` of it, as for the other
  peers.
- Venvs live in ``~/.cache/hybrid-memory/peer-venvs/<name>`` (``HYBRID_MEMORY_PEER_VENVS``
  moves the folder). :func:`build_venv` creates one with the pinned requirements of
  :data:`FOREIGN_PEERS` and records its build time and size in
  ``<venv>/hybrid-memory-peer.json``; a venv counts as built once that file exists.
  mcp-memory-service's sqlite-vec backend loads a SQLite extension, so its venv is made
  from a Python whose ``sqlite3`` can (``HYBRID_MEMORY_PEER_PYTHON`` names one;
  otherwise the first of this Python, ``python3.11``, ``/usr/bin/python3``,
  ``python3`` that can).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from hybrid_memory import HybridMemoryError
from hybrid_memory_eval.peers import EmbeddingLike, PeerRecord, peer_text

__all__ = [
    "FOREIGN_PEERS",
    "ForeignPeer",
    "ForeignPeerError",
    "ForeignSpec",
    "build_venv",
    "foreign_peer",
    "install_command",
    "not_ready_reason",
    "venv_dir",
    "venvs_root",
]

#: Environment variable that moves the folder holding the peer venvs.
VENVS_ENV = "HYBRID_MEMORY_PEER_VENVS"
#: Environment variable naming the Python to build peer venvs from.
PYTHON_ENV = "HYBRID_MEMORY_PEER_PYTHON"
#: The file a finished venv build writes (build time, size, versions).
MANIFEST = "hybrid-memory-peer.json"
DRIVERS = Path(__file__).parent / "drivers"


class ForeignPeerError(HybridMemoryError):
    """A foreign peer failed: its driver answered an error, died, or cannot be built."""


@dataclass(frozen=True)
class ForeignSpec:
    """A peer that runs in its own venv."""

    name: str  #: also the report key and the venv folder name
    driver: str  #: the driver script in ``drivers/``
    requirements: tuple[str, ...]  #: pinned, installed into the venv
    needs_sqlite_extensions: bool = False
    why_pinned: str = ""


#: Name -> spec, in report order.
FOREIGN_PEERS: dict[str, ForeignSpec] = {
    "mem0": ForeignSpec(
        "mem0",
        "mem0_driver.py",
        # mem0's own extras install every vector store; its Chroma adapter needs only this.
        ("mem0ai==2.2.1", "chromadb==1.5.9"),
    ),
    "mcp-memory-service": ForeignSpec(
        "mcp-memory-service",
        "mcp_memory_service_driver.py",
        ("mcp-memory-service==12.2.0",),
        needs_sqlite_extensions=True,
        why_pinned="12.2.1 and later require certifi>=2026.10.19, which the package "
        "registry does not have yet",
    ),
}


def _spec(name: str) -> ForeignSpec:
    try:
        return FOREIGN_PEERS[name]
    except KeyError:
        raise ForeignPeerError(
            f"no foreign peer {name!r}; the foreign peers are {', '.join(FOREIGN_PEERS)}"
        ) from None


def venvs_root() -> Path:
    """The folder holding one venv per foreign peer."""
    configured = os.environ.get(VENVS_ENV, "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "hybrid-memory" / "peer-venvs"


def venv_dir(name: str) -> Path:
    return venvs_root() / _spec(name).name


def _venv_python(name: str) -> Path:
    return venv_dir(name) / "bin" / "python"


def install_command(name: str) -> str:
    return f"hybrid-memory peers install {_spec(name).name}"


def not_ready_reason(name: str) -> str | None:
    """Why the peer cannot run now (its venv is missing or unfinished), or None."""
    folder = venv_dir(name)
    if not (folder / MANIFEST).is_file() or not _venv_python(name).exists():
        return f"no venv at {folder}; build it with: {install_command(name)}"
    return None


def read_manifest(name: str) -> dict[str, Any] | None:
    path = venv_dir(name) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# --- building a venv --------------------------------------------------------------------

_PROBE = (
    "import sqlite3, sys\n"
    "assert sys.version_info >= (3, 10)\n"
    "if {ext}:\n"
    "    c = sqlite3.connect(':memory:'); c.enable_load_extension(True)\n"
)


def _base_python(spec: ForeignSpec) -> str:
    configured = os.environ.get(PYTHON_ENV, "").strip()
    fallbacks = [shutil.which("python3.11"), "/usr/bin/python3", shutil.which("python3")]
    candidates = [configured] if configured else [sys.executable, *fallbacks]
    tried: list[str] = []
    for candidate in dict.fromkeys(c for c in candidates if c):
        probe = _PROBE.format(ext=spec.needs_sqlite_extensions)
        ok = subprocess.run([candidate, "-c", probe], capture_output=True).returncode == 0
        if ok:
            return candidate
        tried.append(candidate)
    need = "Python 3.10+" + (
        " whose sqlite3 can load extensions (enable_load_extension)"
        if spec.needs_sqlite_extensions
        else ""
    )
    raise ForeignPeerError(
        f"{spec.name}: needs {need}; none of {', '.join(tried)} qualifies "
        f"(name one with {PYTHON_ENV}=/path/to/python)"
    )


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def _run_step(spec: ForeignSpec, step: list[str]) -> None:
    """Run one build step; a failure raises with the end of its output."""
    done = subprocess.run(step, capture_output=True, text=True)
    if done.returncode != 0:
        noise = "is ignored: it is neither a file nor a directory"
        lines = [ln for ln in (done.stdout + done.stderr).splitlines() if noise not in ln]
        raise ForeignPeerError(
            f"{spec.name}: {' '.join(step[:4])} ... exited {done.returncode}:\n"
            + "\n".join(lines[-15:])
        )


def build_venv(name: str, *, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """(Re)create the peer's venv with its pinned requirements; returns the manifest
    (requirements, Python, installed versions, build seconds, size in bytes)."""
    spec = _spec(name)
    folder = venv_dir(name)
    python = _base_python(spec)
    if folder.exists():
        progress(f"{spec.name}: removing the old venv at {folder}")
        shutil.rmtree(folder)
    started = time.perf_counter()
    folder.parent.mkdir(parents=True, exist_ok=True)
    progress(f"{spec.name}: creating {folder} from {python}")
    _run_step(spec, [python, "-m", "venv", str(folder)])
    progress(f"{spec.name}: pip install {' '.join(spec.requirements)}")
    pip = [str(folder / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    _run_step(spec, [*pip, *spec.requirements])
    seconds = time.perf_counter() - started
    packages = [r.split("==")[0] for r in spec.requirements]
    versions = subprocess.run(
        [
            str(folder / "bin" / "python"),
            "-c",
            "import json, sys; from importlib.metadata import version; "
            "print(json.dumps({p: version(p) for p in sys.argv[1:]}))",
            *packages,
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    manifest = {
        "name": spec.name,
        "requirements": list(spec.requirements),
        "installed": json.loads(versions.stdout),
        "python": python,
        "build_seconds": round(seconds, 1),
        "size_bytes": _size(folder),
        "built_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    progress(
        f"{spec.name}: built in {manifest['build_seconds']} s, "
        f"{manifest['size_bytes'] / 2**20:.0f} MiB at {folder}"
    )
    return manifest


# --- the protocol client ----------------------------------------------------------------


class ForeignPeer:
    """One running driver behind the :class:`~hybrid_memory_eval.peers.Peer` protocol."""

    #: Records per ``add`` request.
    batch_size = 256

    def __init__(
        self,
        name: str,
        embedding: EmbeddingLike,
        *,
        python: str | os.PathLike[str],
        driver: str | os.PathLike[str],
        timeout: float = 900.0,
        log_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        """Start ``python driver`` and wait for it to say it is ready. ``timeout``:
        seconds to wait for any one answer; ``log_dir``: where the driver's stderr log
        goes (default: the system's temporary directory)."""
        self.name = name
        self._embedding = embedding
        self._timeout = timeout
        self._buffer = bytearray()
        self._closed = False
        self._seconds: float | None = None
        handle, log = tempfile.mkstemp(
            prefix=f"hybrid-memory-peer-{_slug(name)}-", suffix=".log", dir=log_dir
        )
        self.log_path = Path(log)
        self._log = os.fdopen(handle, "wb")
        env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
        }
        env.update(
            HF_HUB_OFFLINE="1",
            TRANSFORMERS_OFFLINE="1",
            ANONYMIZED_TELEMETRY="False",
            PYTHONUNBUFFERED="1",
        )
        try:
            self._process = subprocess.Popen(
                [str(python), str(driver)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
            )
        except OSError as exc:
            self._log.close()
            raise ForeignPeerError(f"{name}: could not start {python} {driver}: {exc}") from exc
        try:
            self.info: dict[str, Any] = self._reply("start")
        except BaseException:
            self._kill()
            raise
        self.info.pop("ready", None)

    # The Peer protocol -----------------------------------------------------------------

    def add(self, records: Sequence[PeerRecord]) -> None:
        seconds = 0.0
        for start in range(0, len(records), self.batch_size):
            batch = records[start : start + self.batch_size]
            message = {"op": "add", "records": self._payload(batch), **self._fields}
            seconds += _seconds(self._request(message, "add"))
        self._seconds = seconds

    def search(self, query: str, k: int, where: dict[str, Any] | None = None) -> list[str]:
        """The ids of the top ``k`` for ``query``; ``where`` ({field: value}, fields named
        in :attr:`filter_fields` when they were added): the peer's own filtered search."""
        vector = [float(x) for x in self._embedding.embed_query(query)]
        message = {"op": "search", "query": query, "vector": vector, "k": k}
        if where:
            message["filter"] = where
        reply = self._request(message, "search")
        self._seconds = _seconds(reply)
        ids = reply.get("ids")
        if not isinstance(ids, list):
            raise self._error(f"search answered without a list of ids: {reply!r}")
        return [str(i) for i in ids]

    # For the scale benchmark ------------------------------------------------------------

    #: Metadata fields each add asks the driver to keep filterable (none for the evaluation).
    filter_fields: tuple[str, ...] = ()

    @property
    def _fields(self) -> dict[str, Any]:
        return {"filter_fields": list(self.filter_fields)} if self.filter_fields else {}

    def add_one(self, record: PeerRecord) -> dict[str, Any]:
        """The peer library's single-memory add; returns the driver's reply (``s``: the
        seconds inside the library; mcp-memory-service says whether it ``stored`` it)."""
        message = {"op": "add", "one": True, "records": self._payload([record]), **self._fields}
        reply = self._request(message, "add one")
        self._seconds = _seconds(reply)
        return reply

    @property
    def last_seconds(self) -> float | None:
        """Seconds the last ``add``, ``add_one`` or ``search`` spent inside the peer
        library, measured in the driver: the library's time without the pipe and JSON
        around it (for ``add``, the sum over its requests)."""
        return self._seconds

    def rss(self, reset: bool = False) -> dict[str, Any]:
        """The driver process's resident memory, ``current_mb`` and ``peak_mb``;
        ``reset``: the peak starts again from now."""
        return self._request({"op": "rss", "reset": reset}, "rss")

    def _payload(self, batch: Sequence[PeerRecord]) -> list[dict[str, Any]]:
        texts = [peer_text(r) for r in batch]
        vectors = self._embedding.embed_documents(texts)
        return [
            {
                "id": r.id,
                "text": text,
                "tags": list(r.tags),
                "metadata": r.metadata,
                "vector": [float(x) for x in vector],
            }
            for r, text, vector in zip(batch, texts, vectors, strict=True)
        ]

    def close(self) -> None:
        """Ask the driver to close (it deletes its store) and wait for it to exit."""
        if self._closed:
            return
        self._closed = True
        clean = False
        try:
            if self._process.poll() is None:
                self._request({"op": "close"}, "close")
                self._process.wait(timeout=60)
                clean = self._process.returncode == 0
        except (ForeignPeerError, subprocess.TimeoutExpired):
            pass
        finally:
            self._kill()
        if clean:
            with contextlib.suppress(OSError):
                self.log_path.unlink()

    # Plumbing ------------------------------------------------------------------------------

    def _request(self, message: dict[str, Any], what: str) -> dict[str, Any]:
        if self._process.poll() is not None:
            raise self._died(what)
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(json.dumps(message).encode("utf-8") + b"\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._died(what) from None
        return self._reply(what)

    def _reply(self, what: str) -> dict[str, Any]:
        line = self._read_line(what)
        try:
            reply = json.loads(line)
        except ValueError:
            raise self._error(f"{what}: not a protocol line: {line[:200]!r}") from None
        if not isinstance(reply, dict):
            raise self._error(f"{what}: not a protocol object: {line[:200]!r}")
        if "error" in reply:
            raise self._error(f"{what} failed: {reply['error']}")
        return reply

    def _read_line(self, what: str) -> str:
        assert self._process.stdout is not None
        fd = self._process.stdout.fileno()
        deadline = time.monotonic() + self._timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._kill()
                raise self._error(f"{what}: no answer within {self._timeout:.0f} s; stopped it")
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                raise self._died(what)
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return line.decode("utf-8", errors="replace")

    def _tail(self, lines: int = 15) -> str:
        if not self._log.closed:
            self._log.flush()
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _error(self, message: str) -> ForeignPeerError:
        tail = self._tail()
        return ForeignPeerError(
            f"peer {self.name}: {message}"
            + (f"\n--- last lines of its stderr ({self.log_path}):\n{tail}" if tail else "")
        )

    def _died(self, what: str) -> ForeignPeerError:
        try:
            code = self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        return self._error(f"the driver exited (code {code}) during {what}")

    def _kill(self) -> None:
        if self._process.poll() is None:
            self._process.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._process.wait(timeout=10)
        for stream in (self._process.stdin, self._process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._log.close()


def _seconds(reply: dict[str, Any]) -> float:
    """The library's seconds a reply reports (0 from a driver that does not say)."""
    value = reply.get("s", 0.0)
    return float(value) if isinstance(value, (int, float)) else 0.0


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower()).strip("-") or "peer"


class ForeignPeerFactory:
    """A :data:`~hybrid_memory_eval.peers.PEERS`-style factory for one foreign
    peer; :attr:`info` holds what the last driver it started said about itself
    (library, version, store, search settings)."""

    def __init__(self, name: str) -> None:
        self.spec = _spec(name)
        self.info: dict[str, Any] = {}

    def __call__(self, embedding: EmbeddingLike) -> ForeignPeer:
        reason = not_ready_reason(self.spec.name)
        if reason:
            raise ForeignPeerError(f"peer {self.spec.name}: {reason}")
        peer = ForeignPeer(
            self.spec.name,
            embedding,
            python=_venv_python(self.spec.name),
            driver=DRIVERS / self.spec.driver,
        )
        self.info = dict(peer.info)
        return peer


def foreign_peer(name: str) -> ForeignPeerFactory:
    """The factory of a foreign peer by name (a key of :data:`FOREIGN_PEERS`)."""
    return ForeignPeerFactory(name)
