"""Issue 16: the gated turn's caches and shortcuts give exactly what the uncached code gave.

Every cache added for the latency criterion is keyed by the text it reads (a pure function of it), so a new
message is simply a new key; these tests pin that a new message is seen, that repeated calls agree with the
first, and that each shortcut equals the long way round (bit for bit where numbers are involved).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from kb_helpers import rfc_bara
from bara.decide import decide
from bara.decide.record import gate_record, policy_snapshot, snapshot
from bara.turn.steps import states_facts, topical_history
from bara.settings import Settings
from bara.types import Utterance
from bara.understand.features import clip_unit, compute_features, topic_similarity
from bara.understand.rewrite import HistoryView, RewriteRules, has_content, history_view, rewrite_query
from bara.understand.topic import topic_dependence

CFG = Settings()
MESSAGES = ("hi there!", "How does TCP retransmission work?", "what about it?", "my name is Ana",
            "testing 123", "Tell me more", "can you answer in Italian?", "thanks, bye")


def test_rewrite_sees_a_new_message_after_its_history_was_cached():
    history = [Utterance("user", "What is IBM Cloudant?"),
               Utterance("assistant", "IBM Cloudant is a distributed JSON document database.")]
    first = rewrite_query("how do I back it up?", history)
    assert rewrite_query("how do I back it up?", history) == first  # served from the caches: same result
    history += [Utterance("user", "What is Db2 Warehouse?"),
                Utterance("assistant", "Db2 Warehouse is a managed analytics database.")]
    after = rewrite_query("how do I back it up?", history)
    assert "Db2 Warehouse" in after.query and after != first


def test_scanned_text_is_read_once_per_history_and_follows_the_rules():
    rules = RewriteRules()
    refused = (Utterance("user", "Cloudant backups explained"),
               Utterance("assistant", "Sorry, I cannot find that in the documents about Cloudant."))
    answered = (refused[0], Utterance("assistant", "Cloudant is a database."))
    assert history_view(refused, rules) is history_view(refused, rules)  # built once per distinct history
    # a reply that refuses reads as nothing (issue 31: the scan returns the text the rules read)
    assert HistoryView(refused, rules).replies == ("",)
    assert HistoryView(answered, rules).replies == ("Cloudant is a database.",)
    short = dataclasses.replace(rules, scan_chars=10)  # the scan length is part of what is read
    assert HistoryView(answered, short).users == ("Cloudant b",) and HistoryView(answered, short).replies == (
        "Cloudant i",)


def test_has_content_and_profile_statements_follow_the_text():
    assert has_content("Tell me about Cloudant") and not has_content("thanks!")
    assert states_facts("my name is Ana") and not states_facts("what is Cloudant?")
    messages = (Utterance("user", "my name is Ana"), Utterance("assistant", "Hello Ana"),
                Utterance("user", "What is Cloudant?"), Utterance("assistant", "A database."))
    assert [m.text for m in topical_history(messages)] == ["What is Cloudant?", "A database."]


@pytest.mark.parametrize("message", MESSAGES)
def test_the_two_phase_gate_equals_the_gate_in_one_call(message):
    from bara.decide import Conversation, Gate

    history = (Utterance("user", "What is Cloudant?"), Utterance("assistant", "A database."))
    vector = np.linspace(-1, 1, 8, dtype=np.float32)
    prior = vector[::-1].copy()
    gate = Gate(CFG)
    draft = gate.read(message, Conversation(history))
    decision = gate.conclude(draft, vector, prior, None, has_context=True)
    assert decision.result == decide(message, history, None, {}, CFG, message_vector=vector, history_vectors=[prior])
    assert decision.topic == topic_dependence(message, decision.result.features, vector, prior, True, CFG)
    assert decision.reasons == decision.result.reasons + (decision.topic.reason,)
    unread = gate.conclude(draft, None, None, None)
    assert unread.result == decide(message, history, None, {}, CFG) and unread.topic.reason == "topic:no_history"


def test_gate_snapshots_equal_asdict():
    gate = decide("How does TCP retransmission work?", (), None, {"name": "Ana"}, CFG)
    for record in (gate.features, gate.intent, gate.behavior, gate.policy):
        assert snapshot(record) == dataclasses.asdict(record)
    assert policy_snapshot(gate.policy) == {**dataclasses.asdict(gate.policy), "retrieves": gate.policy.retrieves}
    assert gate_record(gate).features == {k: v for k, v in dataclasses.asdict(gate.features).items()
                                          if k != "normalized"}


def test_snapshot_of_a_nested_record_is_a_deep_copy_like_asdict():
    @dataclasses.dataclass(frozen=True)
    class Inner:
        xs: list

    @dataclasses.dataclass(frozen=True)
    class Outer:
        inner: Inner
        tags: tuple

    outer = Outer(Inner([1, 2]), ("a",))
    out = snapshot(outer)
    assert out == dataclasses.asdict(outer) == {"inner": {"xs": [1, 2]}, "tags": ("a",)}
    out["inner"]["xs"].append(3)
    assert outer.inner.xs == [1, 2]


def _mean_cosine(message, history, recent):
    centre = np.asarray(history, dtype=np.float32)[-recent:].mean(axis=0)
    vec = np.asarray(message, dtype=np.float32).ravel()
    denom = float(np.linalg.norm(centre) * np.linalg.norm(vec))
    if denom == 0.0 or not np.isfinite(denom):
        return None
    return float(np.clip(np.dot(centre, vec) / denom, -1.0, 1.0))


def test_topic_similarity_is_bit_identical_to_the_numpy_mean():
    rng = np.random.default_rng(16)
    for i in range(300):
        message = rng.standard_normal(384).astype(np.float32)
        history = [rng.standard_normal(384).astype(np.float16).astype(np.float32) for _ in range(1 + i % 3)]
        if i % 5 == 0:
            history = [message.copy()]
        assert topic_similarity(message, history, CFG) == _mean_cosine(message, history,
                                                                      CFG.gate_topic_recent_vectors)
    assert topic_similarity(np.zeros(4, np.float32), [np.ones(4, np.float32)], CFG) is None


@pytest.mark.parametrize("value", [0.25, 1.0000001, -3.0, np.float32(1.0000001), np.float64(-0.5), float("nan")])
def test_clip_unit_equals_np_clip(value):
    expected, got = float(np.clip(value, -1.0, 1.0)), clip_unit(value)
    assert (np.isnan(expected) and np.isnan(got)) or expected == got


def test_topic_dependence_cosine_unchanged_by_clip_shortcut():
    a, b = np.array([1.0, 0.0], np.float32), np.array([1.0, 1e-8], np.float32)
    features = compute_features("What is IBM Cloudant?", (), {}, settings=CFG)
    topic = topic_dependence("What is IBM Cloudant?", features, a, b, True, CFG)
    assert topic.similarity == float(np.clip(np.dot(a, b) / float(np.linalg.norm(a) * np.linalg.norm(b)),
                                             -1.0, 1.0))


@pytest.fixture(scope="module")
def bara(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "turn_caches") as b:
        yield b


def test_the_rewrite_follows_the_assistants_settings(bara):
    from bara.app import Bara
    from bara.turn.gated import Assistant

    def follow_up(assistant, user: str) -> str:
        first = assistant.turn(user, "What is HTTP Strict Transport Security?")
        return assistant.turn(user, "and how is it preloaded?", first.conversation_id).trace.retrieval_query

    assistant = Assistant(bara)
    query = follow_up(assistant, "caches-rules-1")
    assert query.startswith("and how is it preloaded? ") and "Strict Transport Security" in query
    assert follow_up(assistant, "caches-rules-2") == query  # the same settings rewrite alike
    other = Bara(bara.settings.override(rewrite_max_terms=1), store=bara.store, embedder=bara.embedder)
    fewer = follow_up(Assistant(other), "caches-rules-3")  # an assistant over other settings rewrites by them
    assert fewer.startswith("and how is it preloaded? ") and len(fewer.split()) == len("and how is it preloaded?".split()) + 1


def test_rewrite_rules_are_built_from_the_assistants_settings(bara):
    from bara.app import Bara
    from bara.turn.gated import Assistant

    assert Assistant(bara).rewrite_rules == RewriteRules.from_settings(bara.settings)
    other = Bara(bara.settings.override(rewrite_lookback=2), store=bara.store, embedder=bara.embedder)
    assert bara.settings.rewrite_lookback != 2 and Assistant(other).rewrite_rules.lookback == 2


def test_hooks_still_run_at_every_point_when_registered(bara):
    from bara.turn.gated import Assistant

    assistant, seen = Assistant(bara), []
    for point in ("policy_override", "before_generation", "after_generation", "before_persist"):
        assistant.hooks.add(point, lambda value, ctx: seen.append(ctx.point))
    assistant.turn("caches-user", "What is HTTP Strict Transport Security?")
    assert seen == ["policy_override", "before_generation", "after_generation", "before_persist"]
    assert Assistant(bara).turn("caches-user-2", "What is HTTP Strict Transport Security?").trace.hook_errors == ()


def test_policy_step_equals_dataclasses_replace():
    from bara.decide.policy import PolicyDecision, _with

    gate = decide("How does TCP retransmission work?", (), None, {"name": "Ana"}, CFG)
    stepped = _with(gate.policy, "kb:test", kb_k=7, inject_qa=True)
    assert stepped == dataclasses.replace(gate.policy, reasons=gate.policy.reasons + ("kb:test",), kb_k=7,
                                          inject_qa=True)
    # the shortcut copies __dict__ as constructor arguments: valid only while every field is an init field
    assert all(f.init for f in dataclasses.fields(PolicyDecision))
    assert set(vars(gate.policy)) == {f.name for f in dataclasses.fields(PolicyDecision)}


def test_a_prepared_history_gives_the_same_rewrite_as_a_cold_one():
    from bara.understand.rewrite import history_view, prepare_history

    history = [Utterance("user", "What is IBM Cloudant?"),
               Utterance("assistant", "IBM Cloudant is a distributed JSON document database by IBM.")]
    cold = {m: rewrite_query(m, history) for m in MESSAGES}
    history_view.cache_clear()
    prepare_history(history)
    # issue 31: a view also reads the view of its history before the last user turn (what that turn's own
    # rewrite carried), so preparing builds both
    assert history_view.cache_info().currsize == 2
    assert {m: rewrite_query(m, history) for m in MESSAGES} == cold
    assert history_view.cache_info().misses == 2  # every rewrite above read the prepared views
    other = history + [Utterance("user", "and Db2?")]
    assert rewrite_query("is it secure?", other) != rewrite_query("is it secure?", history)  # a new key


def test_the_next_turn_reads_the_history_view_its_predecessor_prepared(bara):
    """The preparation rebuilds the window the next turn loads (its last messages, the user's meta
    included): if it built a different one, the next turn's rewrite would miss the cache."""
    from bara.turn.gated import Assistant
    from bara.understand.rewrite import history_view

    assistant = Assistant(bara)
    cid = assistant.open_conversation("prepared-user")
    for question in ("What is HTTP Strict Transport Security?", "my name is Ana",
                     "How does TLS session resumption work?", "thanks!", "What is DNSSEC?"):
        assistant.turn("prepared-user", question, cid)
        history_view.cache_clear()  # only what this flush prepares can serve the next turn
        bara.flush()  # the surface's idle time: the learning writes, then the preparation
        before = history_view.cache_info()
        trace = assistant.turn("prepared-user", "is it secure?", cid).trace
        assert "rewrite:applied" in trace.reasons or "rewrite:unchanged" in trace.reasons
        after = history_view.cache_info()
        assert (after.hits - before.hits, after.misses - before.misses) == (1, 0)
        bara.flush()


