"""mem0 and mcp-memory-service as peers: the real libraries, each in its own venv, driven
as subprocesses with the real all-MiniLM-L6-v2 vectors. Skipped (with the command that
builds it) when a peer's venv is not built."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hybrid_memory_eval import PEERS, PeerRecord, evaluate, format_report, load_dataset
from hybrid_memory_eval.cli import main
from hybrid_memory_eval.foreign import (
    FOREIGN_PEERS,
    MANIFEST,
    ForeignPeer,
    foreign_peer,
    not_ready_reason,
)

from hybrid_memory._embedding.default_model import MiniLMEmbedder
from tests.conftest import HashEmbedding, write_collection
from tests.integration.test_eval_cli import CORPUS, METRIC_KEYS, QRELS, QUERIES

pytestmark = pytest.mark.slow

RECORDS = [
    PeerRecord("r1", "I adopted a golden retriever puppy and named him Biscuit", ("alice",)),
    PeerRecord("r2", "I work night shifts as a nurse at the city hospital", ("alice",)),
    PeerRecord("r3", "Training for the Berlin marathon in September", ("bob", "sports")),
    PeerRecord("r4", "The quarterly budget review is due on Friday"),
    PeerRecord("r5", "We repainted the kitchen a pale shade of green last weekend"),
    PeerRecord("r6", "My sister moved to Lisbon for a job at a design studio"),
    PeerRecord("r7", "The landlord finally fixed the leaking bathroom faucet"),
    PeerRecord("r8", "I started learning to play the cello in the spring"),
    PeerRecord("r9", "Our team migrated the billing service to PostgreSQL"),
    PeerRecord("r10", "Grandma's apple pie recipe needs a pinch of cinnamon"),
    # The same text twice under two ids: two memories for every other peer.
    PeerRecord("r11", "Remember to water the tomato plants every morning"),
    PeerRecord("r12", "Remember to water the tomato plants every morning"),
]


def needs_venv(name: str) -> pytest.MarkDecorator:
    reason = not_ready_reason(name)
    return pytest.mark.skipif(reason is not None, reason=f"{name}: {reason}")


FOREIGN = pytest.mark.parametrize(
    "name", [pytest.param(n, marks=needs_venv(n)) for n in FOREIGN_PEERS]
)


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture
def peer_of(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: MiniLMEmbedder
) -> Iterator[dict[str, ForeignPeer]]:
    # The driver's temporary store goes under tmp_path, so the test can see it deleted.
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    started: dict[str, ForeignPeer] = {}

    class Peers(dict[str, ForeignPeer]):
        def __missing__(self, name: str) -> ForeignPeer:
            started[name] = self[name] = foreign_peer(name)(minilm)
            return started[name]

    yield Peers()
    for peer in started.values():
        peer.close()


@FOREIGN
def test_finds_the_obviously_relevant_record(
    name: str, peer_of: dict[str, ForeignPeer], tmp_path: Path
) -> None:
    peer = peer_of[name]
    assert peer.info["library"] in {"mem0ai", "mcp-memory-service"}
    assert peer.search("anything at all", 5) == []  # empty store: nothing, no error
    peer.add(RECORDS)
    stores = [
        p for p in tmp_path.iterdir() if p.is_dir() and p.name.startswith("hybrid-memory-peer-")
    ]
    assert len(stores) == 1  # the driver's own temporary store
    # Word overlap with one record.
    assert peer.search("Berlin marathon training", 3)[0] == "r3"
    # No word in common: only the model's vectors (sent from here) can find these.
    assert peer.search("canine pet", 3)[0] == "r1"
    assert peer.search("medical career", 3)[0] == "r2"
    assert peer.search("string instrument lessons", 3)[0] == "r8"
    # k is honoured, every id is one we added, no id twice.
    hits = peer.search("home repairs", 5)
    assert len(hits) == 5 and len(set(hits)) == 5
    assert set(hits) <= {r.id for r in RECORDS}
    # Identical texts under two ids: both come back, side by side.
    garden = peer.search("watering the tomatoes", 4)
    assert {"r11", "r12"} <= set(garden[:2])
    # Records added later are searchable too.
    peer.add([PeerRecord("r13", "The dentist appointment moved to Thursday at noon")])
    assert peer.search("dentist appointment", 3)[0] == "r13"
    peer.close()
    assert not stores[0].exists()  # deleted on close
    assert not peer.log_path.exists()


@pytest.mark.skipif(
    any(not_ready_reason(n) for n in FOREIGN_PEERS),
    reason="needs every foreign peer venv: hybrid-memory peers install",
)
def test_cli_runs_the_foreign_peers_beside_ours(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)

    assert main(["eval", str(folder), "--json", "--peers", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert list(report["peers"]) == [*PEERS, *FOREIGN_PEERS]
    for name in FOREIGN_PEERS:
        figures = report["peers"][name]
        assert set(figures) >= METRIC_KEYS
        assert figures["n_queries"] == 4
        # Verbatim queries within a filtered subset (one peer per filter): found.
        assert figures["recall@10"] == 1.0
        assert figures["driver"]["library"] in {"mem0ai", "mcp-memory-service"}
    text = format_report(report)
    assert "mem0: mem0ai 2.2.1, chroma" in text
    assert "mcp-memory-service: mcp-memory-service 12.2.0, sqlite-vec" in text


def test_cli_says_which_peer_did_not_run_and_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_PEER_VENVS", str(tmp_path / "none"))
    folder = write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)

    assert main(["eval", str(folder), "--json", "--peers", "--quiet"]) == 0
    report = json.loads(capsys.readouterr().out)
    for name in FOREIGN_PEERS:
        assert report["peers"][name] == {
            "not_run": f"no venv at {tmp_path / 'none' / name}; "
            f"build it with: hybrid-memory peers install {name}"
        }
    assert main(["eval", str(folder), "--peers", "--quiet"]) == 0
    text = capsys.readouterr().out
    for name in FOREIGN_PEERS:
        assert (
            f"{name}: not run: no venv at {tmp_path / 'none' / name}; build it with: "
            f"hybrid-memory peers install {name}" in text
        )


@pytest.mark.parametrize("name", list(FOREIGN_PEERS))
def test_a_broken_venv_is_reported_as_failed_beside_the_other_figures(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A "venv" whose python is this one, which lacks the peer library: the real driver
    # starts, cannot import it, answers an error; the run reports it and goes on.
    folder = tmp_path / "venvs" / name
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    (folder / MANIFEST).write_text("{}")
    monkeypatch.setenv("HYBRID_MEMORY_PEER_VENVS", str(tmp_path / "venvs"))
    dataset = write_collection(tmp_path / "toy", CORPUS, QUERIES, QRELS)

    monkeypatch.setenv("TMPDIR", str(tmp_path))  # the driver's temporary store
    report = evaluate(load_dataset(dataset), embedding=HashEmbedding(), peers=True)
    failed = report["peers"][name]["failed"]
    assert failed.startswith(f"peer {name}: start failed: could not start: ModuleNotFoundError")
    # The driver removed its temporary folder; its stderr log is kept, named in the message.
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("hybrid-memory-peer-")]
    log = Path(re.search(r"\((/\S+\.log)\):", failed).group(1))  # type: ignore[union-attr]
    assert "ModuleNotFoundError" in log.read_text()
    log.unlink()
    for other in PEERS:
        assert set(report["peers"][other]) >= METRIC_KEYS
    assert f"{name}: failed: peer {name}: start failed" in format_report(report)
