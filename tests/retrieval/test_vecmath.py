"""The short spellings of the turn's vector arithmetic (issue 16) give the long spellings' values, bit
for bit, on ordinary and on awkward vectors (zero, NaN, infinite, overflowing, underflowing, float64,
2-D, the wrong width)."""

from __future__ import annotations

import numpy as np
import pytest

from bara.settings import Settings
from bara.text.vecmath import as_f32, norm
from bara.understand.features import clip_unit, topic_similarity
from bara.understand.prototypes import PrototypeIndex, load_prototypes
from bara.understand.topic import compose_topic

DIM = 384
RNG = np.random.default_rng(16)


def unit(n: int = 1) -> np.ndarray:
    v = RNG.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


AWKWARD = {
    "unit": unit()[0],
    "random": RNG.standard_normal(DIM).astype(np.float32) * 3,
    "zero": np.zeros(DIM, np.float32),
    "nan": np.where(np.arange(DIM) == 5, np.nan, 0.1).astype(np.float32),
    "inf": np.where(np.arange(DIM) == 7, np.inf, 0.1).astype(np.float32),
    "overflowing": np.full(DIM, 3e19, np.float32),  # finite, but its squares are not
    "underflowing": np.full(DIM, 1e-30, np.float32),  # non-zero, but its squares are
    "float64": unit()[0].astype(np.float64),
    "row": unit(),  # shape (1, 384)
    "narrow": unit()[0][:100],
}


def test_norm_is_numpys():
    for vec in unit(50):
        assert norm(vec) == np.linalg.norm(vec)
        assert type(norm(vec)) is type(np.linalg.norm(vec))


def test_as_f32_is_asarray_ravel_and_reuses_a_ready_vector():
    for vec in AWKWARD.values():
        assert np.array_equal(as_f32(vec), np.asarray(vec, dtype=np.float32).ravel(), equal_nan=True)
    ready = unit()[0]
    assert as_f32(ready) is ready


@pytest.fixture(scope="module")
def index() -> PrototypeIndex:
    return load_prototypes()


@pytest.mark.parametrize("name", sorted(AWKWARD))
def test_nearest_accepted_answers_as_accepts_then_nearest(index, name):
    vec = AWKWARD[name]
    expected = index.nearest(vec) if index.accepts(vec) else None
    assert index.nearest_accepted(vec) == expected


def test_nearest_accepted_on_many_vectors_and_none(index):
    for vec in unit(200):
        assert index.nearest_accepted(vec) == index.nearest(vec)
    assert index.nearest_accepted(None) is None


def reference_similarity(message, history, recent_n):
    """topic_similarity as round 1 spelled it."""
    recent = np.asarray(history, dtype=np.float32)[-recent_n:]
    centre = recent.mean(axis=0)
    vec = np.asarray(message, dtype=np.float32).ravel()
    denom = float(np.linalg.norm(centre) * np.linalg.norm(vec))
    if denom == 0.0 or not np.isfinite(denom):
        return None
    return clip_unit(np.dot(centre, vec) / denom)


@pytest.mark.parametrize("n", [1, 2, 3, 5])
def test_topic_similarity_is_the_long_spelling(n):
    settings = Settings()
    for _ in range(20):
        message, history = unit()[0], list(unit(n))
        expected = reference_similarity(message, history, settings.gate_topic_recent_vectors)
        assert topic_similarity(message, history, settings) == expected
        assert topic_similarity(message, np.stack(history), settings) == expected
    message = unit()[0]
    for name in ("unit", "random", "zero", "nan", "inf", "overflowing", "underflowing", "float64"):
        vec = AWKWARD[name]
        expected = reference_similarity(message, [vec], settings.gate_topic_recent_vectors)
        assert topic_similarity(message, [vec], settings) == expected, name
        assert topic_similarity(vec, [message], settings) == reference_similarity(vec, [message], 3), name
    zero = AWKWARD["zero"]
    assert topic_similarity(unit()[0], [zero], settings) is None
    assert topic_similarity(zero, [unit()[0]], settings) is None


def reference_compose(message, previous, depends, weight):
    vec = np.asarray(message, dtype=np.float32).ravel().copy()
    if depends and previous is not None:
        prev = np.asarray(previous, dtype=np.float32).ravel()
        if prev.shape == vec.shape and np.all(np.isfinite(prev)):
            vec = vec + np.float32(weight) * prev
    length = float(np.linalg.norm(vec))
    return vec / length if length > 0 else vec


@pytest.mark.parametrize("name", ["unit", "random", "zero", "nan", "float64", "row", "narrow"])
@pytest.mark.parametrize("depends", [True, False])
def test_compose_topic_is_the_long_spelling_and_never_the_callers_array(name, depends):
    message = unit()[0]
    previous = AWKWARD[name]
    got = compose_topic(message, previous, depends, 0.8)
    assert np.array_equal(got, reference_compose(message, previous, depends, 0.8), equal_nan=True)
    zero = AWKWARD["zero"].copy()
    same = compose_topic(zero, previous, False, 0.8)
    assert same is not zero
    same[0] = 1.0
    assert zero[0] == 0.0
