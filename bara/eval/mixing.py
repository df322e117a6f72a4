"""Whole conversations with real small talk mixed in (`bara eval ab --mix-smalltalk ...`).

The pool is every CLINC150-format utterance (``{text, intent}``) whose intent
belongs to the ``small_talk`` or ``meta`` domain of ``domains.json``: greetings,
thanks, "are you a bot", "repeat that", ... — turns that need no retrieval.

Counts. A conversation with ``n`` original user turns gets ``m`` inserted ones so
that ``m / (n + m) ≈ R``, i.e. ``m ≈ x = n R / (1 - R)``. ``x`` is rarely whole,
so counts are rounded on the running total (``m_i = round(X_i) - round(X_{i-1})``
with ``X_i = x_1 + ... + x_i`` in file order): each conversation gets ``floor(x_i)``
or ``ceil(x_i)``, and over all conversations the share of inserted turns is R to
within one turn.

Positions and utterances. Each inserted turn goes just before a uniformly drawn
original user turn (so never after the last one: the judged turn stays last);
several may share a gap; utterances are drawn without replacement within a conversation.
The generator of a conversation is seeded by ``(seed, sha256(task id))``: a
conversation's mix does not depend on which other tasks run (only its count
depends on the tasks before it).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from bara.datafiles import check_file
from bara.errors import InputError
from bara.eval.gate import NO_RETRIEVAL_DOMAINS, Task, file_sha256, json_rows, read_domains


@dataclass(frozen=True)
class MixConfig:
    smalltalk: Path
    domains: Path
    rate: float
    seed: int = 0


@dataclass(frozen=True)
class Turn:
    """One user turn of a (mixed) conversation and the reference reply stored after it ("" = the mode's own)."""

    text: str
    inserted: bool
    reference_reply: str = ""


@dataclass(frozen=True)
class MixedConversation:
    task_id: str
    turns: tuple[Turn, ...]  # user turns in order; the last is the task's judged question

    @property
    def sha(self) -> str:
        """Identifies the exact turn sequence (a resumed row must have run the same one)."""
        payload = json.dumps([[t.text, t.inserted, t.reference_reply] for t in self.turns])
        return hashlib.sha256(payload.encode()).hexdigest()[:16]

    @property
    def after_inserted(self) -> bool:
        """Whether the judged (last) turn directly follows an inserted one."""
        return len(self.turns) >= 2 and self.turns[-2].inserted


def read_smalltalk(path: Path, domains_path: Path) -> tuple[str, ...]:
    """Utterances of the small_talk and meta intents, file order, duplicates dropped."""
    check_file(path, "CLINC150-format --mix-smalltalk")
    domains = read_domains(domains_path)
    if not domains:
        raise InputError(f"{domains_path} is missing or not a CLINC150 domains.json: pass it to --mix-domains")
    problems: Counter = Counter()
    pool = [row["text"].strip() for row, _ in json_rows(path, problems)
            if isinstance(row.get("text"), str) and row["text"].strip()
            and domains.get(str(row.get("intent"))) in NO_RETRIEVAL_DOMAINS]
    pool = list(dict.fromkeys(pool))
    if not pool:
        raise InputError(f"{path} has no utterance of the {' or '.join(NO_RETRIEVAL_DOMAINS)} intents of "
                         f"{domains_path}: pass CLINC150 data with those intents")
    return tuple(pool)


def base_turns(task: Task) -> list[Turn]:
    """The task's own user turns, each with the reference reply(ies) that follow it."""
    turns: list[Turn] = []
    items = [*task.history, ("user", task.question)]
    for i, (role, text) in enumerate(items):
        if role != "user":
            continue
        replies = []
        for later_role, later_text in items[i + 1:]:
            if later_role == "user":
                break
            replies.append(later_text)
        turns.append(Turn(text, False, "\n\n".join(replies)))
    return turns


def insert_counts(sizes: Sequence[int], rate: float) -> list[int]:
    """Inserted turns per conversation: rounding on the running total of ``n R / (1 - R)``."""
    if not 0.0 <= rate < 1.0:
        raise InputError(f"--mix-rate {rate} is outside [0, 1): pass the share of inserted user turns, e.g. 0.3")
    per = rate / (1.0 - rate)
    out, total, done = [], 0.0, 0
    for n in sizes:
        total += n * per
        m = int(np.floor(total + 0.5)) - done
        out.append(m)
        done += m
    return out


def task_rng(seed: int, task_id: str) -> np.random.Generator:
    return np.random.default_rng([seed, int(hashlib.sha256(task_id.encode()).hexdigest()[:12], 16)])


def mix_one(task: Task, count: int, pool: Sequence[str], seed: int) -> MixedConversation:
    """The task's conversation with ``count`` utterances of ``pool`` inserted before random original turns."""
    turns = base_turns(task)
    if count <= 0:
        return MixedConversation(task.id, tuple(turns))
    rng = task_rng(seed, task.id)
    picks = rng.choice(len(pool), size=count, replace=count > len(pool))
    gaps = sorted(int(g) for g in rng.integers(0, len(turns), size=count))  # before original turn g
    out: list[Turn] = []
    queue = list(zip(gaps, picks, strict=False))
    for i, turn in enumerate(turns):
        while queue and queue[0][0] == i:
            out.append(Turn(pool[int(queue.pop(0)[1])], True))
        out.append(turn)
    return MixedConversation(task.id, tuple(out))


def mix_conversations(tasks: Sequence[Task], mix: MixConfig | None) -> tuple[MixedConversation, ...]:
    """Every task's whole conversation, with small talk inserted when ``mix`` is given."""
    if mix is None:
        return tuple(MixedConversation(t.id, tuple(base_turns(t))) for t in tasks)
    if isinstance(mix.seed, bool) or not isinstance(mix.seed, int) or mix.seed < 0:
        raise InputError(f"--seed {mix.seed!r} is not a seed: pass a whole number, 0 or more")
    pool = read_smalltalk(mix.smalltalk, mix.domains)
    counts = insert_counts([len(base_turns(t)) for t in tasks], mix.rate)
    return tuple(mix_one(t, c, pool, mix.seed) for t, c in zip(tasks, counts, strict=False))


def mix_manifest(mix: MixConfig | None) -> dict:
    if mix is None:
        return {}
    return {"smalltalk": {"path": str(mix.smalltalk), "sha256": file_sha256(mix.smalltalk)},
            "domains": {"path": str(mix.domains), "sha256": file_sha256(mix.domains)},
            "rate": mix.rate, "seed": mix.seed}
