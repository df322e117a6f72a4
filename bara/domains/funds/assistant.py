"""Agent mode: the portfolio assistant in which the model decides whether and when to search.

One turn: sanitise, load the conversation, run bara's gate, choose the tools to
offer (``agent_gate_tools``), run :func:`~bara.agent.loop.run_agent` over the
six fund tools with a session-bound :class:`~bara.agent.tools.ToolContext`,
persist the exchange, and return the same :class:`~bara.turn.gated.TurnResult`
and :class:`~bara.trace.TurnTrace` as the gated pipeline (``route="agent"``;
tool calls, status and usage under ``trace.gates.agent``).

The model is the configured LLM (``BARA_MODEL``) or, with none configured,
the offline :class:`~bara.domains.funds.router.RuleRouter`.

:func:`index_fund_documents` builds the ``funds_docs`` collection that
``search_documents`` reads: FiQA finance passages plus one fact sheet per
scheme, idempotent by content hash.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Collection, Sequence

from bara.store.base import Store
from bara.agent.loop import AgentRun, run_agent
from bara.agent.session import agent_details, call_query, chat_messages, hit_records, mark_run, run_reasons
from bara.agent.tools import Tool, ToolContext, ToolServices
from bara.app import Bara
from bara.domains.funds.router import SEARCH, RuleRouter
from bara.domains.funds.router.intent import normalise, other_person
from bara.domains.funds.settings import funds_settings
from bara.decide import GateResult, decide
from bara.domains.funds import (REFUSE_OTHER_USER, REFUSE_OUT_OF_SCOPE, FundsRepo, build_fund_tools, detect_refusal,
                                fiqa_documents, scheme_fact_documents)
from bara.domains.funds.prompts import AGENT_SYSTEM, EMPTY_REPLY, NO_ANSWER
from bara.domains.funds.tools import DOCS_COLLECTION
from bara.errors import InputError
from bara.llm.base import Model
from bara.llm.build import build_model
from bara.messages import Message
from bara.memory.knowledge import KnowledgeBase
from bara.turn.gated import TurnResult
from bara.turn.persist import TURN_STORED
from bara.turn import TurnStart, empty_trace, run_turn
from bara.understand.prototypes import prototypes_for
from bara.prompts import EMPTY_INPUT
from bara.decide.record import gate_record
from bara.trace import StoredRecord, TurnRecorder, TurnTrace
from bara.types import SHARED, Utterance, text_hash
from bara.understand.state import ConversationState

CORPUS = Path("mtrag") / "corpus.jsonl"


@dataclass(frozen=True)
class AgentTurn:
    """One agent turn: what the user gets (``result``) and what ran (``run``, ``offered``)."""

    result: TurnResult
    run: AgentRun | None
    offered: tuple[str, ...]


class AgentAssistant:
    """``bara chat --mode agent``: one instance per session; ``turn`` is safe to call repeatedly."""

    mode = "agent"

    def __init__(self, bara: Bara, model: Model | None = None, gate_tools: bool | None = None) -> None:
        self.bara, self.settings = bara, bara.settings
        self.model: Model = model or build_model(self.settings) or RuleRouter.for_store(bara.store, bara.embedder,
                                                                                        self.settings)
        self.gate_tools = self.settings.agent_gate_tools if gate_tools is None else gate_tools
        self.tools: dict[str, Tool] = build_fund_tools()
        self.conversations = bara.conversations
        self.repo = FundsRepo(bara.store)
        self._prototypes = prototypes_for(bara.embedder)[0]

    def turn(self, user_id: str, message: str | bytes, conversation_id: str | None = None) -> TurnResult:
        """Answer one message for ``user_id``; ``conversation_id`` None starts a new conversation."""
        return self.run_turn(user_id, message, conversation_id).result

    def run_turn(self, user_id: str, message: str | bytes, conversation_id: str | None = None,
                 persist: bool = True) -> AgentTurn:
        """Like :meth:`turn`, also returning the agent run; ``persist=False`` stores nothing (evaluation)."""
        name = self.user_name(user_id)  # an unknown user is refused, even with an empty message
        return run_turn(self.settings, self.bara.store, self.conversations, user_id, message, conversation_id,
                        body=lambda s, rec: self._turn(s, name, persist, rec),
                        empty=lambda cid, rec: AgentTurn(TurnResult(EMPTY_INPUT, empty_trace(
                            user_id, cid, "agent", rec), cid), None, ()),
                        open_conversation=lambda user, cid: self._open(user, cid, persist))

    def user_name(self, user_id: str) -> str:
        name = self.repo.user_name(user_id) if isinstance(user_id, str) else None
        if name is None:
            raise InputError(f"user {user_id!r} has no funds account here: pick an id from `bara funds users` "
                             "(or run `bara funds load` first)")
        return name

    def open_conversation(self, user_id: str, conversation_id: str | None = None, create: bool = False) -> str:
        """Same contract as the pipeline's: an existing conversation of ``user_id``, or a new one."""
        self.user_name(user_id)
        return self.conversations.open(user_id, conversation_id, create)

    def _open(self, user_id: str, conversation_id: str | None, persist: bool) -> str:
        if not persist:
            return conversation_id or ""
        # Same contract as the pipeline: a given id must be this user's (an unknown id and another
        # user's id get the same answer); None starts a new conversation.
        return self.conversations.open(user_id, conversation_id)

    def _turn(self, start: TurnStart, name: str, persist: bool, rec: TurnRecorder) -> AgentTurn:
        user_id, text, query, cid = start.user_id, start.clean.text, start.clean.query, start.loaded.conversation_id
        history, state, number = [(m.role, m.text) for m in start.loaded.messages], start.loaded.state, start.loaded.turn
        with rec.stage("gate"):
            gate = self._gate(query, history, state)
        offered, why = self.offered_tools(text, gate, (user_id, name))
        rec.reason(*(r for r in gate.reasons if r.startswith(("intent", "behavior:"))), why)
        ctx = ToolContext.start(user_id, self.bara.store, self.settings,
                                ToolServices(retriever=self.bara.retriever, domain={"funds": self.repo}))
        with rec.stage("agent"):
            run = run_agent(self.model, self.messages(user_id, name, history, text), offered, ctx)
        mark_run(rec, run, getattr(self.model, "name", "model"))
        answer = run.answer.strip() or NO_ANSWER.format(error=run.error or EMPTY_REPLY)
        rec.reason(*run_reasons(run, SEARCH))
        trace_of = functools.partial(self._trace, user_id, cid, number, gate, run, answer, tuple(offered))
        stored = self._persist(user_id, cid, text, answer, gate, run, rec, trace_of) if persist else \
            StoredRecord(turn=False)
        return AgentTurn(TurnResult(answer, trace_of(stored, rec), cid), run, tuple(offered))

    def _gate(self, query: str, history: Sequence[tuple[str, str]], state: ConversationState | None) -> GateResult:
        vector = self.bara.embedder.embed([query])[0] if self._prototypes is not None else None
        return decide(query, [Utterance(r, t) for r, t in history], state, {}, self.settings, self._prototypes,
                      message_vector=vector)

    def offered_tools(self, text: str, gate: GateResult, own: Sequence[str]) -> tuple[dict[str, Tool], str]:
        """All six tools, or none when the gate says no tool can help (and ``gate_tools`` is on)."""
        if not self.gate_tools:
            return self.tools, "agent:tools_all_gate_off"
        if gate.intent.intent == "chitchat":
            return {}, "agent:tools_none_chitchat"
        refusal = detect_refusal(text, tuple(own))
        if refusal is None and other_person(normalise(text, funds_settings(self.settings).router_keyword_score), tuple(own),
                                            self._people()):
            refusal = REFUSE_OTHER_USER
        if refusal in (REFUSE_OTHER_USER, REFUSE_OUT_OF_SCOPE):
            return {}, f"agent:tools_none_{refusal}"
        return self.tools, "agent:tools_all"

    def _people(self) -> list[str]:
        """Names of the store's users: naming one of them (not oneself) asks about someone else."""
        return self.repo.user_names()

    def messages(self, user_id: str, name: str, history: Sequence[tuple[str, str]], text: str) -> list[Message]:
        return chat_messages(AGENT_SYSTEM.format(name=name, user_id=user_id), history, text)

    def _persist(self, user_id: str, cid: str, text: str, answer: str, gate: GateResult, run: AgentRun,
                 rec: TurnRecorder, trace_of: Callable[[StoredRecord, TurnRecorder], TurnTrace]) -> StoredRecord:
        """Store the turn; a surface's ``TURN_STORED`` journal gets its trace in the same transaction, so a
        crash leaves the turn and its trace both, or neither."""
        meta = {"route": "agent", "status": run.status, "tools": [c.name for c in run.tool_calls]}
        journal = TURN_STORED.get()
        with self.bara.store.transaction():
            with rec.stage("persist"):  # the turn's writes; the COMMIT follows the stage (with the trace)
                seqs = self.conversations.record_turn(user_id, cid, text, answer, gate.new_state.to_dict(), meta)
                stored = StoredRecord(turn=True, seqs=tuple(seqs))
            if journal is not None:
                journal(trace_of(stored, rec))
        return stored

    def _trace(self, user_id: str, cid: str, number: int, gate: GateResult, run: AgentRun, answer: str,
               offered: tuple[str, ...], stored: StoredRecord, rec: TurnRecorder) -> TurnTrace:
        searches = [c for c in run.tool_calls if c.name == SEARCH and c.ok]
        hits = tuple(h for c in searches for h in hit_records(c))
        return TurnTrace(
            turn=number, user=user_id, mode="agent", conversation_id=cid, intent=gate.intent.intent,
            intent_source=gate.intent.source, intent_confidence=gate.intent.confidence,
            behavior_mode=gate.behavior.mode, route="agent", retrieved=bool(searches),
            retrieval_query=call_query(searches[0]) if searches else "", rewritten=len(searches) > 1,
            tiers={"kb": len(hits), "profile": 0, "notes": 0, "qa": 0}, hits=hits, answer=answer,
            generator=getattr(self.model, "name", "model"), latency_ms=rec.latency(), reasons=rec.reasons,
            gates=gate_record(gate, agent=agent_details(run, offered)), stored=stored, timeline=rec.timeline())


