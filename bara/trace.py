"""One frozen, JSON-serialisable record per turn: what every gate decided, why, and what it cost.

``TurnTrace.to_json()`` is exactly what ``bara chat --json`` prints (one object
per line) and what a web timeline renders. ``TurnRecorder`` is the private,
per-turn accumulator the pipeline fills while a turn runs (stage latencies,
reason codes, hook errors); it is never shared between turns.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from bara.types import Hit

#: Stages timed on every turn, in pipeline order (absent stages report 0.0).
STAGES = ("sanitize", "load", "gate", "embed", "rewrite", "retrieve_kb", "retrieve_notes", "retrieve_qa",
          "retrieve_history", "assemble", "generate", "persist", "total")
TIERS = ("kb", "profile", "notes", "qa")

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
        return cls(id=hit.id, source=Path(hit.chunk.source).name, section=hit.chunk.section,
                   score=round(float(hit.similarity), 4), title=hit.chunk.title,
                   fused=round(float(hit.fused), 6), tier=tier, lexical_rank=hit.lexical.rank,
                   dense_rank=hit.dense.rank)


@dataclass(frozen=True)
class HookErrorRecord:
    point: str
    hook: str
    error: str


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
    gates: Mapping[str, Any] = field(default_factory=dict)
    stored: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """A fresh dict of JSON-safe values (tuples become lists)."""
        return _plain(asdict(self))


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, float):
        return round(value, 4)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    return str(value)


class TurnRecorder:
    """Accumulates one turn's timings, reason codes and hook errors (one instance per turn)."""

    def __init__(self) -> None:
        self._latency: dict[str, float] = dict.fromkeys(STAGES, 0.0)
        self._reasons: list[str] = []
        self._hook_errors: list[HookErrorRecord] = []
        self._start = time.perf_counter()

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time a block; repeated stages add up (e.g. two embeddings in one turn)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self._latency[name] = self._latency.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

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

    def fields(self) -> dict[str, Any]:
        """The trace fields this recorder owns: ``latency_ms``, ``reasons``, ``hook_errors``."""
        return {"latency_ms": self.latency(), "reasons": self.reasons, "hook_errors": self.hook_errors}

    def latency(self) -> dict[str, float]:
        """Per-stage milliseconds with ``total`` measured from the recorder's creation."""
        out = {k: round(v, 3) for k, v in self._latency.items()}
        out["total"] = round((time.perf_counter() - self._start) * 1e3, 3)
        return out


# --- building blocks the pipeline uses --------------------------------------------

def kb_hit_records(outcome: Any) -> tuple[HitRecord, ...]:
    """Hits of a :class:`~bara.types.RetrievalOutcome` (None = the tier stayed closed)."""
    return () if outcome is None else tuple(HitRecord.from_hit(h) for h in outcome.hits)


def memory_hit_records(notes: Any, qa: Any) -> tuple[HitRecord, ...]:
    """Notes and Q&A hits in the same shape as knowledge hits (``tier`` tells them apart)."""
    out = [HitRecord(0, h.note.source, h.note.kind, round(float(h.score), 4), h.note.text[:80], tier="notes")
           for h in notes]
    out += [HitRecord(0, h.source, "", round(float(h.score), 4), h.question[:80], tier="qa") for h in qa]
    return tuple(out)


def gate_details(gate: Any) -> dict[str, Any]:
    """Every gate's decision and reasons, JSON-ready (a :class:`bara.decide.GateResult`)."""
    features = {k: v for k, v in asdict(gate.features).items() if k != "normalized"}
    policy = {**asdict(gate.policy), "retrieves": gate.policy.retrieves}
    return {"features": features, "intent": asdict(gate.intent), "behavior": asdict(gate.behavior),
            "policy": policy, "state": gate.new_state.to_dict()}


def gate_fields(gate: Any, policy: Any) -> dict[str, Any]:
    """Intent, behaviour and route fields; a None gate is the always-mode baseline (no gates)."""
    if gate is None:
        return {"intent": "none", "intent_source": "none", "intent_confidence": 0.0, "behavior_mode": "none",
                "route": "always_rag", "gates": {}}
    details = gate_details(gate)
    if policy != gate.policy:
        details["policy_after_hooks"] = {**asdict(policy), "retrieves": policy.retrieves}
    return {"intent": gate.intent.intent, "intent_source": gate.intent.source,
            "intent_confidence": gate.intent.confidence, "behavior_mode": gate.behavior.mode,
            "route": policy.route, "gates": details}


def retrieval_fields(query: str, rewritten: bool, kb: Any, notes: Any, qa: Any) -> dict[str, Any]:
    """What was searched (``query`` is "" when no tier was searched) and what came back."""
    return {"retrieved": bool(query), "retrieval_query": query, "rewritten": rewritten,
            "hits": kb_hit_records(kb), "memory_hits": memory_hit_records(notes, qa),
            "dropped_by_floor": kb.n_dropped if kb is not None else 0,
            "dropped_hits": () if kb is None else tuple(HitRecord.from_hit(h) for h in kb.dropped)}


def prompt_fields(prompt: Any) -> dict[str, Any]:
    """Items injected per tier (after the token budget) and the token counts of a Prompt."""
    i = prompt.inputs
    return {"tiers": {"kb": len(i.knowledge), "profile": len(i.profile), "notes": len(i.notes), "qa": len(i.qa)},
            "context_tokens": prompt.context_tokens, "prompt_tokens": prompt.tokens}
