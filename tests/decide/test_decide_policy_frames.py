"""The policy engine and prompt frames, field by field (written against surviving mutants).

Each intent's base policy is compared whole (route, every k and floor, reason codes in order), so a
swapped floor, a dropped Q&A tier or a misspelt reason code fails. Expected numbers come from the
Settings used, never from a run.
"""

from __future__ import annotations

from dataclasses import replace

from bara.decide.behavior import BehaviorDecision
from bara.decide.policy import (PolicyDecision, apply_behavior, apply_overlays, base_policy, profile_name,
                                resolve_policy)
from bara.messages import AssistantMessage, SystemMessage, UserMessage
from bara.prompts.frames import (NoteItem, PromptInputs, QAItem, Source, assemble, build_frames, estimate_tokens,
                                 frame_texts, kb_sources, note_items, preferred_length, profile_items, qa_items,
                                 summarise_turns)
from bara.settings import Settings
from bara.types import Utterance
from bara.understand.features import compute_features
from bara.understand.intent import IntentResult

S = Settings(k=5, floor_kb=0.31, floor_continuation=0.22, floor_general=0.44, floor_qa=0.66, gate_notes_k=3)
F = compute_features("What is HTTP Strict Transport Security", [], {}, settings=S)


def intent(name: str) -> IntentResult:
    return IntentResult(name, "rule:test", 0.9, "greeting" if name == "chitchat" else None)


def test_knowledge_base_route_is_rag_with_qa():
    assert base_policy(intent("knowledge_base"), F, S) == PolicyDecision(
        route="rag", inject_kb=True, kb_k=S.k, kb_floor=S.floor_kb, inject_qa=True, qa_k=S.k, qa_floor=S.floor_qa,
        reasons=("route:rag", "kb:floor_kb", "qa:inject"))


def test_continuation_route_is_conversation_with_qa():
    assert base_policy(intent("continuation"), F, S) == PolicyDecision(
        route="conversation", inject_kb=True, kb_k=S.k, kb_floor=S.floor_continuation, inject_qa=True, qa_k=S.k,
        qa_floor=S.floor_qa, reasons=("route:conversation", "kb:floor_continuation", "qa:inject"))


def test_general_route_is_adaptive_without_qa():
    assert base_policy(intent("general"), F, S) == PolicyDecision(
        route="adaptive", inject_kb=True, kb_k=S.k, kb_floor=S.floor_general,
        reasons=("route:adaptive", "kb:floor_general"))


def test_chitchat_is_llm_only():
    assert base_policy(intent("chitchat"), F, S) == PolicyDecision(reasons=("route:llm_only_chitchat",))


def test_privacy_route_turns_history_off_and_shows_the_profile_only_if_there_is_one():
    assert base_policy(intent("privacy"), F, S) == PolicyDecision(
        route="privacy", privacy_mode=True, use_history=False, reasons=("route:privacy", "history:off_privacy"))
    with_profile = replace(F, has_profile=True)
    assert base_policy(intent("privacy"), with_profile, S) == PolicyDecision(
        route="privacy", privacy_mode=True, use_history=False, inject_profile=True,
        reasons=("route:privacy", "history:off_privacy", "profile:inject_privacy"))


def test_profile_question_and_profile_update():
    assert base_policy(intent("profile"), F, S) == PolicyDecision(route="profile", reasons=("route:profile",))
    assert base_policy(intent("profile"), replace(F, has_profile=True), S) == PolicyDecision(
        route="profile", inject_profile=True, reasons=("route:profile", "profile:inject_profile_question"))
    update = PolicyDecision(route="profile_update", use_history=False,
                            reasons=("route:profile_update", "history:off_profile_update"))
    assert base_policy(intent("profile"), replace(F, is_profile_statement=True), S) == update
    assert base_policy(intent("profile"), replace(F, stated_name="Sam"), S) == update


