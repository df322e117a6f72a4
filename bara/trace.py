"""One frozen, JSON-serialisable record per turn: what every gate decided, why, and what it cost.

``TurnTrace.to_json()`` is exactly what ``bara chat --json`` prints (one object
per line) and what a web timeline renders. ``TurnRecorder`` is the private,
per-turn accumulator the pipeline fills while a turn runs (stage latencies,
reason codes, hook errors); it is never shared between turns.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any, Iterator, Mapping, NamedTuple, Protocol, Sequence

from bara.types import Hit, RetrievalOutcome, source_name

#: Stages timed on every turn, in pipeline order (absent stages report 0.0).
STAGES = ("sanitize", "load", "gate", "embed", "load_vectors", "rewrite", "retrieve_kb", "retrieve_notes",
          "retrieve_qa", "retrieve_episodic", "retrieve_history", "agent", "assemble", "generate", "persist", "total")
#: Memory tiers whose items a prompt may carry (``tiers``: how many of each reached it).
TIERS = ("kb", "profile", "notes", "qa", "episodic")

#: Keys ``bara chat --json`` guarantees (more may follow).
JSON_KEYS = ("turn", "user", "mode", "intent", "intent_source", "behavior_mode", "route", "retrieved",
             "retrieval_query", "tiers", "hits", "dropped_by_floor", "context_tokens", "answer",
             "latency_ms", "reasons", "hook_errors", "conversation_id")


@dataclass(frozen=True)
class HitRecord:
    """A retrieved item as the trace shows it; ``score`` is the cosine the floor was applied to."""

    id: int
    source: str
    section: str
    score: float
    title: str = ""
    fused: float = 0.0
    tier: str = "kb"
    lexical_rank: int | None = None  # 1-based rank in each arm; None = the arm did not find it
    dense_rank: int | None = None

    @classmethod
    def from_hit(cls, hit: Hit, tier: str = "kb") -> "HitRecord":
        return cls(id=hit.id, source=source_name(hit.chunk.source), section=hit.chunk.section,
                   score=round(float(hit.similarity), 4), title=hit.chunk.title,
                   fused=round(float(hit.fused), 6), tier=tier, lexical_rank=hit.lexical.rank,
                   dense_rank=hit.dense.rank)


_NO_DETAIL: Mapping[str, Any] = {}  # shared by every interval without detail: read, never written


class StageSpan(NamedTuple):
    """One timed interval of a turn, in wall-clock nanoseconds (``time.time_ns`` scale).

    ``stage`` is a :data:`STAGES` name, or ``model_call`` / ``tool_call`` / ``rerank`` for the
    intervals an assistant marks itself; ``detail`` holds what that interval alone knows (a tool
    call's id, arguments and result envelope; a model call's usage). Kept in memory for exporters
    (``bara.observe``): never part of the trace JSON.
    """

    stage: str
    start_ns: int
    end_ns: int
    detail: Mapping[str, Any] = _NO_DETAIL  # a tuple, not a dataclass: ~20 are made per turn


@dataclass(frozen=True)
class HookErrorRecord:
    point: str
    hook: str
    error: str


class JsonRecord:
    """A trace record whose JSON leaves out the fields that are None (they are absent, not null)."""

    def as_dict(self) -> dict[str, Any]:
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}  # type: ignore[arg-type]


@dataclass(frozen=True)
class StoredRecord(JsonRecord):
    """What a turn persisted (``stored`` in the JSON); the empty record is ``{}``."""

    turn: bool | None = None  # False: nothing was stored (empty turn, veto, persist off)
    veto_reason: str | None = None  # a before_persist hook vetoed the turn
    profile_facts: Mapping[str, str] | None = None  # gated/always turns: what the turn taught
    notes: tuple[str, ...] | None = None
    qa: bool | None = None
    seqs: tuple[int, ...] | None = None  # agent turns: the message sequence numbers written


@dataclass(frozen=True)
class TokenUsage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class ToolCallTrace:
    """One tool call of an agent run as the trace shows it."""

    name: str
    args: Any  # the model's arguments as given (usually an object)
    ok: bool
    error: str | None
    latency_ms: float
    iteration: int


@dataclass(frozen=True)
class AgentRecord:
    """An agent run: status, cost and every tool call (``gates.agent`` in the JSON)."""

    status: str
    error: str | None
    model_calls: int
    iterations: int
    tools_offered: tuple[str, ...]
    usage: TokenUsage
    tool_calls: tuple[ToolCallTrace, ...]


@dataclass(frozen=True)
class GateRecord(JsonRecord):
    """Every gate's decision, as JSON-ready snapshots of the gate's records (``gates`` in the JSON).

    Built by :func:`bara.decide.record.gate_record`; the empty record (always mode, empty turns) is ``{}``.
    """

    features: Mapping[str, Any] | None = None  # ContextFeatures without ``normalized``
    intent: Mapping[str, Any] | None = None
    behavior: Mapping[str, Any] | None = None
    policy: Mapping[str, Any] | None = None  # PolicyDecision plus ``retrieves``
    state: Mapping[str, Any] | None = None  # the ConversationState after the turn
    policy_after_hooks: Mapping[str, Any] | None = None  # only when a policy_override hook changed it
    agent: AgentRecord | None = None  # agent turns


@dataclass(frozen=True)
class TurnTrace:
    """Everything one turn decided and did. Immutable; ``to_json`` gives plain JSON types."""

    turn: int
    user: str
    mode: str
    conversation_id: str
    intent: str = ""
    intent_source: str = ""
    intent_confidence: float = 0.0
    behavior_mode: str = ""
    route: str = ""
    retrieved: bool = False
    retrieval_query: str = ""
    rewritten: bool = False
    tiers: Mapping[str, int] = field(default_factory=lambda: dict.fromkeys(TIERS, 0))
    hits: tuple[HitRecord, ...] = ()
    memory_hits: tuple[HitRecord, ...] = ()
    dropped_by_floor: int = 0
    dropped_hits: tuple[HitRecord, ...] = ()  # the best knowledge hits the floor removed (up to k)
    kb_floor: float = 0.0  # the cosine floor applied to knowledge hits (0 = none)
    context_tokens: int = 0
    prompt_tokens: int = 0
    answer: str = ""
    generator: str = ""
    latency_ms: Mapping[str, float] = field(default_factory=dict)
    reasons: tuple[str, ...] = ()
    hook_errors: tuple[HookErrorRecord, ...] = ()
    gates: GateRecord = field(default_factory=GateRecord)
    stored: StoredRecord = field(default_factory=StoredRecord)
    #: When each stage ran (first is the whole turn), for span exporters; not in the JSON, not compared.
    timeline: tuple[StageSpan, ...] = field(default=(), compare=False, repr=False, metadata={"json": False})

    def to_json(self) -> dict[str, Any]:
        """A fresh dict of JSON-safe values (tuples become lists, records objects)."""
        return _plain(self)


def _plain(value: Any) -> Any:
    if isinstance(value, JsonRecord):
        return _plain(value.as_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value) if f.metadata.get("json", True)}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


@dataclass(frozen=True)
class RecorderSummary:
    """The trace fields a :class:`TurnRecorder` owns."""

    latency_ms: Mapping[str, float]
    reasons: tuple[str, ...]
    hook_errors: tuple[HookErrorRecord, ...]
    timeline: tuple[StageSpan, ...] = ()


class TurnRecorder:
    """Accumulates one turn's timings, reason codes and hook errors (one instance per turn)."""

    def __init__(self) -> None:
        self._latency: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._reasons: list[str] = []
        self._hook_errors: list[HookErrorRecord] = []
        self._intervals: list[tuple[str, float, float] | StageSpan] = []  # stage() keeps raw readings
        self._wall0 = time.time_ns()
        self._start = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block; repeated stages add up (e.g. two embeddings in one turn), and each run is
        kept as its own interval of the timeline."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self._latency[name] = self._latency.get(name, 0.0) + (t1 - t0) * 1e3
            self._intervals.append((name, t0, t1))  # a StageSpan only when the timeline is read

    def wall_ns(self, perf: float | None = None) -> int:
        """``perf`` (a ``time.perf_counter()`` reading; None: now) on the wall clock, in nanoseconds:
        the turn's intervals share one monotonic origin, so they nest and order exactly."""
        return self._wall0 + int(((time.perf_counter() if perf is None else perf) - self._start) * 1e9)

    def mark(self, name: str, start_ns: int, end_ns: int, /, **detail: Any) -> None:
        """Add an interval the recorder did not time itself (a model or tool call, a rerank)."""
        self._intervals.append(StageSpan(name, start_ns, end_ns, detail))

    def timeline(self) -> tuple[StageSpan, ...]:
        """The whole turn (stage ``total``, from the recorder's creation to now), then every interval."""
        spans = [i if isinstance(i, StageSpan) else StageSpan(i[0], self.wall_ns(i[1]), self.wall_ns(i[2]))
                 for i in self._intervals]
        return (StageSpan("total", self._wall0, self.wall_ns()), *spans)

    def reason(self, *codes: str) -> None:
        self._reasons.extend(c for c in codes if c)

    def hook_error(self, record: HookErrorRecord) -> None:
        self._hook_errors.append(record)
        self._reasons.append(f"hook:{record.point}_failed")

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(self._reasons))

    @property
    def hook_errors(self) -> tuple[HookErrorRecord, ...]:
        return tuple(self._hook_errors)

    def summary(self) -> RecorderSummary:
        """The trace fields this recorder owns: ``latency_ms``, ``reasons``, ``hook_errors``."""
        return RecorderSummary(self.latency(), self.reasons, self.hook_errors, self.timeline())

    def latency(self) -> dict[str, float]:
        """Per-stage milliseconds with ``total`` measured from the recorder's creation."""
        out = {k: round(v, 3) for k, v in self._latency.items()}
        out["total"] = round((time.perf_counter() - self._start) * 1e3, 3)
        return out


