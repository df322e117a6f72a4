"""`bara eval tools`: tool selection on Berkeley Function Calling Leaderboard (v4) cases.

Each case's JSON-schema-like function specs become bara
:class:`~bara.messages.ToolSpec` objects (BFCL types ``dict``/``float``/
``tuple``/``any`` mapped to JSON Schema; names made provider-safe, e.g.
``math.sum`` -> ``math_sum``, and mapped back for scoring). The model sees the
user's question and the specs; its first response is scored, no tool runs:

* a case whose id contains ``irrelevance``: correct when nothing is called;
* any other case: correct when the set of functions called equals the set of
  functions in its ``possible_answer`` ground truth (argument values are not
  scored: this measures *selection*).

Per category the report also counts how each answerable case went
(:attr:`Outcome.verdict`): ``right`` (exactly the answer's tools), ``partial``
(only tools from the answer, not all of them: the usual result on
``parallel_multiple``, where the router calls one tool), ``abstained`` (nothing
called: a false abstention) and ``wrong`` (some tool outside the answer);
``only_answer_tools`` is the share of right + partial.

The default model is bara's offline rule router (:class:`bara.domains.funds.router.RuleRouter`):
its generic selection step (rule score + cosine between the message and each
tool's description; nothing chosen when the request cannot fill the tool's
required arguments or the similarity and name evidence fall short, see
:meth:`~bara.domains.funds.router.RuleRouter.best_fit`), without the portfolio
assistant's refusals, which would decline every non-finance request.

Cases are split in halves by a hash of their id (:func:`split_of`): the
router's abstention thresholds were tuned on ``dev`` only; report both.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from bara.datafiles import check_file, require_some
from bara.errors import InputError
from bara.eval.gate import file_sha256, json_rows
from bara.eval.stats import percentiles
from bara.llm.errors import LLMError
from bara.messages import SystemMessage, ToolSpec, UserMessage
from bara.prompts.eval import BFCL_SYSTEM

TYPE_MAP = {"dict": "object", "float": "number", "tuple": "array", "int": "integer", "bool": "boolean",
            "str": "string", "list": "array"}
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True)
class Case:
    id: str
    question: str
    specs: tuple[ToolSpec, ...]
    names: Mapping[str, str]  # safe name -> BFCL name
    expected: frozenset[str] | None  # None for irrelevance cases

    @property
    def category(self) -> str:
        return self.id.rsplit("_", 1)[0]

    @property
    def split(self) -> str:
        return split_of(self.id)


def split_of(case_id: str) -> str:
    """``dev`` (router thresholds were tuned on it) or ``test`` (never used for tuning): half each, fixed
    by the first 32 bits of SHA-256 of the case id."""
    return "dev" if int(hashlib.sha256(case_id.encode("utf-8")).hexdigest()[:8], 16) % 2 == 0 else "test"


# ----------------------------------------------------------------- conversion
def json_schema(spec: Any) -> Any:
    """BFCL's parameter schema as JSON Schema (type names mapped, recursively)."""
    if isinstance(spec, list):
        return [json_schema(s) for s in spec]
    if not isinstance(spec, dict):
        return spec
    out = {k: json_schema(v) for k, v in spec.items() if k != "optional"}
    kind = spec.get("type")
    if kind == "any":
        out.pop("type")
    elif isinstance(kind, str):
        out["type"] = TYPE_MAP.get(kind, kind)
    return out


def safe_name(name: str, taken: set[str]) -> str:
    """A provider-safe tool name (letters, digits, ``_``, ``-``; at most 64), unique within a case."""
    base = _UNSAFE.sub("_", name)[:60] or "fn"
    out, n = base, 1
    while out in taken:
        n += 1
        out = f"{base}_{n}"
    taken.add(out)
    return out


def to_specs(functions: Any, problems: Counter) -> tuple[tuple[ToolSpec, ...], dict[str, str]]:
    specs, names, taken = [], {}, set()
    for fn in functions if isinstance(functions, list) else []:
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            problems["function spec without a name"] += 1
            continue
        name = safe_name(fn["name"], taken)
        params = json_schema(fn.get("parameters") or {"type": "dict", "properties": {}})
        specs.append(ToolSpec(name, str(fn.get("description") or fn["name"]), params))
        names[name] = fn["name"]
    return tuple(specs), names


