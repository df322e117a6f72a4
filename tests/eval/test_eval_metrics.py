"""Evaluation maths against hand-computed cases: answer scores, bootstrap, verdicts, ir-measures wiring."""

from __future__ import annotations

import math
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from bara import prompts as P
from bara.errors import InputError
from bara.eval.answers import (Judgement, answer_body, answer_kind, judge_agreement, lcs_length, normalize_answer,
                               parse_judgement, rouge_l, spearman, token_f1)
from bara.eval.gate import necessity_metrics
from bara.eval.prereg import (Criterion, bootstrap_ci, load_prereg, paired_bootstrap, retrieval_scores, row_metrics,
                              summarize, verdict)
from bara.eval.tools_bfcl import json_schema, question_text, safe_name, to_specs

ROOT = Path(__file__).resolve().parents[2]


# ------------------------------------------------------------------ answer scores
def test_normalize_follows_squad():
    assert normalize_answer("The  Cat, sat! on A mat.") == "cat sat on mat"


def test_token_f1_hand_computed():
    # pred {cat, sat}, ref {cat, sat, down}: P = 1, R = 2/3, F1 = 0.8
    assert token_f1("the cat sat", "a cat sat down") == pytest.approx(0.8)
    assert token_f1("cat cat", "cat") == pytest.approx(2 * 0.5 * 1 / 1.5)  # multiset overlap 1
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("dog", "cat") == 0.0


def test_rouge_l_lin_2004_example():
    # Lin (2004) 3.1: S1 "police killed the gunman" vs ref "police kill the gunman" (articles dropped by
    # the SQuAD normalisation): LCS = {police, gunman} = 2 of 3 tokens each -> F = 2/3.
    assert rouge_l("police killed the gunman", "police kill the gunman") == pytest.approx(2 / 3)
    # S3 "the gunman kill police": LCS 1 -> F = 1/3.
    assert rouge_l("the gunman kill police", "police kill the gunman") == pytest.approx(1 / 3)
    assert lcs_length("abcbdab", "bdcaba") == 4


def test_answer_body_strips_citations_and_sources():
    answer = "TCP retransmits. [1] It waits. [2]\nSources:\n[1] rfc793.txt\n[2] rfc6298.txt"
    assert answer_body(answer) == "TCP retransmits. It waits."


@pytest.mark.parametrize("answer, kind", [
    (P.NOT_FOUND, "abstain"), (P.NOTHING_RELEVANT, "abstain"), (P.CHITCHAT["low_entropy"], "clarify"),
    (P.chitchat_text("greeting", None), "canned"), ("", "canned"),
    ("Which ocean do you mean?", "clarify"), ("It is blue. [1]\nSources:\n[1] x", "answer"),
])
def test_answer_kind(answer, kind):
    assert answer_kind(answer) == kind


words = st.lists(st.sampled_from(["tcp", "ack", "the", "window", "loss", "a", "rto", "x"]), max_size=12).map(" ".join)


@given(words, words)
@hsettings(max_examples=80, deadline=None)
def test_answer_scores_bounded_and_symmetric(a, b):
    for score in (token_f1, rouge_l):
        assert 0.0 <= score(a, b) <= 1.0
        assert score(a, b) == pytest.approx(score(b, a))
    if normalize_answer(a):
        assert token_f1(a, a) == 1.0 and rouge_l(a, a) == 1.0


def test_spearman_and_judge_agreement():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert parse_judgement('sure: {"faithfulness": 4, "relevance": 5}') == Judgement(4.0, 5.0)
    assert parse_judgement("no json").error
    judged = [(Judgement(f, f), f / 5, f / 5) for f in (1, 2, 3, 4, 5)] + [(Judgement(None, None, "X"), 0, 0)]
    agreement = judge_agreement(judged)
    assert agreement["n"] == 6 and agreement["n_rated"] == 5 and agreement["faithfulness_vs_f1"] == 1.0
    assert agreement["errors"] == {"X": 1}


# ------------------------------------------------------------------ bootstrap
def test_bootstrap_is_seeded_and_sane():
    values = [0.1, 0.4, 0.35, 0.8, 0.0, 0.55, 0.9, 0.2]
    a, b = bootstrap_ci(values, 500, 0.95, seed=7), bootstrap_ci(values, 500, 0.95, seed=7)
    assert a == b and a[0] <= sum(values) / len(values) <= a[1]
    assert bootstrap_ci([0.5] * 10, 200, seed=1) == [0.5, 0.5]
    assert bootstrap_ci([], 200) is None


def test_paired_bootstrap_diff_and_ratio():
    base, treat = [2.0, 2.0, 4.0, 4.0], [1.0, 1.0, 2.0, 2.0]
    out = paired_bootstrap(treat, base, 500, 0.95, seed=3)
    assert out["diff"] == -1.5 and out["ratio"] == 0.5
    assert out["ratio_ci"] == [0.5, 0.5]  # every task halves: the ratio never moves
    assert paired_bootstrap([1.0], [1.0, 2.0]) is None