# --- building blocks the pipeline uses --------------------------------------------
# The memory tiers and prompts sit above this module, so their hits are read through these shapes.

class _Note(Protocol):
    @property
    def source(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


class NoteHitLike(Protocol):
    """:class:`bara.memory.notes.NoteHit`."""

    @property
    def note(self) -> _Note: ...
    @property
    def score(self) -> float: ...


class QAHitLike(Protocol):
    """:class:`bara.memory.qa.QAHit`."""

    @property
    def source(self) -> str: ...
    @property
    def question(self) -> str: ...
    @property
    def score(self) -> float: ...


class EpisodeHitLike(Protocol):
    """:class:`bara.memory.episodic.EpisodeHit`."""

    @property
    def source(self) -> str: ...
    @property
    def turn_id(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def similarity(self) -> float: ...
    @property
    def score(self) -> float: ...


class _PromptInputs(Protocol):
    @property
    def knowledge(self) -> Sequence[Any]: ...
    @property
    def profile(self) -> Sequence[Any]: ...
    @property
    def notes(self) -> Sequence[Any]: ...
    @property
    def qa(self) -> Sequence[Any]: ...
    @property
    def episodes(self) -> Sequence[Any]: ...


class PromptLike(Protocol):
    """:class:`bara.prompts.frames.Prompt`."""

    @property
    def inputs(self) -> _PromptInputs: ...
    @property
    def context_tokens(self) -> int: ...
    @property
    def tokens(self) -> int: ...


@dataclass(frozen=True)
class GateSummary:
    """The trace fields the gate decides; the defaults are the always-mode baseline (no gates)."""

    intent: str = "none"
    intent_source: str = "none"
    intent_confidence: float = 0.0
    behavior_mode: str = "none"
    route: str = "always_rag"
    gates: GateRecord = field(default_factory=GateRecord)


@dataclass(frozen=True)
class RetrievalSummary:
    """What was searched (``retrieval_query`` is "" when no tier was searched) and what came back."""

    retrieved: bool
    retrieval_query: str
    rewritten: bool
    hits: tuple[HitRecord, ...]
    memory_hits: tuple[HitRecord, ...]
    dropped_by_floor: int
    dropped_hits: tuple[HitRecord, ...]


@dataclass(frozen=True)
class PromptSummary:
    """Items injected per tier (after the token budget) and the token counts of a prompt."""

    tiers: Mapping[str, int]
    context_tokens: int
    prompt_tokens: int


def trace_fields(*parts: GateSummary | RetrievalSummary | PromptSummary | RecorderSummary) -> dict[str, Any]:
    """The summaries' fields as :class:`TurnTrace` keyword arguments (shallow: records stay records)."""
    return {f.name: getattr(p, f.name) for p in parts for f in fields(p)}


def kb_hit_records(outcome: RetrievalOutcome | None) -> tuple[HitRecord, ...]:
    """Hits of a :class:`~bara.types.RetrievalOutcome` (None = the tier stayed closed)."""
    return () if outcome is None else tuple(HitRecord.from_hit(h) for h in outcome.hits)


def memory_hit_records(notes: Sequence[NoteHitLike], qa: Sequence[QAHitLike]) -> tuple[HitRecord, ...]:
    """Notes and Q&A hits in the same shape as knowledge hits (``tier`` tells them apart)."""
    out = [HitRecord(0, h.note.source, h.note.kind, round(float(h.score), 4), h.note.text[:80], tier="notes")
           for h in notes]
    out += [HitRecord(0, h.source, "", round(float(h.score), 4), h.question[:80], tier="qa") for h in qa]
    return tuple(out)


def episodic_hit_records(hits: Sequence[EpisodeHitLike]) -> tuple[HitRecord, ...]:
    """Episodic hits (:class:`bara.memory.episodic.EpisodeHit`): section = turn id(s), title = the text."""
    return tuple(HitRecord(0, h.source, h.turn_id, round(float(h.similarity), 4), h.text[:80],
                           round(float(h.score), 6), tier="episodic") for h in hits)


def retrieval_summary(query: str, rewritten: bool, kb: RetrievalOutcome | None, notes: Sequence[NoteHitLike],
                      qa: Sequence[QAHitLike], episodes: Sequence[EpisodeHitLike] = ()) -> RetrievalSummary:
    """What was searched and what came back; episodic hits follow the notes and Q&A hits."""
    return RetrievalSummary(
        retrieved=bool(query), retrieval_query=query, rewritten=rewritten, hits=kb_hit_records(kb),
        memory_hits=memory_hit_records(notes, qa) + episodic_hit_records(episodes),
        dropped_by_floor=kb.n_dropped if kb is not None else 0,
        dropped_hits=() if kb is None else tuple(HitRecord.from_hit(h) for h in kb.dropped))


def prompt_summary(prompt: PromptLike) -> PromptSummary:
    """Items injected per tier (after the token budget) and the token counts of a Prompt."""
    i = prompt.inputs
    return PromptSummary(tiers={"kb": len(i.knowledge), "profile": len(i.profile), "notes": len(i.notes),
                                "qa": len(i.qa), "episodic": len(i.episodes)},
                         context_tokens=prompt.context_tokens, prompt_tokens=prompt.tokens)
