"""Issue 31, round 3 session 9: the rewrite's static word similarities (``sim_msg``, ``central``).

The similarity features pick the referent a bare follow-up leaves out when the lexical features
prefer the wrong word; without model files the rewrite still works, the features are 0 and the
trace says so; the WordPiece split matches the model's own tokenizer.
"""

from __future__ import annotations

import importlib.util

import pytest

from bara.types import Utterance
from bara.understand import word_vectors
from bara.understand.rewrite import RewriteRules, history_view, rewrite_query
from bara.understand.term_scorer import FEATURES, history_candidates

# "largest one" refers to the conversation's topic (mammals), not to the previous turn's "legs".
HISTORY = (Utterance("user", "What are mammals?"),
           Utterance("assistant", "Mammals are warm-blooded vertebrates with hair that nurse their young."),
           Utterance("user", "How many legs do they have?"),
           Utterance("assistant", "Most have four legs, but whales have none."))
MESSAGE = "What is the largest one on land?"


def _fresh() -> None:
    history_view.cache_clear()
    history_candidates.cache_clear()
    word_vectors.reset()


@pytest.fixture
def vectors():
    _fresh()
    found = word_vectors.static_vectors()
    if found is None:
        pytest.skip(f"no MiniLM weights here ({word_vectors.unavailable_reason()})")
    yield found
    _fresh()


def _without_similarity() -> RewriteRules:
    weights = dict(RewriteRules().weights, sim_msg=0.0, central=0.0)
    return RewriteRules(term_weights=tuple(sorted(weights.items())))


def test_similarity_picks_the_topic_as_the_referent(vectors):
    result = rewrite_query(MESSAGE, HISTORY)
    assert "mammals" in result.carried, result.reasons
    term = next(r for r in result.reasons if r.startswith("term:mammals="))
    assert "central=" in term and not any(r.startswith("similarity_off") for r in result.reasons)
    # the same scorer with the two similarity weights at 0 leaves the topic out: the feature decides
    assert "mammals" not in rewrite_query(MESSAGE, HISTORY, rules=_without_similarity()).carried


def test_topic_words_are_more_central_than_a_passing_word(vectors):
    topic, passing = vectors.vector("mammals"), vectors.vector("legs")
    others = [vectors.vector(w) for w in ("vertebrates", "whales", "hair", "young")]
    assert topic is not None and passing is not None and all(v is not None for v in others)
    assert sum(float(topic @ v) for v in others) > sum(float(passing @ v) for v in others)


def test_without_model_files_the_rewrite_still_works(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a, **k: None if name == "all_minilm_l6_v2" else real(name, *a, **k))
    _fresh()
    try:
        result = rewrite_query(MESSAGE, HISTORY)
        assert word_vectors.static_vectors() is None
        assert "similarity_off:no_model_files" in result.reasons
        assert result.changed and result.carried  # still a rewrite, from the lexical features
        view = history_view(tuple(HISTORY), RewriteRules())
        from bara.understand.term_scorer import candidate_features

        sims = [c.features[FEATURES.index(n)] for c in candidate_features(MESSAGE, view.users, view.replies)
                for n in ("sim_msg", "central")]
        assert sims and not any(sims)
    finally:
        monkeypatch.undo()
        _fresh()


WORDS = ["mammals", "Lamborghini", "café", "naïve", "Zürich", "東京", "o\u2019neill", "1.12-micron", "ER-2", "x" * 120,
         "résumé", "TLS1.2", "well-being", "C++", "#hashtag", "\u00e9t\u00e9"]


def test_wordpiece_matches_the_models_tokenizer(vectors):
    pytest.importorskip("tokenizers")
    from bara.retrieval.embedders import load_tokenizer

    tokenizer = load_tokenizer(256)
    for word in WORDS:
        assert word_vectors.wordpiece_ids(word, vectors.ids, vectors.longest) == \
            tokenizer.encode(word, add_special_tokens=False).ids, word