@pytest.mark.parametrize("test, ci, expected", [
    ("ratio_at_most", [0.4, 0.6], "win"), ("ratio_at_most", [0.6, 0.8], "within noise"),
    ("ratio_at_most", [0.75, 1.2], "regression"),
    ("not_lower", [0.01, 0.05], "win"), ("not_lower", [-0.02, 0.03], "within noise"),
    ("not_lower", [-0.05, -0.01], "regression"),
    ("not_higher", [-0.05, -0.01], "win"), ("not_higher", [0.01, 0.05], "regression"),
])
def test_verdicts(test, ci, expected):
    paired = {"ratio": sum(ci) / 2, "ratio_ci": ci, "diff": sum(ci) / 2, "diff_ci": ci}
    row = verdict(Criterion("c", "m", test, threshold=0.7), paired)
    assert row["verdict"] == expected
    assert row["passed"] == (expected == "win" if test == "ratio_at_most" else expected != "regression")
    assert verdict(Criterion("c", "m", test), None)["verdict"] == "not evaluated"


def test_preregistered_file_loads(tmp_path):
    prereg = load_prereg(ROOT / "eval" / "preregistered.toml")
    assert (prereg.baseline, prereg.treatment) == ("always", "gated")
    assert {c.metric for c in prereg.criteria} == {"retrieval_calls", "context_tokens", "recall@5", "answer_f1"}
    assert prereg.seed and len(prereg.sha256) == 64
    bad = tmp_path / "bad.toml"
    bad.write_text('[[criteria]]\nid = "x"\nmetric = "y"\ntest = "guess"\n')
    with pytest.raises(InputError):
        load_prereg(bad)


# ------------------------------------------------------------ retrieval metrics
def _row(task, mode, hits, relevant, answerability="ANSWERABLE", **extra):
    return {"task_id": task, "mode": mode, "hits": hits, "relevant": relevant, "answerability": answerability,
            "retrieved": bool(hits), "retrieval_calls": int(bool(hits)), "context_tokens": 10 * len(hits),
            "answer_f1": 0.5, "rouge_l": 0.5, "kind": "answer" if hits else "abstain", "question_types": ["Factoid"],
            "multi_turn": "N/A", "collection": "c", "latency_ms": {"total": 1.0}, **extra}


def test_retrieval_scores_use_ir_measures_values():
    rows = [_row("t1", "m", ["a", "b"], ["b", "c"]), _row("t2", "m", [], ["a"]), _row("t3", "m", ["x"], [])]
    scores = retrieval_scores(rows)
    assert set(scores) == {"m\tt1", "m\tt2"}  # t3 has no reference passages
    assert scores["m\tt1"]["recall@5"] == pytest.approx(0.5)
    ideal = 1 + 1 / math.log2(3)
    assert scores["m\tt1"]["ndcg@10"] == pytest.approx((1 / math.log2(3)) / ideal)
    assert scores["m\tt2"] == {"recall@5": 0.0, "ndcg@10": 0.0}


def test_mode_that_never_retrieves_scores_zero_recall():
    rows = [_row(f"t{i}", "always", ["a"], ["a"]) for i in range(6)]
    rows += [_row(f"t{i}", "never", [], ["a"]) for i in range(6)]
    prereg = load_prereg(ROOT / "eval" / "preregistered.toml")
    out = summarize(rows, ["always", "never"], prereg).as_dict()
    assert out["modes"]["never"]["recall@5"] == 0.0 and out["modes"]["never"]["retrieval_rate"] == 0.0
    assert out["modes"]["always"]["recall@5"] == 1.0 and out["modes"]["always"]["retrieval_rate"] == 1.0
    assert out["comparison"] is None and out["verdicts"] == []  # "gated" not among the modes


def test_row_metrics_only_where_defined():
    unanswerable = row_metrics(_row("t", "m", [], [], "UNANSWERABLE"), None)
    assert unanswerable["abstain_unanswerable"] == 1.0
    assert "answer_f1" not in unanswerable and "recall@5" not in unanswerable
    assert row_metrics(_row("t", "m", ["a"], ["a"]), {"recall@5": 1.0})["answer_rate_answerable"] == 1.0


# ---------------------------------------------------------------- gate, tools
def test_necessity_metrics_hand_computed():
    labels = [True, True, False, False, False]
    retrieves = [True, False, False, True, False]
    out = necessity_metrics(labels, retrieves).as_dict()
    assert out == {"accuracy": 0.6, "skip_precision": round(2 / 3, 4), "skip_recall": round(2 / 3, 4),
                   "retrieve_recall": 0.5}
    assert necessity_metrics([True], [True]).skip_precision is None


def test_bfcl_conversion():
    spec = {"type": "dict", "properties": {"x": {"type": "float"}, "xs": {"type": "tuple", "items": {"type": "any"}},
                                             "o": {"type": "integer", "optional": True}}, "required": ["x"]}
    schema = json_schema(spec)
    assert schema["type"] == "object" and schema["properties"]["x"]["type"] == "number"
    assert schema["properties"]["xs"] == {"type": "array", "items": {}} and "optional" not in schema["properties"]["o"]
    taken: set[str] = set()
    assert safe_name("math.sum", taken) == "math_sum" and safe_name("math_sum", taken) == "math_sum_2"
    problems: Counter = Counter()
    specs, names = to_specs([{"name": "a.b", "description": "d", "parameters": spec}, {"description": "no name"}],
                            problems)
    assert [s.name for s in specs] == ["a_b"] and names == {"a_b": "a.b"}
    assert problems == {"function spec without a name": 1}
    assert question_text([[{"role": "system", "content": "s"}, {"role": "user", "content": "q?"}]]) == "q?"
