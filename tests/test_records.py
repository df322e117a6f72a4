"""Frozen records between stages (issue 9): their JSON is exactly the dicts they replaced, key order
included, and the settings that replaced module constants reach the code that reads them."""

from __future__ import annotations

import dataclasses
import json

import pytest

from bara.decide.policy import PolicyDecision
from bara.eval.ab_rows import ScoreRow
from bara.eval.conversation_replay import TurnCost
from bara.eval.gate import Confusion, GateReport, GroupStats, NecessityMetrics
from bara.eval.retrieval import ArmReport, RetrievalReport, SkippedArm
from bara.eval.tools_bfcl import CategoryFigures, DataFile, ToolFigures, ToolScore, ToolsReport
from bara.settings import Settings
from bara.trace import (AgentRecord, GateRecord, StoredRecord, TokenUsage, ToolCallTrace, TurnTrace)
from bara.types import ROUTES, Route


def test_trace_records_are_frozen_and_absent_fields_are_absent_not_null():
    stored = StoredRecord(turn=False, veto_reason="experiment")
    with pytest.raises(dataclasses.FrozenInstanceError):
        stored.turn = True  # type: ignore[misc]
    trace = TurnTrace(turn=1, user="u", mode="gated", conversation_id="c", stored=stored)
    out = trace.to_json()
    assert out["stored"] == {"turn": False, "veto_reason": "experiment"} and out["gates"] == {}
    assert list(StoredRecord(turn=True, profile_facts={}, notes=("a",), qa=False).as_dict()) == [
        "turn", "profile_facts", "notes", "qa"]
    assert TurnTrace(turn=1, user="u", mode="m", conversation_id="c").to_json()["stored"] == {}


def test_agent_record_json_keeps_the_old_key_order():
    call = ToolCallTrace(name="search_documents", args={"query": "x"}, ok=True, error=None, latency_ms=1.23456,
                         iteration=1)
    agent = AgentRecord(status="complete", error=None, model_calls=2, iterations=2, tools_offered=("a", "b"),
                        usage=TokenUsage(3, 4), tool_calls=(call,))
    gates = TurnTrace(turn=1, user="u", mode="agent", conversation_id="c",
                      gates=GateRecord(features={}, intent={}, behavior={}, policy={}, state={}, agent=agent)
                      ).to_json()["gates"]
    assert list(gates) == ["features", "intent", "behavior", "policy", "state", "agent"]
    assert json.dumps(gates["agent"]) == json.dumps(
        {"status": "complete", "error": None, "model_calls": 2, "iterations": 2, "tools_offered": ["a", "b"],
         "usage": {"input_tokens": 3, "output_tokens": 4},
         "tool_calls": [{"name": "search_documents", "args": {"query": "x"}, "ok": True, "error": None,
                         "latency_ms": 1.2346, "iteration": 1}]})


def test_policy_injects_reads_each_tier_flag():
    p = PolicyDecision(inject_notes=True, inject_episodic=True)
    assert [t for t in ("kb", "profile", "notes", "qa", "episodic") if p.injects(t)] == ["notes", "episodic"]
    route: Route = "notes"
    assert route in ROUTES and ROUTES[0] == "llm_only"


def test_gate_report_json_is_the_old_dict():
    m = NecessityMetrics(0.9, 0.8, None, 1.0)
    report = GateReport(n=3, full=m, confusion=Confusion(1, 0, 1, 1), latency_ms={"p50": 1.0, "p95": 2.0},
                        rules_only=m, rules_latency_ms={"p50": 0.1, "p95": 0.2}, gate="rules only", embedder=None,
                        needs_retrieval=2, no_retrieval=1, by_group={"g": GroupStats(3, None, 0.5, 1.0)},
                        problems={}, data_path="p", data_sha256="s")
    out = report.as_dict()
    assert list(out) == ["n", "accuracy", "skip_precision", "skip_recall", "retrieve_recall", "confusion",
                         "latency_ms", "rules_only", "gate", "embedder", "labels", "by_group", "problems", "data"]
    assert out["rules_only"] == {**m.as_dict(), "latency_ms": {"p50": 0.1, "p95": 0.2}}
    assert out["by_group"]["g"] == {"n": 3, "needs_retrieval": None, "accuracy": 0.5, "retrieve_rate": 1.0}


