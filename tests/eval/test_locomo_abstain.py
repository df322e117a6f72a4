"""Issue 38: the abstention figures of `bara eval memory` and its --conversations selection."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.eval.locomo import QuestionRow
from bara.eval.locomo_abstain import SAME, SWAPPED, abstention, adversarial_kind
from bara.eval.locomo_data import load_locomo

ABSTAIN_KEYS = {"false_abstain_answerable", "abstain_precision", "abstain_adversarial_split"}


@pytest.fixture(scope="module")
def conv26(data_dir):
    return data_dir / "locomo" / "conv-26.json"


def _run(args):
    from bara.cli import app

    return CliRunner().invoke(app, ["eval", "memory", *args])


def _row(category: int, abstained: bool, kind: str = "") -> QuestionRow:
    return QuestionRow("c", "q?", category, ("D1:1",), [], 0, 0.0, abstained, adversarial_kind=kind)


def test_abstention_shares_precision_and_split():
    rows = [_row(5, True, SWAPPED), _row(5, True, SWAPPED), _row(5, False, SWAPPED), _row(5, False, SAME),
            _row(5, False), _row(1, True), _row(2, False), _row(4, False), _row(4, False)]
    got = abstention(rows)
    assert got["false_abstain_answerable"] == 0.25  # 1 of 4 answerable flagged
    assert got["abstain_precision"] == round(2 / 3, 4)  # 2 of the 3 flagged are adversarial
    assert got["abstain_adversarial_split"] == {SWAPPED: round(2 / 3, 4), f"n_{SWAPPED}": 3, SAME: 0.0,
                                                f"n_{SAME}": 1}
    assert abstention([_row(1, False)])["abstain_precision"] is None  # nothing flagged


def test_adversarial_kind_reads_who_said_the_evidence(conv26):
    conv = load_locomo(conv26)
    by_question = {q.question: q for q in conv.questions}
    # D2:3, the realisation after the charity race, is Melanie's turn; the question names Caroline
    assert adversarial_kind(conv, by_question["What did Caroline realize after her charity race?"]) == SWAPPED
    # D4:3, the necklace from her grandma, is Caroline's own turn with one detail changed (grandpa)
    assert adversarial_kind(conv, by_question["What was grandpa's gift to Caroline?"]) == SAME
    answerable = next(q for q in conv.questions if q.category != 5)
    assert adversarial_kind(conv, answerable) == ""


def test_json_has_the_abstention_keys_per_mode_and_per_category(conv26):
    result = _run(["--locomo", str(conv26), "--sessions", "2", "--limit", "8", "--modes", "turns,gated", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    for mode in ("turns", "gated"):
        metrics = data["modes"][mode]
        assert ABSTAIN_KEYS <= set(metrics), mode
        assert set(metrics["abstain_adversarial_split"]) == {SWAPPED, SAME, f"n_{SWAPPED}", f"n_{SAME}"}
        assert 0.0 <= metrics["false_abstain_answerable"] <= 1.0
        for cat in data["by_category"][mode].values():
            assert "false_abstain_answerable" in cat and "abstain_precision" not in cat


def test_conversations_selects_and_an_unknown_one_exits_2(conv26, data_dir):
    conv30 = data_dir / "locomo" / "conv-30.json"
    args = ["--locomo", str(conv26), str(conv30), "--sessions", "1", "--limit", "2", "--modes", "turns", "--json"]
    picked = _run([*args, "--conversations", "conv-30"])
    assert picked.exit_code == 0, picked.output
    assert json.loads(picked.stdout)["n_questions"] == 2  # one conversation of two, 2 questions each
    wrong = _run([*args, "--conversations", "conv-99"])
    assert wrong.exit_code == 2 and "error:" in wrong.output and "conv-99" in wrong.output
    assert "conv-26" in wrong.output  # says which ids there are
