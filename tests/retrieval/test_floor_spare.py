"""The gated turn spares the full-text arm's first candidates from the cosine floor (issue 16 round 12:
``gate_kb_floor_spare_lexical``): the floor judges a hit by the dense arm alone, and a chunk the
lexical arm ranks first has evidence of its own. The always baseline applies its floor unchanged."""

from __future__ import annotations

import pytest
from test_hybrid import XYLO_QUERY, XYLO_TOPICS

from bara.app import Bara
from bara.memory.knowledge import KnowledgeBase
from bara.turn.gated import Assistant
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore


def _turn(tmp_path, embedder, mode: str, **overrides):
    settings = Settings(db=str(tmp_path / f"{mode}.db"), cache_dir=tmp_path / "c", **overrides)
    store = SQLiteStore(settings.db)
    kb = KnowledgeBase(store, embedder, settings)
    for n, text in enumerate(XYLO_TOPICS):
        kb.add_text(f"doc{n}", text)
    with Bara(settings, store=store, embedder=embedder) as bara:
        return Assistant(bara, mode=mode).turn("alice", XYLO_QUERY).trace


#: every hit below the floor (none of these texts is that close to the query), no relative gap
STRICT = {"floor_kb": 0.99, "floor_general": 0.99, "floor_continuation": 0.99, "gate_kb_relative_gap": 2.0,
          "gate_kb_floor_spare_margin": 2.0}


def test_a_gated_turn_keeps_the_lexical_arms_first_hits_below_its_floor_and_says_so(tmp_path, embedder):
    spared = _turn(tmp_path / "on", embedder, "gated", **STRICT)
    assert spared.retrieved and spared.kb_floor == 0.99
    assert sorted(h.lexical_rank or 0 for h in spared.hits) == [1, 2]  # the default spares two
    assert all(h.score < spared.kb_floor for h in spared.hits)
    assert "kb:floor_spared_lexical:2" in spared.reasons and spared.dropped_by_floor > 0


def test_without_the_spare_the_floor_drops_them(tmp_path, embedder):
    floored = _turn(tmp_path / "off", embedder, "gated", gate_kb_floor_spare_lexical=0, **STRICT)
    assert floored.hits == () and floored.dropped_hits
    assert not any(r.startswith("kb:floor_spared") for r in floored.reasons)


def test_one_spared_hit_when_the_setting_says_one(tmp_path, embedder):
    one = _turn(tmp_path / "one", embedder, "gated", gate_kb_floor_spare_lexical=1, **STRICT)
    assert [h.lexical_rank for h in one.hits] == [1] and "kb:floor_spared_lexical:1" in one.reasons


def test_a_spared_hit_still_meets_the_lower_floor(tmp_path, embedder):
    """The margin bounds the spare: at 0 the lower floor is the floor itself, so nothing below it is kept."""
    none = _turn(tmp_path / "m0", embedder, "gated", **{**STRICT, "gate_kb_floor_spare_margin": 0.0})
    assert none.hits == () and not any(r.startswith("kb:floor_spared") for r in none.reasons)


@pytest.mark.parametrize("spare", [0, 2])
def test_the_always_baseline_never_spares(tmp_path, embedder, spare):
    trace = _turn(tmp_path / str(spare), embedder, "always", gate_kb_floor_spare_lexical=spare)
    assert not any(r.startswith("kb:floor_spared") for r in trace.reasons)
    assert all(h.score >= 0.0 for h in trace.hits)  # its floor is 0, applied to every hit
