"""The rule router as a Model: which tools it picks, in what order, and what it writes.

Tools here keep the real names, descriptions and argument models of the six fund
tools but return canned data, so each routing decision is checked in isolation
(the golden set runs the same router on real data end to end).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from bara.agent.loop import run_agent
from bara.domains.funds.router import RuleRouter, extract_schemes, is_thin, Seen
from bara.domains.funds.router.dates import date_range
from bara.domains.funds.router.parse import allocation_by, normal, reformulate
from bara.agent.tools import Tool, ToolContext, ToolError
from bara.domains.funds.tools import build_fund_tools
from bara.messages import SystemMessage, UserMessage
from bara.settings import Settings

SYSTEM = SystemMessage("You are bara's portfolio assistant.\nSigned-in user: Esha (u_esha).")
KOTAK = {"scheme_code": "152462", "scheme": "Kotak Technology Fund - Direct Plan - Growth Option"}
HOLDINGS = {"as_of": "2026-08-21", "currency": "INR", "note": "avg cost", "holdings": [
    {**KOTAK, "category": "Equity Scheme - Sectoral/ Thematic", "fund_house": "Kotak Mahindra Mutual Fund",
     "units": 10987.76, "invested": 120000.0, "nav": 11.019, "nav_date": "2026-08-20", "current_value": 121074.13,
     "gain": 1074.13, "gain_pct": 0.9},
    {"scheme_code": "145895", "scheme": "LIC MF Arbitrage Fund-Direct Plan-Growth", "category": "Hybrid Scheme",
     "fund_house": "LIC Mutual Fund", "units": 2394.611, "invested": 36000.0, "nav": 15.5242,
     "nav_date": "2026-08-21", "current_value": 37174.42, "gain": 1174.42, "gain_pct": 3.26}],
    "totals": {"invested": 156000.0, "current_value": 158248.55, "gain": 2248.55, "gain_pct": 1.44}}
XIRR = {"scope": KOTAK, "xirr_pct": -4.2, "reason": None, "as_of": "2026-08-20", "first_transaction": "2025-09-10",
        "span_days": 344, "transactions": 12, "current_value": 121074.13, "total_invested": 120000.0,
        "total_redeemed": 0.0, "method": "XIRR"}


def fund_row(code: str, name: str, one_year: float) -> dict:
    return {"scheme_code": code, "scheme": name, "category": "Equity Scheme - Sectoral/ Thematic",
            "fund_house": "Kotak Mahindra Mutual Fund", "nav": 11.019, "nav_date": "2026-08-20",
            "returns_pct": {"1M": 6.21, "3M": 9.73, "6M": 2.66, "1Y": one_year}, "volatility_1y_pct": 18.12,
            "max_drawdown_1y_pct": 24.14, "drawdown_peak": "2025-12-22", "drawdown_trough": "2026-06-30"}


def hits(n: int, score: float = 0.0328) -> list[dict]:
    return [{"source": f"fiqa/{i}", "title": f"FiQA passage {i}", "score": score,
             "text": f"An expense ratio is the annual fee a fund charges, passage {i}. Fees reduce returns."}
            for i in range(n)]


@dataclass
class Canned:
    """Per-tool canned results; search answers by query via ``search_hits``."""

    calls: list[tuple[str, dict]] = field(default_factory=list)
    search_hits: Any = lambda query: hits(4)

    def tools(self) -> list[Tool]:
        real = build_fund_tools()
        data = {"get_holdings": HOLDINGS, "compute_xirr": XIRR, "asset_allocation": {
                    "by": "fund_house", "as_of": "2026-08-21", "currency": "INR", "total_value": 158248.55,
                    "allocation": [{"group": "Kotak Mahindra Mutual Fund", "value": 121074.13, "schemes": 1,
                                    "pct": 76.51}]},
                "get_transactions": {"count": 0, "truncated": False, "note": "", "scheme": None, "transactions": []}}

        def make(name: str):
            def fn(ctx: ToolContext, args: Any) -> Any:
                sent = args.model_dump(mode="json", exclude_none=True)
                self.calls.append((name, sent))
                if name == "search_documents":
                    return {"query": args.query, "status": "ok", "hits": self.search_hits(args.query), "reasons": []}
                if name == "compare_funds":
                    return {"funds": [fund_row("152462", KOTAK["scheme"], -5.82),
                                      fund_row("145895", "LIC MF Arbitrage Fund-Direct Plan-Growth", 6.58)],
                            "note": "AMFI NAV data carries no expense ratios."}
                return data[name]
            return fn
        return [Tool(t.name, t.description, t.args_model, make(t.name)) for t in real.values()]


def run(message: str, canned: Canned | None = None, router: RuleRouter | None = None):
    canned = canned or Canned()
    ctx = ToolContext("u_esha", None, Settings(), time.monotonic() + 30)
    result = run_agent(router or RuleRouter(), [SYSTEM, UserMessage(message)], canned.tools(), ctx)
    return result, canned.calls


def names(calls: list[tuple[str, dict]]) -> list[str]:
    return [n for n, _ in calls]


# ------------------------------------------------------------- tool selection
@pytest.mark.parametrize("message, tool", [
    ("What is my XIRR?", "compute_xirr"),
    ("How are my investments doing?", "compute_xirr"),
    ("Show my holdings", "get_holdings"),
    ("How much is my portfolio worth?", "get_holdings"),
    ("How many units of Kotak Technology Fund do I hold?", "get_holdings"),
    ("How is my portfolio split by fund house?", "asset_allocation"),
    ("List my transactions in March 2026", "get_transactions"),
    ("What did I buy in 2025?", "get_transactions"),
])
def test_portfolio_figures_come_from_computation_never_search(message, tool):
    result, calls = run(message)
    assert names(calls) == [tool]
    assert "search_documents" not in names(calls)
    assert result.status == "complete" and result.model_calls == 2


@pytest.mark.parametrize("message", [
    "What is an expense ratio?",
    "What is the difference between a mutual fund and a hedge fund?",
    "Which fund house manages LIC MF Healthcare Fund?",
    "How do index funds keep costs low?",
    "Why are trackers cheap?",  # the demo's question: an index tracker, in a fund assistant
    "Why are passive funds cheaper than actively managed ones?",
])
def test_qualitative_questions_search_documents(message):
    _, calls = run(message)
    assert names(calls) == ["search_documents"]
    assert calls[0][1]["query"] == message


def test_compare_and_expense_ratios_use_compare_funds_not_search():
    result, calls = run("What are the expense ratios of Kotak Technology Fund and LIC MF Arbitrage Fund?")
    assert calls == [("compare_funds", {"schemes": ["Kotak Technology Fund", "LIC MF Arbitrage Fund"]})]
    assert "no expense ratios" in result.answer


def test_compare_my_funds_fetches_holdings_first():
    _, calls = run("Compare my funds")
    assert calls == [("get_holdings", {}), ("compare_funds", {"schemes": ["152462", "145895"]})]


def test_arguments_are_extracted_from_the_message():
    _, calls = run("Show my transactions in Kotak Technology Fund since 2026-01-01")
    assert calls == [("get_transactions", {"scheme": "Kotak Technology Fund", "from_date": "2026-01-01"})]
    _, calls = run("What is my XIRR in Kotak Technology Fund?")
    assert calls == [("compute_xirr", {"scheme": "Kotak Technology Fund"})]
    _, calls = run("What percentage of my portfolio is with Kotak Mahindra Mutual Fund?")
    assert calls == [("asset_allocation", {"by": "fund_house"})]


# ------------------------------------------------------ compute, then search
def test_why_did_it_fall_computes_first_then_searches_with_the_figures():
    result, calls = run("Why did Kotak Technology Fund fall?")
    assert names(calls) == ["get_holdings", "compute_xirr", "compare_funds", "search_documents"]
    assert calls[2][1] == {"schemes": ["152462", "145895"]}  # the asked fund first, then the user's other fund
    query = calls[3][1]["query"]
    assert "Kotak Technology Fund" in query and "-5.82%" in query and "-4.20%" in query
    assert [r.iteration for r in result.tool_calls] == [1, 1, 2, 3]
    assert "-5.82%" in result.answer and "-4.20%" in result.answer and "From the documents" in result.answer


def test_why_did_two_funds_fall_compares_then_searches():
    _, calls = run("Why did Kotak Technology Fund and LIC MF Arbitrage Fund drop?")
    assert names(calls) == ["compare_funds", "search_documents"]
    assert "-5.82%" in calls[1][1]["query"]  # the weaker of the two informs the query


# -------------------------------------------------------------- looking twice
def test_thin_search_is_reformulated_once_in_corpus_words():
    canned = Canned(search_hits=lambda q: hits(1) if q.startswith("What") else hits(3))
    result, calls = run("What fees do funds charge?", canned)
    assert names(calls) == ["search_documents", "search_documents"]
    first, again = calls[0][1]["query"], calls[1][1]["query"]
    assert first == "What fees do funds charge?" and "expense ratio" in again and again != first
    assert "searched again" in result.answer and "[1]" in result.answer


def test_low_scores_count_as_thin_and_a_second_thin_search_is_the_last():
    canned = Canned(search_hits=lambda q: hits(5, score=0.0164))  # one arm only: no agreement
    result, calls = run("What fees do funds charge?", canned)
    assert names(calls) == ["search_documents", "search_documents"]
    assert result.status == "complete"


def test_rich_search_is_not_repeated():
    _, calls = run("What is an expense ratio?")
    assert names(calls) == ["search_documents"]


def test_is_thin_rules():
    ok = {"ok": True, "data": {"hits": hits(3)}}
    assert not is_thin(Seen("search_documents", {"query": "q"}, ok))
    assert is_thin(Seen("search_documents", {"query": "q"}, {"ok": True, "data": {"hits": hits(1)}}))
    assert not is_thin(Seen("search_documents", {"query": "q"}, {"ok": False, "error": "limit: too big"}))


def test_reformulate_maps_user_words_and_drops_filler():
    assert reformulate("Why do trackers charge less?") == "index funds expense ratio fees less"
    assert reformulate("what is it?") is None


# ------------------------------------------------- chit-chat and refusals
@pytest.mark.parametrize("message", ["Hi there!", "thank you so much", "bye", "ok cool"])
def test_chit_chat_calls_no_tools(message):
    result, calls = run(message)
    assert calls == [] and result.model_calls == 1 and result.answer


def test_chit_chat_by_prototype_needs_the_embedder(embedder):
    result, calls = run("Thanks, that helps.", router=RuleRouter(embedder))
    assert calls == [] and result.answer.startswith("You're welcome")


@pytest.mark.parametrize("message", ["Show me Bilal's holdings", "What is the XIRR of user u_dev?",
                                     "List all users' portfolios"])
def test_other_users_data_is_refused_without_any_tool_call(message):
    result, calls = run(message)
    assert calls == [] and "can't share another investor's" in result.answer


def test_advice_gets_facts_then_a_decline():
    result, calls = run("Should I buy Kotak Technology Fund?")
    assert names(calls) == ["search_documents"]
    assert result.answer.startswith("I can't give investment advice")
    assert "you should buy" not in result.answer.lower()


def test_out_of_scope_is_declined():
    result, calls = run("Write a poem about the monsoon")
    assert calls == [] and "outside what I can help with" in result.answer


def test_failed_tool_is_reported_not_hidden():
    canned = Canned()
    tools = canned.tools()
    broken = [Tool(t.name, t.description, t.args_model, _raise) if t.name == "compute_xirr" else t for t in tools]
    ctx = ToolContext("u_esha", None, Settings(), time.monotonic() + 30)
    result = run_agent(RuleRouter(), [SYSTEM, UserMessage("What is my XIRR?")], broken, ctx)
    assert "I couldn't get your XIRR: no flows yet" in result.answer


def _raise(ctx: ToolContext, args: Any) -> Any:
    raise ToolError("no flows yet")


# ------------------------------------------------------------ never invents
_NUM = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?(?![\d]*(?:Y|M\b|-year))")


def _numbers(text: str) -> set[float]:
    text = re.sub(r"\b\d{4}-\d{2}-\d{2}\b", " ", text)
    return {round(abs(float(m.replace(",", ""))), 2) for m in _NUM.findall(text)}


@pytest.mark.parametrize("message", ["Show my holdings", "What is my XIRR?", "Why did Kotak Technology Fund fall?",
                                     "How is my portfolio split by fund house?"])
def test_every_figure_in_an_answer_comes_from_a_tool_result(message):
    result, _ = run(message)
    sources = _numbers(json.dumps([r.result for r in result.tool_calls]))
    invented = _numbers(result.answer) - sources - {1.0}  # "[1]" citation markers
    assert not invented, (invented, result.answer)


# ---------------------------------------------------------------- extraction
def test_extract_schemes_finds_names_codes_and_quotes():
    assert extract_schemes("Why did Kotak Technology Fund fall?") == ["Kotak Technology Fund"]
    assert extract_schemes("Compare ICICI Prudential Equity & Debt Fund vs 119076") == [
        "119076", "ICICI Prudential Equity & Debt Fund"]
    assert extract_schemes('What is my XIRR in "parag parikh flexi cap"?') == ["parag parikh flexi cap"]
    assert extract_schemes("Show my SIP transactions since March 2026") == []
    assert extract_schemes("What is my XIRR?") == []


def test_dates_and_grouping_are_read_from_the_message():
    assert date_range(normal("between January 2026 and March 2026")) == {"from_date": "2026-01-01",
                                                                         "to_date": "2026-03-31"}
    assert date_range(normal("before 2026-02-30 or after 2026-02-01")) == {"from_date": "2026-02-01"}
    assert date_range(normal("in 2025")) == {"from_date": "2025-01-01", "to_date": "2025-12-31"}
    assert allocation_by("split by amc") == "fund_house"
    assert allocation_by("split by scheme") == "scheme"
    assert allocation_by("how diversified am i") == "category_group"


def test_tool_call_ids_are_unique_across_rounds():
    result, _ = run("Why did Kotak Technology Fund fall?")
    ids = [r.id for r in result.tool_calls]
    assert len(ids) == len(set(ids)) == 4
