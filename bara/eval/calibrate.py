"""`bara eval calibrate`: per-route similarity floors that drop at most a share of relevant hits.

A floor is a cosine between the query vector and a chunk's vector (``Hit.similarity``,
the ``score`` of a trace hit); what it means depends on the embedder, so it is
measured, not copied. For every judged (ANSWERABLE / PARTIAL) MTRAG-UN dev task the
conversation is replayed (as `bara eval ab --turns last`) and its final turn runs
through the gated pipeline with the knowledge-base floor forced to 0 (a
``policy_override`` hook), so each turn returns what its route would show without
a floor, scored. The route's floor name comes from the policy's reason code
(``kb:floor_kb`` | ``kb:floor_continuation`` | ``kb:floor_general``).

Relevant hits are the returned passages among the task's reference passages. For a
route with similarities ``s_1 <= ... <= s_n`` of its relevant hits and allowed share
``q`` (default 0.05) the floor is ``s_(d+1)`` rounded down to 0.01 with
``d = floor(q n)``: at most ``d`` relevant hits lie below it. Routes with fewer
than ``min_hits`` relevant hits take the floor pooled over all routes.

Split: tasks are tuned on the conversations whose ``sha256(conversation id)`` is
even and reported on the odd ones (dropped shares, Recall@5 by ir-measures with no
floor, the current floors and the calibrated ones).
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from bara.retrieval.protocol import Embedder
from bara.app import Bara
from bara.decide.policy import PolicyDecision
from bara.errors import BaraError
from bara.eval.ab import Prepared, _user, cached_index, code_fingerprint, replay, working_copy
from bara.eval.conversation_replay import forget_user
from bara.eval.gate import JUDGED, GateReplay, Task, file_sha256, gate_prototypes
from bara.eval.prereg import retrieval_scores
from bara.hooks import HookContext
from bara.turn.gated import GatedAssistant
from bara.settings import Settings

ROUTE_FLOORS = ("kb", "continuation", "general")  # reason kb:floor_<name> -> Settings.floor_<name>


@dataclass(frozen=True)
class Probe:
    task_id: str
    half: str  # "tune" | "report"
    route: str  # kb | continuation | general | "" (no KB search)
    hits: tuple[tuple[str, float], ...]  # (passage id, cosine) in rank order, floor 0
    relevant: tuple[str, ...]


@dataclass(frozen=True)
class RouteChoice:
    """A route's floor picked on the tune half (``source``: "route" or "pooled")."""

    floor: float | None
    relevant_hits: int
    tasks: int
    source: str

    def as_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "relevant_hits": self.relevant_hits, "tasks": self.tasks, "source": self.source}


@dataclass(frozen=True)
class RouteCheck:
    """How one route's floor holds on a set of probes: shares of relevant / other hits it drops."""

    tasks: int
    floor: float
    relevant_hits: int
    relevant_dropped: float | None
    other_hits: int
    other_dropped: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"tasks": self.tasks, "floor": self.floor, "relevant_hits": self.relevant_hits,
                "relevant_dropped": self.relevant_dropped, "other_hits": self.other_hits,
                "other_dropped": self.other_dropped}


@dataclass(frozen=True)
class FloorCheck:
    """Per-route checks plus Recall@5 with the floors and with none."""

    routes: Mapping[str, RouteCheck]
    recall5: float | None
    recall5_no_floor: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"routes": {r: c.as_dict() for r, c in self.routes.items()}, "recall@5": self.recall5,
                "recall@5_no_floor": self.recall5_no_floor}


@dataclass(frozen=True)
class CalibrationSettings:
    max_drop: float
    min_hits: int
    k: int
    current_floors: Mapping[str, float]
    embedder: str
    embedder_key: str
    embed_max_tokens: int
    bara_source_sha256: str
    split: str = "sha256(conversation id) even = tune, odd = report"

    def as_dict(self) -> dict[str, Any]:
        return {"max_drop": self.max_drop, "min_hits": self.min_hits, "k": self.k,
                "current_floors": dict(self.current_floors), "embedder": self.embedder,
                "embedder_key": self.embedder_key, "embed_max_tokens": self.embed_max_tokens,
                "bara_source_sha256": self.bara_source_sha256, "split": self.split}


@dataclass(frozen=True)
class CalibrationData:
    tasks_path: str
    tasks_sha256: str
    judged: int
    probed: int
    corpus_path: str
    corpus_sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"tasks": {"path": self.tasks_path, "sha256": self.tasks_sha256, "judged": self.judged,
                          "probed": self.probed},
                "corpus": {"path": self.corpus_path, "sha256": self.corpus_sha256}}


