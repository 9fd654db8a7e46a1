"""Deterministic LLM-like answers, and the wire formats their events take.

Token ``i`` of the answer on a path is a pure function of ``(seed, path, i)``, so
every attempt (and a stream resumed after Last-Event-ID) tells the same answer.
About one token in eight carries multi-byte UTF-8 (accents, CJK, emoji), so
byte-level splits of the stream land inside characters.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from fake_servers._ledger import Attempt
from fake_servers._providers import PROVIDERS, OpenAIFormat, provider_for_path

__all__ = [
    "AUTO",
    "EventFormat",
    "NamedFormat",
    "OpenAIFormat",
    "Vocabulary",
    "WireEvent",
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
    """The vocabulary for ``seed``: built once with faker (slow), then cached."""
    from faker import Faker  # imported here: faker costs ~0.2 s to import

    fake = Faker(["en_US", "fr_FR", "ja_JP", "zh_CN"])
    fake.seed_instance(seed)
    plain = _unique(w for w in fake["en_US"].words(_PLAIN_WORDS * 2) if w.isascii())
    accented = _unique(w for w in fake["fr_FR"].words(_MULTIBYTE_WORDS * 20) if not w.isascii())
    japanese = _unique(fake["ja_JP"].words(_MULTIBYTE_WORDS * 2))
    chinese = _unique(fake["zh_CN"].words(_MULTIBYTE_WORDS * 2))
    emoji = _unique(fake["en_US"].emoji() for _ in range(_MULTIBYTE_WORDS * 2))
    multibyte = tuple(
        word for kind in (accented, japanese, chinese, emoji) for word in kind[:_MULTIBYTE_WORDS]
    )
    return Vocabulary(plain=plain[:_PLAIN_WORDS], multibyte=multibyte)


def _unique(words: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(words))


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
    words = vocabulary(seed)
    block, position = divmod(index - 1, _MULTIBYTE_EVERY)
    pick = _draw(seed, path, "token", index)
    if _draw(seed, path, "block", block) % _MULTIBYTE_EVERY == position:
        return " " + words.multibyte[pick % len(words.multibyte)]
    return " " + words.plain[pick % len(words.plain)]


class EventFormat(Protocol):
    """How one answer's tokens and its end look as SSE events."""

    def data_event(self, index: int, token: str) -> WireEvent:
        """The event carrying ``token``, the answer's ``index``-th (1-based)."""
        ...

    def terminal_event(self) -> WireEvent:
        """The event that says the answer is complete."""
        ...


# Raw UTF-8 on the wire (no \\u escapes), so multi-byte characters can be split.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _json(value: object) -> str:
    return _ENCODER.encode(value)


@dataclass(frozen=True)
class NamedFormat:
    """Named events: ``event: token`` with ``{"text", "index"}``, then ``event: done``."""

    def data_event(self, index: int, token: str) -> WireEvent:
        return "token", f'{{"text":{_json(token)},"index":{index}}}'

    def terminal_event(self) -> WireEvent:
        return "done", "{}"


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
