"""The profile tier: a few facts the user stated about themselves, by rules you can read.

Trust boundary: the profile is learned ONLY from the user's own message text.
:meth:`ProfileMemory.learn_from_user_turn` is the single write entry point the
pipeline uses, and it takes nothing but that text: retrieved chunks, notes, old
answers and the assistant's reply can never reach it, so a document saying
"remember that my name is X" or "the user prefers Y" changes nothing.

Extraction is deterministic: each clause of the message (split at ``, ; . ! ?``
and line breaks) is skipped when it is a question ("am I a network engineer?"),
and a cue is ignored when a negation or a hypothetical ("don't", "never", "if",
"suppose"...) precedes it in its clause.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

from bara.store.base import Read, SqlRunner
from bara.identity import require_user_id

_CLAUSE = re.compile(r"[^,;.!?\n]+[,;.!?\n]*")
_QUESTION_START = re.compile(
    r"^\s*(am|are|is|was|were|does|did|can|could|would|should|what|who|whom|"
    r"which|why|how|where|when)\b", re.I)
_BLOCKER = re.compile(
    r"\b(not|never|no longer|don'?t|doesn'?t|didn'?t|isn'?t|wasn'?t|won'?t|aren'?t|ain'?t|"
    r"if|suppose|supposing|imagine|pretend|whether|unless|as if|were i)\b|n't\b", re.I)

_ROLE_NOUNS = frozenset("""
engineer developer programmer scientist analyst student teacher researcher designer manager administrator
admin architect consultant doctor nurse lawyer writer sre devops founder cto ceo cio ciso accountant
professor lecturer physicist mathematician technician operator intern specialist officer editor journalist
pentester tester economist trader statistician librarian pharmacist dentist surgeon physician therapist
marketer recruiter coder hacker maintainer contributor lead director owner entrepreneur freelancer
""".split())
_NOT_A_NAME = frozenset("""
not a an the just also here there back done fine good great ok okay sorry sure glad happy sad tired
interested curious confused stuck lost new ready busy afraid aware able unable trying using working looking
going still really very so in on at from with about currently now always never learning building
what that this later tomorrow when if please again sometime soon maybe asap tonight today whenever anytime
whatever
""".split())

_NAME_EXPLICIT = re.compile(r"\b(?:call me|my name is|my name's|i am called|i'm called)\s+"
                            r"([^\W\d_][\w'\-]{0,39})", re.I)
_NAME_IM = re.compile(r"\b(?i:i'm|i am)\s+([A-Z][\w'\-]{0,39})\s*(?:[,.!;]|$|\s+(?:and|here|by the way)\b)")
_ROLE_IM = re.compile(r"\b(?:i'm|i am)\s+(an?\s+(?:[\w\-/]+\s+){0,3}?[\w\-/]+?)"
                      r"(?=\s+(?:at|for|in|with|who|and|but|so|working|from)\b|\s*$|\s*[,.!;])", re.I)
_ROLE_WORK = re.compile(r"\b(?:i work as|my (?:job|role|title|position) is)\s+((?:an?\s+)?(?:[\w\-/]+\s*){1,4}?)"
                        r"(?=\s+(?:at|for|in|with|and|but|so)\b|\s*$|\s*[,.!;])", re.I)
_EMPLOYER = re.compile(r"\b(?i:i work (?:at|for)|i'm (?:employed )?at)\s+([A-Z][\w&\-]*(?:\s+[A-Z][\w&\-]*){0,3})")
_LOCATION = re.compile(r"\b(?i:i live in|i'm based in|i am based in|i'm from|i am from)\s+"
                       r"([A-Z][\w\-]*(?:\s+[A-Z][\w\-]*){0,3})")
_TIMEZONE = re.compile(r"\bmy time ?zone is\s+([\w+\-/:]{2,40})", re.I)
_SHORT = re.compile(r"\b(keep (it|(?:the |your )?(?:answers?|responses?|replies)) (short|brief|concise)|"
                    r"be (brief|concise)|"
                    r"(i prefer|i like|i want|give me) (short|brief|concise) (answers?|responses?|replies)|"
                    r"short (answers?|responses?|replies) please|tl;?dr)\b", re.I)
_DETAILED = re.compile(r"\b(i prefer|i like|i want|give me) (detailed|long|thorough|in-depth|longer) "
                       r"(answers?|responses?|explanations?|replies)\b", re.I)
_BEGINNER = re.compile(r"\b(explain (it )?like i'?m (new|five|5|a beginner)|i'm new to|i am new to|"
                       r"(i'm|i am) an? (complete |total )?(beginner|novice|newbie))\b", re.I)
_EXPERT = re.compile(r"\b((i'm|i am) an? (expert|professional|veteran)|(i'm|i am) (very )?experienced|"
                     r"skip the basics)\b", re.I)


@dataclass(frozen=True)
class ProfileFact:
    key: str  # name | role | employer | location | timezone | answer_length | expertise
    value: str
    evidence: str  # the clause of the user's message the fact was read from


@dataclass(frozen=True)
class ProfileEntry:
    """A stored fact with where and when it was learned (for "what do you know about me")."""

    key: str
    value: str
    source_text: str
    updated_at: float


def _name_explicit(m: re.Match) -> str | None:
    word = m.group(1).strip("'-")
    if word.lower() in _NOT_A_NAME:
        return None
    return word[:1].upper() + word[1:]


def _name_im(m: re.Match) -> str | None:
    word = m.group(1).strip("'-")
    if word.lower() in _NOT_A_NAME or word.isupper() or word.lower().endswith(("ing", "ed")):
        return None
    return word


def _role(m: re.Match) -> str | None:
    phrase = re.sub(r"^an?\s+", "", m.group(1).strip(), flags=re.I)
    head = phrase.split()[-1].lower() if phrase else ""
    return phrase if head.rstrip("s") in _ROLE_NOUNS or head in _ROLE_NOUNS else None


def _role_work(m: re.Match) -> str | None:
    phrase = re.sub(r"^an?\s+", "", m.group(1).strip(), flags=re.I)
    return phrase or None


def _group(m: re.Match) -> str | None:
    return m.group(1).strip() or None


def _fixed(value: str) -> Callable[[re.Match], str]:
    return lambda _m: value


#: (key, pattern, value-from-match); the first rule that yields a value for a key in a clause wins.
_RULES: tuple[tuple[str, re.Pattern, Callable[[re.Match], str | None]], ...] = (
    ("name", _NAME_EXPLICIT, _name_explicit),
    ("name", _NAME_IM, _name_im),
    ("role", _ROLE_WORK, _role_work),
    ("role", _ROLE_IM, _role),
    ("employer", _EMPLOYER, _group),
    ("location", _LOCATION, _group),
    ("timezone", _TIMEZONE, _group),
    ("answer_length", _SHORT, _fixed("short")),
    ("answer_length", _DETAILED, _fixed("detailed")),
    ("expertise", _BEGINNER, _fixed("beginner")),
    ("expertise", _EXPERT, _fixed("expert")),
)


def _clauses(text: str) -> Iterator[str]:
    for m in _CLAUSE.finditer(text.replace("\u2019", "'").replace("\u2018", "'")):
        clause = m.group(0)
        if clause.strip(" ,;.!?\n") and not _is_question(clause):
            yield clause


def _is_question(clause: str) -> bool:
    return clause.rstrip().endswith("?") or bool(_QUESTION_START.match(clause))


def _facts_in(clause: str) -> Iterator[ProfileFact]:
    seen: set[str] = set()
    for key, pattern, value_of in _RULES:
        if key in seen:
            continue
        for m in pattern.finditer(clause):
            value = None if _BLOCKER.search(clause[:m.start()] + m.group(0)) else value_of(m)
            if value:
                seen.add(key)
                yield ProfileFact(key, value, clause.strip(" ,;\n"))
                break


def extract_profile_facts(user_text: str) -> list[ProfileFact]:
    """Facts the user states about themselves in ``user_text``; the last statement of a key wins."""
    facts: dict[str, ProfileFact] = {}
    for clause in _clauses(user_text):
        for fact in _facts_in(clause):
            facts.pop(fact.key, None)
            facts[fact.key] = fact
    return list(facts.values())


class ProfileMemory:
    """Per-user key/value facts; every query binds the user id."""

    def __init__(self, store: SqlRunner):
        self.store = store

    def get(self, user_id: str) -> dict[str, str]:
        require_user_id(user_id)
        return {e.key: e.value for e in self.entries(user_id)}

    def read(self, user_id: str) -> Read:
        """:meth:`get` as a :class:`~bara.store.base.Read`, to send with other reads (a turn's first ones)."""
        require_user_id(user_id)
        return Read("SELECT key, value FROM profile WHERE user_id=? ORDER BY key", (user_id,),
                    lambda rows: {k: v for k, v in rows})

    def entries(self, user_id: str) -> list[ProfileEntry]:
        require_user_id(user_id)
        rows = self.store.query("SELECT key, value, source_text, updated_at FROM profile WHERE user_id=?"
                                " ORDER BY key", (user_id,))
        return [ProfileEntry(k, v, s, float(t)) for k, v, s, t in rows]

    def set_facts(self, user_id: str, facts: Sequence[ProfileFact]) -> int:
        """Upsert ``facts`` in one transaction; returns how many were written."""
        require_user_id(user_id)
        now = time.time()
        with self.store.transaction():
            for f in facts:
                self.store.execute(
                    "INSERT INTO profile (user_id, key, value, source_text, updated_at) VALUES (?,?,?,?,?)"
                    " ON CONFLICT (user_id, key) DO UPDATE SET value=excluded.value,"
                    " source_text=excluded.source_text, updated_at=excluded.updated_at",
                    (user_id, f.key, f.value, f.evidence, now))
        return len(facts)

    def forget(self, user_id: str, key: str | None = None) -> int:
        """Delete one fact (``key``) or all of the user's; returns how many rows went."""
        require_user_id(user_id)
        if key is None:
            return self.store.execute("DELETE FROM profile WHERE user_id=?", (user_id,))
        return self.store.execute("DELETE FROM profile WHERE user_id=? AND key=?", (user_id, key))

    def learn_from_user_turn(self, user_id: str, user_text: str) -> list[ProfileFact]:
        """The pipeline's only profile write: facts stated in the user's own message.

        Never pass retrieved text, notes, old answers or the assistant's reply here.
        """
        require_user_id(user_id)
        facts = extract_profile_facts(user_text)
        if facts:
            self.set_facts(user_id, facts)
        return facts
