"""Fast unit tests of the turn's building blocks: sanitising, frames, the offline generator, hooks, trace."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from bara import prompts as P
from bara.hooks import HOOK_POINTS, HookContext, HookError, Hooks, PersistPlan
from bara.llm.offline import OfflineGenerator, answer, extractive_answer, split_sentences
from bara.turn.steps import TurnFacts
from bara.understand.sanitize import sanitize
from bara.prompts.frames import (EpisodeItem, MemorySummary, NoteItem, PromptInputs, QAItem, Source, assemble,
                                 build_frames, estimate_tokens)
from bara.trace import JSON_KEYS, HitRecord, HookErrorRecord, TurnRecorder, TurnTrace
from bara.types import Utterance

HSTS = Source(1, 11, "/data/rfc/rfc6797.txt", "5.1", "HSTS Host Declaration",
              "An HTTP host declares itself an HSTS Host by issuing to UAs an HSTS Policy. "
              "The policy is represented by and conveyed via the Strict-Transport-Security HTTP response header "
              "field over secure transport.", 0.61)
MAXAGE = Source(2, 12, "/data/rfc/rfc6797.txt", "6.1.1", "The max-age Directive",
                "The REQUIRED max-age directive specifies the number of seconds, after the reception of the STS "
                "header field, during which the UA regards the host as a Known HSTS Host.", 0.55)


# --- sanitize --------------------------------------------------------------------

def test_sanitize_removes_control_characters_but_keeps_newlines():
    clean = sanitize("what is\x00 HSTS?\x07\nsecond line\t!", 2000)
    assert clean.text == "what is HSTS?\nsecond line\t!"
    assert "input:control_chars_removed" in clean.reasons


def test_sanitize_replaces_invalid_utf8_and_lone_surrogates():
    from_bytes = sanitize(b"caf\xe9 au lait \xff", 2000)
    assert "\ufffd" in from_bytes.text and "input:invalid_utf8_replaced" in from_bytes.reasons
    surrogate = sanitize("bad \udcff text", 2000)
    assert surrogate.text == "bad \ufffd text"
    surrogate.text.encode("utf-8")  # storable


@pytest.mark.parametrize("raw", ["", "   ", "\n\t ", "\x00\x01"])
def test_sanitize_empty_input(raw):
    clean = sanitize(raw, 2000)
    assert clean.text == "" and "input:empty" in clean.reasons


def test_sanitize_caps_the_query_but_keeps_the_whole_text():
    clean = sanitize("x" * 100_000, 2000)
    assert len(clean.text) == 100_000 and len(clean.query) == 2000
    assert "input:truncated_for_retrieval" in clean.reasons


# --- frames ----------------------------------------------------------------------

def _full_inputs(**changes) -> PromptInputs:
    history = tuple(Utterance("user" if n % 2 == 0 else "assistant", f"message {n} " + "word " * 40)
                    for n in range(8))
    base = PromptInputs(message="What does the max-age directive do?", profile=(("role", "network engineer"),),
                        notes=(NoteItem("decision", "let's go with TLS 1.2"),), knowledge=(HSTS, MAXAGE),
                        qa=(QAItem("What is HSTS?", "A policy."),), history=history, kb_opened=True,
                        episodes=(EpisodeItem("[8 May 2023] Sam: we moved the cluster to TLS 1.3 yesterday"),))
    return replace(base, **changes)


def test_frames_come_in_the_documented_order():
    kinds = [f.kind for f in build_frames(_full_inputs())]
    assert kinds == list(P.FRAME_ORDER)


def test_budget_summarises_history_first_and_keeps_knowledge():
    inputs = _full_inputs()
    roomy = assemble(inputs, 10_000)
    assert roomy.reasons == () and len(roomy.inputs.history) == 8
    tight = assemble(inputs, roomy.tokens - 100)
    assert "budget:history_summarised" in tight.reasons
    assert len(tight.inputs.history) < 8 and tight.inputs.knowledge == inputs.knowledge
    assert tight.tokens <= roomy.tokens - 100
    assert "Earlier in this conversation" in tight.messages()[0].text


def test_budget_gives_way_in_order_then_cuts_the_message():
    inputs = _full_inputs(message="q " * 2000)
    prompt = assemble(inputs, 300)
    codes = list(prompt.reasons)
    expected = ["budget:history_summarised", "budget:history_dropped", "budget:qa_dropped",
                "budget:episodes_dropped", "budget:notes_dropped", "budget:kb_dropped", "budget:profile_dropped", "budget:user_message_cut"]
    assert [c for c in expected if c in codes] == codes
    assert prompt.tokens <= 300


def test_token_estimate_is_chars_over_four():
    assert estimate_tokens("") == 0 and estimate_tokens("abcd") == 1 and estimate_tokens("abcde") == 2


def test_prompt_messages_are_typed_and_end_with_the_user_message():
    msgs = assemble(_full_inputs(), 10_000).messages()
    assert type(msgs[0]).__name__ == "SystemMessage" and P.SYSTEM in msgs[0].text
    assert type(msgs[-1]).__name__ == "UserMessage" and msgs[-1].text.startswith("What does")
    assert "[1] rfc6797.txt \u00a75.1 HSTS Host Declaration" in msgs[0].text


# --- offline generator --------------------------------------------------------------

def test_extractive_answer_cites_numbered_sources():
    text = extractive_answer("What does the max-age directive do?", (HSTS, MAXAGE), 2)
    assert "max-age directive specifies the number of seconds" in text
    assert "[2]" in text and P.SOURCES_HEADER in text
    assert "[2] rfc6797.txt \u00a76.1.1 The max-age Directive" in text


@pytest.mark.parametrize("length,limit", [("short", 2), ("long", 7)])
def test_answer_length_shapes_the_number_of_sentences(length, limit):
    many = tuple(replace(HSTS, n=n, text=f"Sentence number {n} talks about the HSTS policy in detail here. " * 3
                         + f"Another sentence {n} on the HSTS max-age directive follows now.")
                 for n in range(1, 5))
    body = answer(PromptInputs(message="HSTS policy max-age", knowledge=many, kb_opened=True,
                               answer_length=length)).split(P.SOURCES_HEADER)[0]
    assert 1 <= body.count("] ") + body.rstrip().endswith("]") <= limit


def test_knowledge_route_with_nothing_above_the_floor_says_so():
    assert answer(PromptInputs(message="What is QUIC?", route="rag", kb_opened=True)) == P.NOT_FOUND


def test_split_sentences_drops_page_debris():
    text = "RFC 6797 HTTP Strict Transport Security (HSTS) November 2012\n\nHodges, et al. [Page 12]\n" \
           "This is a real sentence about transport security policy.\n   5.1.  HSTS Host Declaration ........ 12\n" \
           "\n5.2.  Known HSTS Host\n"
    assert split_sentences(text) == ["This is a real sentence about transport security policy."]


@pytest.mark.parametrize("kind,expected", [("greeting", "Hello Sam!"), ("thanks", "You're welcome Sam."),
                                           ("goodbye", "Goodbye Sam."), ("testing", "I'm here and working.")])
def test_chitchat_replies_use_the_profile_name(kind, expected):
    text = answer(PromptInputs(message="x", intent="chitchat", chitchat=kind, greeting_name="Sam"))
    assert text.startswith(expected)


def test_profile_answers_echo_and_acknowledge():
    told = answer(PromptInputs(message="what's my role?", route="profile", profile=(("role", "network engineer"),)))
    assert told == "You told me you're a network engineer."
    said = "I'm a network engineer"
    learned = answer(PromptInputs(message=said, route="profile_update", learned=TurnFacts.of(said, 8).learned))
    assert "you're a network engineer" in learned.lower() and learned.startswith("Noted")
    assert answer(PromptInputs(message="what's my name?", route="profile")) == P.PROFILE_EMPTY


def test_notes_and_privacy_answers():
    notes = answer(PromptInputs(message="what did we decide about TLS?", notes_requested=True,
                                notes=(NoteItem("decision", "Let's go with TLS 1.2."),)))
    assert "We decided: Let's go with TLS 1.2." in notes
    privacy = answer(PromptInputs(message="what do you know about me?", privacy_mode=True, user_id="u9",
                                  memory=MemorySummary((("name", "Sam"),), notes=2, qa=3, conversations=1)))
    assert "name = Sam" in privacy and "2 research notes" in privacy and "bara memory forget --user u9" in privacy
    assert "- 2 research notes, 3 remembered questions and answers, 1 conversation\n" in privacy
    one = answer(PromptInputs(message="what do you know about me?", privacy_mode=True, user_id="u9",
                              memory=MemorySummary((), notes=1, qa=1, conversations=0)))
    assert "- 1 research note, 1 remembered question and answer, 0 conversations\n" in one


def test_a_stated_decision_is_acknowledged():
    said = "Let's go with TLS 1.2 for the API."
    text = answer(PromptInputs(message=said, kb_opened=True, noted=TurnFacts.of(said, 8).noted))
    assert text.startswith(P.NOTED_HEADER) and "Decision: Let's go with TLS 1.2" in text


def test_the_offline_generator_extracts_nothing_itself():
    """Facts reach it through the inputs record (extracted once per turn by the pipeline): a message
    stating a decision or a profile fact, handed no facts, is not acknowledged."""
    said = "Let's go with TLS 1.2 for the API."
    assert not answer(PromptInputs(message=said, kb_opened=True)).startswith(P.NOTED_HEADER)
    assert answer(PromptInputs(message="I'm a network engineer", route="profile_update")) == \
        P.PROFILE_NOTHING_LEARNED


def test_turn_facts_are_reused_for_the_same_text_and_extracted_again_for_a_changed_one():
    facts = TurnFacts.of("I'm a network engineer. Let's go with TLS 1.2 for the API.", 8)
    assert facts.learned == (("role", "network engineer"),) and [n.kind for n in facts.notes] == ["decision"]
    assert facts.profile_of(facts.text) == list(facts.profile)
    assert facts.profile_of("something else") is None  # a before_persist hook changed the text
    assert facts.notes_of(facts.text, "") == list(facts.notes)
    assert facts.notes_of("We decided to use QUIC.", "") != list(facts.notes)


def test_offline_generator_reads_the_prompt_inputs():
    prompt = assemble(PromptInputs(message="hi", intent="chitchat", chitchat="greeting"), 3000)
    assert OfflineGenerator().generate(prompt).startswith("Hello!")


# --- hooks -----------------------------------------------------------------------

CTX = HookContext(point="after_generation", user_id="u", conversation_id="c", message="m", mode="gated", turn=1)


def test_hooks_chain_and_none_means_unchanged():
    hooks = Hooks()
    hooks.add("after_generation", lambda value, ctx: value + "!")
    hooks.add("after_generation", lambda value, ctx: None)
    hooks.add("after_generation", lambda value, ctx: value.upper())
    assert hooks.run("after_generation", "ok", CTX).value == "OK!"


def test_failing_or_mistyped_hook_is_recorded_and_skipped():
    hooks = Hooks()

    def boom(value, ctx):
        raise RuntimeError("kaput")

    hooks.add("after_generation", boom)
    hooks.add("after_generation", lambda value, ctx: 42)
    run = hooks.run("after_generation", "answer", CTX)
    assert run.value == "answer"
    assert [e.error for e in run.errors] == ["RuntimeError: kaput", "returned int, expected str or None"]
    with pytest.raises(HookError, match="kaput"):
        hooks.run("after_generation", "answer", CTX, strict=True)


def test_unknown_hook_point_is_refused():
    with pytest.raises(ValueError, match="unknown hook point"):
        Hooks().add("before_lunch", lambda v, c: v)
    assert set(HOOK_POINTS) == {"policy_override", "before_generation", "after_generation", "before_persist"}


def test_persist_plan_veto_returns_a_copy():
    plan = PersistPlan("u", "a")
    vetoed = plan.veto("no")
    assert vetoed.vetoed and not plan.vetoed and vetoed.veto_reason == "no"


# --- trace -----------------------------------------------------------------------

def test_trace_to_json_has_every_key_and_is_serialisable():
    rec = TurnRecorder()
    with rec.stage("gate"):
        pass
    rec.reason("a", "", "b", "a")
    rec.hook_error(HookErrorRecord("before_persist", "fn", "boom"))
    trace = TurnTrace(turn=1, user="u", mode="gated", conversation_id="c", hits=(HitRecord(1, "f.txt", "2", 0.5),),
                      latency_ms=rec.latency(), reasons=rec.reasons, hook_errors=rec.hook_errors)
    data = json.loads(json.dumps(trace.to_json()))
    assert all(k in data for k in JSON_KEYS)
    assert data["reasons"] == ["a", "b", "hook:before_persist_failed"]
    assert data["hits"][0] == {"id": 1, "source": "f.txt", "section": "2", "score": 0.5, "title": "",
                               "fused": 0.0, "tier": "kb", "lexical_rank": None, "dense_rank": None}
    assert data["latency_ms"]["total"] >= data["latency_ms"]["gate"] >= 0.0


def test_rewrite_does_not_carry_the_users_name_into_the_query():
    from bara.turn.steps import topical_history
    from bara.types import Utterance
    from bara.understand.rewrite import rewrite_query

    history = [Utterance("user", "My name is Sam and I'm a network engineer."),
               Utterance("assistant", "Noted: your name is Sam. Sam, ask me anything."),
               Utterance("user", "What does it protect against?"), Utterance("assistant", "Hello Sam! It ...")]
    assert "Sam" in rewrite_query("What about its max-age directive?", history).query  # the failure mode
    history[2:] = [Utterance("user", "What does HSTS protect against?"), Utterance("assistant", "HSTS makes ...")]
    query = rewrite_query("What about its max-age directive?", topical_history(history)).query
    assert "Sam" not in query and "HSTS" in query


def test_relative_gap_drops_hits_far_below_the_best():
    from bara.turn.gated import within_gap
    from types import SimpleNamespace

    from bara.types import RetrievalOutcome, Status

    def hit(i, sim):  # within_gap reads only the similarity
        return SimpleNamespace(id=i, similarity=sim)

    kb = RetrievalOutcome(Status.OK, "q", hits=(hit(1, 0.7), hit(2, 0.5), hit(3, 0.35)))
    trimmed = within_gap(kb, 0.3)
    assert [h.id for h in trimmed.hits] == [1, 2] and trimmed.n_dropped == 1
    assert "below_relative_gap" in trimmed.reasons
    assert within_gap(kb, 2.0) is kb and within_gap(None, 0.3) is None
