"""The page's pure parts: filters from a query string, the safe highlighting, re-tagging,
the charts' escaping, the options check and the security checks' parsing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hybrid_memory_ui.bulk import retagged
from hybrid_memory_ui.charts import bar_chart, column_chart
from hybrid_memory_ui.config import UIConfig, UnsafeConfigError
from hybrid_memory_ui.filters import FilterError, metadata_value, parse_filter, split_tags
from hybrid_memory_ui.highlight import highlight
from hybrid_memory_ui.security import host_name, same_origin
from starlette.datastructures import Headers

NOW = datetime(2025, 5, 15, 10, 0, tzinfo=timezone.utc)


def _no_phrase(phrase: str) -> None:
    return None


def test_filters_from_a_query_string() -> None:
    chosen = parse_filter(
        {"tags": "a, b", "tag_mode": "all", "when": "7d", "field": "user", "value": "alice"},
        NOW,
        _no_phrase,
    )
    assert chosen.where == {
        "$and": [
            {"$and": [{"tags": {"$contains": "a"}}, {"tags": {"$contains": "b"}}]},
            {"user": "alice"},
        ]
    }
    assert chosen.after == NOW - timedelta(days=7) and chosen.before is None
    assert chosen.with_time() == {
        "$and": [chosen.where, {"created_at": {"$gte": NOW - timedelta(days=7)}}]
    }
    assert parse_filter(chosen.params(), NOW, _no_phrase) == chosen
    any_of = parse_filter({"tags": "a b"}, NOW, _no_phrase).where
    assert any_of == {"$or": [{"tags": {"$contains": "a"}}, {"tags": {"$contains": "b"}}]}
    assert parse_filter({}, NOW, _no_phrase).with_time() is None
    window = (NOW - timedelta(days=9), NOW - timedelta(days=2))
    read = parse_filter({"when": "last week"}, NOW, lambda p: window)
    assert (read.after, read.before) == window


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"tag_mode": "some"}, "tag_mode: expected one of any, all"),
        ({"when": "whenever"}, "when: 'whenever' is not a time"),
        ({"field": "tags", "value": "x"}, "field: 'tags' is not a metadata field"),
    ],
)
def test_filters_the_page_cannot_apply_name_their_field(
    params: dict[str, str], message: str
) -> None:
    with pytest.raises(FilterError, match=message):
        parse_filter(params, NOW, _no_phrase)


def test_metadata_values_as_typed() -> None:
    assert [metadata_value(v) for v in ("3", "2.5", "true", '"3"', "alice", "[1]")] == [
        3,
        2.5,
        True,
        "3",
        "alice",
        "[1]",
    ]
    assert split_tags(" a,b  a c,") == ("a", "b", "c")


def test_highlight_escapes_everything_but_its_marks() -> None:
    out = str(highlight("<script>cooking</script> & <b>cooked</b> rice", "cook the rice"))
    assert out == (
        "&lt;script&gt;<mark>cooking</mark>&lt;/script&gt; &amp; &lt;b&gt;<mark>cooked</mark>"
        "&lt;/b&gt; <mark>rice</mark>"
    )
    assert str(highlight("a <i>b</i>", "the")) == "a &lt;i&gt;b&lt;/i&gt;"
    assert str(highlight("<script>", "<script>")) == "&lt;<mark>script</mark>&gt;"


def test_retagged_removes_then_adds_once() -> None:
    assert retagged(("a", "b", "c"), ["d", "a"], ["b"]) == ("a", "c", "d")
    assert retagged((), ["x", "x"], []) == ("x",)


def test_charts_escape_their_labels() -> None:
    svg = str(bar_chart(["<script>x</script>"], [3], title="t<&>"))
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "t&lt;&amp;&gt;" in svg
    svg = str(column_chart(["a", "b"], [0, 10], title="t"))
    assert svg.count('class="bar"') == 2 and ">10<" in svg


def test_options_refuse_an_open_bind_without_a_token() -> None:
    with pytest.raises(UnsafeConfigError, match="HYBRID_MEMORY_UI_TOKEN"):
        UIConfig(host="0.0.0.0").check()
    UIConfig(host="0.0.0.0", token="t").check()
    UIConfig(host="::1").check()
    assert "memory.lan" in UIConfig(allowed_hosts=("Memory.LAN",)).host_names()


def test_host_and_origin_parsing() -> None:
    assert [host_name(h) for h in ("127.0.0.1:8777", "[::1]:80", "LOCALHOST", "::1")] == [
        "127.0.0.1",
        "::1",
        "localhost",
        "::1",
    ]

    def check(**headers: str) -> bool:
        return same_origin(Headers({"host": "127.0.0.1:8777", **headers}))

    assert check(origin="http://127.0.0.1:8777")
    assert check(origin="https://127.0.0.1:8777")  # a page served through a TLS proxy
    assert check(referer="http://127.0.0.1:8777/x?y")
    assert not check(origin="null")
    assert not check(origin="http://127.0.0.1:8778")
    assert not check(origin="http://evil.example")
    assert not check(origin="ftp://127.0.0.1:8777")
    assert not check(referer="http://127.0.0.1:8777.evil.example/")
    assert not check()
    assert not same_origin(Headers({"origin": "http://"}))  # no Host: nothing matches
