"""The resumable row log of `bara eval ab`: ``ab_rows.jsonl`` in the report folder.

One JSON object per (task, mode), appended as soon as it is scored. Rows are
keyed by task id and mode and carry the settings hash they were computed under
and the content key of what they ran (``task_sha``); a rerun reuses rows of the
same hash and content and ignores (and counts) the rest.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from bara.eval.conversation_replay import TurnCost
from bara.eval.gate import Task

ROWS_FILE = "ab_rows.jsonl"


@dataclass(frozen=True)
class ScoreRow:
    """One scored (task, mode): what the turn did and how its answer scored (a line of ``ab_rows.jsonl``)."""

    task_id: str
    mode: str
    settings_hash: str
    task_sha: str  # the content key: the task line, plus the exact turn sequence for whole conversations
    answerability: str
    multi_turn: str
    question_types: tuple[str, ...]
    collection: str
    retrieved: bool
    retrieval_calls: int
    context_tokens: int
    hits: tuple[str, ...]
    relevant: tuple[str, ...]
    question: str
    answer: str
    kind: str
    answer_f1: float
    rouge_l: float
    latency_ms: Mapping[str, float]
    route: str
    intent: str
    error: str
    turns: tuple[TurnCost, ...] | None = None  # whole conversations only: every user turn's cost
    after_inserted: bool | None = None  # whole conversations only

    def as_dict(self) -> dict[str, Any]:
        """The row's JSON object (whole-conversation keys only when set)."""
        out: dict[str, Any] = {
            "task_id": self.task_id, "mode": self.mode, "settings_hash": self.settings_hash,
            "task_sha": self.task_sha, "answerability": self.answerability, "multi_turn": self.multi_turn,
            "question_types": list(self.question_types), "collection": self.collection,
            "retrieved": self.retrieved, "retrieval_calls": self.retrieval_calls,
            "context_tokens": self.context_tokens, "hits": list(self.hits), "relevant": list(self.relevant),
            "question": self.question, "answer": self.answer, "kind": self.kind, "answer_f1": self.answer_f1,
            "rouge_l": self.rouge_l, "latency_ms": dict(self.latency_ms), "route": self.route,
            "intent": self.intent, "error": self.error}
        if self.turns is not None:
            out["turns"] = [c.to_dict() for c in self.turns]
        if self.after_inserted is not None:
            out["after_inserted"] = self.after_inserted
        return out


class ResultLog:
    """Rows of one settings hash, loaded from and appended to ``ab_rows.jsonl`` (if a folder is given)."""

    def __init__(self, folder: Path | None, shash: str):
        self.path = folder / ROWS_FILE if folder else None
        self.shash, self.rows, self.counts = shash, {}, Counter()
        if self.path and self.path.is_file():
            self._load(self.path)
        self.loaded = len(self.rows)

    def _load(self, path: Path) -> None:
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            row = _row(line) if line.strip() else {}
            if row is None:
                self.counts["malformed row ignored"] += 1
            elif not row:
                continue
            elif row.get("settings_hash") != self.shash:
                self.counts["stale row ignored (settings changed)"] += 1
            else:
                key = (row["task_id"], row["mode"])
                if key in self.rows:
                    self.counts["duplicate row replaced"] += 1
                self.rows[key] = row

    def done(self, task: Task, mode: str, sha: str | None = None) -> bool:
        """A row of this task and mode exists for the same content (``sha``, default the task's own)."""
        row = self.rows.get((task.id, mode))
        return row is not None and row.get("task_sha") == (sha or task.sha)

    def add(self, scored: ScoreRow) -> None:
        row = scored.as_dict()
        self.rows[(row["task_id"], row["mode"])] = row
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        torn = _ends_torn(self.path)  # a run killed mid-line leaves a torn row: never glue onto it
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if torn else "") + json.dumps(row, sort_keys=True) + "\n")

    def current(self, tasks: Sequence[Task], modes: Sequence[str], shas: Mapping[str, str] | None = None
                ) -> list[dict]:
        """This run's rows, in task then mode order."""
        shas = shas or {}
        return [self.rows[(t.id, m)] for t in tasks for m in modes if self.done(t, m, shas.get(t.id))]


def _ends_torn(path: Path) -> bool:
    if not path.is_file() or path.stat().st_size == 0:
        return False
    with path.open("rb") as fh:
        fh.seek(-1, 2)
        return fh.read(1) != b"\n"


def _row(line: str) -> dict | None:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        return None
    return row if isinstance(row, dict) and {"task_id", "mode", "settings_hash"} <= set(row) else None
