"""A LlamaIndex memory block backed by hybrid-memory.

``Memory`` (``llama_index.core.memory``) keeps the recent chat in a short-term queue
and, when the queue outgrows its token limit, hands the oldest messages to its memory
blocks (``aput``). Before every LLM call it asks each block for content to put in
front of the chat (``aget``), and trims the blocks (``atruncate``) when the whole
prompt would exceed its token limit. :class:`HybridMemoryBlock` stores what is
flushed as hybrid-memory memories and recalls the ones that fit the latest turns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from os import PathLike
from typing import Any, Literal

from hybrid_memory import (
    DuplicateIdError,
    Hit,
    HybridMemory,
    HybridMemorySettings,
    InvalidInputError,
    MissingDependencyError,
)

try:
    from llama_index.core.base.llms.types import ChatMessage
    from llama_index.core.bridge.pydantic import (
        Field,
        PrivateAttr,
        ValidationError,
        field_validator,
    )
    from llama_index.core.memory.memory import BaseMemoryBlock
    from llama_index.core.utils import get_tokenizer
except ImportError as exc:  # pragma: no cover - the distribution depends on it
    raise MissingDependencyError("llama-index-core", "llama_index.memory.hybrid_memory") from exc

from llama_index.memory.hybrid_memory._checks import (
    invalid_input,
    known_roles,
    unmanaged_keys,
)
from llama_index.memory.hybrid_memory._lines import (
    DEFAULT_LINE_FORMAT,
    LINE_FIELDS,
    formattable,
    hit_line,
)
from llama_index.memory.hybrid_memory._records import records_of, role_of

#: The roles whose messages make up the recall query.
QUERY_ROLES = ("user", "assistant")
# Longest recall query, in characters, newest text first (the embedding model reads
# only the first few hundred words anyway).
_MAX_QUERY_CHARS = 2000
# Tries at storing a batch while other writers store some of the same messages.
_STORE_ATTEMPTS = 3
# Ids of stored messages a block remembers (then forgets them all and starts over).
_REMEMBERED_IDS = 10_000


class HybridMemoryBlock(BaseMemoryBlock[str]):
    """Long-term memory for a LlamaIndex ``Memory``: flushed chat messages go into a
    hybrid-memory store, and the memories that best match the latest turns come back.

    Example (offline: the default embedding model ships with hybrid-memory)::

        from llama_index.core.chat_engine import SimpleChatEngine
        from llama_index.core.llms import MockLLM
        from llama_index.core.memory import Memory
        from llama_index.memory.hybrid_memory import HybridMemoryBlock

        block = HybridMemoryBlock(path="./memory", scope="user", user_id="alice")
        memory = Memory.from_defaults(
            session_id="alice-1", token_limit=2000, memory_blocks=[block]
        )
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(), memory=memory)
        engine.chat("My cat is called Miso.")
        ...                                  # later turns push that message out of the
        engine.chat("What is my cat called?")  # short-term queue; the block recalls it

    Pass an open store as ``memory=`` (it stays yours to close), or let the block
    open one with ``path=`` / ``url=`` / ``collection=`` / ``settings=`` /
    ``embedding=``, as :class:`~hybrid_memory.HybridMemory` takes them (then
    :meth:`close` closes it); with neither, an in-memory store.

    **Storing** (``aput``, called by ``Memory`` with the messages it flushes; with
    ``store_immediately``, also every message ``aget`` is shown, so each turn is stored
    when the ``Memory`` is read before the LLM call, not only once it leaves the
    short-term queue): one memory per message of a role in ``roles`` (by default the
    user's only: a model's replies are not facts) that has text (tool-call-only and
    image-only messages are skipped), all of one call written in one ``add_many``.
    Its text is the message's text; its metadata ``role``, ``session_id`` (the
    ``Memory``'s session, else ``session_id`` of the block), ``user_id`` (when set),
    ``source="llama_index"`` and ``metadata``; its tags ``role:<role>``,
    ``session:<id>``, ``user:<id>`` and ``tags``. A message's
    ``additional_kwargs["timestamp"]`` (or ``["created_at"]``: datetime, ISO 8601 or
    epoch seconds) becomes the memory's ``created_at``; without one, the time it is
    stored. The memory's id is derived from user, session, role and text, so flushing
    the same message again (or the same words again in the same session and role)
    stores nothing new. A text longer than the store's ``max_text_length`` is stored
    in parts. A message's ``additional_kwargs["supersedes"]`` (a stored memory's id:
    the message corrects it, "I moved to Berlin") is stored as the memory's
    ``supersedes`` link (``HybridMemory.add``): recall then ranks the older memory
    lower and its line ends with ``superseded_note``.

    **Recalling** (``aget``): the query is the text of the last ``query_messages``
    user and assistant messages, newest first. The search is restricted by
    ``scope``: ``"session"`` (the ``Memory``'s session, and ``user_id`` when set),
    ``"user"`` (every session of ``user_id``) or ``"all"``; ``filter`` (a
    hybrid-memory metadata filter) is added to each. The best ``k`` hits are
    rendered best first, one ``line_format`` line each, until the next line would
    take the text past ``max_tokens`` tokens (the store's search gets the same
    budget). Hits whose text is already in the chat are left out, and with
    ``min_score`` those whose ``Hit.score`` (a relevance in [0, 1]) is below it.

    **Truncating** (``atruncate``, when the whole prompt is over the ``Memory``'s
    token limit): lines are dropped from the end (the least relevant) until enough
    tokens are freed. ``priority`` 0 would exempt the block from this; the default
    is 1.

    Async methods run the store's calls in a worker thread, so the event loop is not
    blocked by embedding or Chroma.
    """

    name: str = Field(
        default="recalled_memories",
        description="The block's name; the Memory wraps its content in a tag of this name.",
    )
    description: str | None = Field(
        default="Memories recalled from earlier turns by hybrid (vector + keyword + tag) search.",
        description="A description of the memory block.",
    )
    priority: int = Field(
        default=1,
        description="Truncation priority in the Memory (0: never truncated; 1: truncated last).",
    )
    memory: HybridMemory | None = Field(
        default=None,
        exclude=True,
        description="The hybrid-memory store (opened from path/url/settings when not given).",
    )
    k: int = Field(default=5, ge=1, description="How many memories to recall at most.")
    max_tokens: int = Field(
        default=400, ge=1, description="Token budget of the rendered recalled memories."
    )
    query_messages: int = Field(
        default=3,
        ge=1,
        description="How many of the latest user/assistant messages make up the recall query.",
    )
    roles: list[str] = Field(
        default_factory=lambda: ["user"],
        description=(
            "Roles of the messages that are stored (default: the user's only; add "
            "'assistant' to keep the replies too)."
        ),
    )
    store_immediately: bool = Field(
        default=False,
        description=(
            "Also store the chat messages the Memory shows the block before each LLM call "
            "(the turn just put, and the previous reply), not only those flushed out of "
            "its short-term queue."
        ),
    )
    min_score: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "Leave out recalled memories whose relevance (hybrid_memory's Hit.score, in "
            "[0, 1]) is below this; None keeps the best k, however weak."
        ),
    )
    mmr: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description=(
            "Maximal marginal relevance when recalling: the weight of variety in [0, 1] "
            "(LlamaIndex's vector_store_query_mode='mmr' with mmr_threshold = 1 - mmr); "
            "None uses the store's setting (0: relevance alone). Near-duplicates come "
            "back once either way (the store's collapse_similar)."
        ),
    )
    on_similar: Literal["keep", "skip", "supersede"] | None = Field(
        default=None,
        description=(
            "What storing a message that stored memories say nearly the same as does "
            "(HybridMemory.add's on_similar): 'keep' stores it too (as LlamaIndex's vector "
            "memory keeps every message), 'skip' stores nothing, 'supersede' stores it as "
            "replacing the most similar; None uses the store's setting ('keep')."
        ),
    )
    scope: Literal["session", "user", "all"] = Field(
        default="session",
        description=(
            "Which memories are recalled: 'session' (this session's, and this user's if "
            "user_id is set), 'user' (all of user_id's sessions) or 'all'."
        ),
    )
    session_id: str | None = Field(
        default=None,
        description="Session id to use when the caller passes none (Memory always passes its own).",
    )
    user_id: str | None = Field(
        default=None,
        description=(
            "Stored as metadata user_id and tag user:<id>; with scope 'session' or 'user', "
            "recall is limited to it."
        ),
    )
    namespace: str | None = Field(
        default=None,
        description=(
            "Store and recall in this namespace of the store (HybridMemory.namespace): a "
            "collection, keyword index and tag set of its own, so nothing of it (hits, "
            "tags, counts, keyword statistics) shows in another namespace or in the store "
            "itself. One namespace per user: namespace=user_id."
        ),
    )
    filter: dict[str, Any] | None = Field(
        default=None,
        description="A hybrid-memory metadata filter added to every recall search.",
    )
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Extra metadata stored with every memory."
    )
    tags: list[str] = Field(
        default_factory=list, description="Extra tags stored with every memory."
    )
    line_format: str = Field(
        default=DEFAULT_LINE_FORMAT,
        description=f"How one recalled memory is rendered; placeholders {', '.join(LINE_FIELDS)}.",
    )
    date_format: str = Field(
        default="%Y-%m-%d %H:%M", description="strftime format of {date} (UTC)."
    )
    superseded_note: str = Field(
        default=" (superseded by a newer memory)",
        description="Appended to the line of a recalled memory that a newer one supersedes "
        "(Hit.superseded_by); '' adds nothing.",
    )
    tokenizer_fn: Callable[[str], list[Any]] = Field(
        default_factory=get_tokenizer,
        exclude=True,
        description="Counts tokens for max_tokens and truncation (LlamaIndex's default).",
    )

    _owns_memory: bool = PrivateAttr(default=False)
    _stored: set[str] = PrivateAttr(default_factory=set)
    _view: HybridMemory | None = PrivateAttr(default=None)

    def __init__(
        self,
        memory: HybridMemory | None = None,
        *,
        path: str | PathLike[str] | None = None,
        url: str | None = None,
        collection: str | None = None,
        settings: HybridMemorySettings | None = None,
        embedding: Any = None,
        **data: Any,
    ) -> None:
        opening = [
            name
            for name, value in (
                ("path", path),
                ("url", url),
                ("collection", collection),
                ("settings", settings),
                ("embedding", embedding),
            )
            if value is not None
        ]
        if memory is not None and opening:
            raise InvalidInputError(
                "memory",
                f"pass either memory= (an open HybridMemory) or {'/'.join(opening)}= "
                "to open one, not both",
            )
        if memory is not None and not isinstance(memory, HybridMemory):
            raise InvalidInputError(
                "memory", f"expected a hybrid_memory.HybridMemory, got {type(memory).__name__}"
            )
        try:
            super().__init__(**{**data, "memory": memory})
        except ValidationError as exc:
            raise invalid_input(exc) from None
        if self.scope == "user" and not self.user_id:
            raise InvalidInputError(
                "user_id", "scope='user' recalls one user's memories: set user_id"
            )
        if memory is None:
            self.memory = HybridMemory(
                path, url=url, collection=collection, settings=settings, embedding=embedding
            )
            self._owns_memory = True
        try:
            if self.namespace is not None:
                self._view = self._store.namespace(self.namespace)
            self._check_against_store()
        except BaseException:
            self.close()
            raise

    # --- validation -------------------------------------------------------------------

    @field_validator("roles")
    @classmethod
    def _known_roles(cls, roles: list[str]) -> list[str]:
        return known_roles(roles)

    @field_validator("metadata")
    @classmethod
    def _unmanaged_keys(cls, metadata: dict[str, Any]) -> dict[str, Any]:
        return unmanaged_keys(metadata)

    @field_validator("line_format")
    @classmethod
    def _formattable(cls, line_format: str) -> str:
        return formattable(line_format)

    def _check_against_store(self) -> None:
        store = self._store
        if self.k > store.settings.max_k:
            raise InvalidInputError(
                "k", f"expected an integer in 1..{store.settings.max_k}, got {self.k}"
            )
        if self.filter is not None:
            try:
                store.count(filter=self.filter)  # validates the filter; stores nothing
            except InvalidInputError as exc:
                raise InvalidInputError("filter", str(exc)) from exc

    @property
    def _store(self) -> HybridMemory:
        """The store, or its namespace when ``namespace`` is set."""
        if self._view is not None:
            return self._view
        if self.memory is None:  # only between __init__'s steps
            raise RuntimeError("HybridMemoryBlock has no store")
        return self.memory

    def close(self) -> None:
        """Close the store if this block opened it (one passed in stays open)."""
        if self._owns_memory and self.memory is not None:
            self.memory.close()

    # --- storing ------------------------------------------------------------------------

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Store the messages ``Memory`` flushed out of its short-term queue."""
        records = self.records_for(messages)
        if records:
            await asyncio.to_thread(self._store_new, records)

    def records_for(
        self, messages: Sequence[ChatMessage], *, session_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The hybrid-memory items (``add_many`` dicts) the block stores for ``messages``
        (a message's own ``additional_kwargs["session_id"]`` first, then ``session_id``,
        then the block's)."""
        return records_of(
            messages,
            roles=self.roles,
            metadata=self.metadata,
            tags=self.tags,
            user_id=self.user_id,
            session_id=session_id or self.session_id,
            max_length=self._store.settings.max_text_length,
            max_tag=self._store.settings.max_tag_length,
        )

    def _store_new(self, records: list[dict[str, Any]]) -> list[str]:
        """Store those of ``records`` not stored yet, in one ``add_many``; returns the ids
        stored now."""
        fresh = [r for r in records if r["id"] not in self._stored]
        store = self._store
        added: list[str] = []
        # New messages cost one add_many; when some were stored before (an earlier run
        # of the block, another block or process on the store), the store refuses the
        # batch before writing anything, and the rest are written after one lookup. A
        # writer storing the same messages at the same moment can make that happen again.
        for _ in range(_STORE_ATTEMPTS):
            if not fresh:
                break
            try:
                added = store.add_many(fresh, on_similar=self.on_similar)
                break
            except DuplicateIdError:
                stored = store.existing([r["id"] for r in fresh])
                fresh = [r for r in fresh if r["id"] not in stored]
        else:
            if fresh:
                raise DuplicateIdError(fresh[0]["id"])
        self._remember(r["id"] for r in records)
        return added

    def _remember(self, ids: Iterable[str]) -> None:
        """Ids known to be stored, so that messages seen again (every turn, with
        ``store_immediately``) cost no store call."""
        if len(self._stored) > _REMEMBERED_IDS:
            self._stored.clear()
        self._stored.update(ids)

    # --- recalling ----------------------------------------------------------------------

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        """Recall the memories that match the latest messages, rendered as lines."""
        messages = messages or []
        session = block_kwargs.get("session_id")
        query = self.query_for(messages)
        # Validated before anything is stored: a scope without its session is an error.
        where = self.filter_for(session) if query else None
        seen = self.records_for(messages, session_id=session) if self.store_immediately else []
        if not query:
            if seen:
                await asyncio.to_thread(self._store_new, seen)
            return ""
        hits = await asyncio.to_thread(self._recall_then_store, query, where, seen)
        in_chat = {" ".join((m.content or "").split()) for m in messages}
        return self.render(h for h in hits if " ".join(h.text.split()) not in in_chat)

    def _recall_then_store(
        self, query: str, where: dict[str, Any] | None, records: list[dict[str, Any]]
    ) -> list[Hit]:
        """Search, then store ``records`` (in this order: the messages still in the chat
        would otherwise take recall slots only to be left out as already shown)."""
        hits = self._store.search(
            query, k=self.k, filter=where, max_tokens=self.max_tokens, mmr=self.mmr
        )
        if records:
            self._store_new(records)
        if self.min_score is not None:
            hits = [h for h in hits if h.score >= self.min_score]
        return list(hits)

    def query_for(self, messages: Sequence[ChatMessage]) -> str:
        """The recall query: the last ``query_messages`` user/assistant texts, newest first."""
        texts: list[str] = []
        for message in reversed(messages):
            text = (message.content or "").strip()
            if role_of(message) in QUERY_ROLES and text:
                texts.append(text)
                if len(texts) == self.query_messages:
                    break
        return "\n".join(texts)[:_MAX_QUERY_CHARS].strip()

    def filter_for(self, session_id: str | None = None) -> dict[str, Any] | None:
        """The metadata filter of a recall search in the given session."""
        parts: list[dict[str, Any]] = [] if self.filter is None else [dict(self.filter)]
        if self.user_id and self.scope in ("session", "user"):
            parts.append({"user_id": self.user_id})
        if self.scope == "session":
            session = session_id or self.session_id
            if not session:
                raise InvalidInputError(
                    "session_id",
                    "scope='session' recalls one session's memories, but no session id is "
                    "known: use the block through a llama_index Memory (it passes its "
                    "session_id), set session_id= on the block, or use scope='user' or 'all'",
                )
            parts.append({"session_id": str(session)})
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {"$and": parts}

    def render(self, hits: Iterable[Hit]) -> str:
        """Hits as ``line_format`` lines, best first, within ``max_tokens``."""
        lines: list[str] = []
        for hit in hits:
            candidate = "\n".join([*lines, self._line(hit)])
            if len(self.tokenizer_fn(candidate)) > self.max_tokens:
                break
            lines.append(self._line(hit))
        return "\n".join(lines)

    def _line(self, hit: Hit) -> str:
        return hit_line(hit, self.line_format, self.date_format, self.superseded_note)

    # --- truncating ---------------------------------------------------------------------

    async def atruncate(self, content: str, tokens_to_truncate: int) -> str | None:
        """Drop the least relevant lines until ``tokens_to_truncate`` tokens are freed."""
        if tokens_to_truncate <= 0:
            return content
        lines = content.split("\n")
        before = len(self.tokenizer_fn(content))
        while lines:
            lines.pop()
            if before - len(self.tokenizer_fn("\n".join(lines))) >= tokens_to_truncate:
                break
        return "\n".join(lines) or None
