"""Whose event a remembered turn tells, read from its words alone (pure: no I/O, no model).

A question about one person ("What did Jon design for his store?") is often answered by a turn
the *other* speaker said about themselves ("Gina: I designed the store's logo myself"). The episodic
tier lifts the named person's turns (they are *said by* Jon), but who said a turn is not whose event
it tells. This module reads the owner of one turn from three cues, first match wins:

1. **a mention** of the person the question names, not as a form of address: "I went hiking with
   Maria" tells (also) Maria's event; "Thanks, Maria!" or "Hey Maria, ..." only speaks to her;
2. **first person** ("I", "my", "we", ...): the speaker's own event;
3. **second person only** ("you", "your", ...): the addressee's event ("How was your race?");
4. otherwise the speaker's (people mostly talk about themselves), marked ``default``.

:func:`attributed_elsewhere` then says whether none of a question's best turns is the named person's
event, which is what the episodic tier reports as ``episodic:attributed_to_other``. The cues are
LoCoMo-style English chat; a turn whose owner cannot be read (a second-person turn with no known
addressee) blocks the finding rather than supporting it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, Sequence

Cue = Literal["mention", "first_person", "second_person", "default", "unknown"]

FIRST_PERSON = frozenset("""i i'm im i've i'd i'll me my mine myself we we're we've we'd we'll us our ours
ourselves""".split())
SECOND_PERSON = frozenset("you you're youre you've you'd you'll your yours yourself yourselves ya".split())
#: Words that, right before a name, make it a form of address ("Thanks, Maria!", "Hey Maria").
ADDRESS_OPENERS = frozenset("""hey hi hello hiya thanks thank thx congrats congratulations wow oh aw aww awww yay
yes yeah yep sure great good nice ok okay omg dear bye morning evening night cheers haha lol well man""".split())
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")
_STAMP = re.compile(r"^\[[^\]]*\]\s*")
_CAPITALISED = re.compile(r"\b[A-Z][a-z][\w'\u2019]*")


@dataclass(frozen=True)
class Ownership:
    """Whose event one turn tells (``owner`` "" = cannot tell) and which cue said so."""

    owner: str
    cue: Cue


def body_of(stored: str, speaker: str) -> str:
    """The words of a stored episode's first line: ``[8 May 2023] Gina: I designed ...`` -> ``I designed ...``."""
    line = _STAMP.sub("", stored.split("\n", 1)[0])
    prefix = f"{speaker}: "
    return line[len(prefix):] if speaker and line.startswith(prefix) else line


def words(text: str) -> set[str]:
    """Lower-cased words with their apostrophes (curly ones read as straight)."""
    return set(_WORD.findall(text.replace("\u2019", "'").lower()))


def _is_address(text: str, start: int, end: int) -> bool:
    """True when the name at ``text[start:end]`` speaks *to* someone: it closes a clause ("Thanks, Maria!",
    "That's great, Maria.") or opens the turn or a sentence followed by a comma or "!" ("Maria, look"),
    or follows a greeting ("Hey Maria", "Thanks Maria")."""
    before = text[:start].rstrip()
    after = text[end:].lstrip()
    closes = not after or after[0] in ",!?.;:)"
    if not before or before[-1] in ".!?":
        return not after or after[0] in ",!"
    if before[-1] == ",":
        return closes
    opener = _WORD.findall(before.lower())[-1:]
    return bool(opener) and opener[0] in ADDRESS_OPENERS and closes


def mentions(text: str, names: Sequence[str]) -> bool:
    """True when ``text`` names one of ``names`` (whole word, possessive allowed) other than as a form
    of address."""
    for name in (n for n in names if n):
        for m in re.finditer(rf"\b{re.escape(name)}(?:'s|\u2019s)?\b", text):
            if not _is_address(text, m.start(), m.end()):
                return True
    return False


def turn_owner(body: str, speaker: str, addressee: str, person: str, forms: Sequence[str] = ()) -> Ownership:
    """Whose event ``body`` (said by ``speaker`` to ``addressee``; "" when unknown) tells, for a question
    about ``person`` (also called ``forms``: "Mel" for "Melanie"). See the module docstring."""
    if person != speaker and mentions(body, [person, *forms]):
        return Ownership(person, "mention")
    said = words(body)
    if said & FIRST_PERSON:
        return Ownership(speaker, "first_person")
    if said & SECOND_PERSON:
        return Ownership(addressee, "second_person" if addressee else "unknown")
    return Ownership(speaker, "default")


def attributed_elsewhere(owners: Sequence[str], person: str) -> bool:
    """True when there are turns, every one's owner is known (not ""), and none is ``person``: the
    memory records this of someone else."""
    return bool(owners) and all(owner and owner != person for owner in owners)


def question_names(text: str) -> list[str]:
    """Capitalised words of a question (possessive 's stripped): the people it may name."""
    return [w[:-2] if w.endswith(("'s", "\u2019s")) else w for w in _CAPITALISED.findall(text)]


def named_person(question_names: Sequence[str], speakers: Sequence[str]) -> tuple[str, tuple[str, ...]]:
    """(the one speaker a question names, the forms it used) or ("", ()) when it names none or several.
    A form names a speaker when it equals the speaker's name or starts it (3+ letters: "Mel")."""
    hit: dict[str, list[str]] = {}
    for form in question_names:
        for s in speakers:
            if len(form) >= 3 and s.lower().startswith(form.lower()):
                hit.setdefault(s, [])
                if form != s and form not in hit[s]:
                    hit[s].append(form)
    if len(hit) != 1:
        return "", ()
    person, forms = next(iter(hit.items()))
    return person, tuple(forms)
