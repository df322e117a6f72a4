"""The episodic tier's attribution check: is what the memory found the named person's event at all?

LoCoMo's adversarial questions (category 5) ask about one speaker's event with the *other* speaker's
name ("What did Jon design for his store?" when Gina did). The tier's speaker boost puts the named
person's turns first, so the found items look like an answer. This check, run when the question names
exactly one known speaker X (:func:`bara.understand.attribution.named_person`):

1. searches once more with X's name taken out of the question (no boost, no second round), so the
   turns that match the *event* come first whoever said them (``memory_episodic_attribution_search``;
   off: the tier's own best items are read instead);
2. reads the owner of the best ``memory_episodic_attribution_turns`` of them from their words
   (:func:`bara.understand.attribution.turn_owner`: a mention of X, first person, second person with
   the session's other speaker as addressee);
3. reports :class:`Attribution` with ``fired`` when none of them is X's event and the best of them
   is one of the tier's own items, so the prompt shows the turn it cites
   (``memory_episodic_attribution_shown``; reason ``episodic:attributed_to_other``).

The tier's items are never dropped: the prompt shows them with a line saying whose event the memory
records (:data:`bara.prompts.EPISODES_ATTRIBUTION`).

No model; deterministic (the search is the Store's, the reading is pure).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

from bara.store.base import Store
from bara.understand.attribution import Ownership, attributed_elsewhere, body_of, named_person, turn_owner

FIRED = "episodic:attributed_to_other"
CHECKED = "episodic:attribution_checked"


class _Hit(Protocol):
    @property
    def source(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def speaker(self) -> str: ...
    @property
    def text(self) -> str: ...


@dataclass(frozen=True)
class CheckedTurn:
    """One turn the check read: its id, who said it, whose event it tells and by which cue."""

    turn_id: str
    speaker: str
    owner: str
    cue: str


@dataclass(frozen=True)
class Attribution:
    """The check's finding for one question about ``person``.

    ``fired``: none of ``checked`` is ``person``'s event; ``other`` is whose event the best checked turn
    tells and ``text`` that turn as stored (what the prompt and the offline answer cite)."""

    person: str
    fired: bool
    checked: tuple[CheckedTurn, ...]
    other: str = ""
    turn_id: str = ""
    text: str = ""

    @property
    def reason(self) -> str:
        return FIRED if self.fired else CHECKED


def without_name(question: str, names: Sequence[str]) -> str:
    """``question`` with every form of the person's name (and its possessive) taken out, spaces tidied:
    "What did Jon design for his store?" -> "What did design for his store?"."""
    out = question
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        out = re.sub(rf"\b{re.escape(name)}(?:'s|\u2019s)?\b", " ", out)
    return " ".join(out.split())


def session_speakers(store: Store, user_id: str, source: str) -> list[str]:
    """The speakers of the stored batch ``ep:<conversation>:<session>`` (``[]`` when unknown)."""
    head, _, session = source.removeprefix("ep:").rpartition(":")
    rows = store.query("SELECT speakers FROM episodic_sessions WHERE user_id=? AND conversation_id=? AND session=?",
                       (user_id, head, session))
    return [str(s) for (raw,) in rows for s in json.loads(raw or "[]")]


def addressee(speakers: Sequence[str], speaker: str) -> str:
    """Whom ``speaker`` talks to: the session's one other speaker ("" with none or several)."""
    others = sorted({s for s in speakers if s != speaker})
    return others[0] if len(others) == 1 else ""


def read_turns(hits: Sequence[_Hit], person: str, forms: Sequence[str],
               speakers_of: Callable[[str], Sequence[str]]) -> tuple[CheckedTurn, ...]:
    """The owner of each hit's own turn (the first line of a windowed item)."""
    out = []
    for h in hits:
        speaker = h.speaker
        own: Ownership = turn_owner(body_of(h.text, speaker), speaker, addressee(speakers_of(h.source), speaker),
                                    person, forms)
        out.append(CheckedTurn(h.turn_id.split("|")[0], speaker, own.owner, own.cue))
    return tuple(out)


def shown_turns(items: Sequence[_Hit]) -> set[tuple[str, str]]:
    """(source, turn id) of every turn the tier's items show (a windowed item shows several)."""
    return {(h.source, turn) for h in items for turn in h.turn_id.split("|")}


def check(question: str, question_names: Sequence[str], speakers: Sequence[str], best: Sequence[_Hit],
          search: Callable[[str], Sequence[_Hit]] | None, turns: int,
          speakers_of: Callable[[str], Sequence[str]], shown: bool = True) -> Attribution | None:
    """The attribution of ``question`` (None when it names no single known speaker, or nothing was found).

    ``best``: the tier's items, best first; ``search``: one search of a query (None: the extra search is
    off and ``best`` is read); ``turns``: how many of the best turns are read; ``shown``: fire only when
    the turn it cites (the best checked one) is one of the tier's items, so the prompt holds it."""
    person, forms = named_person(question_names, speakers)
    if not person or not best:
        return None
    hits = list(search(without_name(question, [person, *forms])) if search is not None else best)[:turns]
    checked = read_turns(hits, person, forms, speakers_of)
    elsewhere = attributed_elsewhere([c.owner for c in checked], person)
    if not elsewhere or (shown and (hits[0].source, checked[0].turn_id) not in shown_turns(best)):
        return Attribution(person, False, checked)
    return Attribution(person, True, checked, checked[0].owner, checked[0].turn_id, hits[0].text.split("\n", 1)[0])
