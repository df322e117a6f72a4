"""The golden set end to end on the real AMFI data, in a temporary store, with the offline router.

The index holds every document a case needs plus distractors (a subset of the
1,345 fact sheets and 157 FiQA passages keeps the module quick); scores are
printed (`pytest -s`) and held to the floor measured when the set was written.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.domains.funds.assistant import AgentAssistant, fund_documents, index_fund_documents
from bara.domains.funds.golden import (CATEGORIES, Facts, answer_numbers, doc_subset, run_golden, short_name)
from bara.domains.funds.golden_cases import CASES
from bara.app import Bara
from bara.cli import app
from bara.domains.funds import create_demo_users, load_amfi
from bara.errors import InputError
from bara.llm.base import ModelResponse
from bara.messages import AssistantMessage
from bara.settings import Settings

#: Per-category pass rate the offline router must keep on the dev split (tuned on; 1.0 everywhere when
#: written) and on the held-out test split (0.83-1.0 per category at the first honest run: a regression guard).
FLOOR = {"dev": 0.9, "test": 0.75}
DISTRACTOR_EVERY = 100  # every n-th scheme fact sheet and ...
FIQA_EVERY = 10 # ... every n-th FiQA passage are indexed besides the relevant ones


@pytest.fixture(scope="module")
def world(tmp_path_factory, data_dir, embedder):
    tmp = tmp_path_factory.mktemp("golden")
    settings = Settings(db=str(tmp / "golden.db"), cache_dir=tmp / "cache")
    bara = Bara(settings, embedder=embedder)
    load_amfi(bara.store, data_dir)
    create_demo_users(bara.store)
    codes, fiqa = doc_subset(Facts(bara.store), every=DISTRACTOR_EVERY)
    every_fiqa = [s.removeprefix("fiqa/") for s, _, _ in fund_documents(bara.store, data_dir, codes=())]
    fiqa |= set(every_fiqa[::FIQA_EVERY])
    report = index_fund_documents(bara, data_dir, codes=codes, fiqa_ids=fiqa)
    yield bara, data_dir, codes, fiqa, report
    bara.close()


@pytest.fixture(scope="module")
def golden(world):
    return run_golden(world[0])


def test_the_set_has_at_least_150_cases_in_four_categories():
    assert len(CASES) >= 150
    for category in CATEGORIES:
        assert sum(c["category"] == category for c in CASES) >= 10, category
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_golden_scores_with_the_offline_router(golden):
    splits = golden.splits()
    print("\ngolden:", json.dumps(splits), json.dumps(golden.totals()))
    for outcome in golden.outcomes:
        if not outcome.passed:
            print(f"FAIL {outcome.split} {outcome.id}: {outcome.detail}")
    assert set(splits) == {"dev", "test"}
    for split, scores in splits.items():
        assert set(scores) == set(CATEGORIES)
        for category, score in scores.items():
            assert score["total"] >= 10
            assert score["passed"] / score["total"] >= FLOOR[split], (split, category, golden.to_json()["failures"])


def test_portfolio_figures_never_reach_for_search(golden):
    for o in golden.outcomes:
        if o.category == "numeric" and not o.id.startswith("num-compare"):
            assert "search_documents" not in o.tools, o


def test_a_model_that_makes_things_up_fails_every_category(world):
    class Bluffer:
        name = "bluffer"

        def complete(self, messages, tools=(), *, deadline=None):
            return ModelResponse(AssistantMessage(text="Sure! It is 42.00 INR, up 3.5%; buy more."))

    picked = [next(c for c in CASES if c["category"] == cat) for cat in CATEGORIES]
    picked.append(next(c for c in CASES if c["id"] == "sel-definition"))
    report = run_golden(world[0], model=Bluffer(), cases=picked)
    assert report.categories() == {
        "numeric": {"passed": 0, "total": 1}, "retrieval": {"passed": 0, "total": 1},
        "refusal": {"passed": 0, "total": 1}, "tool_selection": {"passed": 0, "total": 2}}


def test_gate_decides_which_tools_are_offered(world):
    picked = [c for c in CASES if c["id"] in ("sel-greeting", "sel-thanks", "ref-named-user", "ref-scope-poem",
                                              "sel-xirr")]
    on = run_golden(world[0], gate_tools=True, cases=picked)
    off = run_golden(world[0], gate_tools=False, cases=picked)
    assert on.categories() == off.categories()
    assert on.totals()["tool_calls"] == off.totals()["tool_calls"]
    # six specs per model call that offers tools: only the XIRR turn's two calls with the gate on
    assert on.totals()["tool_specs_offered"] == 6 * 2
    assert off.totals()["tool_specs_offered"] == 6 * (len(picked) + 1)


def test_expected_figures_are_independent_and_sane(world):
    facts = Facts(world[0].store)
    assert facts.f_portfolio_value("u_asha") > 0
    assert -100 < facts.f_portfolio_xirr("u_asha") < 100
    assert facts.f_top_units("u_dev") > 0
    assert 0 < facts.f_top_house_pct("u_asha") <= 100
    assert facts.f_falling_user(None) in {"u_asha", "u_bilal", "u_chitra", "u_dev", "u_esha", "u_farhan"}
    assert short_name("Kotak Technology Fund - Direct Plan - Growth Option") == "Kotak Technology Fund"
    assert short_name("Mirae Asset Money Market Fund Direct Growth") == "Mirae Asset Money Market Fund"
    assert answer_numbers("INR 1,23,456.78 on 2026-08-21, +1.85%") == [123456.78, 1.85]


def test_indexing_is_idempotent(world):
    bara, data_dir, codes, fiqa, first = world
    again = index_fund_documents(bara, data_dir, codes=codes, fiqa_ids=fiqa)
    assert first.written == len(codes) + len(fiqa) and first.chunks >= first.written
    assert (again.written, again.unchanged, again.removed) == (0, first.written, 0)


def test_agent_turn_persists_and_traces_like_the_pipeline(world):
    assistant = AgentAssistant(world[0])
    first = assistant.turn("u_esha", "What is my XIRR?")
    second = assistant.turn("u_esha", "Thanks, that helps.", first.conversation_id)
    t1, t2 = first.trace, second.trace
    assert (t1.mode, t1.route, t1.turn, t2.turn) == ("agent", "agent", 1, 2)
    assert "tool:compute_xirr" in t1.reasons and "search:skipped" in t1.reasons and not t1.retrieved
    assert t1.gates.agent.tool_calls[0].name == "compute_xirr"
    assert "agent:tools_none_chitchat" in t2.reasons and t2.gates.agent.tools_offered == ()
    history = assistant.conversations.history("u_esha", first.conversation_id)
    assert [m.role for m in history] == ["user", "assistant", "user", "assistant"]
    json.dumps(t1.to_json())


def test_search_turn_records_hits_in_the_trace(world):
    result = AgentAssistant(world[0]).turn("u_bilal", "What is a fiat currency?")
    assert result.trace.retrieved and result.trace.hits and result.trace.retrieval_query
    assert all(h.source.startswith(("fiqa/", "amfi/scheme/")) for h in result.trace.hits)


def test_unknown_user_is_refused_with_a_clear_error(world):
    with pytest.raises(InputError, match="bara funds users"):
        AgentAssistant(world[0]).turn("u_nobody", "What is my XIRR?")


def test_eval_golden_cli_prints_the_four_categories(world, tmp_path):
    picked_db = world[0].settings.db
    args = ["eval", "golden", "--json", "--db", picked_db, "--case", "num-xirr", "--case", "ret-fiat",
            "--case", "ref-named-user", "--case", "sel-holdings"]
    result = CliRunner().invoke(app, args, env={"BARA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["categories"] == {"numeric": {"passed": 4, "total": 4}, "retrieval": {"passed": 1, "total": 1},
                                    "refusal": {"passed": 1, "total": 1},
                                    "tool_selection": {"passed": 1, "total": 1}}


def test_eval_golden_on_an_empty_store_says_what_to_run(tmp_path):
    result = CliRunner().invoke(app, ["eval", "golden", "--json", "--db", str(tmp_path / "empty.db")],
                                env={"BARA_CACHE_DIR": str(tmp_path / "cache")})
    assert result.exit_code == 2 and "bara funds load" in result.output
