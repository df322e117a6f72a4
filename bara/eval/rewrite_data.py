"""Conversations with human standalone rewrites (`bara eval rewrite --conversations FILE`).

One conversation per JSONL line: ``{"id", "source", "turns": [{"user", "rewrite", "peer_rewrite"?,
"assistant"?, "passage_id"?}]}``. ``rewrite`` is the human standalone rewrite, ``peer_rewrite``
another system's, ``assistant`` the reply shown after that turn and ``passage_id`` that reply's
``_id`` in the pooled corpus. A line that breaks this shape is an :class:`~bara.errors.InputError`
naming the line and the field (exit 2 at the CLI): figures over a half-read file would mislead.

Split: like ``bara eval calibrate``, by ``sha256`` of the conversation id, even = ``dev`` (tune),
odd = ``test`` (report). Branches of one CAsT 2022 topic (``...-branchN``) share their first turns,
so the id hashed is the id with that suffix removed: a topic's branches fall in one half.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bara.datafiles import check_file, json_lines, open_text
from bara.errors import InputError

__all__ = ["Conversation", "Split", "Turn", "half_of", "read_conversations", "select"]

Split = Literal["dev", "test", "all"]
_BRANCH = re.compile(r"-branch\d+$")
_FIX = "each line must be {\"id\": str, \"turns\": [{\"user\": str, \"rewrite\": str, ...}]}"


@dataclass(frozen=True)
class Turn:
    user: str
    rewrite: str
    peer_rewrite: str | None = None
    assistant: str | None = None
    passage_id: str | None = None


@dataclass(frozen=True)
class Conversation:
    id: str
    source: str
    turns: tuple[Turn, ...]

    @property
    def half(self) -> str:
        return half_of(self.id)


def half_of(conversation_id: str) -> str:
    """"dev" when sha256 of the id (branch suffix removed) is even, else "test"."""
    base = _BRANCH.sub("", conversation_id)
    return "dev" if int(hashlib.sha256(base.encode()).hexdigest(), 16) % 2 == 0 else "test"


def _text(row: dict[str, Any], key: str, where: str, required: bool) -> str | None:
    value = row.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value.strip()):
        raise InputError(f"{where}: {key!r} must be a non-empty string; {_FIX}")
    return value


def _turn(row: Any, where: str) -> Turn:
    if not isinstance(row, dict):
        raise InputError(f"{where} is not an object; {_FIX}")
    return Turn(user=_text(row, "user", where, True) or "", rewrite=_text(row, "rewrite", where, True) or "",
                peer_rewrite=_text(row, "peer_rewrite", where, False), assistant=_text(row, "assistant", where, False),
                passage_id=_text(row, "passage_id", where, False))


def _conversation(row: Any, where: str) -> Conversation:
    if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not row["id"]:
        raise InputError(f"{where} has no string \"id\"; {_FIX}")
    turns = row.get("turns")
    if not isinstance(turns, list) or not turns:
        raise InputError(f"{where} (conversation {row['id']!r}) has no list of \"turns\"; {_FIX}")
    source = row.get("source") if isinstance(row.get("source"), str) else ""
    return Conversation(row["id"], str(source), tuple(_turn(t, f"{where} turn {i}") for i, t in enumerate(turns)))


def read_conversations(path: Path) -> tuple[Conversation, ...]:
    """Every conversation of ``path``; a malformed line or a repeated id is an InputError."""
    check_file(path, "conversations")
    out: list[Conversation] = []
    seen: set[str] = set()
    with open_text(path, "conversations") as fh:
        for number, row in json_lines(fh, str(path), _FIX):
            conv = _conversation(row, f"{path} line {number}")
            if conv.id in seen:
                raise InputError(f"{path} line {number}: conversation id {conv.id!r} is repeated; ids must be unique")
            seen.add(conv.id)
            out.append(conv)
    if not out:
        raise InputError(f"{path} holds no conversation (no lines): {_FIX}")
    return tuple(out)


def select(conversations: tuple[Conversation, ...], split: str) -> tuple[Conversation, ...]:
    """The conversations of one half (``dev`` / ``test``) or all of them."""
    if split not in ("dev", "test", "all"):
        raise InputError(f"unknown split {split!r}: pass dev, test or all")
    return conversations if split == "all" else tuple(c for c in conversations if c.half == split)
