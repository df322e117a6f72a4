"""Typed records for the tool results the rule router reads back from the transcript.

Tool results reach the router as JSON text in :class:`~bara.messages.ToolResultMessage`s (the same
envelopes a real model sees); these records are what the router works with once it has parsed them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class SearchHit:
    """One ``search_documents`` hit; ``score`` is the fused (RRF) score, 0.0 when absent."""

    source: str = ""
    title: str = ""
    text: str = ""
    score: float = 0.0

    @classmethod
    def read(cls, raw: Any) -> "SearchHit":
        """A hit from the tool's JSON; missing or malformed fields read as empty."""
        h = raw if isinstance(raw, Mapping) else {}
        return cls(str(h.get("source", "")), str(h.get("title", "")), str(h.get("text", "")),
                   float(h.get("score") or 0.0))


def search_hits(data: Mapping[str, Any]) -> tuple[SearchHit, ...]:
    """The hits of a ``search_documents`` result's ``data``, in rank order."""
    return tuple(SearchHit.read(h) for h in data.get("hits") or [])
