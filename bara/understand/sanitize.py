"""Cleaning a raw user message before anything reads it: pure, no I/O.

The message is kept whole for storage (``text``) and capped for gating and search (``query``); every
change made leaves a reason code for the trace.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from bara.errors import InputError
from bara.text.blank import blank
from bara.text.surrogates import has_surrogates, no_surrogates

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class CleanInput:
    """The message as stored (``text``, whole) and as gated and searched (``query``, capped)."""

    text: str
    query: str
    reasons: tuple[str, ...] = ()


def sanitize(message: str | bytes, max_query_chars: int) -> CleanInput:
    """Decode bytes leniently, replace lone surrogates, drop control characters, cap the search copy;
    anything but text or bytes is an InputError (a None message was a TypeError deep inside)."""
    if not isinstance(message, (str, bytes)):
        raise InputError(f"a message must be text (str, or UTF-8 bytes), not {type(message).__name__}")
    reasons: list[str] = []
    text = message.decode("utf-8", errors="replace") if isinstance(message, bytes) else message
    if "\ufffd" in text and isinstance(message, bytes):
        reasons.append("input:invalid_utf8_replaced")
    if has_surrogates(text):
        text, reasons = no_surrogates(text), reasons + ["input:invalid_utf8_replaced"]
    if _CONTROL.search(text):
        text, reasons = _CONTROL.sub("", text), reasons + ["input:control_chars_removed"]
    text = unicodedata.normalize("NFC", text).strip()
    if blank(text):  # also zero-width spaces, BOMs, direction marks: nothing anyone could read
        return CleanInput("", "", tuple(reasons + ["input:empty"]))
    if len(text) > max_query_chars:
        reasons.append("input:truncated_for_retrieval")
    return CleanInput(text, text[:max_query_chars], tuple(dict.fromkeys(reasons)))
