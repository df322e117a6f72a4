"""Weighted RRF against hand-computed cases."""

import pytest

from bara.text.fusion import weighted_rrf


def test_two_lists_hand_computed():
    # a: 1/(60+1) + 1/(60+2) ; b: 1/(60+2) + 1/(60+1) ; c: 1/(60+3) only in list 1
    fused = dict(weighted_rrf([["a", "b", "c"], ["b", "a"]], [1.0, 1.0], k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert fused["c"] == pytest.approx(1 / 63)


def test_missing_from_one_arm_gets_nothing_from_it():
    fused = dict(weighted_rrf([["x"], ["y"]], [1.0, 1.0], k=60))
    assert fused == {"x": pytest.approx(1 / 61), "y": pytest.approx(1 / 61)}


def test_weights_scale_contributions():
    fused = dict(weighted_rrf([["a"], ["b"]], [2.0, 0.5], k=10))
    assert fused["a"] == pytest.approx(2.0 / 11)
    assert fused["b"] == pytest.approx(0.5 / 11)
    assert [d for d, _ in weighted_rrf([["a"], ["b"]], [0.5, 2.0], k=10)] == ["b", "a"]


def test_order_and_ties_are_deterministic():
    out = weighted_rrf([["a", "b"], ["b", "a"]], [1.0, 1.0], k=1)
    # equal scores (1/2 + 1/3 each): tie broken by best rank (both 1), then first appearance
    assert [d for d, _ in out] == ["a", "b"]
    assert weighted_rrf([["a", "b"], ["b", "a"]], [1.0, 1.0], k=1) == out


def test_empty_lists_and_bad_arguments():
    assert weighted_rrf([[], []], [1.0, 1.0]) == []
    with pytest.raises(ValueError):
        weighted_rrf([["a"]], [1.0, 1.0])
    with pytest.raises(ValueError):
        weighted_rrf([["a"]], [1.0], k=0)


def test_single_list_keeps_its_order():
    assert [d for d, _ in weighted_rrf([["c", "a", "b"]], [1.0])] == ["c", "a", "b"]
