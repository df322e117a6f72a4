"""LoCoMo (Maharana et al., ACL 2024) conversations as typed records, and the evidence-recall metric.

A file holds one conversation between ``speaker_a`` and ``speaker_b`` over dated
sessions (``session_N`` with ``session_N_date_time``) and its questions (``qa``:
question, answer or ``adversarial_answer``, ``evidence`` turn ids such as
``D3:7``, category 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5
adversarial).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Iterable, Sequence

from bara.errors import InputError
from bara.memory.dates import parse_session_date
from bara.datafiles import json_value

CATEGORIES = ("1", "2", "3", "4")  # 5 (adversarial) is scored by abstention, not recall
ADVERSARIAL = 5
_SESSION = re.compile(r"^session_(\d+)$")


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
    caption = turn.get("blip_caption")
    return f" [shares a photo: {caption}]" if caption else ""


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
    if not isinstance(raw, dict) or not isinstance(conv, dict) or "speaker_a" not in conv \
            or not isinstance(raw.get("qa"), list):
        raise InputError(f"{path}{where} is not a LoCoMo conversation (needs speaker_a, session_N and qa)")
    try:
        return _parse(path, raw, conv)
    except (AttributeError, TypeError, ValueError) as exc:
        raise InputError(f"{path}{where} has a malformed LoCoMo entry ({type(exc).__name__}: {exc}): each "
                         "session_N must be a list of {speaker, dia_id, text} objects and each qa item an object") from exc


def _parse(path: Path, raw: dict, conv: dict) -> LocomoConversation:
    sessions = []
    for key, value in conv.items():
        m = _SESSION.match(key)
        if not m or not isinstance(value, list):
            continue
        date_text = str(conv.get(f"{key}_date_time", ""))
        turns = tuple(LocomoTurn(str(t.get("dia_id", "")), str(t.get("speaker", "")),
                                 str(t.get("text", "")) + _image_caption(t)) for t in value)
        sessions.append(LocomoSession(int(m.group(1)), parse_session_date(date_text), date_text, turns))
    sessions.sort(key=lambda s: (s.when or datetime.min, s.n))
    questions = tuple(LocomoQuestion(str(q.get("question", "")), str(q.get("answer", q.get("adversarial_answer", ""))),
                                     tuple(_evidence(q.get("evidence", ()))), int(q.get("category", 0)))
                      for q in raw["qa"])
    return LocomoConversation(str(raw.get("sample_id", Path(path).stem)), str(conv["speaker_a"]),
                              str(conv["speaker_b"]), tuple(sessions), questions)


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