def test_preparations_run_after_the_writes_and_outside_any_transaction():
    from contextlib import contextmanager

    from bara.memory.writebehind import WriteBehind

    events: list[str] = []

    class Store:
        @contextmanager
        def scoped(self, owners):
            yield

        @contextmanager
        def transaction(self):
            events.append("begin")
            yield
            events.append("commit")

    wb = WriteBehind(Store())
    wb.prepare(lambda: events.append("prepare"))
    wb.defer("a", lambda: events.append("write"))
    assert wb.flush() == 1 and events == ["begin", "write", "commit", "prepare"]
    assert wb.flush() == 0 and events[-1] == "prepare" and events.count("prepare") == 1


def test_a_decoded_topic_is_shared_read_only_and_equal_to_a_fresh_decode():
    import base64

    from bara.memory.vectors import EMBEDDER, TOPIC, decode_vector, message_meta

    vec = np.random.default_rng(3).normal(size=384).astype(np.float32)
    meta = message_meta("m1", True, vec, vec * 2)
    first, again = decode_vector(meta, TOPIC, "m1"), decode_vector(dict(meta), TOPIC, "m1")
    assert first is again and not first.flags.writeable
    fresh = np.frombuffer(base64.b64decode(meta[TOPIC]), dtype=np.float16).astype(np.float32)
    assert np.array_equal(first, fresh)
    with pytest.raises(ValueError):
        first += 1.0  # a caller that changed it would change every later turn's topic
    assert decode_vector({**meta, EMBEDDER: "other"}, TOPIC, "m1") is None


