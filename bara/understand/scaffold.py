"""An assistant's scaffolding and a user's explicit topic change: what a follow-up query must not carry.

A reply is written for reading, not for searching: citation markers (``[1]``, ``[Doc 2]``), source
lines ("Sources: ...", "See also ...", "Note: ..."), headings, hedges ("It seems that...") and
repetition notes ("Repeated ...") name no topic, and carried into the next query they pull in
whatever else mentions "sources" or "note". :func:`strip_scaffolding` removes them from the text
the rewrite reads; the words of :data:`bara.text.stopwords.ASSISTANT_SCAFFOLDING` are, besides,
never candidates from an assistant turn.

An explicit topic change ("switching topics", "new question", "unrelated:", "on another note",
"changing the subject") starts a new topic: :func:`topic_switch` finds it and gives the message
without the cue (``"Switching topics: how do dpkg triggers work?"`` -> ``"how do dpkg triggers
work?"``). Pure, no I/O.
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = ["strip_scaffolding", "topic_switch"]

_CITATION = re.compile(r"\[(?:\s*(?:doc(?:ument)?|source|ref)?\s*\d+(?:\s*[,\u2013-]\s*\d+)*\s*)\]|\[\^?\d+\]|"
                       r"\(\s*(?:source|see|ref)[^)]{0,80}\)", re.IGNORECASE)
_SCAFFOLD_LINE = re.compile(r"^\s*(?:#{1,6}\s|\*\*[^*]{1,60}\*\*\s*:?\s*$|(?:sources?|references?|see(?: also)?|"
                            r"notes?|repeated|citations?|disclaimer)\b\s*[:\-\u2013]?)", re.IGNORECASE)
_HEADING = re.compile(r"^\s*[^.!?]{1,60}:\s*$")
_HEDGE = re.compile(r"\b(?:i think|i believe|it seems(?: that)?|it appears(?: that)?|it is possible that|"
                    r"based on the (?:provided )?(?:documents?|passages?|context|information)|"
                    r"according to the (?:provided )?(?:documents?|passages?|context|sources?)|"
                    r"(?:i )?hope (?:this|that) helps|let me know if[^.!?]*)\b[,:]?", re.IGNORECASE)
_SWITCH = re.compile(
    r"^\W*(?:ok(?:ay)?|so|now|alright|and)?[\s,]*(?:"
    r"switching (?:topics?|subjects?|gears)|(?:let'?s )?(?:switch|change) (?:topics?|subjects?|gears)|"
    r"changing (?:the )?(?:topics?|subjects?)|(?:a |on a |on an? )?(?:new|different|separate|unrelated) "
    r"(?:question|topic|subject)|unrelated(?: question)?|(?:on )?another (?:note|topic|subject|question)|"
    r"on a (?:different|separate|side) note|moving on|totally different|something (?:else|different))"
    r"\b\s*(?:[:,.;!?\u2013\u2014-]+\s*|but\s+|now\s+)*", re.IGNORECASE)


@lru_cache(maxsize=4096)
def strip_scaffolding(text: str) -> str:
    """``text`` without citation markers, source / note / heading lines and hedges (cached per text)."""
    kept = []
    for line in text.splitlines():
        if _SCAFFOLD_LINE.match(line) or _HEADING.match(line):
            continue
        kept.append(_HEDGE.sub(" ", _CITATION.sub(" ", line)))
    return " ".join(" ".join(kept).split())


@lru_cache(maxsize=4096)
def topic_switch(message: str) -> str | None:
    """The message after an explicit topic-change cue, or None when it has none."""
    m = _SWITCH.match(message)
    if m is None or m.end() >= len(message.rstrip()):
        return None if m is None else ""
    return message[m.end():].strip()
