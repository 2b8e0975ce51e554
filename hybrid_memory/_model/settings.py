"""Every knob of hybrid-memory, in one pydantic-settings class.

Each field can be set in the constructor or through the environment as
``HYBRID_MEMORY_<FIELD>`` (``HYBRID_MEMORY_RRF_K=60``; lists as JSON,
``HYBRID_MEMORY_ALPHA_THRESHOLDS='[500, 5000]'``). Constructor arguments beat the
environment. An invalid value fails at construction with an
:class:`~hybrid_memory._model.errors.InvalidInputError` naming the variable.
"""

from __future__ import annotations

import itertools
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict, SettingsError

from hybrid_memory._model.namespaces import PARTITION_SUFFIX, REGISTRY_SUFFIX
from hybrid_memory._model.settings_errors import settings_error, source_error

ENV_PREFIX = "HYBRID_MEMORY_"
DEFAULT_EMBEDDING_MODEL = "all-MiniLM-L6-v2"
# Names of the collections a store keeps beside its own for its namespaces.
RESERVED_COLLECTION_SUFFIXES = (PARTITION_SUFFIX, REGISTRY_SUFFIX)


class HybridMemorySettings(BaseSettings):
    """Configuration of a :class:`~hybrid_memory.HybridMemory` store and its search."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, extra="forbid", validate_default=True, frozen=True
    )

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise settings_error(exc, ENV_PREFIX) from exc
        except SettingsError as exc:  # a list variable that is not valid JSON
            raise source_error(exc, ENV_PREFIX) from exc

    # --- where the memories live -------------------------------------------------
    path: str | None = Field(
        None,
        description="Directory of an embedded, persistent store (Chroma + keyword index). "
        "None, with no url, keeps everything in memory.",
    )
    url: str | None = Field(
        None, description="URL of a Chroma server (e.g. http://127.0.0.1:8000) to share memory."
    )
    collection: str = Field(
        "hybrid_memory",
        description="Chroma collection name: 3-512 characters of [a-zA-Z0-9._-], not ending "
        "in .namespaces or .namespace-names (where a store keeps its namespaces).",
        pattern=r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$",
    )
    request_timeout: float = Field(
        30.0,
        gt=0.0,
        le=3600.0,
        description="Seconds a request may wait for its answer: from the Chroma server (url), "
        "or, on an embedded path shared by several processes, from the process that owns the "
        "path. One that does not answer in time (stopped, stuck, a server that accepts "
        "connections and never answers) fails the call with StoreError naming it; the next "
        "call asks again. A write that timed out may still be applied once the other side "
        "resumes. Not applied to a client you pass yourself (client=).",
    )
    write_reserve: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Bytes of free space an embedded store keeps in reserve: a write is "
        "refused with StoreError (nothing of it stored) while the store's disk has less free "
        "space than this, or its files are within this of the process's file size limit "
        "(RLIMIT_FSIZE). Embedded Chroma hangs once its files cannot grow, so writes stop "
        "short of that; reads go on, and writes resume once space returns. 0 disables the "
        "check. Not applied to a server store (its disk is the server's).",
    )
    index_path: str | None = Field(
        None,
        description="SQLite file of the derived keyword index. Default: inside `path`; for "
        "a server store (url, or a client), a cache file under cache_dir/indexes named by "
        "the server and the collection's id, reused by every later open on this machine "
        "(which catches up only what changed); in memory for in-memory stores.",
    )

    # --- embeddings ---------------------------------------------------------------
    embedding_model: str = Field(
        DEFAULT_EMBEDDING_MODEL,
        description="Model used when no embedding is passed. The default, all-MiniLM-L6-v2, "
        "runs on onnxruntime from its published files (no torch), found locally or "
        "downloaded once into cache_dir; any "
        "other sentence-transformers model name or folder needs the sentence-transformers "
        "extra.",
    )
    embedding_backend: Literal["onnx", "sentence-transformers"] = Field(
        "onnx",
        description="What runs the default model: onnxruntime, or sentence-transformers "
        "(needs the sentence-transformers extra; same vectors, same recorded name). Other "
        "models always run on sentence-transformers.",
    )
    embedding_model_files: str | None = Field(
        None,
        description="Folder holding the default model's published model.safetensors and "
        "tokenizer.json (a Hugging Face snapshot, or your own mirror), used instead of any "
        "other source; the files must match the pinned sha256 digests. Default: an earlier "
        "download in cache_dir, else a snapshot in the Hugging Face cache, else the package "
        "the offline-model extra installs, else a download (embedding_model_url).",
    )
    embedding_model_url: str | None = Field(
        None,
        description="http(s) URL of a folder serving the default model's model.safetensors "
        "and tokenizer.json, downloaded once into cache_dir when no local source has them "
        "(checked by sha256). Default: the model's repository at the pinned revision on "
        "$HF_ENDPOINT, else huggingface.co; not tried when HF_HUB_OFFLINE is set.",
        pattern=r"^https?://\S+$",
    )
    cache_dir: str | None = Field(
        None,
        description="Directory for files derived once and reused: the default model's "
        "onnxruntime graph (~90 MB) and, if downloaded, its files (~90 MB); under indexes/, "
        "the keyword indexes of server stores. Default: $XDG_CACHE_HOME/hybrid-memory, else "
        "~/.cache/hybrid-memory; if it cannot be written, the graph is built and the index "
        "kept in memory.",
    )
    embedding_batch_size: int = Field(32, ge=1, le=4096, description="Texts per embedding call.")
    query_cache_size: int = Field(
        1024, ge=0, description="Query embeddings kept in an LRU cache (0 disables it)."
    )

    # --- search -----------------------------------------------------------------
    k: int = Field(5, ge=1, description="Hits returned when search() is given no k.")
    max_k: int = Field(100, ge=1, description="The largest k a search may ask for.")
    candidates: int = Field(
        100, ge=1, le=10_000, description="Candidates each leg contributes to the fusion."
    )
    rrf_k: float = Field(60.0, gt=0, description="Reciprocal Rank Fusion constant.")
    alpha: float | None = Field(
        None,
        ge=0.0,
        le=1.0,
        description="Vector share against the keyword leg (1 = vector only). "
        "None: chosen from the corpus size by the adaptive schedule below.",
    )
    alpha_thresholds: list[int] = Field(
        default_factory=lambda: [500, 5000],
        description="Corpus sizes (after filtering) where the adaptive alpha steps up.",
    )
    alpha_values: list[float] = Field(
        default_factory=lambda: [0.5, 0.5, 0.4],
        description="Adaptive alpha per size band; one more value than thresholds.",
    )
    tag_weight: float = Field(
        1.0, ge=0.0, le=1.0, description="Weight of the tag leg, before normalisation."
    )
    tag_boost: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Extra tag-leg weight per matched query tag beyond the first.",
    )
    tag_cache_ttl: float = Field(
        60.0, ge=0.0, description="Seconds the known-tag set is cached between refreshes."
    )
    feedback_docs: int = Field(
        3,
        ge=0,
        le=50,
        description="Top memories of the keyword leg whose vectors refine "
        "the query vector before the vector leg (Rocchio pseudo-relevance feedback); 0 "
        "disables it.",
    )
    feedback_weight: float = Field(
        0.5, ge=0.0, le=1.0, description="Weight of the feedback centroid against the query."
    )
    feedback_full_words: int = Field(
        10,
        ge=0,
        le=1000,
        description="Queries of up to this many content words (stopwords left out) get the "
        "whole feedback weight; longer ones feedback_weight × this / their words (long "
        "queries carry their own content, and their keyword top is less precise). 0 keeps "
        "the whole weight for every query.",
    )
    long_memory_window: int = Field(
        1200,
        ge=0,
        description="Characters of a memory the embedding model reads (all-MiniLM-L6-v2: "
        "256 word pieces, about 1,200 characters of English). A longer memory's keyword "
        "hit counts by the share of its matches within them, and as a feedback memory "
        "its vector counts by the share of it read (docs/quality.md). 0 turns both off.",
    )
    recency_decay: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Per-day exponential decay of scores by memory age; 0 disables it.",
    )
    time_phrases: Literal["off", "boost", "narrow"] = Field(
        "off",
        description='What a time the query names ("last week", "in March", "two '
        "months ago\", \"before I moved\") does, relative to the query's now: 'boost' ranks "
        "memories created in that window higher, 'narrow' searches only them (every leg, "
        "before its cut), 'off' (the default) ignores it. SearchResult.time_window shows "
        "the reading. Off by default: it helps some collections and not others "
        "(docs/quality.md).",
    )
    time_boost: float = Field(
        1.0,
        ge=0.0,
        le=100.0,
        description="With time_phrases='boost': a memory created in the named window has "
        "its fused score multiplied by 1 + time_boost.",
    )
    time_window_to_now: bool = Field(
        False,
        description="A window the query names ('last month') extends to the query's now: "
        "memories written after it may recount it ('which shoes did I clean last month?' "
        "answered a month later).",
    )
    time_order_weight: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Weight of the candidates ranked by creation time (newest first for "
        "'currently', 'recently', 'the latest'; oldest first for 'the first time'), fused "
        "with the legs by RRF; 0 ignores such words.",
    )

    keyword_score_lift: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="Score-aware fusion of the keyword leg: each keyword hit's RRF share "
        "times 1 + this x its BM25 score min-max normalised over the leg's candidates, so "
        "a hit far ahead of the rest counts more than its rank. 0 (default) is plain "
        "weighted RRF. For stores whose keyword leg is the stronger one (chat logs full of "
        "names and numbers); measure it on your own judgments first (docs/quality.md).",
    )
    vector_score_lift: float = Field(
        0.0,
        ge=0.0,
        le=10.0,
        description="The same for the vector leg (its cosines min-max normalised over "
        "its candidates); 0 (default) is plain weighted RRF.",
    )
    supersede_factor: float = Field(
        0.99,
        ge=0.0,
        le=1.0,
        description="A memory another memory supersedes (add(..., supersedes=ID)) gives its "
        "place to the newer one (raised to its score, or brought in when the search's "
        "filter admits it) and ranks just below it, its score times this (per step of its "
        "chain when the newer one is not admitted); never filtered out, marked "
        "Hit.superseded_by. Lower values push it further down; 1 turns supersession off "
        "in searches.",
    )

    # --- near-duplicates ------------------------------------------------------------
    similar_cosine: float = Field(
        0.94,
        ge=0.0,
        le=1.0,
        description="Two memories of a store (or namespace) whose vectors' cosine similarity "
        "is at least this say nearly the same thing: an add reports the stored ones "
        "(AddResult.outcome 'similar', AddResult.similar; see on_similar) and a search shows "
        "one hit for them (collapse_similar). Measured on LoCoMo's turns "
        "(docs/concepts/near-duplicates.md).",
    )
    similar_words_cosine: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="Two memories are also near-duplicates from this cosine up when the "
        "words of one (stopwords aside) are all words of the other and the other has at "
        "most similar_extra_words more: a fact restated with a date in "
        "front, '(confirmed again)' or its words reordered, whose vector a few added words "
        "move far when it is short. 1 leaves only similar_cosine.",
    )
    similar_extra_words: int = Field(
        5,
        ge=0,
        le=100,
        description="The most words a restatement may add (see similar_words_cosine); a "
        "date such as 2026-10-13 is three.",
    )
    on_similar: Literal["keep", "skip", "supersede"] = Field(
        "keep",
        description="What add and add_many do with a new memory that stored memories say "
        "nearly the same as, when the call does not say (its on_similar): 'keep' stores it "
        "beside them, 'skip' stores nothing and returns the most similar one's id, "
        "'supersede' stores it as superseding the most similar one (as supersedes=). Each "
        "case is reported: outcome 'similar', AddResult.similar.",
    )
    collapse_similar: bool = Field(
        True,
        description="A search shows one hit for memories that say nearly the same thing "
        "(similar_cosine, similar_words_cosine): the best ranked of them (a superseding one "
        "before those it supersedes), the others named in Hit.similar_ids. "
        "False shows each one.",
    )
    mmr: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Maximal marginal relevance: the weight of variety against relevance when "
        "a search picks its hits among more candidates (0, the default: relevance alone; "
        "1: variety alone). LangChain's lambda_mult and LlamaIndex's mmr_threshold are "
        "1 - mmr. search(mmr=...) sets it for one call.",
    )

    # --- keyword index ------------------------------------------------------------
    keyword_tokenizer: str = Field(
        "porter unicode61 remove_diacritics 2",
        description="SQLite FTS5 tokenizer spec of the keyword index (changing it rebuilds "
        "the index).",
    )
    drop_stopwords: bool = Field(
        True, description="Drop English stopwords from keyword queries (not from the index)."
    )
    keyword_max_df: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Keyword queries leave out words found in more than this share of "
        "memories (they weigh little in BM25 and cost the most); 1 keeps every word.",
    )
    warm_in_background: int = Field(
        5000,
        ge=0,
        description="A keyword index that must be filled from scratch with more memories "
        "than this (a new process on a large server store, with no cache yet) is filled in "
        "the background: the store opens at once, and until the index is warm, unfiltered "
        "searches answer from the vector leg (fallback_mode) while other calls that read "
        "the index wait for it.",
    )
    sync_interval: float = Field(
        1.0,
        ge=0.0,
        description="Seconds between checks of the collection for writes made by other "
        "processes (shared or server stores). The check runs in the background, so those "
        "writes become visible within about this long; a call after the store sat unused "
        "for two intervals checks first, and 0 makes every call check first. On a large "
        "store checks are spaced further (they grow with the collection), and an embedded "
        "store skips them while nobody wrote to its path.",
    )

    open_namespaces: int | None = Field(
        None,
        ge=1,
        description="Namespaces a store keeps open at once (each holds its keyword index "
        "file, three file descriptors, and worker threads); beyond it the least recently "
        "used is closed and opened again on its next use, which loses nothing. Default: "
        "a quarter of the process's open-file limit (ulimit -n), at most 256.",
    )

    # --- limits and token budget ----------------------------------------------------
    max_text_length: int = Field(100_000, ge=1, description="Longest memory text, in characters.")
    max_tags: int = Field(64, ge=1, description="Most tags one memory may carry.")
    max_tag_length: int = Field(100, ge=1, description="Longest tag, in characters.")
    token_encoding: str = Field(
        "cl100k_base", description="tiktoken encoding that counts tokens for max_tokens."
    )

    @field_validator("collection")
    @classmethod
    def _not_a_namespace_collection(cls, value: str) -> str:
        for suffix in RESERVED_COLLECTION_SUFFIXES:
            if value.endswith(suffix):
                raise ValueError(
                    f"a name ending in {suffix!r} is reserved: it is where the store on "
                    f"collection {value[: -len(suffix)]!r} keeps its namespaces; choose a "
                    f"name not ending in any of {list(RESERVED_COLLECTION_SUFFIXES)}"
                )
        return value

    @field_validator("alpha_thresholds")
    @classmethod
    def _thresholds_increase(cls, value: list[int]) -> list[int]:
        if any(b <= a for a, b in itertools.pairwise(value)) or any(v < 0 for v in value):
            raise ValueError("thresholds must be non-negative and strictly increasing")
        return value

    @field_validator("alpha_values")
    @classmethod
    def _values_in_unit_interval(cls, value: list[float]) -> list[float]:
        if not value or any(not 0.0 <= v <= 1.0 for v in value):
            raise ValueError("values must be a non-empty list of numbers in [0, 1]")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> HybridMemorySettings:
        if len(self.alpha_values) != len(self.alpha_thresholds) + 1:
            raise ValueError(
                "alpha_values needs exactly one more entry than alpha_thresholds "
                f"(got {len(self.alpha_values)} values for {len(self.alpha_thresholds)} "
                "thresholds)"
            )
        if self.k > self.max_k:
            raise ValueError(f"k ({self.k}) must not exceed max_k ({self.max_k})")
        if self.path is not None and self.url is not None:
            raise ValueError("path and url are mutually exclusive: a store is embedded or remote")
        return self


# The settings a view made by ``HybridMemory.with_settings`` may change: those read per call.
SEARCH_SETTINGS = frozenset(
    {
        "k",
        "max_k",
        "candidates",
        "rrf_k",
        "alpha",
        "alpha_thresholds",
        "alpha_values",
        "tag_weight",
        "tag_boost",
        "recency_decay",
        "time_phrases",
        "time_boost",
        "time_window_to_now",
        "time_order_weight",
        "supersede_factor",
        "keyword_score_lift",
        "vector_score_lift",
        "feedback_docs",
        "feedback_weight",
        "feedback_full_words",
        "long_memory_window",
        "drop_stopwords",
        "keyword_max_df",
        "token_encoding",
        "sync_interval",
        "similar_cosine",
        "similar_words_cosine",
        "similar_extra_words",
        "on_similar",
        "collapse_similar",
        "mmr",
    }
)


def load_settings(
    settings: HybridMemorySettings | None = None, **overrides: Any
) -> HybridMemorySettings:
    """Build settings from the environment, then ``settings``, then ``overrides``.

    Raises :class:`InvalidInputError` naming the environment variable of the first
    invalid field.
    """
    if settings is None:
        return HybridMemorySettings(**overrides)
    if not overrides:
        return settings
    return HybridMemorySettings(**(settings.model_dump(exclude_unset=True) | overrides))
