"""The gated assistant: sanitise, load, gate, rewrite, retrieve, assemble, generate, persist, trace.

Gated mode (the default) decides by rules (``bara.decide``) whether to retrieve, from which memory
tier and how much, before any search runs. What it shares with the ``always`` baseline
(``bara.turn.always``: the turn, hooks, generator, persist and trace) is
:class:`bara.turn.base.PipelineAssistant`; :func:`Assistant` builds either by mode.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from bara.app import Bara
from bara.decide import Conversation, Gate, GateResult, PolicyDecision
from bara.errors import InputError
from bara.hooks import PersistPlan
from bara.llm.base import Model
from bara.memory.history import curate_history
from bara.memory.vectors import HistoryTopic, history_topic
from bara.retrieval.agreement import agreement_cut
from bara.store.base import Read
from bara.turn.always import AlwaysAssistant
from bara.turn.base import PipelineAssistant
from bara.turn.persist import next_turn_preparation, reply_preparation
from bara.turn.records import Retrieved, Seen, TurnInput, TurnResult
from bara.turn.steps import (LexicalGuess, answers_are_passages, drop_said, last_reply,
                                 learns_qa, lexical_guess, mark_rerank, names_identifier, per_message, rewrite_for,
                                 said_terms, within_gap)
import bara.prompts as PROMPTS
from bara.prompts.frames import (MemorySummary, PromptInputs, Source, attribution_note, compact_sources,
                                 episode_items, kb_sources, note_items, preferred_length,
                                 profile_items, qa_items)
from bara.trace import TurnRecorder
from bara.types import PIPELINE_MODES, PipelineMode, RetrievalOutcome, Tier, Utterance
from bara.understand.forget import asks_to_forget
from bara.understand.prototypes import prototypes_for
from bara.understand.rewrite import RewriteRules
from bara.understand.scaffold import topic_switch
from bara.understand.topic import compose_topic, search_vector

MODES = PIPELINE_MODES


def pipeline_mode(value: str) -> PipelineMode:
    """``value`` as a mode of the gated pipeline; InputError when it names none."""
    for mode in PIPELINE_MODES:
        if mode == value:
            return mode
    raise InputError(f"unknown mode {value!r}: the caller must pass one of {', '.join(MODES)}")


def Assistant(bara: Bara, model: Model | None = None, mode: PipelineMode = "gated", strict: bool = False,  # noqa: N802
              fallback_offline: bool = True) -> PipelineAssistant:
    """The pipeline assistant of ``mode`` over ``bara``: :class:`GatedAssistant` or
    :class:`~bara.turn.always.AlwaysAssistant` (named as the class it was when one class ran both)."""
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}: the caller must pass one of {', '.join(MODES)}")
    made = GatedAssistant if mode == "gated" else AlwaysAssistant
    return made(bara, model=model, strict=strict, fallback_offline=fallback_offline)


class GatedAssistant(PipelineAssistant):
    """The gated pipeline over one :class:`~bara.app.Bara` (``gated`` mode)."""

    mode: PipelineMode = "gated"

    def __init__(self, bara: Bara, model: Model | None = None, strict: bool = False, fallback_offline: bool = True):
        super().__init__(bara, model, strict, fallback_offline)
        prototypes, self._prototype_reason = prototypes_for(bara.embedder)
        self.gate = Gate(bara.settings, prototypes)
        self.rewrite_rules = RewriteRules.from_settings(bara.settings)

    def _answer(self, t: TurnInput, rec: TurnRecorder) -> TurnResult:
        gate, seen = self._gate(t, rec)
        ctx = self._context(t, gate)
        policy = self._hook("policy_override", gate.policy, ctx, rec)
        rec.reason("hook:policy_overridden" if policy != gate.policy else "")
        retrieved = self._retrieve(t, policy, seen, rec)
        forgotten = self._privacy_forget(t, policy, rec)
        answer, prompt = self._generate(self._inputs(t, gate, policy, retrieved, forgotten, rec), ctx, rec)
        learn = not policy.privacy_mode
        rec.reason("" if learn else "persist:privacy_no_learning")
        asked = learns_qa(gate)
        rec.reason("" if asked or retrieved.kb is None else "persist:qa_not_a_question")
        plan = PersistPlan(t.clean.text, answer, learn_profile=learn, extract_notes=learn,
                           add_qa=learn and asked and retrieved.kb is not None and bool(retrieved.kb.hits))
        stored = self._persist(t, gate.new_state, plan, retrieved, ctx, rec,
                               lambda s: self._trace(t, gate, policy, retrieved, prompt, answer, s, rec))
        trace = self._trace(t, gate, policy, retrieved, prompt, answer, stored, rec)
        return TurnResult(answer, trace, t.conversation_id)

    def _gate(self, t: TurnInput, rec: TurnRecorder) -> tuple[GateResult, Seen]:
        """Rules first. The message is embedded (once) when the turn may search or no rule is
        conclusive; then the topic before this turn is read from the conversation's vector cache and
        the episodic names the message may mention from the store, and the gate concludes."""
        with rec.stage("gate"):
            draft = self.gate.read(t.clean.query, Conversation(t.history, t.state, t.profile))
        guess = lexical_guess(t.clean.query, t.messages, self.bara.retriever, self.settings, self._rewrite_rules(),
                              rec, t.head) if draft.may_search else LexicalGuess()
        vector = self._embed(t.clean.query, rec) if draft.may_search else None
        rec.reason("" if draft.ruled is not None else self._prototype_reason)
        prior = self._history_topic(t, rec) if vector is not None else HistoryTopic(None, False)
        with rec.stage("gate"):
            known = self._known_names(t, draft.capitalised)
            decision = self.gate.conclude(draft, vector, prior.topic, known, has_context=prior.has_context)
        rec.reason(*decision.reasons)
        return decision.result, Seen(vector, prior, decision.topic, guess)

    def _first_reads(self, user_id: str, cid: str) -> dict[str, Read]:
        """The profile, and whether the user has episodes of another conversation (``_known_names``)."""
        return {**super()._first_reads(user_id, cid), "holds_other": self.episodic.holds_other_read(user_id, cid)}

    def _known_names(self, t: TurnInput, words: tuple[str, ...]) -> frozenset[str] | None:
        """The stored names of the user's other conversations that ``words`` may name; None when there
        is no other conversation (this conversation is its own history, so no episodic overlay)."""
        others = t.also.get("holds_other")
        if not (self.episodic.holds_other(t.user_id, t.conversation_id) if others is None else others):
            return None
        return self.episodic.known_names(t.user_id, t.conversation_id, words)

    def _kb(self, t: TurnInput, policy: PolicyDecision, seen: Seen, query: str,
            vectors: tuple[np.ndarray | None, np.ndarray | None], rec: TurnRecorder) -> RetrievalOutcome | None:
        """The knowledge-base search. A follow-up (the message depends on the conversation) drops the hits an
        earlier reply already is (``drop_said``), searching one more per earlier reply (at most
        ``gate_kb_said_spare``) so that k remain. When the conversation's answers are passages of the knowledge
        base (``answers_are_passages``, reason ``topic:answers_are_passages``), its dense arm searches with the
        message, the last reply and a little of the user turns' topic (``search_vector``: reply weight
        ``gate_followup_reply_weight``, topic weight ``gate_followup_topic_weight``; reason ``topic:with_reply``)
        and its full-text arm weighs ``gate_followup_weight_lexical`` in the fusion, unless the message names an
        identifier of its own (``names_identifier``, reason ``topic:names_identifier``)."""
        s, follow = self.settings, seen.topic.depends
        (message_vector, vector), said = vectors, ()
        passages = follow and answers_are_passages(t.messages)
        rec.reason("topic:answers_are_passages" if passages else "")
        exact = passages and s.gate_followup_identifier_lexical and names_identifier(t.clean.query)
        rec.reason("topic:names_identifier" if exact else "")
        reply = last_reply(t.messages) if passages and s.gate_followup_reply_weight > 0 else ""
        reply_vector = self._embed(reply, rec) if reply and message_vector is not None else None
        if message_vector is not None and reply_vector is not None:
            vector = search_vector(message_vector, seen.prior.topic, True, s.gate_followup_topic_weight,
                                   reply_vector, s.gate_followup_reply_weight)
            rec.reason("topic:with_reply")
        if follow and s.gate_kb_said_spare:
            said = said_terms(t.messages)
        spare = min(len(said), s.gate_kb_said_spare)  # each earlier reply can take one slot
        kb = self._tier("retrieve_kb", rec, lambda: self.bara.retriever.search(
            query, k=policy.kb_k + spare, floor=policy.kb_floor, vector=vector,
            prefetched=seen.guess.prefetched, spare_lexical=s.gate_kb_floor_spare_lexical,
            spare_floor=policy.kb_floor - s.gate_kb_floor_spare_margin,
            weight_lexical=s.gate_followup_weight_lexical if passages and not exact else None))
        return drop_said(kb, said, s.gate_kb_said_containment, policy.kb_k)

    def _history_topic(self, t: TurnInput, rec: TurnRecorder) -> HistoryTopic:
        with rec.stage("load_vectors"):
            prior = history_topic(t.messages, self._embedder_id, lambda texts: self._embed_many(texts, rec),
                                  self.settings.gate_topic_carry_weight, self.settings.memory_topic_fallback_messages)
        rec.reason(f"topic:history_encoded:{prior.encoded}" if prior.encoded else "")
        return prior

    def _rewrite_rules(self) -> RewriteRules:
        """The rewrite's rules, built from the settings once, when the assistant is (not every turn)."""
        return self.rewrite_rules

    # ---------------------------------------------------------------------- retrieval
    def _retrieve(self, t: TurnInput, policy: PolicyDecision, seen: Seen, rec: TurnRecorder) -> Retrieved:
        """Search only the tiers the policy opened. The lexical arm reads the rewrite (context carried
        only when the message depends on it); the dense arm reads the topic vector, composed from
        vectors already computed (``bara.understand.topic``), so the rewrite is never encoded. How many
        knowledge hits are shown: those within the relative gap of the best (``within_gap``), without the
        ones only one arm returned when the best has both (``bara.retrieval.agreement``)."""
        if not policy.retrieves:
            return Retrieved(message_vector=seen.vector)
        query, rewritten = t.clean.query, False
        if policy.needs_rewrite and seen.topic.depends:
            with rec.stage("rewrite"):
                rw = seen.guess.rewrite or rewrite_for(t.clean.query, t.messages, self.settings, self._rewrite_rules(),
                                                                   t.head)
            query, rewritten = rw.query, rw.changed
            rec.reason(*(c if c.startswith("rewrite:") else f"rewrite:{c}" for c in rw.reasons),
                       "rewrite:applied" if rw.changed else "rewrite:unchanged")
        elif policy.needs_rewrite:
            switched = topic_switch(t.clean.query)  # the cue ("Switching topics:") is not the topic
            query, rewritten = (switched, True) if switched else (query, False)
            rec.reason("rewrite:topic_switch" if switched else "rewrite:standalone")
        message_vector = seen.vector if seen.vector is not None else self._embed(t.clean.query, rec)
        vector = None if message_vector is None else compose_topic(
            message_vector, seen.prior.topic, seen.topic.depends, self.settings.gate_topic_carry_weight)
        kb = self._kb(t, policy, seen, query, (message_vector, vector), rec) if policy.inject_kb else None
        mark_rerank(rec, kb, self.settings)
        kb = within_gap(kb, self.settings.gate_kb_relative_gap)
        kb = agreement_cut(kb, self.settings.gate_kb_agreement_ratio, self.settings.gate_kb_agreement_keep,
                           self.settings.gate_kb_agreement_spare_lexical)
        notes = self._tier("retrieve_notes", rec, lambda: self.notes.search(  # the user's own words: a recap
            t.user_id, t.clean.query, k=policy.notes_k, vector=message_vector),  # names its kind and topic
        ) if self._open(t, "notes", policy, rec) else ()
        qa = self._tier("retrieve_qa", rec, lambda: self.qa.search(
            t.user_id, query, t.conversation_id, k=policy.qa_k, floor=policy.qa_floor,
            vector=vector)) if self._open(t, "qa", policy, rec) else ()
        episodes = self._tier("retrieve_episodic", rec, lambda: self.episodic.search(
            t.user_id, t.clean.query, k=policy.episodic_k, vector=message_vector,
            exclude_conversation=t.conversation_id)) if self._open(t, "episodic", policy, rec) else None
        if episodes is not None:
            rec.reason(*episodes.reasons)
        retrieved = Retrieved(query, rewritten, kb, tuple(notes or ()), tuple(qa or ()), vector, message_vector,
                              searched=True, episodes=episodes.hits if episodes is not None else (),
                              attribution=episodes.attribution if episodes is not None else None)
        self._tier_reasons(retrieved, rec)
        return retrieved

    def _open(self, t: TurnInput, tier: Tier, policy: PolicyDecision, rec: TurnRecorder) -> bool:
        """A user tier the policy opened is searched only if it holds anything: searching an
        empty tier costs a search and can never add context."""
        if not policy.injects(tier):
            return False
        if not self.bara.store.has_chunks(t.user_id, tier):
            rec.reason(f"{tier}:skipped_empty_tier")
            return False
        return True

    def _privacy_forget(self, t: TurnInput, policy: PolicyDecision, rec: TurnRecorder) -> str:
        """On the privacy route, an explicit deletion request (``bara.understand.forget``: not a question about
        deleting, not negated, not deferred) deletes the user's profile, notes, Q&A and episodic memory."""
        if not policy.privacy_mode or not asks_to_forget(t.clean.query):
            return ""
        with rec.stage("persist"):
            gone = self.bara.forget(t.user_id)
        rec.reason("privacy:memory_forgotten")
        return PROMPTS.PRIVACY_FORGOTTEN_WHAT.format(profile=PROMPTS.counted(gone.profile, "profile"),
                                                     notes=PROMPTS.counted(gone.notes or 0, "notes_short"),
                                                     qa=PROMPTS.counted(gone.qa or 0, "qa_short"),
                                                     episodes=PROMPTS.counted(gone.episodic or 0, "episodes"))

    # ----------------------------------------------------------------------- assembly
    def _inputs(self, t: TurnInput, gate: GateResult, policy: PolicyDecision, r: Retrieved, forgotten: str,
                rec: TurnRecorder) -> PromptInputs:
        profile = self.profile.get(t.user_id) if forgotten else t.profile
        history = self._history(t, policy, r, rec) if policy.use_history else ()
        history = history[-policy.history_messages:] if policy.history_messages is not None else history
        memory = self._memory_summary(t.user_id, profile) if policy.privacy_mode else None
        with rec.stage("assemble"):
            inputs = PromptInputs(
                message=t.clean.text, user_id=t.user_id, intent=gate.intent.intent, chitchat=gate.intent.chitchat,
                route=policy.route, behavior_mode=gate.behavior.mode, tone=gate.behavior.tone,
                answer_length=self._length(gate, profile, rec),
                kb_opened=policy.inject_kb, notes_requested=policy.inject_notes, privacy_mode=policy.privacy_mode,
                greeting_name=policy.greeting_name, profile=profile_items(profile) if policy.inject_profile else (),
                notes=note_items(r.notes), knowledge=self._shown(r, rec), qa=qa_items(r.qa), history=history,
                memory=memory, forgotten=forgotten, retrieval_query=r.query, episodes=episode_items(r.episodes),
                learned=t.facts.learned, noted=t.facts.noted, attribution=attribution_note(r.attribution),
                lean_system=self.settings.gate_lean_system_without_context)
        rec.reason("prompt:system_without_context" if inputs.lean else "")
        return inputs

    def _shown(self, r: Retrieved, rec: TurnRecorder) -> tuple[Source, ...]:
        """The knowledge passages as this turn's prompt shows them (``compact_sources``; the always baseline
        shows them verbatim); reasons ``kb:markup_dropped:N`` and ``kb:overlap_dropped:N`` (N characters)."""
        sources, markup, repeats = compact_sources(kb_sources(r.kb), markup=self.settings.gate_kb_compact_markup,
                                                   overlap_min_chars=self.settings.gate_kb_overlap_min_chars)
        rec.reason(f"kb:markup_dropped:{markup}" if markup else "")
        rec.reason(f"kb:overlap_dropped:{repeats}" if repeats else "")
        return sources

    @staticmethod
    def _length(gate: GateResult, profile: Mapping[str, str], rec: TurnRecorder) -> str:
        length, reason = preferred_length(gate.behavior.answer_length, gate.behavior.mode, profile)
        rec.reason(reason)
        return length

    def _history(self, t: TurnInput, policy: PolicyDecision, r: Retrieved,
                 rec: TurnRecorder) -> tuple[Utterance, ...]:
        """The recent window; for continuations also older turns whose question resembles the query."""
        window = len(t.messages)
        if policy.route != "conversation" or r.vector is None or window < self.settings.pipeline_history_messages:
            return t.history
        with rec.stage("retrieve_history"):
            scan = self.settings.gate_curate_scan_windows * window
            older = tuple(self.conversations.history(t.user_id, t.conversation_id, limit=scan))
        questions = [m.text for m in older if m.role == "user"]
        vectors = self._embed_many(questions, rec) if len(older) > window and questions else None
        if vectors is None:
            return t.history
        picked = curate_history(older, window, True, r.vector, per_message(older, vectors),
                                floor=self.settings.floor_continuation)
        rec.reason("history:older_similar_turns" if len(picked) > window else "")
        return tuple(Utterance(m.role, m.text) for m in picked)

    def _memory_summary(self, user_id: str, profile: Mapping[str, str]) -> MemorySummary:
        return MemorySummary(profile=profile_items(profile), notes=len(self.notes.list(user_id)),
                             qa=len(self.qa.list(user_id)), conversations=len(self.conversations.list(user_id)))

    def _prepare_next(self, t: TurnInput, plan: PersistPlan, meta: dict[str, Any]) -> None:
        """The next turn's history, analysed after the answer too."""
        self.bara.learning.prepare(next_turn_preparation(self.settings, t, plan, meta, self._rewrite_rules(),
                                                         self._embedder_id),
                                   *reply_preparation(self.settings, plan, meta, self.bara.embedder.embed,
                                                      answers_are_passages(t.messages)))
