"""The always baseline: sliding-window RAG, the evaluation's reference for the gated pipeline.

It embeds every message, takes k knowledge-base chunks every turn (floor 0) and the last N messages,
with no tiers and no gates. It shares the generator, hooks and persist stage of every pipeline
assistant (``bara.turn.base``), so only retrieval differs from ``gated``.
"""

from __future__ import annotations

from bara.hooks import PersistPlan
from bara.prompts.frames import PromptInputs, kb_sources
from bara.trace import TurnRecorder
from bara.turn.base import PipelineAssistant
from bara.turn.records import Retrieved, TurnInput, TurnResult
from bara.types import PipelineMode
from bara.understand.features import normalize
from bara.understand.state import note_ungated_turn


class AlwaysAssistant(PipelineAssistant):
    """Sliding-window RAG over one :class:`~bara.app.Bara` (``always`` mode)."""

    mode: PipelineMode = "always"

    def _answer(self, t: TurnInput, rec: TurnRecorder) -> TurnResult:
        """Sliding-window RAG: embed, take k chunks (floor 0), last N messages; no tiers, no gates."""
        with rec.stage("retrieve_kb"):  # the lexical arm scores while the message is encoded
            prefetched = self.bara.retriever.prefetch(t.clean.query, k=self.settings.k)
        vector = self._embed(t.clean.query, rec)
        kb = self._tier("retrieve_kb", rec, lambda: self.bara.retriever.search(
            t.clean.query, k=self.settings.k, floor=0.0, vector=vector, prefetched=prefetched))
        retrieved = Retrieved(t.clean.query, False, kb, vector=vector, searched=True)  # its message is a topic
        self._tier_reasons(retrieved, rec)
        with rec.stage("assemble"):
            inputs = PromptInputs(message=t.clean.text, user_id=t.user_id, route="always_rag", kb_opened=True,
                                  knowledge=kb_sources(kb), history=t.history, retrieval_query=t.clean.query,
                                  learned=t.facts.learned, noted=t.facts.noted)
        ctx = self._context(t, None)
        answer, prompt = self._generate(inputs, ctx, rec)
        plan = PersistPlan(t.clean.text, answer, learn_profile=False, extract_notes=False, add_qa=False)
        state = note_ungated_turn(t.state, normalize(t.clean.query), self.settings)  # a later gated turn reads it
        stored = self._persist(t, state, plan, retrieved, ctx, rec,
                               lambda s: self._trace(t, None, None, retrieved, prompt, answer, s, rec))
        trace = self._trace(t, None, None, retrieved, prompt, answer, stored, rec)
        return TurnResult(answer, trace, t.conversation_id)

