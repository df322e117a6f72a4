"""Passage markup a model does not read, removed from the text a gated prompt shows.

Knowledge-base chunks keep the markup of the page they came from: markdown image embeds
(``![alt](https://…/content/<hash>/….png)``), the URL targets of markdown links, runs of blank lines and
trailing spaces, and, when a chunker overlaps neighbouring chunks, the same sentences at the end of
one chunk and the start of the next. None of it is something an answer quotes; all of it is prompt
tokens (URLs and hashes tokenise densely). :func:`compact_passage` keeps every word of the prose and
every link's visible text; :func:`drop_repeated_start` removes from a passage the edge another passage
of the same prompt already showed.
"""

from __future__ import annotations

import re

__all__ = ["compact_passage", "drop_repeated_start"]

_IMAGE = re.compile(r"!\[([^\]\n]*)\]\([^)\s]*(?:\s+\"[^\"\n]*\")?\)")
_LINK = re.compile(r"(?<!!)\[([^\]\n]+)\]\((?:https?://|/|#|\.)[^)\s]*(?:\s+\"[^\"\n]*\")?\)")
_TRAILING = re.compile(r"[ \t]+\n")
_BLANKS = re.compile(r"\n{3,}")


def compact_passage(text: str) -> str:
    """``text`` without image embeds (their alt text kept when it has words), with each markdown link
    reduced to its visible text, without trailing spaces and with at most one blank line in a row.
    Indentation is kept: in a code or YAML sample it is meaning (collapsing it saved 0.15% of the tokens)."""
    out = _IMAGE.sub(lambda m: m.group(1).strip(), text)
    out = _LINK.sub(lambda m: m.group(1), out)
    out = _TRAILING.sub("\n", out)
    return _BLANKS.sub("\n\n", out).strip()


def _overlap(first: str, second: str, min_chars: int) -> int:
    """Length of the longest end of ``first`` (at least ``min_chars``) that ``second`` opens with; 0 if none."""
    probe = second[:min_chars]
    start = first.find(probe, max(0, len(first) - len(second)))
    while start >= 0:
        if second.startswith(first[start:]):
            return len(first) - start
        start = first.find(probe, start + 1)
    return 0


def drop_repeated_start(shown: str, text: str, min_chars: int) -> str:
    """``text`` without what it shares with ``shown`` at an edge, as an overlapping chunker repeats it: its
    opening when that is the end of ``shown`` (``text`` continues it), or its ending when that is the opening
    of ``shown`` (``text`` precedes it). At least ``min_chars`` characters must match (0 = off); ``text`` is
    unchanged when nothing of its own would be left."""
    if min_chars <= 0 or len(text) < min_chars or len(shown) < min_chars:
        return text
    head = _overlap(shown, text, min_chars)
    if head and text[head:].strip():
        return text[head:].strip()
    tail = _overlap(text, shown, min_chars)
    if tail and text[:-tail].strip():
        return text[:-tail].strip()
    return text
