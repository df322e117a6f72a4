"""Cue phrases that mark a sentence as a research note (decision, conclusion, hypothesis, open question).

Shared by the gate (a statement that records a note needs no knowledge-base search) and the
notes tier (``bara.memory.notes`` extracts the notes). Pure regular expressions.
"""

from __future__ import annotations

import re

__all__ = ["CUES", "OWN_KINDS", "records_note"]

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


#: Notes that are ours to keep, not the documents' to confirm: a decision or an open question.
#: A hypothesis ("I think my luggage is lost") is a claim the knowledge base may check, and the
#: same words open many plain requests, so it does not stop a search.
OWN_KINDS = frozenset({"decision", "open_question"})


def records_note(text: str, kinds: frozenset[str] = OWN_KINDS) -> bool:
    """True when ``text`` carries a cue of one of ``kinds`` ("let's go with", "we still need to")."""
    return any(pattern.search(text) for kind, pattern in CUES if kind in kinds)
