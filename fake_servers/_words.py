"""The word pools the fake servers' answers are drawn from: built here, from rules.

Every pool is made by the functions below from a few syllables and Unicode ranges, so
the words are the same on every run and platform and nothing is loaded at run time.
The multi-byte pools cover what a streaming client must decode across reads: two-byte
accented Latin, three-byte kana and ideographs, four-byte emoji, and emoji of several
code points (skin tones, ZWJ families, flags).
"""

from __future__ import annotations

import random

__all__ = ["ACCENTED", "CHINESE", "EMOJI", "JAPANESE", "PLAIN", "draw"]

_ONSETS = [
    "b",
    "c",
    "d",
    "f",
    "g",
    "h",
    "j",
    "k",
    "l",
    "m",
    "n",
    "p",
    "r",
    "s",
    "t",
    "v",
    "w",
    "z",
    "br",
    "ch",
    "cl",
    "cr",
    "dr",
    "fl",
    "fr",
    "gl",
    "gr",
    "pl",
    "pr",
    "sh",
    "sk",
    "sl",
    "sp",
    "st",
    "th",
    "tr",
]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "ee", "io", "oa", "ou"]
_CODAS = ("", "n", "r", "s", "t", "l", "m", "nd", "st", "ck")
_ACCENTS = ["é", "è", "ê", "à", "â", "î", "ï", "ô", "û", "ü"]


def _syllables(vowels: list[str]) -> tuple[str, ...]:
    """onset + vowel + coda, every combination, in a fixed order."""
    return tuple(o + v + c for o in _ONSETS for v in vowels for c in _CODAS)


def _two_of(start: int, size: int, count: int, step_a: int, step_b: int) -> tuple[str, ...]:
    """``count`` distinct two-character words from the ``size`` code points at ``start``."""
    words = (
        chr(start + (i * step_a) % size) + chr(start + (i * step_b + 1) % size)
        for i in range(count)
    )
    return tuple(dict.fromkeys(words))


def _emoji() -> tuple[str, ...]:
    faces = [chr(c) for c in range(0x1F600, 0x1F650)]  # emoticons: one code point each
    things = [chr(c) for c in range(0x1F330, 0x1F380, 2)]  # plants, food, drink
    tones = [chr(c) for c in range(0x1F3FB, 0x1F400)]  # the five skin-tone modifiers
    hands = [chr(c) + tone for c in range(0x1F44A, 0x1F451) for tone in tones]
    zwj = "\u200d"
    man, woman, girl, boy = "\U0001f468", "\U0001f469", "\U0001f467", "\U0001f466"
    families = [zwj.join(p) for p in ((man, woman, girl), (woman, woman, boy), (man, girl))]
    flags = [
        "".join(chr(0x1F1E6 + ord(letter) - ord("A")) for letter in code)
        for code in ["FR", "JP", "BR", "KE", "IN", "CA", "NO", "CL", "VN", "MX"]
    ]
    return (*faces, *things, *hands, *families, *flags)


PLAIN = _syllables(_VOWELS)  # 3,960 ASCII words
ACCENTED = _syllables(_ACCENTS)[::7]  # 515 words with a two-byte letter
JAPANESE = _two_of(0x3042, 82, 240, 7, 11)  # 82 hiragana pairs (3 bytes a character)
CHINESE = _two_of(0x4E00, 20000, 240, 97, 131)  # 240 CJK ideograph pairs
EMOJI = _emoji()  # 4 bytes a code point; some of several code points


def draw(seed: int, plain: int, per_kind: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words of the vocabulary for ``seed``: ``plain`` ASCII words, and ``per_kind``
    each of accented, Japanese, Chinese and emoji ones (the multi-byte words, in that
    order), all distinct, the same on every run and platform."""
    rng = random.Random(seed)
    multibyte = (
        w for pool in (ACCENTED, JAPANESE, CHINESE, EMOJI) for w in rng.sample(pool, per_kind)
    )
    return tuple(rng.sample(PLAIN, plain)), tuple(multibyte)
