"""The gated turn's passage count (``bara.retrieval.agreement``): past the first two hits, a hit only one
retriever returned is dropped when the best hit has both behind it (``gate_kb_agreement_ratio``); the
always baseline shows its k hits unchanged."""

from __future__ import annotations

import pytest

from bara.app import Bara
from bara.memory.knowledge import KnowledgeBase
from bara.retrieval.agreement import agreement_cut, kept_by_agreement
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.turn.gated import Assistant
from bara.types import ArmScore, Hit, PipelineMode, RetrievalOutcome, Status, StoredChunk

C = 60  # rrf_k


def hit(i: int, lex: int | None, dense: int | None, rerank: float | None = None) -> Hit:
    fused = (1 / (C + lex) if lex else 0.0) + (1 / (C + dense) if dense else 0.0)
    chunk = StoredChunk(i, f"text {i}", f"doc{i}", "", "", "kb", "", 0, 0, 6)
    return Hit(chunk, rerank if rerank is not None else fused, 0.5, ArmScore(lex), ArmScore(dense), fused, rerank)


BOTH_THEN_DENSE = (hit(1, 1, 1), hit(2, 3, 2), hit(3, None, 3), hit(4, None, 4))


def test_hits_only_the_dense_arm_returned_go_when_the_best_has_both():
    kept = kept_by_agreement(BOTH_THEN_DENSE, ratio=0.6, keep=2, spare_lexical=2)
    assert [h.id for h in kept] == [1, 2]


def test_the_first_keep_hits_stay_whatever_their_score():
    hits = (hit(1, 1, 1), hit(2, None, 2), hit(3, None, 3))
    assert [h.id for h in kept_by_agreement(hits, 0.6, keep=2, spare_lexical=0)] == [1, 2]
    assert [h.id for h in kept_by_agreement(hits, 0.6, keep=1, spare_lexical=0)] == [1]


def test_the_lexical_arms_first_hits_are_spared():
    hits = (hit(1, 1, 1), hit(2, 4, 2), hit(3, 2, None), hit(4, 5, None))
    assert [h.id for h in kept_by_agreement(hits, 0.6, keep=2, spare_lexical=2)] == [1, 2, 3]
    assert [h.id for h in kept_by_agreement(hits, 0.6, keep=2, spare_lexical=0)] == [1, 2]


def test_nothing_is_cut_when_no_hit_has_both_arms_behind_it():
    """Relative, not absolute: a dense-only list (the full-text arm found nothing) keeps every hit."""
    hits = (hit(1, None, 1), hit(2, None, 2), hit(3, None, 3), hit(4, None, 4))
    assert kept_by_agreement(hits, 0.6, keep=2, spare_lexical=2) == hits


def test_off_at_ratio_zero_and_reranked_hits_are_left_alone():
    assert kept_by_agreement(BOTH_THEN_DENSE, 0.0, 2, 2) == BOTH_THEN_DENSE
    reranked = tuple(hit(h.id, h.lexical.rank, h.dense.rank, rerank=1.0 - h.id / 10) for h in BOTH_THEN_DENSE)
    assert kept_by_agreement(reranked, 0.6, 2, 2) == reranked


def test_the_outcome_says_how_many_went_and_keeps_the_floors_count():
    kb = RetrievalOutcome(Status.OK, "q", hits=BOTH_THEN_DENSE, n_dropped=3, reasons=("floor_spared_lexical:1",))
    out = agreement_cut(kb, 0.6, 2, 2)
    assert out is not None and [h.id for h in out.hits] == [1, 2]
    assert out.reasons == ("floor_spared_lexical:1", "single_arm_cut:2") and out.n_dropped == 3
    assert agreement_cut(kb, 0.0, 2, 2) is kb and agreement_cut(None, 0.6, 2, 2) is None


# Two passages share the query's words; three say the same thing in other words (only the dense arm finds
# them); the rest are off topic.
DOCS = ["To reset your password, open Settings and choose Reset password.",
        "A password reset link expires after one hour: request a new reset link if it has.",
        "Forgot your login credentials? The account recovery page sends a sign-in code to your phone.",
        "Locked out of the account? Recovering access starts from the sign-in screen's help link.",
        "Changing the passphrase of a profile is done from the security page.",
        "The cafeteria opens at nine and closes at three.", "Parking permits are renewed every January."]
QUERY = "how do I reset my password"


def _trace(tmp_path, embedder, mode: PipelineMode, **overrides):
    settings = Settings(db=str(tmp_path / f"{mode}.db"), cache_dir=tmp_path / "c", **overrides)
    store = SQLiteStore(settings.db)
    kb = KnowledgeBase(store, embedder, settings)
    for n, text in enumerate(DOCS):
        kb.add_text(f"doc{n}", text)
    with Bara(settings, store=store, embedder=embedder) as bara:
        return Assistant(bara, mode=mode).turn("alice", QUERY).trace


def _single_arm_past_keep(trace, keep: int = 2, spare: int = 2) -> list:
    return [h for h in trace.hits[keep:] if (h.lexical_rank is None or h.dense_rank is None)
            and not (h.lexical_rank is not None and h.lexical_rank <= spare)]


def test_a_gated_turn_drops_the_single_arm_hits_and_says_so(tmp_path, embedder):
    off = _trace(tmp_path / "off", embedder, "gated", gate_kb_agreement_ratio=0.0)
    single = _single_arm_past_keep(off)
    assert single, "the corpus must give the gated search single-arm hits past the first two"
    on = _trace(tmp_path / "on", embedder, "gated")
    assert not _single_arm_past_keep(on)
    assert [h.source for h in on.hits] == [h.source for h in off.hits if h not in single]
    assert f"kb:single_arm_cut:{len(single)}" in on.reasons
    assert not any(r.startswith("kb:single_arm_cut") for r in off.reasons)
    assert on.context_tokens < off.context_tokens


@pytest.mark.parametrize("ratio", [0.0, 0.6])
def test_the_always_baseline_shows_k_hits_whatever_the_setting(tmp_path, embedder, ratio):
    trace = _trace(tmp_path / str(ratio), embedder, "always", gate_kb_agreement_ratio=ratio)
    assert len(trace.hits) == 4 and not any(r.startswith("kb:single_arm_cut") for r in trace.reasons)