# ------------------------------------------------------------------------ indexing
@dataclass(frozen=True)
class IndexReport:
    written: int
    unchanged: int
    removed: int
    chunks: int
    seconds: float


def fund_documents(store: Store, data_dir: str | Path, codes: Collection[str] | None = None,
                   fiqa_ids: Collection[str] | None = None) -> list[tuple[str, str, str]]:
    """FiQA passages then scheme fact sheets as (source, title, text); subsets for fast tests."""
    fiqa = fiqa_documents(Path(data_dir).expanduser() / CORPUS)
    facts = scheme_fact_documents(store)
    if fiqa_ids is not None:
        fiqa = [d for d in fiqa if d[0].removeprefix("fiqa/") in set(fiqa_ids)]
    if codes is not None:
        facts = [d for d in facts if d[0].rsplit("/", 1)[-1] in set(codes)]
    return fiqa + facts


def index_fund_documents(bara: Bara, data_dir: str | Path | None = None, codes: Collection[str] | None = None,
                         fiqa_ids: Collection[str] | None = None,
                         progress: Callable[[str, int], None] | None = None) -> IndexReport:
    """Write the ``funds_docs`` collection (shared owner) from ``data_dir`` (default: settings.data_dir).

    Unchanged documents are skipped by content hash; with no subset given,
    documents no longer produced (e.g. a scheme without NAVs now) are removed.
    """
    started = time.perf_counter()
    docs = fund_documents(bara.store, data_dir or bara.settings.data_dir, codes, fiqa_ids)
    if progress:
        progress("total", len(docs))
    kb = KnowledgeBase(bara.store, bara.embedder, bara.settings, owner=SHARED, collection=DOCS_COLLECTION)
    written = chunks = 0
    for source, title, body in docs:
        done = _index_one(bara.store, kb, source, title, body)
        written, chunks = written + (done > 0), chunks + done
        if progress:
            progress(source, 1)
    full = codes is None and fiqa_ids is None
    removed = _prune(bara.store, {d[0] for d in docs}) if full else 0
    return IndexReport(written, len(docs) - written, removed, chunks, round(time.perf_counter() - started, 3))


def _index_one(store: Store, kb: KnowledgeBase, source: str, title: str, body: str) -> int:
    """Chunks written for one document; 0 when its content hash is already stored."""
    text = f"# {title}\n\n{body}"
    digest = text_hash(text)
    if store.document_hash(source, SHARED, DOCS_COLLECTION) == digest:
        return 0
    kind = "fiqa" if source.startswith("fiqa/") else "scheme"
    return kb.add_text(source, text, digest, meta={"kind": kind}).chunks


def _prune(store: Store, keep: set[str]) -> int:
    stale = [s for s in store.list_sources(SHARED, DOCS_COLLECTION) if s not in keep]
    return sum(bool(store.delete_document(s, SHARED, DOCS_COLLECTION)) for s in stale)
