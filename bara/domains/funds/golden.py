"""The golden set (``bara eval golden``): four categories, scored separately.

* ``numeric``: every expected figure appears in the answer within its
  tolerance. Expected figures are computed here from the raw tables with plain
  SQL, pyxirr and NAV arithmetic, independently of the tools under test.
* ``retrieval``: a search_documents call returned a relevant passage (FiQA
  passages chosen by reading them; the right scheme fact sheet).
* ``refusal``: another user's portfolio (by name, id or in bulk), investment
  advice and off-topic requests are declined; nothing of another user shows
  and nothing is recommended.
* ``tool_selection``: the right tool, in the right order, and not search for
  the user's own figures; no tools for chit-chat.

Tool selection and retrieval are kept apart because their fixes differ: a
selection failure is a description or routing problem, a retrieval failure a
chunking or ranking one. The same cases run with the offline router (CI) and,
unchanged, with any model configured through ``BARA_MODEL``.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from dataclasses import dataclass
from datetime import date
from typing import Any, Callable, Iterable, Mapping

import pyxirr

from bara.store.base import SqlRunner
from bara.domains.funds.assistant import AgentAssistant
from bara.domains.funds.golden_cases import CASES, CATEGORIES
from bara.domains.funds.golden_rows import GoldenRows
from bara.domains.funds.golden_checks import (CHECKS, DECLINE, PORTFOLIO_TOOLS, RECOMMEND, TOLERANCE,  # noqa: F401
                                      answer_numbers)  # re-exported
from bara.errors import InputError
from bara.llm.base import Model
from bara.prompts.frames import estimate_tokens

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w+))?\}")
_SHORT_NAME = re.compile(r"\s*(?:-\s*|\(|\s)(?:Direct|Regular|Growth|Formerly)\b.*$", re.I)


@dataclass(frozen=True)
class GoldenCase:
    id: str
    category: str
    user: str
    message: str
    expect: Mapping[str, Any]


@dataclass(frozen=True)
class CaseOutcome:
    id: str
    category: str
    passed: bool
    detail: str
    user: str = ""
    message: str = ""
    answer: str = ""
    tools: tuple[str, ...] = ()
    model_calls: int = 0
    tool_specs_offered: int = 0
    split: str = ""
    spec_tokens: int = 0  # tokens of the tool specs sent with every model call of the case
    input_tokens: int = 0  # as the provider reported them (0 for the offline router)


@dataclass(frozen=True)
class GoldenReport:
    model: str
    gate_tools: bool
    outcomes: tuple[CaseOutcome, ...]
    seconds: float = 0.0

    def categories(self, split: str | None = None) -> dict[str, dict[str, int]]:
        """Passed/total per category, over every case or one split's."""
        rows = [o for o in self.outcomes if split is None or o.split == split]
        return {c: {"passed": sum(o.passed for o in rows if o.category == c),
                    "total": sum(o.category == c for o in rows)} for c in CATEGORIES}

    def splits(self) -> dict[str, dict[str, dict[str, int]]]:
        """Category scores per split (dev, test), in case order."""
        return {s: self.categories(s) for s in dict.fromkeys(o.split for o in self.outcomes if o.split)}

    def totals(self) -> dict[str, Any]:
        o = self.outcomes
        return {"cases": len(o), "passed": sum(x.passed for x in o), "model_calls": sum(x.model_calls for x in o),
                "tool_calls": sum(len(x.tools) for x in o),
                "searches": sum(x.tools.count("search_documents") for x in o),
                "tool_specs_offered": sum(x.tool_specs_offered for x in o),
                "tool_spec_tokens": sum(x.spec_tokens for x in o), "input_tokens": sum(x.input_tokens for x in o),
                "seconds": round(self.seconds, 3)}

    def to_json(self) -> dict[str, Any]:
        return {"categories": self.categories(), "splits": self.splits(), "model": self.model,
                "gate_tools": self.gate_tools, "totals": self.totals(),
                "failures": [{"id": x.id, "split": x.split, "category": x.category, "detail": x.detail}
                             for x in self.outcomes if not x.passed]}


# ------------------------------------------------------------ independent facts
@dataclass(frozen=True)
class Holding:
    code: str
    name: str
    fund_house: str
    units: float
    nav_date: str
    value: float


