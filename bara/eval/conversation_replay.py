"""Whole conversations through one assistant mode (`bara eval ab --turns all`), and the `last2` reference.

Every user turn of a (possibly mixed) conversation runs, in order, through
:meth:`bara.turn.base.PipelineAssistant.turn`. What the conversation stores after a turn
is the task's reference reply when the turn has one (a ``before_persist`` hook
swaps it in, so later turns see the same history in every mode, as the
``--turns last`` replay does); after an inserted small-talk turn it is the
mode's own answer. Each turn leaves a :class:`TurnCost` (did it search the
knowledge base, store searches, context tokens, latency); the last turn's
trace is scored like a ``--turns last`` row.

``last2`` is hybrid search of the last two user messages joined with a space
(as ``bench/bench_rewrite.py`` builds its ``last_two`` strategy), at the same k,
no gating, no floor, and otherwise exactly ``always``: :class:`Last2Assistant`
only replaces the searched copy of the message (``clean.query``) once the turn's
window is loaded; the stored and shown message stays the user's own.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, get_args

from bara.app import Bara
from bara.eval.mixing import MixedConversation
from bara.hooks import HookContext, PersistPlan
from bara.turn.always import AlwaysAssistant
from bara.turn.base import PipelineAssistant
from bara.turn.gated import Assistant, pipeline_mode
from bara.turn.records import TurnInput, TurnResult
from bara.trace import TurnTrace
from bara.turn import TurnStart
from bara.types import ReferenceMode
from bara.understand.sanitize import sanitize

REFERENCE_MODES: tuple[ReferenceMode, ...] = get_args(ReferenceMode)


@dataclass(frozen=True)
class TurnCost:
    """What one user turn cost: the figures behind ``turns_all`` and ``inserted`` in the report."""

    inserted: bool
    kb_searched: bool
    retrieval_calls: int
    context_tokens: int
    latency_ms: float

    def to_dict(self) -> dict[str, Any]:
        return {"inserted": self.inserted, "kb": self.kb_searched, "calls": self.retrieval_calls,
                "tokens": self.context_tokens, "ms": round(self.latency_ms, 3)}


def kb_searched(trace: TurnTrace) -> bool:
    """Whether the turn ran a knowledge-base search (the timed ``retrieve_kb`` stage, or an agent search)."""
    agent = trace.gates.agent
    if agent is not None:
        return any(c.name == "search_documents" for c in agent.tool_calls)
    return trace.latency_ms.get("retrieve_kb", 0.0) > 0


class ReferenceReplies:
    """``before_persist`` hook: store the reference reply set for the coming turn ("" keeps the answer)."""

    def __init__(self) -> None:
        self.next = ""

    def __call__(self, plan: PersistPlan, ctx: HookContext) -> PersistPlan | None:
        return replace(plan, assistant_text=self.next) if self.next else None


class Last2Assistant(AlwaysAssistant):
    """``always`` that searches the previous user message and this one joined (the ``last2`` reference)."""

    def __init__(self, bara: Bara, model: Any = None):
        super().__init__(bara, model=model)

    def _input(self, start: TurnStart) -> TurnInput:
        t, clean = super()._input(start), start.clean
        query = last2_query([m.text for m in t.messages if m.role == "user"], clean.query)
        return replace(t, clean=replace(clean, query=sanitize(query, self.settings.max_query_chars).query))


def last2_query(earlier_user_messages: list[str], message: str) -> str:
    """The last earlier user message and this one, joined with a space (this one alone if it is the first)."""
    return " ".join([*earlier_user_messages[-1:], message])


def build_assistant(bara: Bara, mode: str) -> PipelineAssistant:
    """The assistant of a pipeline mode, or of a reference mode (``last2``)."""
    return Last2Assistant(bara) if mode == "last2" else Assistant(bara, model=None, mode=pipeline_mode(mode))


def run_conversation(assistant: PipelineAssistant, replies: ReferenceReplies, conv: MixedConversation, user: str,
                     cid: str) -> tuple[list[TurnCost], TurnResult]:
    """Run every user turn of ``conv`` in order; the cost of each and the final turn's result."""
    assistant.open_conversation(user, cid, create=True)
    costs: list[TurnCost] = []
    result: TurnResult | None = None
    for turn in conv.turns:
        replies.next = turn.reference_reply
        try:
            result = assistant.turn(user, turn.text, conversation_id=cid)
        finally:
            replies.next = ""
        tr = result.trace
        costs.append(TurnCost(turn.inserted, kb_searched(tr), retrieval_calls(tr), tr.context_tokens,
                              float(tr.latency_ms.get("total", 0.0))))
    assert result is not None  # a task always ends with its judged user turn
    return costs, result


def forget_user(assistant: PipelineAssistant, user: str) -> None:
    """Delete everything a task's run stored for its user (tiers, profile, conversations).

    Needed for independent rows: FTS5's ``bm25()`` takes document frequencies and lengths from its
    whole table, and every user's rows share one (``memory_fts``; the knowledge base has its own), so
    Q&A pairs and notes one run leaves behind would shift the memory ranking of every later task and
    mode (and a resumed run would differ from an uninterrupted one).
    """
    assistant.bara.flush()  # the last turn's learning writes first, or they would land after the delete
    with assistant.bara.store.transaction():
        assistant.bara.store.delete_owner(user)
        assistant.episodic.forget(user)  # its sessions and name index (the chunks went with delete_owner)
        assistant.profile.forget(user)
        assistant.conversations.delete(user)


def retrieval_calls(trace: TurnTrace) -> int:
    """Store searches the turn really ran: agent search calls, else the timed retrieve_* stages."""
    agent = trace.gates.agent
    if agent is not None:
        return sum(c.name == "search_documents" for c in agent.tool_calls)
    ran = sum(1 for stage in ("retrieve_kb", "retrieve_notes", "retrieve_qa") if trace.latency_ms.get(stage, 0) > 0)
    return ran or int(trace.retrieved)
