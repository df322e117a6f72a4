"""curate_history: recent window plus similar older turns for continuations (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from bara.memory.conversations import StoredMessage
from bara.memory.history import curate_history

DIM = 4


def unit(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i % DIM] = 1.0
    return v


def convo(n_turns: int) -> list[StoredMessage]:
    out = []
    for t in range(n_turns):
        out.append(StoredMessage("c", "u", 2 * t + 1, "user", f"q{t}", float(t)))
        out.append(StoredMessage("c", "u", 2 * t + 2, "assistant", f"a{t}", float(t)))
    return out


def texts(msgs) -> list[str]:
    return [m.text for m in msgs]


def test_last_n_only_when_not_a_continuation():
    msgs = convo(5)
    assert texts(curate_history(msgs, 4, False)) == ["q3", "a3", "q4", "a4"]
    assert texts(curate_history(msgs, 0, False)) == []
    assert texts(curate_history(msgs, 50, False)) == texts(msgs)
    assert curate_history([], 4, True, unit(0), np.zeros((0, DIM))) == ()


def test_continuation_adds_most_similar_older_turns_in_order():
    msgs = convo(6)  # turns 0..5; the last 4 messages are turns 4 and 5
    vectors = np.stack([unit(1)] * len(msgs))
    vectors[2 * 3 + 1] = unit(0)  # a3 matches the query
    vectors[2 * 1] = unit(0)  # q1 matches the query
    got = curate_history(msgs, 4, True, unit(0), vectors)
    assert texts(got) == ["q1", "a1", "q3", "a3", "q4", "a4", "q5", "a5"]


def test_older_k_and_floor():
    msgs = convo(6)
    vectors = np.stack([unit(1)] * len(msgs))
    vectors[0] = unit(0)
    assert texts(curate_history(msgs, 4, True, unit(0), vectors, older_k=1)) == ["q0", "a0", "q4", "a4", "q5", "a5"]
    assert texts(curate_history(msgs, 4, True, unit(0), vectors, older_k=1, floor=1.5)) == ["q4", "a4", "q5", "a5"]
    assert texts(curate_history(msgs, 4, True, unit(0), None)) == ["q4", "a4", "q5", "a5"]


def test_is_pure_and_checks_alignment():
    msgs = convo(3)
    before = list(msgs)
    curate_history(msgs, 2, True, unit(0), np.stack([unit(0)] * len(msgs)))
    assert msgs == before
    with pytest.raises(ValueError, match="align"):
        curate_history(msgs, 2, True, unit(0), np.stack([unit(0)] * 2))
