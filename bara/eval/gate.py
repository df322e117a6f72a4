"""Retrieval-necessity evaluation of the gate (`bara eval gate`) and the MTRAG-UN task reader.

Labelled utterances come in three formats, detected per line:

* CLINC150 ``{text, intent}``: no retrieval is needed when the intent belongs to
  the ``small_talk`` or ``meta`` domain of ``domains.json``; every other intent
  (including out-of-scope ones) needs retrieval;
* ``{text, needs_retrieval}`` with a boolean label;
* MTRAG-UN tasks: the final user turn, after the earlier turns are replayed
  into the gate state; ANSWERABLE and PARTIAL tasks need retrieval,
  UNANSWERABLE and UNDERSPECIFIED ones do not.

Each utterance goes through the real gate (:func:`bara.decide.decide`) twice:
rules only (no prototypes, no vectors) and the full gate (prototypes plus the
message embedding when no rule is conclusive, as the gated pipeline runs it).
"Skip" is the positive class of ``skip_precision`` / ``skip_recall``.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from bara.retrieval.protocol import Embedder
from bara.datafiles import check_file, json_value, read_lines, require_some
from bara.decide import GateResult, decide
from bara.eval.stats import percentiles
from bara.understand.sanitize import sanitize
from bara.settings import Settings
from bara.types import Utterance
from bara.understand.features import compute_features
from bara.understand.intent import apply_rules
from bara.understand.prototypes import prototypes_for
from bara.understand.state import ConversationState

JUDGED = ("ANSWERABLE", "PARTIAL")
NO_RETRIEVAL_DOMAINS = ("small_talk", "meta")
KNOWN_FIELDS = frozenset({"conversation_id", "task_id", "task_type", "turn", "dataset", "contexts", "input",
                          "targets", "answerability", "Question Type", "Multi-Turn", "Collection", "enrichments"})
_ROLES = {"user": "user", "agent": "assistant", "assistant": "assistant"}


@dataclass(frozen=True)
class Task:
    id: str
    history: tuple[tuple[str, str], ...]  # earlier (role, text), role "user" | "assistant"
    question: str
    reference: str
    relevant: tuple[str, ...]
    answerability: str
    multi_turn: str
    question_types: tuple[str, ...]
    collection: str
    sha: str



# ---------------------------------------------------------------------- reading
def json_rows(path: Path, problems: Counter) -> Iterator[tuple[dict, str]]:
    """(object, raw line) per usable line; blank lines skipped, bad ones counted by reason."""
    for line in read_lines(path, "JSON-lines"):
        if not line.strip():
            continue
        try:
            row = json_value(line)
        except json.JSONDecodeError:
            problems["malformed JSON line"] += 1
            continue
        if isinstance(row, dict):
            yield row, line.strip()
        else:
            problems["line is not a JSON object"] += 1


def read_tasks(path: Path, problems: Counter) -> list[Task]:
    """MTRAG-UN tasks in file order; unusable ones are counted in ``problems`` and skipped."""
    tasks: dict[str, Task] = {}
    for row, line in json_rows(path, problems):
        task = parse_task(row, line, problems)
        if task is not None and task.id in tasks:
            problems["duplicate task_id"] += 1
        elif task is not None:
            tasks[task.id] = task
    return list(tasks.values())


def _first(value: Any, default: str = "") -> str:
    if isinstance(value, list):
        return str(value[0]) if value else default
    return str(value) if isinstance(value, (str, int)) and str(value) else default


def parse_task(row: Mapping[str, Any], line: str, problems: Counter) -> Task | None:
    for name in sorted(set(row) - KNOWN_FIELDS):
        problems[f"unknown field: {name}"] += 1
    turns = conversation(row.get("input"), problems)
    if not isinstance(row.get("task_id"), str) or not row["task_id"]:
        problems["missing task_id"] += 1
        return None
    if turns is None or not turns or turns[-1][0] != "user" or not turns[-1][1].strip():
        problems["no final user turn"] += 1
        return None
    answerability = _first(row.get("answerability"), "UNKNOWN").upper()
    relevant = tuple(dict.fromkeys(c["document_id"] for c in row.get("contexts") or []
                                   if isinstance(c, dict) and isinstance(c.get("document_id"), str)))
    if not relevant:
        problems[f"no contexts ({answerability})"] += 1
    qtypes = row.get("Question Type")
    return Task(row["task_id"], tuple(turns[:-1]), turns[-1][1], reference(row.get("targets")), relevant,
                answerability, _first(row.get("Multi-Turn"), "N/A"),
                tuple(str(q) for q in qtypes) if isinstance(qtypes, list) and qtypes else (_first(qtypes, "unknown"),),
                _first(row.get("Collection"), "unknown"), hashlib.sha256(line.encode()).hexdigest()[:16])


def conversation(items: Any, problems: Counter) -> list[tuple[str, str]] | None:
    if not isinstance(items, list):
        return None
    out = []
    for item in items:
        speaker = item.get("speaker") if isinstance(item, dict) else None
        role = _ROLES.get(speaker) if isinstance(speaker, str) else None
        if role is None or not isinstance(item.get("text"), str):
            problems["input turn without a known speaker or text"] += 1
            continue
        out.append((role, item["text"]))
    return out


def reference(targets: Any) -> str:
    if isinstance(targets, list):
        return " ".join(t["text"] for t in targets if isinstance(t, dict) and isinstance(t.get("text"), str))
    return targets if isinstance(targets, str) else ""


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ----------------------------------------------------------------------- gate replay
@dataclass(frozen=True)
class GateReplay:
    """Runs the gate the way the gated pipeline does, and advances its state over earlier turns."""

    settings: Settings
    prototypes: Any = None
    embedder: Embedder | None = None

    def result(self, text: str, window: Sequence[Utterance], state: ConversationState | None) -> GateResult:
        """Rules first; the message is embedded when the turn may search (as the pipeline does)."""
        query = sanitize(text, self.settings.max_query_chars).query or text
        keep = self.settings.pipeline_history_messages
        history = tuple(window[-keep:]) if keep else ()
        ruled = apply_rules(compute_features(query, history, {}, settings=self.settings), self.settings)
        may_search = ruled is None or ruled.intent in ("knowledge_base", "continuation", "general")
        embedder = self.embedder if may_search and self.prototypes is not None else None
        vector = embedder.embed([query])[0] if embedder is not None else None
        return decide(query, history, state, {}, self.settings, self.prototypes, message_vector=vector)

    def step(self, text: str, window: Sequence[Utterance], state: ConversationState | None) -> ConversationState:
        return self.result(text, window, state).new_state

    def prime(self, history: Sequence[tuple[str, str]]) -> tuple[ConversationState | None, list[Utterance]]:
        """The state and message window after the earlier turns of a conversation."""
        state, window = None, []
        for role, text in history:
            if role == "user":
                state = self.step(text, window, state)
            window.append(Utterance(role, text))
        return state, window


def gate_prototypes(embedder: Embedder) -> Any:
    """The gate's shipped prototypes when they match ``embedder`` (the pipeline's one loader), else None."""
    return prototypes_for(embedder)[0]


# ------------------------------------------------------------------- labelled data
@dataclass(frozen=True)
class Labelled:
    text: str
    needs_retrieval: bool
    group: str  # CLINC domain, MTRAG answerability, or "labelled"
    history: tuple[tuple[str, str], ...] = ()


def read_domains(path: Path) -> dict[str, str] | None:
    """intent -> domain from CLINC150's ``domains.json``; None when it is missing or unusable."""
    try:
        data = json_value(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    return {str(i): str(d) for d, intents in data.items() if isinstance(intents, list) for i in intents}


def read_labelled(path: Path, domains_path: Path | None, problems: Counter) -> list[Labelled]:
    """Labelled utterances of any of the three formats (detected per line); bad lines are counted."""
    domains_path = domains_path or path.parent / "domains.json"
    domains: dict[str, str] | None = None
    items: list[Labelled] = []
    for row, line in json_rows(path, problems):
        if "intent" in row and domains is None:
            domains = read_domains(domains_path) or {}
            if not domains:
                problems["no usable domains.json for intent rows"] += 1
        item = labelled(row, line, domains or {}, problems)
        if item is not None:
            items.append(item)
    return items


def labelled(row: Mapping[str, Any], line: str, domains: Mapping[str, str], problems: Counter) -> Labelled | None:
    if "input" in row:
        task = parse_task(row, line, problems)
        return None if task is None else Labelled(task.question, task.answerability in JUDGED, task.answerability,
                                                  task.history)
    text = row.get("text")
    if not isinstance(text, str) or not text.strip():
        problems["missing or empty text"] += 1
        return None
    if "needs_retrieval" in row and isinstance(row["needs_retrieval"], bool):
        return Labelled(text, row["needs_retrieval"], "labelled")
    if isinstance(row.get("intent"), str) and domains:
        domain = domains.get(row["intent"], "out_of_scope")
        return Labelled(text, domain not in NO_RETRIEVAL_DOMAINS, domain)
    problems["no usable label (intent, needs_retrieval or MTRAG task)"] += 1
    return None


# ---------------------------------------------------------------------- results
@dataclass(frozen=True)
class NecessityMetrics:
    """Accuracy of "retrieve?" with skip the positive class; None when a denominator is 0."""

    accuracy: float | None
    skip_precision: float | None
    skip_recall: float | None
    retrieve_recall: float | None

    def as_dict(self) -> dict[str, float | None]:
        return {"accuracy": self.accuracy, "skip_precision": self.skip_precision, "skip_recall": self.skip_recall,
                "retrieve_recall": self.retrieve_recall}


@dataclass(frozen=True)
class Confusion:
    """Counts with skip the positive class (tp: skipped and not needed)."""

    tp: int
    fp: int
    fn: int
    tn: int

    def as_dict(self) -> dict[str, int]:
        return {"tp": self.tp, "fp": self.fp, "fn": self.fn, "tn": self.tn}


@dataclass(frozen=True)
class GroupStats:
    """One CLINC domain / MTRAG answerability group."""

    n: int
    needs_retrieval: bool | None  # None: the group mixes labels
    accuracy: float | None
    retrieve_rate: float | None

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "needs_retrieval": self.needs_retrieval, "accuracy": self.accuracy,
                "retrieve_rate": self.retrieve_rate}


