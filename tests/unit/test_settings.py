"""HybridMemorySettings: defaults, the environment, and errors that name the variable."""

from __future__ import annotations

import os
from typing import Any

import pytest
from pydantic import ValidationError

from hybrid_memory._model.errors import InvalidInputError
from hybrid_memory._model.settings import ENV_PREFIX, HybridMemorySettings, load_settings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A developer's or CI's own HYBRID_MEMORY_* variables must not leak into these tests.
    for name in list(os.environ):
        if name.upper().startswith(ENV_PREFIX):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    s = load_settings()
    assert s.path is None and s.url is None and s.index_path is None
    assert s.collection == "hybrid_memory"
    assert s.embedding_model == "all-MiniLM-L6-v2"
    assert (s.k, s.max_k, s.candidates) == (5, 100, 100)
    assert s.rrf_k == 60.0
    assert s.alpha is None  # adaptive by default
    assert s.alpha_thresholds == [500, 5000]
    # Calibrated on ../shared/data (issue 4): see README, "Retrieval quality".
    assert s.alpha_values == [0.5, 0.5, 0.4]
    assert (s.tag_weight, s.tag_boost, s.tag_cache_ttl) == (1.0, 0.5, 60.0)
    assert (s.feedback_docs, s.feedback_weight) == (3, 0.5)
    assert s.recency_decay == 0.0
    assert s.keyword_tokenizer == "porter unicode61 remove_diacritics 2"
    assert s.drop_stopwords is True
    assert s.token_encoding == "cl100k_base"
    assert (s.max_tags, s.max_tag_length, s.max_text_length) == (64, 100, 100_000)


def test_every_field_is_documented() -> None:
    for name, info in HybridMemorySettings.model_fields.items():
        assert info.description, f"{name} has no description"


@pytest.mark.parametrize(
    ("variable", "raw", "field", "value"),
    [
        ("HYBRID_MEMORY_RRF_K", "30", "rrf_k", 30.0),
        ("HYBRID_MEMORY_K", "7", "k", 7),
        ("HYBRID_MEMORY_ALPHA", "0.25", "alpha", 0.25),
        ("HYBRID_MEMORY_TAG_WEIGHT", "0", "tag_weight", 0.0),
        ("HYBRID_MEMORY_DROP_STOPWORDS", "false", "drop_stopwords", False),
        ("HYBRID_MEMORY_PATH", "/tmp/memory", "path", "/tmp/memory"),
        ("HYBRID_MEMORY_COLLECTION", "agent-1.notes", "collection", "agent-1.notes"),
        ("HYBRID_MEMORY_KEYWORD_TOKENIZER", "trigram", "keyword_tokenizer", "trigram"),
        ("hybrid_memory_recency_decay", "0.01", "recency_decay", 0.01),  # any case
    ],
)
def test_environment_is_read(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str, field: str, value: Any
) -> None:
    monkeypatch.setenv(variable, raw)
    assert getattr(load_settings(), field) == value
    assert getattr(HybridMemorySettings(), field) == value


