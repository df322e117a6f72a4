"""Abstention figures of `bara eval memory`: how often a mode says "the memory does not say so",
on the questions it should (LoCoMo category 5, adversarial) and on those it should not (1-4).

A question is *flagged* (``QuestionRow.abstained``) in ``gated`` mode when no memory item reached the
prompt or the episodic tier's attribution check fired (``episodic:attributed_to_other``); in ``turns``
mode when the search returned nothing. Over a set of rows:

    abstain_adversarial      = flagged category-5 questions / category-5 questions
    false_abstain_answerable = flagged category 1-4 questions / category 1-4 questions
    abstain_precision        = flagged category-5 questions / flagged questions (all categories)

and ``abstain_adversarial_split`` separates category 5 by who said its evidence:
``speaker_swapped`` (the question names one speaker and none of its evidence turns is theirs: the
other speaker's event asked about them) and ``same_speaker`` (an evidence turn said by the person
named: the named person's own turn with one detail changed, which no owner reading can flag; the
ceiling). Questions that name no speaker, or both, fall in neither.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence

from bara.eval.locomo_data import ADVERSARIAL, LocomoConversation, LocomoQuestion
from bara.understand.attribution import named_person, question_names

SWAPPED, SAME = "speaker_swapped", "same_speaker"


class _Row(Protocol):
    @property
    def category(self) -> int: ...
    @property
    def abstained(self) -> bool: ...
    @property
    def adversarial_kind(self) -> str: ...


def adversarial_kind(conv: LocomoConversation, q: LocomoQuestion) -> str:
    """``speaker_swapped``, ``same_speaker`` or "" for a category-5 question (see the module docstring)."""
    if q.category != ADVERSARIAL:
        return ""
    person, _ = named_person(question_names(q.question), [conv.speaker_a, conv.speaker_b])
    said = {t.dia_id: t.speaker for t in conv.turns}
    by = [said[e] for e in q.evidence if e in said]
    if not person or not by:
        return ""
    return SAME if person in by else SWAPPED


def _share(flags: Sequence[bool]) -> float | None:
    return round(sum(flags) / len(flags), 4) if flags else None


def abstention(rows: Sequence[_Row]) -> dict[str, Any]:
    """The abstention keys of one mode's ``--json`` object over ``rows`` (None where no row counts)."""
    adversarial = [r.abstained for r in rows if r.category == ADVERSARIAL]
    answerable = [r.abstained for r in rows if r.category != ADVERSARIAL]
    flagged = sum(adversarial) + sum(answerable)
    split: dict[str, Any] = {}
    for kind in (SWAPPED, SAME):
        kept = [r.abstained for r in rows if r.category == ADVERSARIAL and r.adversarial_kind == kind]
        split[kind], split[f"n_{kind}"] = _share(kept), len(kept)
    return {"false_abstain_answerable": _share(answerable),
            "abstain_precision": round(sum(adversarial) / flagged, 4) if flagged else None,
            "abstain_adversarial_split": split}
