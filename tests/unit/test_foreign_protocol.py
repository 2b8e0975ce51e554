"""The foreign-peer protocol: the client (:class:`ForeignPeer`) against tiny real driver
scripts run by this Python, and the real driver loop (``drivers/_protocol.py``) with a
tiny backend. No mocks: every test starts a real subprocess."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from hybrid_memory_eval import PeerRecord
from hybrid_memory_eval.foreign import (
    DRIVERS,
    FOREIGN_PEERS,
    ForeignPeer,
    ForeignPeerError,
    foreign_peer,
    install_command,
    not_ready_reason,
    venv_dir,
)


class CountingEmbedding:
    """A tiny deterministic embedding: letter counts (the client only forwards vectors)."""

    name = "letters-3"

    def _vector(self, text: str) -> list[float]:
        return [float(text.count(c)) for c in "abc"]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._vector(text)


def script(tmp_path: Path, body: str, name: str = "driver.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def start(path: Path, timeout: float = 900.0) -> ForeignPeer:
    # The stderr log beside the script: a failing peer keeps its log, in tmp_path here.
    return ForeignPeer(
        "toy",
        CountingEmbedding(),
        python=sys.executable,
        driver=path,
        timeout=timeout,
        log_dir=path.parent,
    )


READY = 'import json, sys\nprint(json.dumps({"ready": True, "library": "toy"}), flush=True)\n'


def test_a_driver_that_exits_at_start_is_reported_with_code_and_stderr(tmp_path: Path) -> None:
    driver = script(
        tmp_path, "import sys\nprint('cannot import peerlib', file=sys.stderr)\nsys.exit(3)\n"
    )
    with pytest.raises(ForeignPeerError) as caught:
        start(driver)
    message = str(caught.value)
    assert "peer toy" in message
    assert "exited (code 3) during start" in message
    assert "cannot import peerlib" in message


def test_a_driver_that_dies_mid_run_is_reported(tmp_path: Path) -> None:
    driver = script(
        tmp_path,
        READY
        + textwrap.dedent(
            """
            line = sys.stdin.readline()
            print("segfault-ish: giving up on " + json.loads(line)["op"], file=sys.stderr)
            sys.exit(7)
            """
        ),
    )
    peer = start(driver)
    with pytest.raises(ForeignPeerError) as caught:
        peer.add([PeerRecord("r1", "abc")])
    assert "exited (code 7) during add" in str(caught.value)
    assert "giving up on add" in str(caught.value)
    with pytest.raises(ForeignPeerError, match="exited"):
        peer.search("a", 3)  # still dead, still said so
    peer.close()
    peer.close()
    assert "giving up on add" in peer.log_path.read_text()  # a failed peer keeps its log


def test_an_error_reply_raises_naming_the_peer_and_the_peer_stays_usable(
    tmp_path: Path,
) -> None:
    driver = script(
        tmp_path,
        READY
        + textwrap.dedent(
            """
            for line in sys.stdin:
                request = json.loads(line)
                if request["op"] == "search" and request["query"] == "bad":
                    reply = {"error": "KeyError: no vector for 'bad'"}
                elif request["op"] == "search":
                    reply = {"ids": ["r1"] * request["k"]}
                else:
                    reply = {"ok": True}
                print(json.dumps(reply), flush=True)
                if request["op"] == "close":
                    break
            """
        ),
    )
    peer = start(driver)
    try:
        with pytest.raises(ForeignPeerError) as caught:
            peer.search("bad", 2)
        assert str(caught.value).startswith("peer toy: search failed: KeyError: no vector")
        assert peer.search("good", 2) == ["r1", "r1"]
    finally:
        peer.close()
    assert not peer.log_path.exists()  # a clean close deletes the stderr log


def test_a_start_error_reply_raises(tmp_path: Path) -> None:
    driver = script(
        tmp_path,
        'import json\nprint(json.dumps({"error": "could not start: no chroma"}), flush=True)\n',
    )
    with pytest.raises(ForeignPeerError, match="peer toy: start failed: could not start: no"):
        start(driver)


def test_a_line_that_is_not_json_is_a_protocol_error(tmp_path: Path) -> None:
    driver = script(tmp_path, "print('Loading model... done', flush=True)\n")
    with pytest.raises(ForeignPeerError, match="not a protocol line: 'Loading model"):
        start(driver)


def test_a_driver_that_never_answers_is_stopped_after_the_timeout(tmp_path: Path) -> None:
    driver = script(tmp_path, READY + "import time\ntime.sleep(60)\n")
    peer = start(driver, timeout=1.0)
    with pytest.raises(ForeignPeerError, match="no answer within 1 s"):
        peer.search("a", 1)
    peer.close()


# --- the real driver loop ------------------------------------------------------------------


TOY_BACKEND = f"""
import sys
sys.path.insert(0, {str(DRIVERS)!r})
from _protocol import Vectors, serve


class Backend:
    info = {{"library": "toy", "version": "0"}}

    def __init__(self):
        self.vectors = Vectors()
        self.rows = []

    def add(self, records):
        print("library chatter on stdout must not reach the protocol")
        for r in records:
            self.rows.append((r["id"], r["vector"]))

    def search(self, query, vector, k):
        if query == "unknown":
            self.vectors.get(query)  # no vector was put for it
        score = lambda row: sum(a * b for a, b in zip(row[1], vector))
        return [i for i, _ in sorted(self.rows, key=score, reverse=True)][:k]

    def close(self):
        print("closed", file=sys.stderr)


