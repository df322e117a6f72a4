"""The rule router: an offline :class:`~bara.llm.base.Model` that picks tools with no LLM.

It is the default model of the demo and of CI, and the golden set scores its
tool selection like any model's. Each ``complete`` call re-reads the transcript
(the signed-in user from the system prompt, the last user message, the tool
results since) and returns either the next tool calls or a templated answer.
It never does arithmetic: every figure in an answer is copied from a tool
result (wording and formatters: :mod:`bara.domains.funds.router.compose`).

Every message is first normalised (:mod:`bara.domains.funds.router.intent`: Hinglish
words mapped to English, misspelt keywords corrected) and its scheme names
resolved by fuzzy matching over the catalogue, the user's own schemes first
(:mod:`bara.domains.funds.router.schemes`). Routing, first match wins:

1. refusals: another person's portfolio (by name, id, relation such as "my
   brother", "his holdings", in bulk) or an out-of-scope request get no tools;
   investment advice gets facts only, then a decline;
2. chit-chat and thanks (bara's gate, :func:`bara.decide.decide`) get no tools;
3. "why did X fall": compute first (holdings + XIRR, or compare_funds), THEN
   search_documents with a query built from the computed figures;
4. nothing about money or a named scheme: no tool fits, none is called;
5. two or more schemes with a comparison cue or a performance question: compare_funds;
6. the user's money by fund house: asset_allocation by fund house;
7. a question about a concept ("what is", "explain", "why does"), not the
   user's own figures: search_documents, even when it names a metric;
8. otherwise keyword rules plus cosine similarity between the message and the
   "use for" half of each tool description; search is never chosen for the
   user's own figures; with no rule firing a tool is called only when it fits
   (:meth:`RuleRouter.best_fit`, :mod:`bara.domains.funds.router.fit`).

Follow-up steps (thin-search reformulation, compute-then-search) live in
:mod:`bara.domains.funds.router.steps`.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from bara.retrieval.protocol import Embedder
from bara.store.base import SqlRunner
from bara.domains.funds.router import intent as I
from bara.domains.funds.router import compose as C
from bara.domains.funds.router import parse as T
from bara.domains.funds.repo import FundsRepo
from bara.domains.funds.router.dates import date_range, read_dates
from bara.domains.funds.router.named import named_fund
from bara.domains.funds.router.fit import contradicts, fillable, name_coverage, spec_text
from bara.domains.funds.router.schemes import SchemeCatalogue
from bara.domains.funds.settings import funds_settings
from bara.domains.funds.router.steps import (MAX_COMPARE, SEARCH, Call, Plan, Seen, Turn,  # noqa: F401
                                             informed_query, is_thin, next_calls, read_turn)  # re-exported
from bara.decide import decide
from bara.domains.funds.users import REFUSE_ADVICE, REFUSE_OTHER_USER, REFUSE_OUT_OF_SCOPE, detect_refusal
from bara.llm.base import STOP_END, STOP_TOOL_CALLS, ModelResponse
from bara.messages import AssistantMessage, Message, ToolCall, ToolSpec
from bara.settings import Settings
from bara.understand.prototypes import PrototypeIndex
from bara.understand.prototypes import prototypes_for as load_matching

ROUTER_NAME = "rule-router"
PORTFOLIO_TOOLS = ("get_holdings", "get_transactions", "compute_xirr", "asset_allocation")
#: First words of scheme names that are ordinary English too ("The ...", "Bank of India ..."): no fund house alone.
COMMON_FIRST_WORDS = frozenset("the bank old trust choice angel union quant quantum navi".split())
#: Figures only the user's own flows give: asked of a named scheme, they are computed, not looked up as a concept.
_OWN_FIGURE = re.compile(r"\b(xirr|irr|units|invested)\b")
#: Portfolio tools with no date argument: a date the user gives them is named in the answer as not applied.
UNDATED_TOOLS = ("get_holdings", "compute_xirr", "asset_allocation")


class RuleRouter:
    """A Model with no LLM behind it. ``embedder`` (optional) enables the gate's prototype
    fallback and tool-description similarity; without it only rules decide."""

    def __init__(self, embedder: Embedder | None = None, settings: Settings | None = None,
                 prototypes: PrototypeIndex | None = None, name: str = ROUTER_NAME,
                 schemes: SchemeCatalogue | None = None, people: Sequence[str] = ()) -> None:
        self.name, self.embedder, self.settings = name, embedder, settings or Settings()
        self.prototypes = prototypes if prototypes is not None else prototypes_for(embedder)
        self.schemes, self.people = schemes, tuple(people)  # scheme names to match; other users' names
        self._vectors: dict[str, np.ndarray] = {}  # text -> unit vector; descriptions and messages

    @classmethod
    def for_store(cls, store: SqlRunner, embedder: Embedder | None = None, settings: Settings | None = None) -> "RuleRouter":
        """A router that knows the store's scheme names (fuzzy matching) and its users' names (refusals)."""
        s = settings or Settings()
        f = funds_settings(s)
        catalogue = SchemeCatalogue.from_store(store, f.router_scheme_min_score, f.router_scheme_token_score)
        people = FundsRepo(store).user_names()
        return cls(embedder, s, schemes=catalogue, people=people)

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        turn = read_turn(messages)
        plan = self.plan(turn.text, (turn.user_id, turn.user_name), tools)
        calls = next_calls(plan, turn.seen, {t.name for t in tools}, self.settings)
        if calls:
            tool_calls = tuple(ToolCall(f"rr-{turn.calls_made + i + 1}", c.name, dict(c.args))
                               for i, c in enumerate(calls))
            return ModelResponse(AssistantMessage(tool_calls=tool_calls), stop_reason=STOP_TOOL_CALLS)
        return ModelResponse(AssistantMessage(text=C.compose(plan, turn)), stop_reason=STOP_END)

    # ------------------------------------------------------------------ planning
    def plan(self, text: str, own: Sequence[str], tools: Sequence[ToolSpec] = ()) -> Plan:
        """What this message needs, from the message alone (deterministic)."""
        low = T.normal(text)
        if not low.strip():
            return Plan("chitchat", note="testing", reasons=("router:empty",))
        norm = I.normalise(text, funds_settings(self.settings).router_keyword_score)
        refusal = self.refusal(text, norm, own)
        if refusal and refusal != REFUSE_ADVICE:
            return Plan("refuse", note=refusal, reasons=(f"router:refuse_{refusal}",))
        chitchat = "thanks" if I.thanks(norm) else self.chitchat_kind(text)
        if chitchat and not refusal:
            return Plan("chitchat", note=chitchat, reasons=(f"router:chitchat_{chitchat}",))
        spans = self.scheme_codes(text, own[0] if own else "")
        if refusal:
            return Plan("advice", advice_calls(spans, norm, self.label), note=refusal,
                        reasons=("router:advice_facts_only",))
        return self.plan_answer(text, norm, spans, tools)

    def refusal(self, text: str, norm: str, own: Sequence[str]) -> str | None:
        """Why this message must be refused (or answered with facts only: advice), if it must."""
        refusal = detect_refusal(text, tuple(n for n in own if n), self.schemes.firsts if self.schemes else ())
        if refusal is None and I.other_person(norm, tuple(n for n in own if n), self.people):
            refusal = REFUSE_OTHER_USER
        if refusal is None and I.advice(norm):
            refusal = REFUSE_ADVICE
        return refusal

    def plan_answer(self, text: str, norm: str, spans: list[str], tools: Sequence[ToolSpec]) -> Plan:
        """The plan for an in-scope message that is neither refused nor small talk. A fund the message
        names that no scheme matched (``named``) still goes to the tool as its scheme argument, so the tool's
        own error says it is not the user's: never the whole portfolio's figure in its place."""
        named = [] if spans else [n for n in (named_fund(text) or self.fund_house_named(text),) if n]
        if T.WHY_FALL.search(norm) or (I.fall_question(norm) and (spans or named or I.personal(norm))):
            return Plan("explain", explain_calls(spans or named, norm), reasons=("router:compute_then_search",),
                        labels=self.labels(spans))
        if not spans and not I.on_topic(norm):
            return Plan("refuse", note=REFUSE_OUT_OF_SCOPE, reasons=("router:no_tool_fits_off_topic",))
        if len(spans) >= 2 and I.compares(norm):
            return Plan("tools", (Call("compare_funds", {"schemes": spans[:MAX_COMPARE]}),),
                        reasons=("router:compare_named",))
        if I.fund_house_split(norm):
            return Plan("tools", (Call("asset_allocation", {"by": "fund_house"}),), reasons=("router:by_fund_house",))
        if I.concept(norm) and not ((spans or named) and _OWN_FIGURE.search(norm)):  # "the xirr of <a fund>"
            return Plan("tools", (Call(SEARCH, {"query": search_query(text), "limit": 5}),),
                        reasons=("router:concept_search",))
        return self.choose(text, norm, spans, tools, named)

    def fund_house_named(self, text: str) -> str | None:
        """A capitalised word (not the first) that starts a fund house's scheme names ("xirr for Mirae"), or None."""
        if self.schemes is None:
            return None
        words = re.findall(r"[A-Za-z][\w&-]*", text)[1:]
        return next((w for w in words if w[:1].isupper() and w.lower() in self.schemes.by_first
                     and w.lower() not in COMMON_FIRST_WORDS), None)

    def labels(self, spans: Sequence[str]) -> tuple[tuple[str, str], ...]:
        return tuple((c, self.label(c)) for c in spans if self.label(c) != c)

    def label(self, span: str) -> str:
        """How to write a scheme in a search query: its name when the catalogue knows the code."""
        return self.schemes.label(span) if self.schemes is not None else span

    def scheme_codes(self, text: str, user: str) -> list[str]:
        """Schemes named in ``text`` (codes, held ones resolved to the user's plan), in message order;
        without a catalogue, the capitalised runs of the text."""
        if self.schemes is None:
            return extract_schemes(text)
        found = T.CODE.findall(text) + T.ISIN.findall(text)
        return list(dict.fromkeys(found + [m.code for m in self.schemes.find(text, user)]))

    def chitchat_kind(self, text: str) -> str | None:
        vector = self._embed(text) if self.embedder is not None else None
        gate = decide(text, (), None, {}, self.settings, self.prototypes, vector)
        if gate.intent.intent == "chitchat":
            return gate.intent.chitchat or "meta"
        return "low_entropy" if gate.features.low_entropy else None

    def choose(self, text: str, low: str, spans: list[str], tools: Sequence[ToolSpec],
               named: Sequence[str] = ()) -> Plan:
        scores = self.scores(text, low, tools, spans)
        rules = {n: T.rule_score(n, low, spans) for n in scores}
        picked = sorted((n for n, r in rules.items() if r >= 1.0), key=lambda n: -rules[n])
        if not picked:
            best = self.best_fit(text, scores, tools)
            if best is None:
                return Plan("chitchat", note="low_entropy", reasons=("router:no_tool_fits",))
            picked = [best]
        picked = _drop_search(picked, rules, low)
        if "compare_funds" in picked and len(spans) < 2:
            return _compare_fallback(text, low, [self.label(c) for c in spans], picked)
        dates = read_dates(T.normal(text))
        if dates.problems and set(picked[:3]) & set(PORTFOLIO_TOOLS):
            problem = dates.problems[0]
            return Plan("clarify", note=problem.text, reasons=(f"router:date_{problem.kind}",))
        calls = tuple(Call(n, tool_args(n, text, low, [*spans] or [*named])) for n in picked[:3])
        undated = [n for n in picked[:3] if n in UNDATED_TOOLS]
        period = tuple(date_range(T.normal(text)).items()) if undated else ()
        funds = tuple(spans or named) if "get_holdings" in picked[:3] else ()  # "how many units of X do I hold"
        return Plan("tools", calls, reasons=tuple(f"router:pick_{n}" for n in picked[:3]), period=period,
                    labels=self.labels(spans), funds=funds)

    def best_fit(self, text: str, scores: Mapping[str, float], tools: Sequence[ToolSpec],
                 spec_scores: Mapping[str, float] | None = None) -> str | None:
        """With no rule firing: of the tools that fit and whose required numeric and enum arguments the text
        can fill, the most similar (ties broken by how much of its name the text mentions), or None.
        A tool fits when its similarity reaches ``router_sim_min``, or ``router_sim_floor`` with at least
        ``router_name_cover_min`` of its name's words mentioned (:mod:`bara.domains.funds.router.fit`), or
        ``router_sim_floor_named`` with ``router_name_cover_most`` of them, or
        when the text mentions some word of its name and is close to its whole spec (name words, description
        and parameter descriptions: ``spec_scores``, by default :meth:`spec_similarity`) at
        ``router_spec_sim_min``; and the text does not ask for the opposite of a name word ("lowest" for
        ``high_score``). A tool that does not fit or cannot be filled is no candidate: it neither wins nor
        makes a fitting runner-up lose."""
        s = funds_settings(self.settings)
        cover = {n: name_coverage(n, text) for n in scores}
        specs = {t.name: t for t in tools}

        def spec_sim(n: str) -> float:
            if spec_scores is not None:
                return spec_scores.get(n, -1.0)
            return self.spec_similarity(text, specs[n]) if n in specs else -1.0

        def fits(n: str) -> bool:
            sim = scores[n]
            if contradicts(n, text):
                return False
            if sim >= s.router_sim_min or (sim >= s.router_sim_floor and cover[n] >= s.router_name_cover_min):
                return True
            if sim >= s.router_sim_floor_named and cover[n] >= s.router_name_cover_most:
                return True
            return cover[n] > 0 and spec_sim(n) >= s.router_spec_sim_min

        candidates = [n for n in scores if fits(n) and (n not in specs or fillable(specs[n].parameters, text, n))]
        return max(candidates, key=lambda n: scores[n] + s.router_name_weight * cover[n], default=None)

    def spec_similarity(self, text: str, spec: ToolSpec) -> float:
        """cosine(message, the tool's whole spec as text: :func:`~bara.domains.funds.router.fit.spec_text`);
        -1 without an embedder."""
        if self.embedder is None:
            return -1.0
        return float(np.dot(self._embed(text), self._embed(spec_text(spec.name, use_part(spec.description),
                                                                    spec.parameters))))

    def scores(self, text: str, low: str, tools: Sequence[ToolSpec], spans: list[str] | None = None
               ) -> dict[str, float]:
        """Rule score plus ``router_sim_weight`` x cosine(message, tool's "use for" text), per offered tool."""
        names = [t.name for t in tools] or list(T.RULES)
        spans = extract_schemes(text) if spans is None else spans
        out = {n: T.rule_score(n, low, spans) for n in names}
        if self.embedder is not None and tools:
            message = self._embed(text)
            for spec in tools:
                out[spec.name] += funds_settings(self.settings).router_sim_weight * float(np.dot(message, self._embed(use_part(spec.description))))
        if T.personal_figure(low) and SEARCH in out:
            out[SEARCH] -= 2.0  # the user's own figures come from computation, never from documents
        return out

    def _embed(self, text: str) -> np.ndarray:
        """The cached vector of ``text``; called only when the router has an embedder."""
        assert self.embedder is not None, "the router embeds only with an embedder"
        if text not in self._vectors:
            if len(self._vectors) > 512:  # bound the cache; anything cleared is re-embedded on demand
                self._vectors.clear()
            self._vectors[text] = np.asarray(self.embedder.embed([text])[0], dtype=np.float32)
        return self._vectors[text]