@dataclass(frozen=True)
class GateReport:
    """What `bara eval gate` reports; ``as_dict`` is its JSON."""

    n: int
    full: NecessityMetrics
    confusion: Confusion
    latency_ms: Mapping[str, float | None]
    rules_only: NecessityMetrics
    rules_latency_ms: Mapping[str, float | None]
    gate: str
    embedder: str | None
    needs_retrieval: int
    no_retrieval: int
    by_group: Mapping[str, GroupStats]
    problems: Mapping[str, int]
    data_path: str
    data_sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, **self.full.as_dict(), "confusion": self.confusion.as_dict(),
                "latency_ms": dict(self.latency_ms),
                "rules_only": {**self.rules_only.as_dict(), "latency_ms": dict(self.rules_latency_ms)},
                "gate": self.gate, "embedder": self.embedder,
                "labels": {"needs_retrieval": self.needs_retrieval, "no_retrieval": self.no_retrieval},
                "by_group": {k: g.as_dict() for k, g in self.by_group.items()}, "problems": dict(self.problems),
                "data": {"path": self.data_path, "sha256": self.data_sha256}}


# ---------------------------------------------------------------------- evaluation
def necessity_metrics(labels: Sequence[bool], retrieves: Sequence[bool]) -> NecessityMetrics:
    """Accuracy of "retrieve?" plus skip precision/recall and retrieve recall.

    With skip the positive class: ``skip_precision = |skipped and not needed| / |skipped|``,
    ``skip_recall = |skipped and not needed| / |not needed|``;
    ``retrieve_recall = |retrieved and needed| / |needed|``. None when a denominator is 0.
    """
    pairs = list(zip(labels, retrieves, strict=False))
    skipped = [need for need, got in pairs if not got]
    needed = [got for need, got in pairs if need]
    not_needed = sum(not need for need, _ in pairs)
    good_skips = sum(not need for need in skipped)
    return NecessityMetrics(accuracy=_ratio(sum(need == got for need, got in pairs), len(pairs)),
                            skip_precision=_ratio(good_skips, len(skipped)),
                            skip_recall=_ratio(good_skips, not_needed),
                            retrieve_recall=_ratio(sum(needed), len(needed)))


