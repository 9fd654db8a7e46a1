"""Deterministic LLM-like answers, and the wire formats their events take.

Token ``i`` of the answer on a path is a pure function of ``(seed, path, i)``, so
every attempt (and a stream resumed after Last-Event-ID) tells the same answer.
About one token in eight carries multi-byte UTF-8 (accents, CJK, emoji), so
byte-level splits of the stream land inside characters.
"""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass
from typing import Protocol

from fake_servers._ledger import Attempt
from fake_servers._providers import (
    PROVIDERS,
    AnthropicFormat,
    GeminiFormat,
    OpenAIFormat,
    ResponsesFormat,
    json_string,
    provider_for_path,
)
from fake_servers._words import draw as draw_words

__all__ = [
    "AUTO",
    "KIT_FORMATS",
    "Answer",
    "EventFormat",
    "NamedFormat",
    "OpenAIFormat",
    "Vocabulary",
    "WireEvent",
    "answer",
    "format_names",
    "get_format",
    "register_format",
    "sent_text",
    "token",
    "vocabulary",
]

WireEvent = tuple[str | None, str]  # (SSE event name or None, data)

_MULTIBYTE_EVERY = 8  # one token in each block of this many carries multi-byte text
_PLAIN_WORDS = 400
_MULTIBYTE_WORDS = 48  # per kind: accented, Japanese, Chinese, emoji


@dataclass(frozen=True)
class Vocabulary:
    """The words an answer is drawn from: plain ASCII ones and multi-byte ones."""

    plain: tuple[str, ...]
    multibyte: tuple[str, ...]


@functools.lru_cache(maxsize=32)
def vocabulary(seed: int) -> Vocabulary:
    """The vocabulary for ``seed``: drawn from the fixed word pools of ``_words``."""
    plain, multibyte = draw_words(seed, _PLAIN_WORDS, _MULTIBYTE_WORDS)
    return Vocabulary(plain=plain, multibyte=multibyte)