def test_skip_clears_every_lookup_and_names_the_mode():
    rag = base_policy(intent("knowledge_base"), F, S)
    skipped = apply_behavior(rag, BehaviorDecision(mode="greeting", skip_retrieval=True, k=0))
    assert (skipped.route, skipped.inject_kb, skipped.kb_k, skipped.kb_floor, skipped.inject_qa, skipped.qa_k,
            skipped.qa_floor) == ("behavior:greeting", False, 0, 0.0, False, 0, 0.0)
    assert skipped.reasons[-1] == "retrieval:skipped_by_greeting" and not skipped.retrieves
    chat = base_policy(intent("chitchat"), F, S)
    assert apply_behavior(chat, BehaviorDecision(mode="greeting", skip_retrieval=True)) == chat  # nothing to skip


def test_reduce_and_boost_replace_k_and_shift_the_floor_within_bounds():
    rag = base_policy(intent("knowledge_base"), F, S)
    reduced = apply_behavior(rag, BehaviorDecision(mode="rapid_fire", reduce_retrieval=True, k=2, floor_delta=0.1))
    assert (reduced.kb_k, reduced.kb_floor, reduced.reasons[-1]) == (2, round(S.floor_kb + 0.1, 4),
                                                                     "kb:reduce_by_rapid_fire")
    assert reduced.qa_k == S.k and reduced.route == "rag"
    boosted = apply_behavior(rag, BehaviorDecision(mode="exploratory", boost_retrieval=True, k=8, floor_delta=-0.05))
    assert (boosted.kb_k, boosted.kb_floor, boosted.reasons[-1]) == (8, round(S.floor_kb - 0.05, 4),
                                                                     "kb:boost_by_exploratory")
    high = apply_behavior(rag, BehaviorDecision(mode="rapid_fire", reduce_retrieval=True, k=1, floor_delta=5.0))
    low = apply_behavior(rag, BehaviorDecision(mode="exploratory", boost_retrieval=True, k=9, floor_delta=-5.0))
    assert (high.kb_floor, low.kb_floor) == (1.0, -1.0)
    assert apply_behavior(rag, BehaviorDecision()) == rag
    profile = base_policy(intent("profile"), F, S)
    assert apply_behavior(profile, BehaviorDecision(boost_retrieval=True, k=9)) == profile  # no kb to boost


def test_overlays():
    rag = base_policy(intent("knowledge_base"), F, S)
    named = apply_overlays(rag, F, S, {"name": "  Ada "})
    assert named.greeting_name == "Ada" and named.reasons[-1] == "overlay:greeting_name"
    assert apply_overlays(rag, replace(F, stated_name="Sam"), S, {"name": "Ada"}).greeting_name == "Sam"
    assert profile_name({"preferred_name": "Bo"}, F) == "Bo" and profile_name({"name": "  "}, F) is None
    assert profile_name({"display_name": "Cy", "name": 3}, F) == "Cy"
    personal = replace(F, has_personal_reference=True)
    assert apply_overlays(rag, personal, S, {"role": "dev"}).inject_profile
    assert not apply_overlays(rag, personal, S, {}).inject_profile
    privacy = base_policy(intent("privacy"), personal, S)
    assert apply_overlays(privacy, replace(personal, notes_request=True), S, {"role": "dev"}) == privacy
    notes = apply_overlays(rag, replace(F, notes_request=True), S, {})
    assert (notes.inject_notes, notes.notes_k, notes.reasons[-2:]) == (
        True, S.gate_notes_k, ("overlay:notes_request", "kb:off_recap_from_notes"))
    # A recap is answered by the notes: the knowledge base and Q&A close, the route says so.
    assert (notes.route, notes.inject_kb, notes.kb_k, notes.inject_qa, notes.qa_k) == ("notes", False, 0, False, 0)


