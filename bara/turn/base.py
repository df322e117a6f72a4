"""What every pipeline assistant shares: the turn, the hooks, the generator, the tiers' timing, persist, trace.

:class:`PipelineAssistant` runs the turn skeleton (``bara.turn.skeleton``) and hands the loaded turn to
its mode's :meth:`~PipelineAssistant._answer`: the gated pipeline (``bara.turn.gated``) or the always
baseline (``bara.turn.always``). Both use the same generator, hooks and persist stage, so only
retrieval differs between them.

Turns on one conversation are serialised (``Conversations.turn_lock``); a turn's messages, state and
profile facts are stored in one transaction before it answers, and its notes, Q&A pair and episodic
record right after (``bara.memory.writebehind``). Every stage is timed and every decision leaves a
reason code in the turn's :class:`~bara.trace.TurnTrace`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

import numpy as np

from bara.app import Bara
from bara.decide import GateResult, PolicyDecision
from bara.decide.record import gate_summary
from bara.errors import BaraError
from bara.hooks import HookContext, Hooks, PersistPlan
from bara.llm.base import Model
from bara.llm.errors import LLMError
from bara.llm.offline import FALLBACK_REASON, Generator, ModelGenerator, OfflineGenerator, answered_by
from bara.prompts import EMPTY_INPUT
from bara.prompts.frames import Prompt, PromptInputs, assemble
from bara.store.base import Read
from bara.trace import StoredRecord, TurnRecorder, TurnTrace, prompt_summary, retrieval_summary, trace_fields
from bara.turn.persist import TURN_STORED, learn_profile, learning_writes, user_meta
from bara.turn.records import Retrieved, TurnInput, TurnResult
from bara.turn.skeleton import TurnStart, empty_trace, run_turn
from bara.types import PipelineMode
from bara.understand.state import ConversationState


class PipelineAssistant:
    """A multi-turn assistant over one :class:`~bara.app.Bara`; hooks live on ``self.hooks``. A mode
    subclasses it with its ``mode`` and :meth:`_answer`."""

    mode: PipelineMode

    def __init__(self, bara: Bara, model: Model | None = None, strict: bool = False, fallback_offline: bool = True):
        self.bara, self.settings, self.strict = bara, bara.settings, strict
        self.fallback_offline = fallback_offline  # False: a model failure raises (HTTP answers 502/504)
        self.hooks = Hooks()
        self.offline = OfflineGenerator()
        self.generator: Generator = ModelGenerator(model, bara.settings.gated_deadline_s) if model is not None else self.offline
        self.conversations, self.profile, self.notes = bara.conversations, bara.profile, bara.notes
        self.qa, self.episodic = bara.qa, bara.episodic
        self._embedder_id = str(getattr(bara.embedder, "model_id", ""))

    def open_conversation(self, user_id: str, conversation_id: str | None = None, create: bool = False) -> str:
        """An existing conversation of ``user_id``, or a new one (``None``, or ``create=True``)."""
        return self.conversations.open(user_id, conversation_id, create)

    # ---------------------------------------------------------------------------- turn
    def turn(self, user_id: str, message: str | bytes, conversation_id: str | None = None) -> TurnResult:
        """Answer one user message; ``conversation_id`` None starts a new conversation."""
        self.bara.flush()  # what earlier turns learned is stored before this one reads memory
        return run_turn(self.settings, self.bara.store, self.conversations, user_id, message, conversation_id,
                        body=self._body, empty=lambda cid, rec: self._empty_turn(user_id, cid, rec),
                        also=lambda cid: self._first_reads(user_id, cid))

    def _first_reads(self, user_id: str, cid: str) -> dict[str, Read]:
        """Reads of other tiers the turn needs before it decides anything, sent with the conversation's
        (``bara.turn.skeleton.load_conversation``: one round trip on PostgreSQL): the user's profile."""
        return {"profile": self.profile.read(user_id)}

    def _empty_turn(self, user_id: str, cid: str, rec: TurnRecorder) -> TurnResult:
        return TurnResult(EMPTY_INPUT, empty_trace(user_id, cid, self.mode, rec, behavior_mode="none"), cid)

    def _body(self, start: TurnStart, rec: TurnRecorder) -> TurnResult:
        with rec.stage("load"):
            t = self._input(start)
        return self._answer(t, rec)

    def _answer(self, t: TurnInput, rec: TurnRecorder) -> TurnResult:
        """The mode's own work on the loaded turn: retrieve, assemble, generate, persist, trace."""
        raise NotImplementedError

    def _input(self, start: TurnStart) -> TurnInput:
        """The turn's input: the loaded conversation and the user's profile (a reference mode may
        override this to change the query, e.g. ``bara.eval.conversation_replay.Last2Assistant``)."""
        also = start.loaded.also
        profile = also["profile"] if "profile" in also else self.profile.get(start.user_id)
        return TurnInput.of(start, profile, self.settings.memory_notes_max_concepts)

    def _embed(self, text: str, rec: TurnRecorder) -> np.ndarray | None:
        vectors = self._embed_many([text], rec)
        return None if vectors is None else vectors[0]

    def _embed_many(self, texts: list[str], rec: TurnRecorder) -> np.ndarray | None:
        return self._tier("embed", rec, lambda: self.bara.embedder.embed(texts))

    def _context(self, t: TurnInput, gate: GateResult | None) -> HookContext:
        return HookContext(point="", user_id=t.user_id, conversation_id=t.conversation_id, message=t.clean.text,
                           mode=self.mode, turn=t.turn, intent=gate.intent.intent if gate else "",
                           route=gate.policy.route if gate else "always_rag",
                           behavior_mode=gate.behavior.mode if gate else "", reasons=gate.reasons if gate else ())

    def _hook(self, point: str, value: Any, ctx: HookContext, rec: TurnRecorder) -> Any:
        if not self.hooks.registered(point):  # nothing to run: no context to build
            return value
        run = self.hooks.run(point, value, replace(ctx, point=point), strict=self.strict)
        for error in run.errors:
            rec.hook_error(error)
        return run.value

    def _tier(self, stage: str, rec: TurnRecorder, search: Callable[[], Any]) -> Any:
        """Run one timed stage (a tier's search, an embedding); a failure is recorded and yields None."""
        try:
            with rec.stage(stage):
                return search()
        except BaraError as exc:
            rec.reason(f"{stage}:failed:{type(exc).__name__}")
            return None

    @staticmethod
    def _tier_reasons(r: Retrieved, rec: TurnRecorder) -> None:
        if r.kb is not None:
            rec.reason(f"kb:{r.kb.status.value}", *(f"kb:{code}" for code in r.kb.reasons))
            rec.reason(f"kb:dropped_by_floor:{r.kb.n_dropped}" if r.kb.n_dropped else "")
        rec.reason(f"notes:{len(r.notes)}_found" if r.notes else "", f"qa:{len(r.qa)}_found" if r.qa else "",
                   f"episodic:{len(r.episodes)}_found" if r.episodes else "")

    def _generate(self, inputs: PromptInputs, ctx: HookContext, rec: TurnRecorder) -> tuple[str, Prompt]:
        with rec.stage("assemble"):
            prompt = assemble(inputs, self.settings.pipeline_context_budget_tokens)
        rec.reason(*prompt.reasons)
        prompt = self._hook("before_generation", prompt, ctx, rec)
        with rec.stage("generate"):
            try:
                answer = self.generator.generate(prompt)
            except LLMError as exc:
                if not self.fallback_offline:
                    raise
                rec.reason(f"{FALLBACK_REASON}{type(exc).__name__}")
                answer = self.offline.generate(prompt)
        shown = self._hook("after_generation", answer, ctx, rec)
        rec.reason("hook:answer_changed" if shown != answer else "")
        return shown, prompt

    # ------------------------------------------------------------------------ persist
    def _persist(self, t: TurnInput, state: ConversationState | None, plan: PersistPlan, r: Retrieved,
                 ctx: HookContext, rec: TurnRecorder,
                 trace_of: Callable[[StoredRecord], TurnTrace] | None = None) -> StoredRecord:
        """Store the turn and its profile facts (from the user's text only) in one transaction; queue its
        notes, episodic record and Q&A pair for the write-behind (or store them too, when it is off, or when
        a surface asks for the turn atomic with its learning and trace: ``TURN_STORED``, given
        ``trace_of(stored)`` inside the same transaction)."""
        plan = self._hook("before_persist", plan, ctx, rec)
        if plan.vetoed:
            rec.reason("persist:vetoed")
            return StoredRecord(turn=False, veto_reason=plan.veto_reason)
        # Offline answers quote documents; only a model's own words may yield notes.
        reply = plan.assistant_text if self.generator is not self.offline else ""
        journal = TURN_STORED.get()
        behind = self.settings.memory_write_behind and journal is None
        # flat: the turn's nested writes take no savepoints (a failure of any fails the turn whole)
        with self.bara.store.transaction(flat=True):
            with rec.stage("persist"):  # the turn's writes; their COMMIT follows the stage (with the trace)
                meta = user_meta(self.settings, self._embedder_id, r, plan.assistant_text)
                self.conversations.record_turn(t.user_id, t.conversation_id, plan.user_text, plan.assistant_text,
                                               state.to_dict() if state else {}, {"mode": self.mode}, meta)
                facts = learn_profile(self.profile, t, plan) if plan.learn_profile else []
                notes = t.facts.notes_of(plan.user_text, reply) if plan.extract_notes else []
                writes = learning_writes(self.bara, t, plan, r, notes)
                if not behind:
                    for write in writes:
                        write()
                stored = StoredRecord(turn=True, profile_facts={f.key: f.value for f in facts},
                                      notes=tuple(n.text for n in notes), qa=bool(plan.add_qa))
            rec.reason(*(f"persist:profile_{f.key}" for f in facts), *(f"persist:note_{n.kind}" for n in notes),
                       "persist:qa_added" if plan.add_qa else "")
            if journal is not None and trace_of is not None:
                journal(trace_of(stored))  # the final trace, the transaction's last write (with its COMMIT)
        if behind:
            self.bara.learning.defer(t.user_id, *writes)  # stored after the answer (bara.memory.writebehind)
            self._prepare_next(t, plan, meta)
        return stored

    def _prepare_next(self, t: TurnInput, plan: PersistPlan, meta: dict[str, Any]) -> None:
        """Queue pure work for the conversation's next turn, run after the answer (none by default)."""

    # -------------------------------------------------------------------------- trace
    def _trace(self, t: TurnInput, gate: GateResult | None, policy: PolicyDecision | None, r: Retrieved,
               prompt: Prompt, answer: str, stored: StoredRecord, rec: TurnRecorder) -> TurnTrace:
        retrieval = retrieval_summary(r.query, r.rewritten, r.kb, r.notes, r.qa, r.episodes)
        return TurnTrace(turn=t.turn, user=t.user_id, mode=self.mode, conversation_id=t.conversation_id,
                         answer=answer, generator=answered_by(self.generator.name, self.offline.name, rec.reasons), stored=stored,
                         kb_floor=float(policy.kb_floor) if policy is not None and r.kb is not None else 0.0,
                         **trace_fields(gate_summary(gate, policy), retrieval, prompt_summary(prompt), rec.summary()))