def test_lists_come_from_json(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_ALPHA_THRESHOLDS", "[100, 1000, 10000]")
    monkeypatch.setenv("HYBRID_MEMORY_ALPHA_VALUES", "[0.4, 0.5, 0.6, 0.9]")
    s = load_settings()
    assert s.alpha_thresholds == [100, 1000, 10000]
    assert s.alpha_values == [0.4, 0.5, 0.6, 0.9]


def test_constructor_beats_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_RRF_K", "30")
    monkeypatch.setenv("HYBRID_MEMORY_K", "9")
    assert HybridMemorySettings(rrf_k=10).rrf_k == 10.0
    s = load_settings(rrf_k=10)
    assert s.rrf_k == 10.0
    assert s.k == 9  # untouched fields still come from the environment


def test_constructor_value_wins_even_when_the_env_value_is_invalid(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_RRF_K", "not a number")
    assert load_settings(rrf_k=5).rrf_k == 5.0


def test_load_settings_layers_overrides_over_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_TAG_WEIGHT", "0.9")
    base = HybridMemorySettings(rrf_k=10, k=3)
    assert load_settings(base) is base  # nothing to change
    merged = load_settings(base, k=4, tag_boost=0.1)
    assert (merged.rrf_k, merged.k, merged.tag_boost) == (10.0, 4, 0.1)
    assert merged.tag_weight == 0.9


def test_settings_are_frozen() -> None:
    s = load_settings()
    with pytest.raises(ValidationError):
        s.rrf_k = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("variable", "raw"),
    [
        ("HYBRID_MEMORY_RRF_K", "0"),
        ("HYBRID_MEMORY_RRF_K", "-1"),
        ("HYBRID_MEMORY_RRF_K", "sixty"),
        ("HYBRID_MEMORY_ALPHA", "1.5"),
        ("HYBRID_MEMORY_K", "0"),
        ("HYBRID_MEMORY_CANDIDATES", "10001"),
        ("HYBRID_MEMORY_TAG_WEIGHT", "-0.1"),
        ("HYBRID_MEMORY_RECENCY_DECAY", "2"),
        ("HYBRID_MEMORY_DROP_STOPWORDS", "maybe"),
        ("HYBRID_MEMORY_COLLECTION", "a"),  # 3-512 characters
        ("HYBRID_MEMORY_COLLECTION", "has space"),
        ("HYBRID_MEMORY_EMBEDDING_BATCH_SIZE", "0"),
        ("HYBRID_MEMORY_ALPHA_THRESHOLDS", "[5000, 500]"),
        ("HYBRID_MEMORY_ALPHA_THRESHOLDS", "[-1, 500]"),
        ("HYBRID_MEMORY_ALPHA_VALUES", "[0.5, 1.2, 0.8]"),
    ],
)
def test_invalid_environment_value_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, raw: str
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(InvalidInputError) as info:
        load_settings()
    assert variable in str(info.value)
    assert info.value.field.startswith(variable)
    assert isinstance(info.value, ValueError)


def test_unparsable_json_list_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_ALPHA_THRESHOLDS", "500, 5000")
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_ALPHA_THRESHOLDS"):
        load_settings()


def test_unparsable_json_list_fails_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HYBRID_MEMORY_ALPHA_THRESHOLDS", "500, 5000")
    with pytest.raises(ValueError, match="alpha_thresholds"):
        load_settings()


def test_direct_construction_fails_with_invalid_input_error() -> None:
    with pytest.raises(InvalidInputError, match="HYBRID_MEMORY_RRF_K"):
        HybridMemorySettings(rrf_k=-1)


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"rrf_k": -5}, "HYBRID_MEMORY_RRF_K"),
        ({"alpha": 2}, "HYBRID_MEMORY_ALPHA"),
        ({"tag_boost": "lots"}, "HYBRID_MEMORY_TAG_BOOST"),
        ({"max_k": 0}, "HYBRID_MEMORY_MAX_K"),
        ({"alpha_values": []}, "HYBRID_MEMORY_ALPHA_VALUES"),
        ({"no_such_knob": 1}, "HYBRID_MEMORY_NO_SUCH_KNOB"),
    ],
)
def test_invalid_argument_names_the_variable(overrides: dict[str, Any], variable: str) -> None:
    with pytest.raises(InvalidInputError) as info:
        load_settings(**overrides)
    assert f"{variable} ({next(iter(overrides))})" in str(info.value)
    assert "got" in str(info.value) or "extra" in str(info.value).lower()


def test_invalid_value_shows_what_was_given() -> None:
    with pytest.raises(InvalidInputError, match="got -5"):
        load_settings(rrf_k=-5)


# --- consistency between fields -------------------------------------------------------------


def test_alpha_values_need_one_more_entry_than_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInputError, match="alpha_values needs exactly one more") as info:
        load_settings(alpha_thresholds=[100], alpha_values=[0.5, 0.6, 0.7])
    assert "3 values for 1 thresholds" in str(info.value)
    # Changing only one of the pair through the environment is caught too.
    monkeypatch.setenv("HYBRID_MEMORY_ALPHA_THRESHOLDS", "[10, 100, 1000]")
    with pytest.raises(InvalidInputError, match="alpha_thresholds"):
        load_settings()


def test_consistent_alpha_schedules_are_accepted() -> None:
    assert load_settings(alpha_thresholds=[], alpha_values=[0.6]).alpha_values == [0.6]
    s = load_settings(alpha_thresholds=[10, 20], alpha_values=[0.0, 0.5, 1.0])
    assert s.alpha_thresholds == [10, 20]


def test_equal_thresholds_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="strictly increasing"):
        load_settings(alpha_thresholds=[500, 500], alpha_values=[0.5, 0.6, 0.7])


def test_k_must_not_exceed_max_k() -> None:
    with pytest.raises(InvalidInputError, match=r"k \(20\) must not exceed max_k \(10\)"):
        load_settings(k=20, max_k=10)
    assert load_settings(k=10, max_k=10).k == 10


def test_path_and_url_are_exclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInputError, match="mutually exclusive"):
        load_settings(path="/tmp/m", url="http://127.0.0.1:8000")
    monkeypatch.setenv("HYBRID_MEMORY_URL", "http://127.0.0.1:8000")
    with pytest.raises(InvalidInputError, match="mutually exclusive"):
        load_settings(path="/tmp/m")


@pytest.mark.parametrize("name", ["notes.namespaces", "hybrid_memory.namespace-names"])
def test_a_collection_named_as_another_stores_namespaces_is_refused(name: str) -> None:
    # Store "notes" keeps its namespaces in "notes.namespaces": a store of that name
    # would read and write them as its own memories.
    with pytest.raises(InvalidInputError) as caught:
        HybridMemorySettings(collection=name)
    message = str(caught.value)
    assert "collection" in message and "reserved" in message and name in message
    assert HybridMemorySettings(collection=name + "-2").collection == name + "-2"