@dataclass(frozen=True)
class Facts:
    """Expected values straight from the raw tables (:mod:`bara.domains.funds.golden_rows`, pyxirr), never
    through the tools."""

    store: SqlRunner

    @property
    def rows(self) -> GoldenRows:
        return GoldenRows(self.store)

    def lookup(self, key: str, user: str | None) -> Any:
        fn = getattr(self, f"f_{key}", None)
        if fn is None:
            raise InputError(f"golden case uses unknown placeholder {{{key}}}; fix bara/domains/funds/data/golden_*.jsonl")
        return fn(user)

    def require_data(self) -> None:
        if not self.rows.has_users():
            raise InputError("no demo users in this store: run `bara funds load` (same --db) before "
                             "`bara eval golden`")

    def holdings(self, user: str) -> list[Holding]:
        rows = self.rows.units_held(user)
        held = [Holding(c, n, h, u, *self._valued(c, u)) for c, n, h, u in rows if u > 1e-6]
        return sorted(held, key=lambda x: (-x.value, x.code))

    def _valued(self, code: str, units: float) -> tuple[str, float]:
        day, nav = self.rows.latest_nav(code)
        return day, units * float(nav)

    def xirr_pct(self, user: str, code: str | None = None) -> float:
        rows = self.rows.transactions(user)
        flows = [(date.fromisoformat(d), a if k == "REDEMPTION" else -a) for d, k, a, c in rows if code in (None, c)]
        flows += [(date.fromisoformat(h.nav_date), h.value) for h in self.holdings(user) if code in (None, h.code)]
        rate = pyxirr.xirr([d for d, _ in flows], [a for _, a in flows])
        if rate is None:  # pyxirr finds no rate for these flows (float(None) failed here before)
            raise ValueError(f"no XIRR for {user} {code or 'portfolio'}: the cash flows have no solution")
        return 100 * float(rate)

    def return_1y_pct(self, code: str) -> float:
        navs = [(date.fromisoformat(d), float(v)) for d, v in self.rows.navs(code)]
        end_day, end_nav = navs[-1]
        last = calendar.monthrange(end_day.year - 1, end_day.month)[1]
        start = date(end_day.year - 1, end_day.month, min(end_day.day, last))
        base = [v for d, v in navs if d <= start][-1]
        return 100 * (end_nav / base - 1)

    def _busy(self, user: str) -> tuple[str, int]:
        month, count = self.rows.busiest_month(user)
        year, num = (int(x) for x in month.split("-"))
        return f"{calendar.month_name[num]} {year}", int(count)

    def _falling(self) -> tuple[str, Holding]:
        users = self.rows.user_ids()
        pairs = [(u, h) for u in users for h in self.holdings(u)]
        return min(pairs, key=lambda p: (self.return_1y_pct(p[1].code), p[0], p[1].code))

    # placeholders and expected figures: f_<key>(user)
    def f_top_scheme(self, user: str) -> str:
        return short_name(self.holdings(user)[0].name)

    def f_top_code(self, user: str) -> str:
        return self.holdings(user)[0].code

    def f_top_scheme_lc(self, user: str) -> str:
        """The top scheme as a user types it in a hurry: lower case."""
        return short_name(self.holdings(user)[0].name).lower()

    def f_second_scheme(self, user: str) -> str:
        return short_name(self.holdings(user)[1].name)

    def f_second_code(self, user: str) -> str:
        return self.holdings(user)[1].code

    def f_top_house(self, user: str) -> str:
        return self.holdings(user)[0].fund_house

    def f_top_value(self, user: str) -> float:
        return self.holdings(user)[0].value

    def f_top_units(self, user: str) -> float:
        return self.holdings(user)[0].units

    def f_top_xirr(self, user: str) -> float:
        return self.xirr_pct(user, self.holdings(user)[0].code)

    def f_top_house_pct(self, user: str) -> float:
        held = self.holdings(user)
        return 100 * sum(h.value for h in held if h.fund_house == held[0].fund_house) / sum(h.value for h in held)

    def f_portfolio_value(self, user: str) -> float:
        return sum(h.value for h in self.holdings(user))

    def f_portfolio_xirr(self, user: str) -> float:
        return self.xirr_pct(user)

    def f_return_1y(self, user: str) -> float:
        return self.return_1y_pct(self.holdings(user)[0].code)

    def f_busy_month(self, user: str) -> str:
        return self._busy(user)[0]

    def f_busy_month_count(self, user: str) -> int:
        return self._busy(user)[1]

    def f_first_tx_date(self, user: str) -> str:
        """The median transaction date: "since then" selects about half of the user's rows."""
        return self.rows.transaction_date(user, self.rows.transaction_count(user) // 2)

    def f_falling_user(self, user: str | None) -> str:
        return self._falling()[0]

    def f_falling_scheme(self, user: str | None) -> str:
        return short_name(self._falling()[1].name)

    def others_scheme_names(self, user: str) -> set[str]:
        """Short names of schemes only other users hold (a leak if an answer shows one)."""
        users = self.rows.user_ids(other_than=user)
        own = {h.code for h in self.holdings(user)}
        return {short_name(h.name) for u in users for h in self.holdings(u) if h.code not in own}


def short_name(name: str) -> str:
    """How people write a scheme: "Kotak Technology Fund - Direct Plan - Growth" -> "Kotak Technology Fund"."""
    return _SHORT_NAME.sub("", name).strip(" -") or name


# ------------------------------------------------------------------- resolving
def fill(value: Any, user: str | None, facts: Facts) -> Any:
    """Replace placeholders in strings, lists and dicts (``{key}`` uses the case's user)."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda m: str(facts.lookup(m.group(1), m.group(2) or user)), value)
    if isinstance(value, Mapping):
        return {k: fill(v, user, facts) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [fill(v, user, facts) for v in value]
    return value


def resolve(raw: Mapping[str, Any], facts: Facts) -> GoldenCase:
    user = fill(raw["user"], None, facts)
    expect = {k: v for k, v in raw["expect"].items() if k != "figures"}
    return GoldenCase(raw["id"], raw["category"], user, fill(raw["message"], user, facts),
                      {**fill(expect, user, facts), "figures": raw["expect"].get("figures", [])})


def load_cases(raw: Iterable[Mapping[str, Any]] | None = None) -> list[Mapping[str, Any]]:
    cases = list(CASES if raw is None else raw)
    unknown = sorted({c["category"] for c in cases} - set(CATEGORIES))
    if unknown:
        raise InputError(f"golden cases use unknown categories {unknown}; use one of {', '.join(CATEGORIES)}")
    return cases


# --------------------------------------------------------------------- running
def run_golden(bara: Any, model: Model | None = None, gate_tools: bool | None = None,
               cases: Iterable[Mapping[str, Any]] | None = None,
               progress: Callable[[CaseOutcome], None] | None = None) -> GoldenReport:
    """Run every case (nothing is persisted) and score the four categories."""
    started = time.perf_counter()
    facts = Facts(bara.store)
    facts.require_data()
    assistant = AgentAssistant(bara, model=model, gate_tools=gate_tools)
    outcomes = []
    for raw in load_cases(cases):
        outcome = run_case(assistant, raw, facts)
        outcomes.append(outcome)
        if progress:
            progress(outcome)
    return GoldenReport(getattr(assistant.model, "name", "model"), assistant.gate_tools, tuple(outcomes),
                        time.perf_counter() - started)


def run_case(assistant: AgentAssistant, raw: Mapping[str, Any], facts: Facts) -> CaseOutcome:
    try:
        case = resolve(raw, facts)
    except (InputError, IndexError, ValueError, pyxirr.InvalidPaymentsError) as exc:
        return CaseOutcome(raw["id"], raw["category"], False, f"case could not be resolved from the data: {exc}")
    turn = assistant.run_turn(case.user, case.message, persist=False)
    passed, detail = CHECKS[case.category](case, turn, facts)
    run = turn.run
    tools = tuple(c.name for c in run.tool_calls) if run else ()
    iterations = run.iterations if run else 0
    return CaseOutcome(case.id, case.category, passed, detail, case.user, case.message, turn.result.answer, tools,
                       run.model_calls if run else 0, len(turn.offered) * iterations, str(raw.get("split", "")),
                       spec_tokens(assistant.tools[n] for n in turn.offered) * iterations,
                       run.usage.input_tokens if run else 0)


def spec_tokens(tools: Iterable[Any]) -> int:
    """Estimated tokens of the tool specs as sent (name, description, JSON schema), chars/token as the
    prompt budget estimates them (:func:`bara.prompts.frames.estimate_tokens`)."""
    specs = [{"name": s.name, "description": s.description, "parameters": s.parameters}
             for s in (t.spec() for t in tools)]
    return estimate_tokens(json.dumps(specs, separators=(",", ":"))) if specs else 0


def doc_subset(facts: Facts, every: int = 25) -> tuple[set[str], set[str]]:
    """Scheme codes and FiQA ids a fast test index needs: every relevant document of the cases, every
    demo-held scheme, plus distractors (every ``every``-th scheme with NAVs)."""
    codes = {h.code for u in facts.rows.user_ids() for h in facts.holdings(u)}
    codes |= {c for i, c in enumerate(facts.rows.nav_codes()) if i % every == 0}
    fiqa = {s.removeprefix("fiqa/") for c in CASES for s in c["expect"].get("sources", []) if s.startswith("fiqa/")}
    return codes, fiqa