@dataclass(frozen=True)
class Calibration:
    """What `bara eval calibrate` reports; ``as_dict`` is its JSON, :func:`to_toml` its floors file."""

    floors: Mapping[str, float]
    tune: Mapping[str, RouteChoice]
    report_calibrated: FloorCheck
    report_current: FloorCheck
    tune_check: FloorCheck
    settings: CalibrationSettings
    data: CalibrationData

    def as_dict(self) -> dict[str, Any]:
        return {"floors": dict(self.floors), "tune": {r: c.as_dict() for r, c in self.tune.items()},
                "report": {"calibrated": self.report_calibrated.as_dict(), "current": self.report_current.as_dict()},
                "tune_check": self.tune_check.as_dict(), "settings": self.settings.as_dict(),
                "data": self.data.as_dict()}


def half_of(task: Task) -> str:
    """"tune" for conversations whose sha256 is even, else "report" (a fixed, content-free split)."""
    conv = task.id.split("<::>")[0]
    return "tune" if int(hashlib.sha256(conv.encode()).hexdigest(), 16) % 2 == 0 else "report"


def _floor_zero(policy: PolicyDecision, ctx: HookContext) -> PolicyDecision | None:
    return replace(policy, kb_floor=0.0) if policy.inject_kb else None


def probe(bara: Bara, tasks: Sequence[Task], gate: GateReplay,
          progress: Callable[[int], None] | None = None) -> list[Probe]:
    """Run each judged task's final turn gated with floor 0 and keep its scored hits and route."""
    assistant = GatedAssistant(bara, model=None)
    assistant.hooks.add("policy_override", _floor_zero)
    out = []
    for task in tasks:
        user, cid = _user(task, "calibrate")
        try:
            replay(assistant.conversations, bara.store, user, cid, task, gate)
            trace = assistant.turn(user, task.question, conversation_id=cid).trace
        except BaraError:
            continue
        finally:
            forget_user(assistant, user)
        route = next((r.split("kb:floor_", 1)[1] for r in trace.reasons if r.startswith("kb:floor_")), "")
        hits = tuple((h.source, float(h.score)) for h in trace.hits) if route else ()
        out.append(Probe(task.id, half_of(task), route, hits, task.relevant))
        if progress:
            progress(1)
    return out


def pick_floor(similarities: Sequence[float], max_drop: float) -> float | None:
    """The highest 0.01-step floor below which at most ``max_drop`` of ``similarities`` fall."""
    s = sorted(similarities)
    if not s:
        return None
    d = int(math.floor(max_drop * len(s)))
    return math.floor(s[min(d, len(s) - 1)] * 100 + 1e-9) / 100  # 1e-9: 0.29 * 100 is 28.999...


def relevant_similarities(probes: Sequence[Probe], route: str | None = None) -> list[float]:
    return [score for p in probes if route is None or p.route == route
            for source, score in p.hits if source in p.relevant]


def choose_floors(probes: Sequence[Probe], max_drop: float, min_hits: int) -> dict[str, RouteChoice]:
    """Per route: its floor (or the pooled one when it has fewer than ``min_hits`` relevant hits)."""
    tune = [p for p in probes if p.half == "tune" and p.route]
    pooled = pick_floor(relevant_similarities(tune), max_drop)
    out = {}
    for route in ROUTE_FLOORS:
        sims = relevant_similarities(tune, route)
        own = len(sims) >= min_hits
        out[route] = RouteChoice(pick_floor(sims, max_drop) if own else pooled, len(sims),
                                 sum(p.route == route for p in tune), "route" if own else "pooled")
    return out


def evaluate_floors(probes: Sequence[Probe], floors: Mapping[str, float]) -> FloorCheck:
    """On ``probes``: share of relevant / other hits each route's floor drops, and Recall@5 with them."""
    per_route: dict[str, RouteCheck] = {}
    for route in ROUTE_FLOORS:
        mine = [p for p in probes if p.route == route]
        rel = relevant_similarities(mine)
        other = [s for p in mine for src, s in p.hits if src not in p.relevant]
        f = floors[route]
        per_route[route] = RouteCheck(len(mine), f, len(rel), _share(sum(s < f for s in rel), len(rel)),
                                      len(other), _share(sum(s < f for s in other), len(other)))
    return FloorCheck(per_route, _recall(probes, floors), _recall(probes, None))