def confusion(labels: Sequence[bool], retrieves: Sequence[bool]) -> Confusion:
    """Counts with skip the positive class: tp skipped & not needed, fp skipped & needed,
    fn retrieved & not needed, tn retrieved & needed."""
    pairs = list(zip(labels, retrieves, strict=False))
    return Confusion(tp=sum(not n and not g for n, g in pairs), fp=sum(n and not g for n, g in pairs),
                     fn=sum(not n and g for n, g in pairs), tn=sum(n and g for n, g in pairs))


def _ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def gate_calls(items: Sequence[Labelled], replayer: GateReplay) -> tuple[list[bool], list[float]]:
    """Whether the gate retrieves for each item, and the ms its final decision took (embedding included)."""
    decisions, times = [], []
    for item in items:
        state, window = replayer.prime(item.history)
        t0 = time.perf_counter()
        decisions.append(replayer.result(item.text, window, state).policy.retrieves)
        times.append((time.perf_counter() - t0) * 1e3)
    return decisions, times


def by_group(items: Sequence[Labelled], retrieves: Sequence[bool]) -> dict[str, GroupStats]:
    """Per CLINC domain / MTRAG answerability: size, label, accuracy and how often the gate retrieved."""
    groups: dict[str, list[tuple[bool, bool]]] = {}
    for item, got in zip(items, retrieves, strict=False):
        groups.setdefault(item.group, []).append((item.needs_retrieval, got))
    return {name: _group_stats(pairs) for name, pairs in sorted(groups.items())}


