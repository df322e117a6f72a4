"""Whether a text shows anything: pure, linear in its length.

A message of spaces, control characters or invisible format characters (zero-width space U+200B, BOM
U+FEFF, direction marks U+200E/U+202E, word joiner U+2060, Hangul fillers, variation selectors) looks
empty to its sender; answering or storing it as text would keep something nobody can see.
"""

from __future__ import annotations

import unicodedata

_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})
_FILLERS = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f" + "".join(chr(c) for c in range(0xFE00, 0xFE10)))


def blank(text: str) -> bool:
    """True when ``text`` holds no character a reader would see."""
    return all(ch.isspace() or ch in _FILLERS or unicodedata.category(ch) in _INVISIBLE_CATEGORIES for ch in text)