def _share(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def _recall(probes: Sequence[Probe], floors: Mapping[str, float] | None) -> float | None:
    rows = [{"mode": "m", "task_id": p.task_id, "relevant": list(p.relevant),
             "hits": [src for src, s in p.hits if floors is None or not p.route or s >= floors[p.route]]}
            for p in probes]
    scores = retrieval_scores(rows)
    return round(sum(v["recall@5"] for v in scores.values()) / len(scores), 4) if scores else None


def calibrate(prep: Prepared, corpus_path: Path, tasks_path: Path, settings: Settings, embedder: Embedder, k: int,
              max_drop: float = 0.05, min_hits: int = 30,
              progress: Callable[[str, int, int], None] | None = None) -> Calibration:
    """Probe every judged task, pick floors on the tune half, report them on the other half."""
    settings = settings.override(k=k)
    tasks = [t for t in prep.tasks if t.answerability in JUDGED and t.relevant]
    index = cached_index(corpus_path, prep.docs, settings, embedder)
    gate = GateReplay(settings, gate_prototypes(embedder), embedder)
    with tempfile.TemporaryDirectory(prefix="bara-calibrate-") as tmp:
        with Bara(settings.override(db=str(working_copy(index, Path(tmp)))), embedder=embedder) as bara:
            probes = probe(bara, tasks, gate, (lambda n: progress("turns", n, len(tasks))) if progress else None)
    chosen = choose_floors(probes, max_drop, min_hits)
    floors = {r: c.floor if c.floor is not None else getattr(settings, f"floor_{r}") for r, c in chosen.items()}
    current = {r: getattr(settings, f"floor_{r}") for r in ROUTE_FLOORS}
    report = [p for p in probes if p.half == "report"]
    run = CalibrationSettings(max_drop, min_hits, k, current, getattr(embedder, "model_id", ""),
                              str(getattr(embedder, "cache_key", getattr(embedder, "model_id", ""))),
                              settings.embed_max_tokens, code_fingerprint())
    data = CalibrationData(str(tasks_path), file_sha256(tasks_path), len(tasks), len(probes),
                           str(corpus_path), prep.corpus_sha)
    return Calibration({f"floor_{r}": f for r, f in floors.items()}, chosen, evaluate_floors(report, floors),
                       evaluate_floors(report, current), evaluate_floors([p for p in probes if p.half == "tune"], floors),
                       run, data)


def to_toml(calibration: Calibration) -> str:
    """The floors file (``eval/floors.toml``): floors first, then where they come from and how they hold."""
    result = calibration.as_dict()
    s, d = result["settings"], result["data"]
    lines = ["# Per-route similarity floors calibrated by `bara eval calibrate` (do not edit by hand: rerun it).",
             f"# Each floor drops at most {s['max_drop']:.0%} of the relevant hits of its route on the tune half",
             "# of MTRAG-UN dev; the report half shows how that holds on unseen conversations.", "",
             "[floors]"]
    lines += [f"{name} = {value}" for name, value in result["floors"].items()]
    lines += ["", "[provenance]", f'embedder = "{s["embedder"]}"', f'embedder_key = "{s["embedder_key"]}"',
              f"embed_max_tokens = {s['embed_max_tokens']}", f"k = {s['k']}", f"max_drop = {s['max_drop']}",
              f"min_hits = {s['min_hits']}", f'split = "{s["split"]}"',
              f'tasks = "{Path(d["tasks"]["path"]).name}"', f'tasks_sha256 = "{d["tasks"]["sha256"]}"',
              f'corpus = "{Path(d["corpus"]["path"]).name}"', f'corpus_sha256 = "{d["corpus"]["sha256"]}"',
              f'bara_source_sha256 = "{s["bara_source_sha256"]}"']
    for route, c in result["tune"].items():
        rep = result["report"]["calibrated"]["routes"][route]
        cur = result["report"]["current"]["routes"][route]
        lines += ["", f"[routes.{route}]", f"tune_tasks = {c['tasks']}", f"tune_relevant_hits = {c['relevant_hits']}",
                  f'floor_source = "{c["source"]}"', f"report_tasks = {rep['tasks']}",
                  f"report_relevant_dropped = {_toml(rep['relevant_dropped'])}",
                  f"report_other_dropped = {_toml(rep['other_dropped'])}",
                  f"current_floor = {cur['floor']}", f"current_relevant_dropped = {_toml(cur['relevant_dropped'])}"]
    rep = result["report"]
    lines += ["", "[report]", f"recall_at_5_no_floor = {_toml(rep['calibrated']['recall@5_no_floor'])}",
              f"recall_at_5_calibrated = {_toml(rep['calibrated']['recall@5'])}",
              f"recall_at_5_current = {_toml(rep['current']['recall@5'])}"]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    return "nan" if value is None else str(value)
