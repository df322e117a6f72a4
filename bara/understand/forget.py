"""Is a privacy message an explicit request to delete the user's memory, now?

The privacy route deletes the user's profile, notes, Q&A and episodic memory when the message asks it to
(``Assistant._privacy_forget``). A deletion cannot be undone, so only a request counts: some clause of the
message (sentences, and clauses joined by "and", "but", "then", split apart) names a deletion verb with

- nothing but request words before it: nothing ("forget my data"), "please", "I want you to", "you
  should", or, in a question, "can / could / would / will you" ("can you delete my profile?");
- no negation before it ("don't delete it", "never forget my data");
- no deferral or condition after it ("... later", "... if I ask", "... when I leave").

So a question about deletion ("how do I delete my data?", "do you ever forget what I tell you?") or a
wish to keep ("don't forget my data") deletes nothing; the privacy answer says how to delete instead.
Every pattern is anchored or a plain alternation over one clause: linear in the message's length.
"""

from __future__ import annotations

import re

_CLAUSES = re.compile(r"[.!?;:\n]+|,|\b(?:and|but|then|so)\b")
_VERB = re.compile(r"\b(forget|delete|erase|remove|wipe|clear)\b")
_NEGATION = re.compile(r"\b(not|never|no|don'?t|dont|doesn'?t|won'?t|wouldn'?t|shouldn'?t|can'?t|cannot|"
                       r"without|stop)\b|n't\b")
_DEFERRED = re.compile(r"\b(later|tomorrow|someday|eventually|next|future|if|when|whenever|after|unless|until)\b")
# Possessive repeats (``*+``): a run of softeners is never re-split, so a failing match stays linear.
_SOFTENERS = r"(?:(?:please|pls|ok|okay|now|just|so|then|go ahead|right away|kindly|yes)\s+)*+"
_REQUEST_PREFIX = re.compile(
    rf"^{_SOFTENERS}(?:(?:i(?: want| need| would like|'d like|d like) (?:you )?to|you (?:should|must|can|may)|"
    rf"(?:can|could|would|will) you|let'?s)\s+{_SOFTENERS})?$")


def asks_to_forget(message: str) -> bool:
    """True when some clause of ``message`` explicitly asks to delete (see the module docstring)."""
    text = " ".join(message.lower().replace("\u2019", "'").split())
    return any(_requests(clause.strip()) for clause in _CLAUSES.split(text))


def _requests(clause: str) -> bool:
    verb = _VERB.search(clause)
    if verb is None:
        return False
    before, after = clause[:verb.start()], clause[verb.end():]
    return (not _NEGATION.search(before) and not _DEFERRED.search(after)
            and _REQUEST_PREFIX.match(before.strip() + " " if before.strip() else "") is not None)