def _drop_search(picked: list[str], rules: Mapping[str, float], low: str) -> list[str]:
    """Search rides along only when it is as strongly asked for as the computation, and never
    for the user's own figures."""
    others = [n for n in picked if n != SEARCH]
    if SEARCH in picked and others and (T.personal_figure(low) or max(rules[n] for n in others) > rules[SEARCH]):
        return others
    return picked


def prototypes_for(embedder: Embedder | None) -> PrototypeIndex | None:
    """The gate's prototypes, only when they were built with this embedder (``bara.understand.prototypes``)."""
    return load_matching(embedder)[0]


def use_part(description: str) -> str:
    """The "use for" half of a tool description (before its first "Do NOT")."""
    return description.split("Do NOT")[0].strip() or description


# ------------------------------------------------------------------ arguments
def advice_calls(spans: list[str], low: str, label: Callable[[str], str] = str) -> tuple[Call, ...]:
    if len(spans) >= 2:
        return (Call("compare_funds", {"schemes": spans[:MAX_COMPARE]}),)
    if spans:
        return (Call(SEARCH, {"query": f"{label(spans[0])} category, fund house and trailing returns", "limit": 3}),)
    return (Call("get_holdings", {}),) if T.PERSONAL.search(low) else ()


def explain_calls(spans: list[str], low: str) -> tuple[Call, ...]:
    if len(spans) >= 2:
        return (Call("compare_funds", {"schemes": spans[:MAX_COMPARE]}),)
    if spans:
        return Call("get_holdings", {}), Call("compute_xirr", {"scheme": spans[0]})
    if T.PERSONAL.search(low):
        return Call("get_holdings", {}), Call("compute_xirr", {})
    return ()


