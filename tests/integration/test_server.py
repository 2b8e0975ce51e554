"""Many agents, one memory: HybridMemory against a real Chroma server (``chroma run``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import chromadb
import pytest

from hybrid_memory import HybridMemory, StoreError

from ..conftest import HashEmbedding

pytestmark = pytest.mark.server
REPO = Path(__file__).resolve().parents[2]


def agent(url: str, collection: str) -> HybridMemory:
    return HybridMemory(
        url=url,
        collection=collection,
        embedding=HashEmbedding(),
        embedding_name="test-hash-64",
        sync_interval=0,
    )


def test_agents_sharing_a_server_see_each_others_writes(chroma_server: str) -> None:
    name = f"shared-{uuid.uuid4().hex[:8]}"
    with agent(chroma_server, name) as a, agent(chroma_server, name) as b:
        a.add("the deploy key rotates every ninety days", id="k", tags=["ops"])
        hits = b.search("when does the deploy key rotate?", alpha=0.0)
        assert [h.id for h in hits] == ["k"] and "keyword" in hits[0].ranks
        assert b.tags() == ["ops"]
        assert b.search("rotation", tags=["ops"])[0].ranks.get("tag") == 1
        b.update("k", text="the deploy key rotates every thirty days")
        a.sync(full=True)
        assert a.get("k").text.endswith("thirty days")
        assert a.search("thirty", alpha=0.0)[0].id == "k"
        b.delete("k")
        assert a.search("deploy key", alpha=0.0) == [] and a.count() == 0


def test_a_writer_in_another_process_is_found(chroma_server: str) -> None:
    name = f"proc-{uuid.uuid4().hex[:8]}"
    script = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {str(REPO)!r})
        from hybrid_memory import HybridMemory
        from tests.conftest import HashEmbedding
        store = HybridMemory(url={chroma_server!r}, collection={name!r},
                             embedding=HashEmbedding(), embedding_name="test-hash-64")
        store.add_many([{{"text": f"note {{i}} from the other agent", "tags": ["remote"],
                          "metadata": {{"i": i}}}} for i in range(25)])
        store.close()
        """
    )
    with agent(chroma_server, name) as local:
        local.add("a note from this agent")
        subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
        assert local.count() == 26
        assert local.count({"i": {"$gte": 20}}) == 5
        hits = local.search("note 7 from the other agent", alpha=0.0, filter={"i": 7})
        assert [h.metadata["i"] for h in hits] == [7]
        assert "remote" in local.tags()


def test_filters_hold_on_the_server_too(chroma_server: str) -> None:
    name = f"filter-{uuid.uuid4().hex[:8]}"
    with agent(chroma_server, name) as store:
        store.add_many(
            [
                {"text": f"shared fact {i}", "metadata": {"user": "ann" if i % 2 else "ben"}}
                for i in range(10)
            ]
        )
        narrow = store.with_settings(candidates=1)
        for alpha in (0.0, 1.0):
            hits = narrow.search("shared fact", alpha=alpha, filter={"user": "ben"})
            assert hits and all(h.metadata["user"] == "ben" for h in hits)


def test_a_client_can_be_passed_in(chroma_server: str) -> None:
    host, port = chroma_server.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port))
    name = f"client-{uuid.uuid4().hex[:8]}"
    with HybridMemory(client=client, collection=name, embedding=HashEmbedding()) as store:
        store.add("passed-in client works")
        assert store.search("client")[0].text == "passed-in client works"


def test_an_unreachable_server_is_a_clear_error() -> None:
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:9"):
        HybridMemory(url="http://127.0.0.1:9", embedding=HashEmbedding())
