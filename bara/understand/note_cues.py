"""Cue phrases that mark a sentence as a research note (decision, conclusion, hypothesis, open question).

Shared by the gate (a statement that records a note needs no knowledge-base search) and the
notes tier (``bara.memory.notes`` extracts the notes). Pure regular expressions.
"""

from __future__ import annotations

import re

__all__ = ["CUES", "records_note"]

CUES: tuple[tuple[str, re.Pattern], ...] = (
    ("decision", re.compile(r"\b(we(?:'ve| have)? decided (?:to|on|that|against)|let'?s (?:go with|use|stick with)|"
                            r"we(?:'ll| will) (?:go with|use)|we(?:'re| are) going with|we agreed (?:to|on|that)|"
                            r"we settled on|the decision is|decision:)", re.I)),
    ("conclusion", re.compile(r"\b(so the conclusion is|the conclusion is|in conclusion|conclusion:|"
                              r"we(?:'ve| have)? concluded(?: that)?|the takeaway is|bottom line:?|so it turns out)",
                              re.I)),
    ("hypothesis", re.compile(r"\b(i think(?: that)?|my hypothesis is|hypothesis:|i suspect(?: that)?|"
                              r"my guess is|i bet|maybe it'?s because|it might be because)", re.I)),
    ("open_question", re.compile(r"\b(open question:?|we still need to (?:figure out|decide|find out|check|work out)|"
                                 r"still (?:unclear|unknown|to be decided)|it'?s unclear (?:whether|how|why|if)|"
                                 r"remains to be seen|tbd:?)", re.I)),
)


def records_note(text: str) -> bool:
    """True when any sentence of ``text`` carries a note cue ("let's go with", "I think", "open question")."""
    return any(pattern.search(text) for _, pattern in CUES)