def _compare_fallback(text: str, low: str, spans: list[str], picked: list[str]) -> Plan:
    """compare_funds needs two schemes: compare the user's own funds, or look one fund up."""
    if T.PERSONAL.search(low) and not spans:
        return Plan("compare_held", (Call("get_holdings", {}),), reasons=("router:compare_own_holdings",))
    query = f"{spans[0]} trailing returns, volatility and drawdown" if spans else search_query(text)
    return Plan("tools", (Call(SEARCH, {"query": query, "limit": 5}),), reasons=("router:compare_one_fund_search",))


def tool_args(name: str, text: str, low: str, spans: list[str]) -> dict[str, Any]:
    if name == SEARCH:
        return {"query": search_query(text), "limit": 5}
    if name == "compare_funds":
        return {"schemes": spans[:MAX_COMPARE]}
    if name == "asset_allocation":
        return {"by": T.allocation_by(low)}
    args: dict[str, Any] = {"scheme": spans[0]} if spans and name in ("compute_xirr", "get_transactions") else {}
    if name == "get_transactions":
        args.update(date_range(T.normal(text)))
    return args


def search_query(text: str) -> str:
    query = " ".join(text.split())[:300]
    return query if len(query) >= 3 else "mutual fund basics"


def extract_schemes(text: str) -> list[str]:
    """Scheme names, AMFI codes and ISINs named in the message, in order, without repeats."""
    found = T.QUOTED.findall(text) + T.CODE.findall(text) + T.ISIN.findall(text)
    found += [span for span in T.name_runs(text) if not T.CODE.fullmatch(span)]
    return list(dict.fromkeys(s.strip() for s in found if s.strip()))
