"""Frozen records of `bara eval ab`'s report: the summary of a set of rows (:func:`bara.eval.prereg.summarize`)
and the whole report (:func:`bara.eval.ab.evaluate_ab`). ``as_dict`` is the JSON, key order included."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence


@dataclass(frozen=True)
class ABSummary:
    """The per-mode table, the breakdowns and the pre-registered comparison (None without both arms)."""

    n_tasks: int
    modes: Mapping[str, Mapping[str, Any]]
    by_category: Mapping[str, Mapping[str, Mapping[str, Any]]]
    comparison: Mapping[str, Any] | None

    @property
    def verdicts(self) -> Sequence[Any]:
        return self.comparison["verdicts"] if self.comparison else []

    def as_dict(self) -> dict[str, Any]:
        return {"n_tasks": self.n_tasks, "modes": dict(self.modes), "by_category": dict(self.by_category),
                "comparison": self.comparison, "verdicts": self.verdicts}


@dataclass(frozen=True)
class ABReport:
    """What `bara eval ab` reports (and writes to ``ab.json``): the summary, then the run's bookkeeping."""

    summary: ABSummary
    problems: Mapping[str, Any]
    resume: Mapping[str, int]
    complete: bool
    judge: Mapping[str, Any]
    manifest: Mapping[str, Any]

    def as_dict(self) -> dict[str, Any]:
        return {**self.summary.as_dict(), "problems": dict(self.problems), "resume": dict(self.resume),
                "complete": self.complete, "judge": self.judge, "manifest": dict(self.manifest)}
