"""Round-2 pre-registration: the file loads, one-sample ratio-of-sums intervals, gate verdicts from
confusion counts, per-criterion baselines, and the whole-conversation sums of a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from bara.eval.conversation_metrics import conversation_summary, turn_metrics
from bara.eval.gate import confusion, necessity_metrics
from bara.eval.prereg import Criterion, gate_confusion, gate_verdicts, judge, load_prereg, ratio_of_sums, verdict

ROUND2 = Path(__file__).resolve().parents[2] / "eval" / "preregistered_round2.toml"


def test_round2_file_loads_with_sources_baselines_and_mixing():
    p = load_prereg(ROUND2)
    by_id = {c.id: c for c in p.criteria}
    assert by_id["recall_vs_last2"].baseline == "last2" and by_id["calls_whole_conversation"].threshold == 0.75
    assert by_id["tokens_whole_conversation"].threshold == 0.6
    assert by_id["inserted_smalltalk_searched"].test == "at_most" and by_id["inserted_smalltalk_searched"].threshold == 0.1
    assert {c.id for c in p.criteria if c.source == "gate"} == {"smalltalk_skip_recall", "smalltalk_skip_precision"}
    assert p.mixing["rate"] == 0.3 and p.mixing["seed"]


def test_ratio_of_sums_is_the_pooled_rate_with_a_seeded_interval():
    num, den = [0, 1, 0, 2, 0], [3, 2, 4, 5, 1]  # 3 of 15
    a, b = ratio_of_sums(num, den, seed=1), ratio_of_sums(num, den, seed=1)
    assert a == b and a["estimate"] == 0.2 and a["n"] == 15 and a["ci"][0] <= 0.2 <= a["ci"][1]
    assert ratio_of_sums([0, 0], [0, 0]) is None


@pytest.mark.parametrize("test,ci,estimate,expected,point", [
    ("at_most", [0.02, 0.08], 0.05, "win", True),
    ("at_most", [0.06, 0.14], 0.09, "within noise", True),
    ("at_most", [0.12, 0.2], 0.15, "regression", False),
    ("at_least", [0.96, 0.99], 0.97, "win", True),
    ("at_least", [0.93, 0.97], 0.94, "within noise", False),
    ("at_least", [0.8, 0.9], 0.85, "regression", False),
])
def test_one_sample_verdicts(test, ci, estimate, expected, point):
    threshold = 0.1 if test == "at_most" else 0.95
    row = verdict(Criterion("x", "m", test, threshold=threshold), {"estimate": estimate, "ci": ci, "n": 50})
    assert row["verdict"] == expected and row["passed"] == (expected == "win") and row["point_met"] == point


def test_gate_verdicts_from_confusion_and_from_rounded_rates():
    labels = [False] * 600 + [True] * 2400  # 600 small talk
    retrieves = [False] * 570 + [True] * 30 + [False] * 6 + [True] * 2394
    counts = confusion(labels, retrieves).as_dict()
    assert counts == {"tp": 570, "fp": 6, "fn": 30, "tn": 2394}
    rates = necessity_metrics(labels, retrieves).as_dict()
    gate = {"n": 3000, **rates, "labels": {"needs_retrieval": 2400, "no_retrieval": 600}}
    assert gate_confusion(gate) == counts  # rebuilt from the rounded rates
    rows = {r["id"]: r for r in gate_verdicts(load_prereg(ROUND2), {**gate, "confusion": counts})}
    assert rows["smalltalk_skip_recall"]["estimate"] == 0.95 and rows["smalltalk_skip_recall"]["point_met"]
    assert rows["smalltalk_skip_recall"]["verdict"] == "within noise"  # 0.95 exactly: the CI straddles it
    assert rows["smalltalk_skip_precision"]["estimate"] == round(570 / 576, 4)
    assert rows["smalltalk_skip_precision"]["passed"] is (rows["smalltalk_skip_precision"]["ci"][0] >= 0.98)


def test_criteria_with_their_own_baseline_pair_against_it():
    p = load_prereg(ROUND2)
    tasks = [f"t{i}" for i in range(40)]
    per_task = {"gated": {"recall@5": {t: 0.5 for t in tasks}},
                "always": {"recall@5": {t: 0.5 for t in tasks}},
                "last2": {"recall@5": {t: 0.9 for t in tasks}}}
    rows = {r["id"]: r for r in judge(p, per_task)["verdicts"]}
    assert rows["recall_vs_always"]["estimate"] == 0.0 and rows["recall_vs_always"]["passed"]
    assert rows["recall_vs_last2"]["estimate"] == -0.4 and rows["recall_vs_last2"]["verdict"] == "regression"
    assert rows["calls_whole_conversation"]["verdict"] == "not evaluated"
    assert "smalltalk_skip_recall" not in rows  # judged from the gate report, not here


def test_turn_sums_and_summary_of_whole_conversation_rows():
    turns = [{"inserted": True, "kb": False, "calls": 0, "tokens": 0, "ms": 3.0},
             {"inserted": False, "kb": True, "calls": 2, "tokens": 100, "ms": 9.0},
             {"inserted": True, "kb": True, "calls": 1, "tokens": 50, "ms": 5.0}]
    row = {"task_id": "a", "turns": turns, "after_inserted": True}
    assert turn_metrics(row) == {"turns_all.retrieval_calls": 3.0, "turns_all.context_tokens": 150.0,
                                 "turns_all.n": 3.0, "inserted.searched": 1.0, "inserted.n": 2.0}
    assert turn_metrics({"task_id": "b"}) == {}
    out = conversation_summary([row, {"task_id": "b", "turns": turns[1:2], "after_inserted": False}],
                               {"a": 0.5, "b": 1.0})
    assert out["turns_all"]["n"] == 4 and out["turns_all"]["retrieval_calls"] == 1.25
    assert out["turns_all"]["context_tokens"] == 62.5 and out["inserted"] == {"n": 2, "retrieval_rate": 0.5}
    assert out["after_inserted"] == {"n": 1, "recall@5": 0.5}