def test_the_gates_topic_similarity_is_the_topic_cosine_bit_for_bit():
    """topic_dependence reuses the gate's cosine of the message to the one topic vector (issue 16)."""
    from bara.understand.topic import _cosine

    rng = np.random.default_rng(7)
    for i in range(2000):
        message = rng.standard_normal(384).astype(np.float32)
        topic = rng.standard_normal(384).astype(np.float16).astype(np.float32)
        if i % 7 == 0:
            topic = message.copy()
        assert topic_similarity(message, [topic], CFG) == _cosine(message, topic)
    zero = np.zeros(384, np.float32)
    assert topic_similarity(zero, [zero], CFG) is None and _cosine(zero, zero) is None


@pytest.mark.parametrize("message", MESSAGES)
def test_evolve_equals_dataclasses_replace_on_the_gates_records(message):
    from bara.decide.policy import PolicyDecision
    from bara.types import evolve
    from bara.understand.features import ContextFeatures

    for cls in (ContextFeatures, PolicyDecision):  # evolve copies __dict__: only init fields, no __post_init__
        assert all(f.init for f in dataclasses.fields(cls)) and not hasattr(cls, "__post_init__")
    gate = decide(message, (Utterance("user", "What is TCP?"),), None, {}, CFG)
    features = evolve(gate.features, topic_similarity=0.5)
    assert features == dataclasses.replace(gate.features, topic_similarity=0.5) and type(features) is ContextFeatures
    assert gate.features.topic_similarity is None  # the original is untouched
    policy = evolve(gate.policy, kb_k=9, reasons=gate.policy.reasons + ("x",))
    assert policy == dataclasses.replace(gate.policy, kb_k=9, reasons=gate.policy.reasons + ("x",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        policy.__setattr__("kb_k", 1)


@pytest.mark.parametrize("source", ["/data/rfc/rfc5246.txt", "rfc5246.txt", "docs/a/", "https://example.org/x/y.html",
                                    "", ".", "C:\\docs\\a.txt", "notes/2026-01-01"])
def test_source_name_is_the_path_name(source):
    from pathlib import Path

    from bara.types import source_name

    assert source_name(source) == Path(source).name == source_name(source)


def test_snapshot_of_small_and_enum_records_equals_asdict():
    import enum

    class Colour(str, enum.Enum):
        RED = "red"

    @dataclasses.dataclass(frozen=True)
    class Empty:
        pass

    @dataclasses.dataclass(frozen=True)
    class One:
        x: int

    @dataclasses.dataclass(frozen=True)
    class Mixed:
        colour: Colour
        names: tuple
        score: float | None

    for record in (Empty(), One(3), Mixed(Colour.RED, ("a", Colour.RED), None), Mixed(Colour.RED, (), 0.5)):
        assert snapshot(record) == dataclasses.asdict(record)
        assert type(snapshot(record)) is dict


def test_the_gate_concludes_with_the_episodic_overlay_only_when_names_are_given():
    from bara.decide import Conversation, Gate
    from bara.decide.policy import apply_episodic

    gate, message = Gate(CFG), "What did Caroline say about her trip?"
    draft = gate.read(message, Conversation())
    assert draft.capitalised == ("What", "Caroline")
    plain, opened = gate.conclude(draft, None, None, None), gate.conclude(draft, None, None, frozenset({"caroline"}))
    assert not plain.result.policy.inject_episodic and opened.result.policy.inject_episodic
    assert opened.result.policy == apply_episodic(plain.result.policy, message, {"caroline"}, CFG)
    added = opened.result.reasons[len(plain.result.reasons):]
    assert added and opened.reasons == plain.reasons + added