# --------------------------------------------------------------------- reading
def read_answers(paths: Sequence[Path], problems: Counter) -> dict[str, frozenset[str]]:
    """Case id -> the function names of its ground truth (BFCL ``possible_answer`` format)."""
    out: dict[str, frozenset[str]] = {}
    for path in paths:
        for row, _ in json_rows(path, problems):
            truth = row.get("ground_truth")
            if not isinstance(row.get("id"), str) or not isinstance(truth, list):
                problems["answer line without id or ground_truth"] += 1
                continue
            out[row["id"]] = frozenset(k for item in truth if isinstance(item, dict) for k in item)
    return out


def question_text(question: Any) -> str:
    """The last user message of the case's first turn."""
    turn = question[0] if isinstance(question, list) and question and isinstance(question[0], list) else question
    users = [m.get("content") for m in turn or [] if isinstance(m, dict) and m.get("role") == "user"]
    return next((u for u in reversed(users) if isinstance(u, str) and u.strip()), "")


def read_cases(path: Path, answers: Mapping[str, frozenset[str]], problems: Counter) -> list[Case]:
    cases = []
    for row, _ in json_rows(path, problems):
        case = parse_case(row, answers, problems)
        if case is not None:
            cases.append(case)
    return cases


def parse_case(row: Mapping[str, Any], answers: Mapping[str, frozenset[str]], problems: Counter) -> Case | None:
    case_id, text = row.get("id"), question_text(row.get("question"))
    if not isinstance(case_id, str) or not text:
        problems["case without id or user question"] += 1
        return None
    specs, names = to_specs(row.get("function"), problems)
    if not specs:
        problems["case without usable functions"] += 1
        return None
    irrelevant = "irrelevance" in case_id
    if not irrelevant and case_id not in answers:
        problems["case without a possible answer"] += 1
        return None
    return Case(case_id, text, specs, names, None if irrelevant else answers[case_id])


# ---------------------------------------------------------------------- models
@dataclass(frozen=True)
class RouterSelector:
    """The offline rule router's generic selection (no portfolio refusals)."""

    router: Any
    name: str = "rule-router"

    def pick(self, text: str, specs: Sequence[ToolSpec]) -> tuple[str, ...]:
        from bara.domains.funds.router import parse as T
        from bara.domains.funds.router import extract_schemes

        plan = self.router.choose(text, T.normal(text), extract_schemes(text), list(specs))
        return tuple(c.name for c in plan.calls) if plan.kind == "tools" else ()


@dataclass(frozen=True)
class ModelSelector:
    """A configured chat model: the tool calls of its first response."""

    model: Any

    @property
    def name(self) -> str:
        return f"model:{getattr(self.model, 'name', 'model')}"

    def pick(self, text: str, specs: Sequence[ToolSpec]) -> tuple[str, ...]:
        response = self.model.complete([SystemMessage(BFCL_SYSTEM), UserMessage(text)], list(specs))
        return tuple(c.name for c in response.message.tool_calls)


# --------------------------------------------------------------------- scoring
@dataclass(frozen=True)
class Outcome:
    case: Case
    called: frozenset[str]  # BFCL names
    ms: float
    error: str = ""

    @property
    def correct(self) -> bool:
        return not self.called if self.case.expected is None else self.called == self.case.expected

    @property
    def verdict(self) -> str:
        """``abstained`` / ``called`` for an irrelevance case; else ``right``, ``partial`` (a non-empty
        strict subset of the answer's tools), ``abstained`` or ``wrong``."""
        expected = self.case.expected
        if not self.called:
            return "abstained"
        if expected is None:
            return "called"
        return "right" if self.called == expected else "partial" if self.called < expected else "wrong"


def run_case(selector: Any, case: Case) -> Outcome:
    t0 = time.perf_counter()
    try:
        picked = selector.pick(case.question, case.specs)
    except LLMError as exc:
        return Outcome(case, frozenset(), (time.perf_counter() - t0) * 1e3, type(exc).__name__)
    called = frozenset(case.names.get(n, n) for n in picked)
    return Outcome(case, called, (time.perf_counter() - t0) * 1e3)


def _share(outcomes: Sequence[Outcome]) -> float | None:
    return round(sum(o.correct for o in outcomes) / len(outcomes), 4) if outcomes else None


@dataclass(frozen=True)
class CategoryFigures:
    n: int
    accuracy: float | None
    verdicts: Mapping[str, int] = field(default_factory=dict)  # Outcome.verdict -> cases
    answerable: bool = True  # False for irrelevance categories

    @property
    def only_answer_tools(self) -> float | None:
        """Share of cases that called something and only tools from the answer (None for irrelevance)."""
        if not self.n or not self.answerable:
            return None
        return round((self.verdicts.get("right", 0) + self.verdicts.get("partial", 0)) / self.n, 4)

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "accuracy": self.accuracy, "verdicts": dict(sorted(self.verdicts.items())),
                "only_answer_tools": self.only_answer_tools}


