"""Lone UTF-16 surrogates ("\\ud83d", half an emoji: legal in JSON and in Python strings) cannot be
encoded as UTF-8, so no store, terminal, file or HTTP response can take them. Every surface that
receives text from outside (a message, a request field, a data file, a stored trace, an MCP line)
replaces each one with U+FFFD through these functions, so the rule lives in one place."""

from __future__ import annotations

import re
from typing import Any

SURROGATE = re.compile(r"[\ud800-\udfff]")
REPLACEMENT = "\ufffd"


def has_surrogates(text: str) -> bool:
    """True when ``text`` holds a lone surrogate."""
    return SURROGATE.search(text) is not None


def no_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (the same string when it holds none)."""
    return SURROGATE.sub(REPLACEMENT, text)


def json_without_surrogates(value: Any) -> Any:
    """A decoded JSON value (str, list, dict, number...) with :func:`no_surrogates` applied to every
    string in it, keys too; anything else is returned as it is."""
    if isinstance(value, str):
        return no_surrogates(value)
    if isinstance(value, list):
        return [json_without_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {json_without_surrogates(k): json_without_surrogates(v) for k, v in value.items()}
    return value