def _group_stats(pairs: Sequence[tuple[bool, bool]]) -> GroupStats:
    labels = {need for need, _ in pairs}
    return GroupStats(n=len(pairs), needs_retrieval=labels.pop() if len(labels) == 1 else None,
                      accuracy=_ratio(sum(need == got for need, got in pairs), len(pairs)),
                      retrieve_rate=_ratio(sum(got for _, got in pairs), len(pairs)))


def evaluate_gate(path: Path, domains: Path | None, settings: Settings, embedder: Embedder) -> GateReport:
    """The JSON report of `bara eval gate`: full gate and rules-only figures on one labelled file."""
    check_file(path, "labelled data")
    problems: Counter = Counter()
    items = read_labelled(path, domains, problems)
    require_some(items, path, "labelled utterance", problems)
    labels = [i.needs_retrieval for i in items]
    prototypes = gate_prototypes(embedder)
    full, full_ms = gate_calls(items, GateReplay(settings, prototypes, embedder))
    rules, rules_ms = gate_calls(items, GateReplay(settings))
    return GateReport(
        n=len(items), full=necessity_metrics(labels, full), confusion=confusion(labels, full),
        latency_ms=percentiles(full_ms), rules_only=necessity_metrics(labels, rules),
        rules_latency_ms=percentiles(rules_ms),
        gate="rules + prototypes" if prototypes is not None else "rules only (prototypes unavailable)",
        embedder=getattr(embedder, "model_id", None), needs_retrieval=sum(labels),
        no_retrieval=len(labels) - sum(labels), by_group=by_group(items, full), problems=dict(problems),
        data_path=str(path), data_sha256=file_sha256(path))