def test_rewrite_flag():
    s_on, s_off = S.override(gate_rewrite_in_conversation=True), S.override(gate_rewrite_in_conversation=False)
    followup = replace(F, is_followup=True, history_length=2)
    in_conv = replace(F, history_length=2)
    kb = intent("knowledge_base")
    assert resolve_policy(kb, followup, BehaviorDecision(), s_off, {}).reasons[-1] == "rewrite:followup"
    assert resolve_policy(intent("continuation"), in_conv, BehaviorDecision(), s_off, {}).needs_rewrite
    on = resolve_policy(kb, in_conv, BehaviorDecision(), s_on, {})
    assert on.needs_rewrite and on.reasons[-1] == "rewrite:in_conversation"
    assert not resolve_policy(kb, in_conv, BehaviorDecision(), s_off, {}).needs_rewrite
    assert not resolve_policy(kb, F, BehaviorDecision(), s_on, {}).needs_rewrite  # first turn
    assert not resolve_policy(intent("chitchat"), followup, BehaviorDecision(), s_on, {}).needs_rewrite


# --------------------------------------------------------------------------------- frames
def test_tier_results_become_numbered_items():
    from bara.types import ArmScore, Hit, RetrievalOutcome, Status, StoredChunk

    hits = tuple(Hit(StoredChunk(i, f"text {i}", f"dir/doc{i}.txt", f"{i}.1", f"T{i}", "kb", "", 0, 0, 5),
                     0.5 - i / 10, 0.9 - i / 10, ArmScore(), ArmScore(), 0.0) for i in (1, 2))
    sources = kb_sources(RetrievalOutcome(Status.OK, "q", hits))
    assert [(s.n, s.id, s.source, s.section, s.title, s.text) for s in sources] == \
        [(1, 1, "dir/doc1.txt", "1.1", "T1", "text 1"), (2, 2, "dir/doc2.txt", "2.1", "T2", "text 2")]
    assert [s.score for s in sources] == [h.similarity for h in hits]
    assert sources[0].label == "doc1.txt \u00a71.1 T1" and kb_sources(None) == ()
    assert Source(1, 1, "a/b.txt", "", "", "x", 0.0).label == "b.txt"

    class NoteHit:
        def __init__(self, kind, text, score):
            self.note, self.score = type("N", (), {"kind": kind, "text": text})(), score

    assert note_items([NoteHit("decision", "use TLS", 0.7)]) == (NoteItem("decision", "use TLS", 0.7),)

    class QAHit:
        question, answer, score = "q?", "a.", 0.8

    assert qa_items([QAHit()]) == (QAItem("q?", "a.", 0.8),)
    assert profile_items({"b": "2", "a": 1}) == (("a", "1"), ("b", "2"))


def test_preferred_length():
    assert preferred_length("normal", "standard", {"answer_length": "short"}) == ("short", "profile:answer_length_short")
    assert preferred_length("normal", "standard", {"answer_length": "detailed"}) == ("long", "profile:answer_length_long")
    assert preferred_length("normal", "greeting", {"answer_length": "short"}) == ("normal", "")
    assert preferred_length("short", "standard", {"answer_length": "short"}) == ("short", "")
    assert preferred_length("normal", "standard", {}) == ("normal", "")


def test_summary_and_token_estimate():
    turns = (Utterance("user", "one two three four five six seven eight nine ten"), Utterance("assistant", "x"),
             Utterance("user", "short one"))
    line = summarise_turns(turns)
    assert "\u201cone two three four five six seven eight\u201d" in line and "nine" not in line
    assert "\u201cshort one\u201d" in line and summarise_turns((Utterance("assistant", "x"),)) == ""
    assert estimate_tokens("abcdefgh", 2.0) == 4 and estimate_tokens("abcdefghi", 2.0) == 5