def _category(outcomes: Sequence[Outcome]) -> CategoryFigures:
    return CategoryFigures(len(outcomes), _share(outcomes), dict(Counter(o.verdict for o in outcomes)),
                           answerable=all(o.case.expected is not None for o in outcomes))


@dataclass(frozen=True)
class ToolFigures:
    """Tool-selection figures over a set of cases (errors excluded from every rate)."""

    n: int
    selection_accuracy: float | None
    irrelevance_abstention: float | None
    n_selection: int
    n_irrelevance: int
    by_category: Mapping[str, CategoryFigures]
    latency_ms: Mapping[str, float | None]
    model_errors: Mapping[str, int]

    def as_dict(self, timings: bool = True) -> dict[str, Any]:
        """The JSON object; a split's (``timings=False``) leaves out latency and model errors."""
        out: dict[str, Any] = {
            "n": self.n, "selection_accuracy": self.selection_accuracy,
            "irrelevance_abstention": self.irrelevance_abstention, "n_selection": self.n_selection,
            "n_irrelevance": self.n_irrelevance, "by_category": {c: f.as_dict() for c, f in self.by_category.items()}}
        if timings:
            out.update({"latency_ms": dict(self.latency_ms), "model_errors": dict(self.model_errors)})
        return out


@dataclass(frozen=True)
class ToolScore:
    """Overall figures and per split (dev / test halves, see :func:`split_of`)."""

    overall: ToolFigures
    splits: Mapping[str, ToolFigures]

    def as_dict(self) -> dict[str, Any]:
        return {**self.overall.as_dict(), "splits": {s: f.as_dict(timings=False) for s, f in self.splits.items()}}


@dataclass(frozen=True)
class DataFile:
    path: str
    sha256: str


@dataclass(frozen=True)
class ToolsReport:
    """What `bara eval tools` reports; ``as_dict`` is its JSON."""

    score: ToolScore
    model: str
    problems: Mapping[str, int]
    data: tuple[DataFile, ...]

    def as_dict(self) -> dict[str, Any]:
        return {**self.score.as_dict(), "model": self.model, "problems": dict(self.problems),
                "data": [{"path": d.path, "sha256": d.sha256} for d in self.data]}


def score(outcomes: Sequence[Outcome]) -> ToolScore:
    """Overall figures, per category, and per split (dev / test halves, see :func:`split_of`)."""
    return ToolScore(_figures(outcomes),
                     {s: _figures([o for o in outcomes if o.case.split == s]) for s in ("dev", "test")})


def _figures(outcomes: Sequence[Outcome]) -> ToolFigures:
    ok = [o for o in outcomes if not o.error]
    selection = [o for o in ok if o.case.expected is not None]
    irrelevance = [o for o in ok if o.case.expected is None]
    categories = sorted({o.case.category for o in ok})
    return ToolFigures(
        n=len(ok), selection_accuracy=_share(selection), irrelevance_abstention=_share(irrelevance),
        n_selection=len(selection), n_irrelevance=len(irrelevance),
        by_category={c: _category([o for o in ok if o.case.category == c]) for c in categories},
        latency_ms=percentiles([o.ms for o in ok]),
        model_errors=dict(Counter(o.error for o in outcomes if o.error)))


def default_answers(path: Path) -> Path | None:
    candidate = path.parent / "possible_answer" / path.name
    return candidate if candidate.is_file() else None


def evaluate_tools(bfcl: Sequence[Path], answers: Sequence[Path], selector: Any) -> ToolsReport:
    """The JSON report of `bara eval tools`."""
    problems: Counter = Counter()
    for path in (*bfcl, *answers):
        if path.is_dir() or (path.exists() and not path.is_file()):
            check_file(path, "BFCL")  # a folder or a device: says which
    missing = [p for p in (*bfcl, *answers) if not p.is_file()]
    if missing:
        raise InputError(f"{missing[0]} does not exist: pass BFCL case and possible_answer files")
    answer_files = list(answers) or [a for a in map(default_answers, bfcl) if a is not None]
    truth = read_answers(answer_files, problems)
    cases = [c for path in bfcl for c in read_cases(path, truth, problems)]
    require_some(cases, Path(", ".join(map(str, bfcl))), "BFCL case", problems)
    return ToolsReport(score([run_case(selector, c) for c in cases]), selector.name, dict(problems),
                       tuple(DataFile(str(p), file_sha256(p)) for p in (*bfcl, *answer_files)))