sys.exit(serve(Backend))
"""


def test_the_driver_loop_with_a_real_client(tmp_path: Path) -> None:
    peer = start(script(tmp_path, TOY_BACKEND))
    try:
        assert peer.info == {"library": "toy", "version": "0"}
        peer.add([PeerRecord("aa", "aaaa"), PeerRecord("bb", "bbbb"), PeerRecord("cc", "cccc")])
        assert peer.search("b", 2)[0] == "bb"
        assert peer.search("c c", 1) == ["cc"]
        with pytest.raises(ForeignPeerError, match='search failed: KeyError: "no vector'):
            peer.search("unknown", 1)
        assert peer.search("a", 3)[0] == "aa"  # an error answered, the loop goes on
    finally:
        peer.close()
    assert peer.log_path.exists() is False


def test_the_driver_loop_answers_unknown_ops_and_bad_json(tmp_path: Path) -> None:
    import subprocess

    driver = script(tmp_path, TOY_BACKEND)
    lines = ["not json", json.dumps({"op": "drop"}), json.dumps({"op": "close"})]
    done = subprocess.run(
        [sys.executable, str(driver)],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    replies = [json.loads(line) for line in done.stdout.splitlines()]
    assert replies[0] == {"ready": True, "library": "toy", "version": "0"}
    assert replies[1]["error"].startswith("JSONDecodeError")
    assert replies[2] == {"error": "unknown op 'drop': expected 'add', 'search', 'rss' or 'close'"}
    assert replies[3] == {"ok": True}
    assert done.returncode == 0 and "closed" in done.stderr


# --- venv bookkeeping ------------------------------------------------------------------------


def test_a_missing_venv_names_the_command_that_builds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_PEER_VENVS", str(tmp_path / "venvs"))
    for name in FOREIGN_PEERS:
        assert venv_dir(name) == tmp_path / "venvs" / name
        assert not_ready_reason(name) == (
            f"no venv at {tmp_path / 'venvs' / name}; build it with: "
            f"hybrid-memory peers install {name}"
        )
        assert install_command(name) == f"hybrid-memory peers install {name}"
        with pytest.raises(ForeignPeerError, match="no venv at"):
            foreign_peer(name)(CountingEmbedding())
    with pytest.raises(ForeignPeerError, match="no foreign peer 'mem1'; the foreign peers are"):
        foreign_peer("mem1")


def test_every_driver_stays_out_of_hybrid_memory() -> None:
    import ast

    for spec in FOREIGN_PEERS.values():
        path = DRIVERS / spec.driver
        assert path.is_file()
        for module in (path, DRIVERS / "_protocol.py"):
            tree = ast.parse(module.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module or ""]
                    if isinstance(node, ast.ImportFrom)
                    else []
                )
                assert not any(n.split(".")[0] == "hybrid_memory" for n in names), module


# --- what the scale benchmark asks of a driver ---------------------------------------------


SCALE_BACKEND = f"""
import sys
sys.path.insert(0, {str(DRIVERS)!r})
from _protocol import serve


class Backend:
    info = {{"library": "toy"}}

    def __init__(self):
        self.rows = []

    def add(self, records, filter_fields=()):
        for r in records:
            kept = {{f: r["metadata"][f] for f in filter_fields if f in r["metadata"]}}
            self.rows.append((r["id"], kept))

    def add_one(self, record, filter_fields=()):
        if record["text"] == "refuse me":
            return {{"stored": False, "message": "duplicate"}}
        self.add([record], filter_fields)
        return {{"stored": True, "message": "ok"}}

    def search(self, query, vector, k, where=None):
        wanted = (where or {{}}).items()
        rows = [i for i, kept in self.rows if all(kept.get(f) == v for f, v in wanted)]
        return rows[:k]

    def close(self):
        pass


sys.exit(serve(Backend))
"""


def test_single_adds_filters_seconds_and_rss_through_the_driver_loop(tmp_path: Path) -> None:
    peer = start(script(tmp_path, SCALE_BACKEND))
    peer.filter_fields = ("user",)
    try:
        peer.add([PeerRecord(f"m{i}", f"text {i}", (), {"user": f"u{i % 2}"}) for i in range(6)])
        assert isinstance(peer.last_seconds, float) and peer.last_seconds >= 0
        assert peer.search("text", 10, {"user": "u1"}) == ["m1", "m3", "m5"]
        assert peer.search("text", 2) == ["m0", "m1"]  # no filter: every memory
        reply = peer.add_one(PeerRecord("m6", "text 6", (), {"user": "u1"}))
        assert reply["ok"] and reply["stored"] and reply["s"] >= 0
        assert peer.search("text", 10, {"user": "u1"})[-1] == "m6"
        assert peer.add_one(PeerRecord("m7", "refuse me"))["stored"] is False
        memory = peer.rss(reset=True)
        assert memory["current_mb"] > 5 and memory["peak_mb"] >= memory["current_mb"] - 1
    finally:
        peer.close()


def test_a_driver_without_single_adds_says_so(tmp_path: Path) -> None:
    peer = start(script(tmp_path, TOY_BACKEND))
    try:
        with pytest.raises(ForeignPeerError, match="this driver has no 'add_one'"):
            peer.add_one(PeerRecord("a", "abc"))
        peer.add([PeerRecord("b", "bbb")])  # the loop goes on
    finally:
        peer.close()