def _draw(seed: int, path: str, label: str, index: int) -> int:
    digest = hashlib.blake2b(f"{seed}|{path}|{label}|{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def token(seed: int, path: str, index: int) -> str:
    """Token ``index`` (1-based) of the answer served on ``path`` under ``seed``.

    Args:
        seed: The scenario's seed.
        path: The endpoint path; each path tells its own answer.
        index: The token's 1-based position in the answer.

    Returns:
        A word with a leading space; one in each block of eight is multi-byte.
    """
    return answer(seed, path).token(index)


_KEPT_TOKENS = 1 << 17  # tokens an Answer keeps (8 bytes each: the words are shared)
_GROW = 1024  # tokens drawn at once at most, about 1.5 ms
_FIRST = 16  # tokens drawn by an answer's first draw (two blocks): most answers are short


class Answer:
    """The tokens of the answer on one path under one seed, each drawn once.

    Token ``i`` is the word picked by the blake2b draw of ``(seed, path, i)`` (multi-byte
    where the draw of its block of eight says), as it always was; the draws are made
    once and kept, the first ``_KEPT_TOKENS`` of them, so every attempt on a path (and
    every reader of the ledger) shares them. They are kept in order, in batches that
    double from _FIRST up to _GROW (a token far past the kept ones is drawn alone), so a
    short answer draws only a few and no call holds the server's loop for long. Safe
    from any thread: the kept list only grows, by one ``extend``.
    """

    def __init__(self, seed: int, path: str) -> None:
        self._words = _spaced(seed)
        self._token_key = f"{seed}|{path}|token|".encode()
        self._block_key = f"{seed}|{path}|block|".encode()
        self._kept: list[str] = [""]  # index 0 is no token
        self._growing = threading.Lock()

    def token(self, index: int) -> str:
        kept = self._kept
        if 0 < index < len(kept):
            return kept[index]
        if index < 1 or index >= _KEPT_TOKENS or index - len(kept) >= _GROW:
            return self._draw_token(index)
        with self._growing:
            first = len(kept)
            if index >= first:
                end = max(index + 1, first + min(max(first, _FIRST), _GROW))
                kept.extend(self._draw_tokens(first, min(end, _KEPT_TOKENS)))
        return kept[index]

    def _draw_tokens(self, first: int, end: int) -> list[str]:
        """Tokens ``first`` to ``end - 1``: one draw each, one per block of eight for the block."""
        plain, wide = self._words
        out: list[str] = []
        block: int | None = None
        wide_at = -1
        for index in range(first, end):
            if (index - 1) // _MULTIBYTE_EVERY != block:
                block = (index - 1) // _MULTIBYTE_EVERY
                wide_at = self._draw(self._block_key, block) % _MULTIBYTE_EVERY
            pick = self._draw(self._token_key, index)
            if (index - 1) % _MULTIBYTE_EVERY == wide_at:
                out.append(wide[pick % len(wide)])
            else:
                out.append(plain[pick % len(plain)])
        return out

    def _draw_token(self, index: int) -> str:
        return self._draw_tokens(index, index + 1)[0]

    @staticmethod
    def _draw(key: bytes, number: int) -> int:
        # The bytes of f"{seed}|{path}|{label}|{number}", as _draw hashes them.
        digest = hashlib.blake2b(key + b"%d" % number, digest_size=8).digest()
        return int.from_bytes(digest, "big")


@functools.lru_cache(maxsize=64)
def answer(seed: int, path: str) -> Answer:
    """The answer on ``path`` under ``seed`` (kept for the 64 most recent pairs)."""
    return Answer(seed, path)


@functools.lru_cache(maxsize=32)
def _spaced(seed: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The vocabulary's plain and multi-byte words, each with its leading space, made once."""
    words = vocabulary(seed)
    return tuple(" " + w for w in words.plain), tuple(" " + w for w in words.multibyte)


class EventFormat(Protocol):
    """How one answer's tokens and its end look as SSE events."""

    def data_event(self, index: int, token: str) -> WireEvent:
        """The event carrying ``token``, the answer's ``index``-th (1-based)."""
        ...

    def terminal_event(self) -> WireEvent:
        """The event that says the answer is complete."""
        ...


@dataclass(frozen=True)
class NamedFormat:
    """Named events: ``event: token`` with ``{"text", "index"}``, then ``event: done``."""

    def data_event(self, index: int, token: str) -> WireEvent:
        return "token", f'{{"text":{json_string(token)},"index":{index}}}'

    def terminal_event(self) -> WireEvent:
        return "done", "{}"


# The kit's own formats: each event a pure function of (index, token) and the format's
# fields, so the ledger can make a data event's data again instead of keeping it.
KIT_FORMATS: frozenset[type] = frozenset(
    {OpenAIFormat, ResponsesFormat, AnthropicFormat, GeminiFormat, NamedFormat}
)

AUTO = "auto"  # not a format: the provider whose path it is, else openai
_REGISTRY: dict[str, EventFormat] = {**PROVIDERS, "named": NamedFormat()}


def register_format(name: str, event_format: EventFormat, *, replace: bool = False) -> None:
    """Make ``event_format`` available to scripts as ``Stream(format=name)``.

    Args:
        name: The name scripts use.
        event_format: An object with ``data_event`` and ``terminal_event``.
        replace: Allow replacing a format already registered under ``name``.

    Raises:
        ValueError: ``name`` is taken and ``replace`` is false, or is ``auto``.
    """
    if name == AUTO:
        raise ValueError(f"{AUTO!r} is reserved: it picks the format by the request's path")
    if name in _REGISTRY and not replace:
        raise ValueError(f"event format {name!r} is already registered")
    _REGISTRY[name] = event_format


def get_format(name: str, path: str | None = None) -> EventFormat:
    """The format registered as ``name``; ``auto`` is the format of ``path``'s provider.

    ``auto`` resolves to ``openai`` off the provider paths (and without a path).

    Raises:
        KeyError: No such format; the message lists the known names.
    """
    if name == AUTO:
        name = (provider_for_path(path) if path is not None else None) or "openai"
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown event format {name!r}; known: {format_names()}") from None


def format_names() -> tuple[str, ...]:
    """Every name a script can use: the registered formats and ``auto``, sorted."""
    return tuple(sorted({*_REGISTRY, AUTO}))


def sent_text(attempt: Attempt, seed: int) -> str:
    """The answer text the attempt's data events carried (tokens in the order sent).

    Args:
        attempt: A ledger attempt.
        seed: The scenario seed the server ran with (``server.scenario.seed``).

    Returns:
        The concatenated tokens, as an SDK that read every token would return them.
    """
    return "".join(token(seed, attempt.path, event.index) for event in attempt.data_events)
