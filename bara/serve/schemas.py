"""Request and response bodies of the HTTP API (pydantic): the contract the web timeline reads.

Every trace is a :class:`TraceOut`: all of :class:`bara.trace.TurnTrace` as JSON plus ``trace_id``,
``message`` (the user's own words; compare with ``retrieval_query`` to see a rewrite), ``errors`` and
``degraded``. Field meanings:

- gate decision: ``intent``, ``intent_source``, ``intent_confidence``, ``behavior_mode``, ``route``,
  ``retrieved`` (did any tier search run), ``gates`` (features, intent, behaviour, policy, state);
- why: ``reasons`` (reason codes in pipeline order, e.g. ``kb:floor_factual``, ``rewrite:applied``);
- what came back: ``hits`` (knowledge chunks with cosine ``score``, ``fused`` RRF score, per-arm ranks),
  ``memory_hits`` (``tier`` = notes | qa), ``dropped_hits`` and ``dropped_by_floor`` (what the cosine
  floor ``kb_floor`` removed), ``tiers`` (items injected per tier after the token budget);
- cost: ``context_tokens``, ``prompt_tokens``, ``latency_ms`` per stage (sanitize, load, gate, embed,
  rewrite, retrieve_kb, retrieve_notes, retrieve_qa, retrieve_history, assemble, generate, persist, total);
- hooks: ``hook_errors`` and reasons starting ``hook:``; ``stored`` (what the turn persisted).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Mode = Literal["gated", "always", "agent"]


class ErrorBody(BaseModel):
    """Every 4xx/5xx answer (OpenAI's error shape): ``error.type`` is a stable code (repeated as
    ``error.code``), ``error.message`` says what to change, ``error.param`` names the field to change."""

    class Detail(BaseModel):
        type: str
        message: str
        param: str | None = None
        code: str | None = None

    error: Detail


class HitOut(BaseModel):
    model_config = ConfigDict(extra="allow")
    id: int
    source: str
    section: str
    score: float = Field(description="cosine similarity of query and chunk (the floor applies to it)")
    title: str = ""
    fused: float = Field(0.0, description="weighted reciprocal rank fusion score")
    tier: str = "kb"
    lexical_rank: int | None = None
    dense_rank: int | None = None


class TraceOut(BaseModel):
    """One turn's full trace (see the module docstring for every field)."""

    model_config = ConfigDict(extra="allow")
    trace_id: str
    turn: int
    user: str
    mode: str
    conversation_id: str
    message: str = ""
    intent: str = ""
    intent_source: str = ""
    intent_confidence: float = 0.0
    behavior_mode: str = ""
    route: str = ""
    retrieved: bool = False
    retrieval_query: str = ""
    rewritten: bool = False
    tiers: dict[str, int] = {}
    hits: list[HitOut] = []
    memory_hits: list[HitOut] = []
    dropped_hits: list[HitOut] = []
    dropped_by_floor: int = 0
    kb_floor: float = 0.0
    context_tokens: int = 0
    prompt_tokens: int = 0
    answer: str = ""
    generator: str = ""
    latency_ms: dict[str, float] = {}
    reasons: list[str] = []
    hook_errors: list[dict[str, Any]] = []
    gates: dict[str, Any] = {}
    stored: dict[str, Any] = {}
    errors: list[str] = []
    degraded: bool = False


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(description="the user's message")
    conversation_id: str | None = Field(None, description="continue this conversation; omit to start one")
    mode: Mode | None = Field(None, description="gated | always | agent; default: the server's --mode")
    baseline: bool = Field(False, description="a side-by-side baseline: answered in a conversation of its own that "
                           "is deleted once answered, so it never lists among the caller's conversations")

    @model_validator(mode="after")
    def _baseline_alone(self) -> "TurnIn":
        if self.baseline and self.conversation_id is not None:
            raise ValueError("a baseline turn answers in a conversation of its own: omit conversation_id")
        return self


class TurnOut(BaseModel):
    answer: str
    conversation_id: str
    trace: TraceOut


class ConversationOut(BaseModel):
    id: str
    created_at: float
    updated_at: float
    turn_count: int
    message_count: int


class ConversationList(BaseModel):
    conversations: list[ConversationOut]


class TurnRecord(BaseModel):
    """One stored turn: the user's message, the answer, and its trace (None if not stored by the server)."""

    turn: int
    user: str
    assistant: str
    created_at: float
    trace: TraceOut | None = None


class TurnList(BaseModel):
    conversation_id: str
    turns: list[TurnRecord]


class SearchHit(BaseModel):
    id: int
    source: str
    section: str
    title: str
    text: str
    similarity: float = Field(description="cosine similarity")
    fused: float = Field(description="weighted reciprocal rank fusion score")
    lexical_rank: int | None = Field(None, description="1-based rank in the BM25 arm (None: not found)")
    lexical_score: float | None = None
    dense_rank: int | None = Field(None, description="1-based rank in the dense arm (None: not found)")
    dense_score: float | None = None


class SearchOut(BaseModel):
    query: str
    k: int
    status: str
    reasons: list[str]
    hits: list[SearchHit]
    latency_ms: dict[str, float] = {}


class RememberedTurnOut(BaseModel):
    session: str = Field(description="the stored batch: t<n> for chat turn n, a dialogue's session id otherwise")
    turn_id: str
    speaker: str
    text: str = Field(description="as remembered: '[8 May 2023] Speaker: words (resolved dates)'")


class EpisodeConversationOut(BaseModel):
    conversation_id: str
    sessions: int
    turns: int = Field(description="turns remembered from this conversation")
    first_date: str = Field(description="date of its first remembered session ('' when unknown)")
    last_date: str
    first_said_at: float
    last_said_at: float
    names: list[str] = Field(description="names indexed for the gate (speakers, names said), most sessions first")
    names_left_out: int
    remembered: list[RememberedTurnOut] = Field(description="its latest remembered turns, oldest first")
    remembered_left_out: int


class EpisodicOut(BaseModel):
    """What the caller said in earlier conversations and bara remembers (the episodic tier), bounded by the
    ``memory_inspect_episodic_*`` settings; what they leave out is counted."""

    turns: int = Field(description="every remembered turn, shown or not")
    conversations: list[EpisodeConversationOut] = Field(description="most recently said first")
    conversations_left_out: int


class MemoryOut(BaseModel):
    """The caller's memory: profile facts, notes, remembered Q&A and episodic memory."""

    user: str
    profile: dict[str, str]
    notes: list[dict[str, Any]]
    qa: list[dict[str, Any]]
    episodic: EpisodicOut
    conversations: int


class ForgetOut(BaseModel):
    deleted: dict[str, int]


class IngestOut(BaseModel):
    source: str
    status: str
    chunks: int
    reason: str = ""


class HealthOut(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="degraded while the store is down")
    mode: str
    version: str = ""
    store: Literal["ok", "down"] = Field("ok", description="down: a store fault in the last "
                                         "serve_health_fault_window_s, or the store does not answer now")
    store_error: str | None = Field(None, description="the fault's code (store_busy, store_full, store_read_only, "
                                    "store_unavailable) while the store is down")
    worker: int = Field(0, description="process id of the worker that answered (`bara serve --workers N` spreads "
                        "connections over N processes; a new connection may reach another one)")