def test_tools_report_splits_leave_out_timings():
    figures = ToolFigures(1, 1.0, None, 1, 0, {"multiple": CategoryFigures(1, 1.0)}, {"p50": 1.0}, {"E": 1})
    out = ToolsReport(ToolScore(figures, {"dev": figures, "test": figures}), "rule-router", {},
                      (DataFile("a", "b"),)).as_dict()
    assert list(out) == ["n", "selection_accuracy", "irrelevance_abstention", "n_selection", "n_irrelevance",
                         "by_category", "latency_ms", "model_errors", "splits", "model", "problems", "data"]
    assert "latency_ms" not in out["splits"]["dev"] and "model_errors" not in out["splits"]["test"]
    assert out["data"] == [{"path": "a", "sha256": "b"}]


def test_retrieval_report_json_order():
    arm = ArmReport({"ndcg@10": 0.5, "recall@100": 0.9}, {"p50": 1.0}, {"search": {"p50": 1.0}})
    out = RetrievalReport("scifact", 2, 3, {}, {"hybrid": arm, "rerank": SkippedArm("no model")}).as_dict()
    assert json.dumps(out) == json.dumps(
        {"dataset": "scifact", "n_queries": 2, "n_docs": 3, "problems": {},
         "arms": {"hybrid": {"ndcg@10": 0.5, "recall@100": 0.9, "latency_ms": {"p50": 1.0},
                             "stages_ms": {"search": {"p50": 1.0}}}, "rerank": {"skipped": "no model"}}})


def test_score_row_adds_whole_conversation_keys_only_when_set():
    row = ScoreRow("t", "gated", "h", "sha", "ANSWERABLE", "N/A", ("q",), "c", True, 1, 10, ("d",), ("d",),
                   "q?", "a", "answer", 0.5, 0.5, {"total": 1.0}, "rag", "general", "")
    assert "turns" not in row.as_dict() and "after_inserted" not in row.as_dict()
    whole = dataclasses.replace(row, turns=(TurnCost(True, False, 0, 0, 1.0),), after_inserted=False).as_dict()
    assert list(whole)[-2:] == ["turns", "after_inserted"] and whole["turns"][0]["inserted"] is True


def test_moved_constants_are_settings_and_reach_the_code():
    from bara.understand.features import followup_score
    from bara.understand.rewrite import RewriteRules

    s = Settings()
    assert (s.intent_confidence_default, s.gate_followup_weight_starter, s.state_history_window,
            s.gate_curate_scan_windows, s.rerank_latency_ema_alpha) == (0.4, 0.4, 8, 4, 0.3)
    assert RewriteRules.from_settings(s) == RewriteRules()
    assert RewriteRules.from_settings(s.override(rewrite_max_terms=0)).max_terms == 0
    assert followup_score(("starter",)) == 0.4
    assert followup_score(("starter",), s.override(gate_followup_weight_starter=0.7)) == 0.7


def test_intent_confidences_and_state_window_come_from_settings():
    from bara.understand.features import compute_features
    from bara.understand.intent import apply_rules
    from bara.understand.state import ConversationState, update_state

    features = compute_features("hello there", [], {})
    assert apply_rules(features).confidence == 0.9  # type: ignore[union-attr]
    assert apply_rules(features, Settings(intent_confidence_greeting=0.5)).confidence == 0.5  # type: ignore[union-attr]
    small = Settings(state_history_window=2)
    state = None
    for text in ("what is tcp", "what is udp", "what is dns"):
        f = compute_features(text, [], {}, settings=small)
        state = update_state(state, text, apply_rules(f, small), f, small)  # type: ignore[arg-type]
    assert state is not None and state.recent_queries == ("what is udp", "what is dns")
    assert ConversationState.from_dict({"recent_queries": ["a", "b", "c"]}, small).recent_queries == ("b", "c")
