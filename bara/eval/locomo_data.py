"""LoCoMo (Maharana et al., ACL 2024) conversations as typed records, and the evidence-recall metric.

A file holds one conversation between ``speaker_a`` and ``speaker_b`` over dated
sessions (``session_N`` with ``session_N_date_time``) and its questions (``qa``:
question, answer or ``adversarial_answer``, ``evidence`` turn ids such as
``D3:7``, category 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5
adversarial).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Iterable, Sequence

from bara.errors import InputError
from bara.memory.dates import parse_session_date
from bara.datafiles import json_value
from bara.prompts import locomo as PROMPTS

CATEGORIES = ("1", "2", "3", "4")  # 5 (adversarial) is scored by abstention, not recall
ADVERSARIAL = 5
_SESSION = re.compile(r"^session_(\d+)$")
_SHOWN_IDS = 5  # how many shared dia_ids an error message lists (the count says how many there are)


@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str  # "D3:7"
    speaker: str
    text: str


@dataclass(frozen=True)
class LocomoSession:
    n: int
    when: datetime | None
    date_text: str
    turns: tuple[LocomoTurn, ...]


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    answer: str  # the reference (the adversarial trap for category 5)
    evidence: tuple[str, ...]
    category: int


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: tuple[LocomoSession, ...]  # in date order
    questions: tuple[LocomoQuestion, ...]

    @property
    def turns(self) -> tuple[LocomoTurn, ...]:
        return tuple(t for s in self.sessions for t in s.turns)


def _image_caption(turn: dict) -> str:
    """LoCoMo turns that share a photo carry its caption; the text alone may not say what is in it."""
    caption = _text(turn.get("blip_caption"))
    return f" [shares a photo: {caption}]" if caption else ""


def _text(value: object) -> str:
    """A LoCoMo string field; JSON null (or a missing field) is empty, never the word "None"."""
    return "" if value is None else str(value)


def load_locomo(path: Path) -> LocomoConversation:
    """The one conversation of a LoCoMo file; a file of several is an InputError (``load_locomo_all``)."""
    convs = load_locomo_all(path)
    if len(convs) != 1:
        raise InputError(f"{path} holds {len(convs)} LoCoMo conversations, not one: read it with load_locomo_all")
    return convs[0]


def load_locomo_all(path: Path) -> tuple[LocomoConversation, ...]:
    """Every conversation of a LoCoMo file: one object (``conv-26.json``) or the released list of them
    (``locomo10.json``); an unreadable or malformed file is an InputError naming what to fix."""
    try:
        raw = json_value(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise InputError(f"cannot read LoCoMo file {path}: {exc}; pass a conv-*.json or locomo10.json file") from exc
    if not isinstance(raw, list):
        return (_conversation(path, raw, ""),)
    if not raw:
        raise InputError(f"{path} holds an empty JSON list: pass a file with at least one LoCoMo conversation")
    convs = tuple(_conversation(path, item, f" (item {n} of the list)") for n, item in enumerate(raw))
    ids = [c.sample_id for c in convs]
    if len(set(ids)) != len(ids):  # items without sample_id would all be named after the file
        convs = tuple(replace(c, sample_id=f"{c.sample_id}-{n}") for n, c in enumerate(convs))
    return convs


def _conversation(path: Path, raw: object, where: str) -> LocomoConversation:
    conv = raw.get("conversation", raw) if isinstance(raw, dict) else None
    if not isinstance(raw, dict) or not isinstance(conv, dict) or not isinstance(raw.get("qa"), list):
        raise InputError(PROMPTS.NOT_A_CONVERSATION.format(path=path, where=where))
    missing = [key for key in ("speaker_a", "speaker_b") if not _text(conv.get(key)).strip()]
    if missing:
        raise InputError(PROMPTS.MISSING_SPEAKERS.format(path=path, where=where, keys=" and ".join(missing)))
    try:
        parsed = _parse(path, raw, conv)
    except (AttributeError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"{path}{where} has a malformed LoCoMo entry ({type(exc).__name__}: {exc}): each "
                         "session_N must be a list of {speaker, dia_id, text} objects and each qa item an object") from exc
    _check_usable(path, where, parsed)
    return parsed


def _check_usable(path: Path, where: str, conv: LocomoConversation) -> None:
    """A conversation with no questions evaluates nothing, and a dia_id two turns share makes evidence recall
    credit either of them: both are InputErrors naming what to fix."""
    if not conv.questions:
        raise InputError(PROMPTS.NO_QUESTIONS.format(path=path, where=where))
    shared = [d for d, n in Counter(t.dia_id for t in conv.turns if t.dia_id).items() if n > 1]
    if shared:
        shown = ", ".join(map(repr, shared[:_SHOWN_IDS]))
        raise InputError(PROMPTS.DUPLICATE_DIA_IDS.format(path=path, where=where, n=len(shared), ids=shown))


def _parse(path: Path, raw: dict, conv: dict) -> LocomoConversation:
    sessions = []
    for key, value in conv.items():
        m = _SESSION.match(key)
        if not m or not isinstance(value, list):
            continue
        date_text = _text(conv.get(f"{key}_date_time"))
        turns = tuple(LocomoTurn(_text(t.get("dia_id")), _text(t.get("speaker")),
                                 _text(t.get("text")) + _image_caption(t)) for t in value)
        sessions.append(LocomoSession(int(m.group(1)), parse_session_date(date_text), date_text, turns))
    # By date when every session has one; else by number (an undated session is not moved to the start).
    dated = all(s.when is not None for s in sessions)
    sessions.sort(key=lambda s: (s.when or datetime.min, s.n) if dated else (datetime.min, s.n))
    questions = tuple(LocomoQuestion(_text(q.get("question")), _answer(q), tuple(_evidence(q.get("evidence", ()))),
                                     int(q.get("category", 0))) for q in raw["qa"])
    return LocomoConversation(_text(raw.get("sample_id")) or Path(path).stem, _text(conv["speaker_a"]),
                              _text(conv["speaker_b"]), tuple(sessions), questions)


def _answer(q: dict) -> str:
    """The reference answer, or the adversarial trap of a category-5 question (which has no answer)."""
    answer = q.get("answer")
    return _text(q.get("adversarial_answer") if answer is None else answer)


def _evidence(items: Iterable) -> list[str]:
    """Evidence ids, split when one string holds several ("D8:6; D9:17")."""
    out: list[str] = []
    for item in items or ():
        out += [e for e in re.split(r"[;,\s]+", str(item)) if re.match(r"^D\d+:\d+$", e)]
    return out


def evidence_recall(evidence: Sequence[str], returned: Sequence[str], k: int) -> float | None:
    """Share of a question's evidence turns among the first ``k`` returned items.

        recall@k = |evidence ∩ returned[:k]| / |evidence|

    (the "evidence recall" of LoCoMo's retrieval analysis, Maharana et al. 2024, §5). ``returned``
    items may name several turns each (a prompt item holding a window); None when there is no evidence.
    """
    wanted = set(evidence)
    if not wanted:
        return None
    seen: set[str] = set()
    for item in returned[:k]:
        seen.update(item.split("|"))
    return len(wanted & seen) / len(wanted)