def test_messages_put_context_in_the_system_message_and_history_in_order():
    inputs = PromptInputs(message="And its max-age?", kb_opened=True,
                          knowledge=(Source(1, 1, "h.txt", "", "", "HSTS text", 0.5),),
                          history=(Utterance("user", "What is HSTS?"), Utterance("assistant", "A policy.")))
    msgs = assemble(inputs, 10_000).messages()
    assert isinstance(msgs[0], SystemMessage) and "HSTS text" in msgs[0].text
    assert [type(m) for m in msgs[1:]] == [UserMessage, AssistantMessage, UserMessage]
    assert [m.text for m in msgs[1:]] == ["What is HSTS?", "A policy.", "And its max-age?"]
    texts = frame_texts(inputs)
    assert "HSTS text" in texts["knowledge"] and texts["notes"] == "" and texts["qa"] == ""
    assert [f.kind for f in build_frames(inputs)][-1] == "user"


def test_frame_texts_word_every_item():
    """Each frame's wording, written out by hand: a template edit must show up here as a reviewed change."""
    inputs = PromptInputs(message="q", answer_length="short", tone="warm", behavior_mode="greeting",
                          greeting_name="Ada", privacy_mode=True, profile=(("role", "engineer"),),
                          notes=(NoteItem("decision", "use TLS 1.3"),), qa=(QAItem("What is HSTS?", "A policy."),),
                          history=(Utterance("user", "hi"), Utterance("assistant", "hello")))
    texts = frame_texts(inputs)
    assert texts["behavior"] == (
        "Answer style: a short (1-2 sentences) answer, warm tone (behaviour mode: greeting).\n"
        "The user's name is Ada; use it when greeting.\n"
        "The user asks about their stored data. List what is stored and explain how to delete it; "
        "do not use anything else.")
    # a length with no wording of its own is passed through as given
    assert "Answer style: odd answer, neutral tone (behaviour mode: standard)." in \
        frame_texts(replace(inputs, answer_length="odd", tone="neutral", behavior_mode="standard"))["behavior"]
    assert texts["profile"] == "What the user has told you about themselves:\n- role: engineer"
    assert texts["notes"] == ("Research notes from earlier in your work with this user (decisions, conclusions, "
                              "questions):\n- (decision) use TLS 1.3")
    assert texts["qa"] == "Earlier questions from this user with the answers given:\nQ: What is HSTS?\nA: A policy."
    assert texts["history"] == "user: hi\nassistant: hello"
    folded = frame_texts(replace(inputs, history=inputs.history[1:], summarised=inputs.history[:1]))["history"]
    assert folded == "Earlier in this conversation (summarised) the user asked: \u201chi\u201d\nassistant: hello"


def test_system_message_joins_every_context_frame_and_nothing_else():
    inputs = PromptInputs(message="the question", profile=(("role", "engineer"),),
                          notes=(NoteItem("decision", "use TLS 1.3"),),
                          history=(Utterance("user", "earlier question"),))
    prompt = assemble(inputs, 10_000)
    system = prompt.messages()[0].text
    context = [f.text for f in prompt.frames if f.kind not in ("history", "user") and f.text]
    assert system == "\n\n".join(context)
    assert "the question" not in system and "earlier question" not in system


def test_cut_message_and_dropped_history_are_exact():
    from bara.prompts.frames import _cut_message, _drop_oldest_turn

    i = PromptInputs(message="abcdefghij", history=(Utterance("user", "a"), Utterance("assistant", "b")))
    assert _cut_message(i, 1, 4.0).message == "abcdef" and _cut_message(i, 3, 4.0).message == ""
    dropped = _drop_oldest_turn(i)
    assert dropped.history == (Utterance("assistant", "b"),) and dropped.summarised == (Utterance("user", "a"),)
    fixed = assemble(PromptInputs(message=""), 10_000).tokens
    cut = assemble(PromptInputs(message="word " * 400), fixed + 10)
    assert cut.reasons == ("budget:user_message_cut",) and cut.tokens <= fixed + 10
    assert cut.inputs.message == ("word " * 400)[:len(cut.inputs.message)] and len(cut.inputs.message) > 20
