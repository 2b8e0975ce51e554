"""The path owner's ledger of writes by what they can touch (issue 44: a namespace
closed in step opens again without reading its share while nothing touched it)."""

from __future__ import annotations

from hybrid_memory._shared_path.write_ledger import ANY, WriteLedger, collection_key


def test_writes_elsewhere_leave_a_mark_alone() -> None:
    ledger = WriteLedger()
    shared = collection_key("store.namespaces")
    before = ledger.mark("a", shared)
    for key in ("b", collection_key("store"), collection_key("store.namespace-names")):
        ledger.begin(key)
        ledger.end(key)
    assert ledger.mark("a", shared) == before == 0


def test_writes_that_can_touch_a_share_move_its_mark() -> None:
    shared = collection_key("store.namespaces")
    for key in ("a", shared, ANY):  # its own, the whole collection's, an unknown one
        ledger = WriteLedger()
        ledger.begin(key)
        ledger.end(key)
        assert ledger.mark("a", shared) == 1
        assert ledger.mark("b", collection_key("other")) == (1 if key is ANY else 0)


def test_no_mark_while_a_write_that_can_touch_it_is_in_flight() -> None:
    ledger = WriteLedger()
    ledger.begin("a")
    assert ledger.mark("a") is None
    assert ledger.mark("b") == 0
    ledger.begin(ANY)
    assert ledger.mark("b") is None
    ledger.end(ANY)
    ledger.end("a")
    assert ledger.mark("a") == 2 and ledger.mark("b") == 1
