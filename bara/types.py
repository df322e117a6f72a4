"""Frozen records passed between stages. Stages never mutate what they receive."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from enum import Enum
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal, Mapping, TypeVar, get_args

import numpy as np

R = TypeVar("R")


def evolve(record: R, **changes: Any) -> R:
    """``dataclasses.replace(record, **changes)`` for a frozen record whose fields are all init fields
    and which has no ``__post_init__`` (its ``__dict__`` is then exactly its arguments): the copy is
    made without replace's per-call field walk and the frozen ``__init__`` (the gate takes
    such steps about ten times a turn). ``tests/turn/test_turn_caches.py`` pins that each record it is used
    on qualifies and that the result equals ``replace``'s."""
    new = object.__new__(type(record))
    new.__dict__.update(record.__dict__, **changes)
    return new


@lru_cache(maxsize=4096)
def source_name(source: str) -> str:
    """``Path(source).name``, the file name traces and prompt labels show: cached per source (a
    knowledge base names the same few documents every turn, and pathlib parsing is not free)."""
    return Path(source).name


#: Owner scope of rows every user may read (the shared knowledge base).
SHARED = ""

# --- the closed vocabularies stages pass each other (the values are what traces and JSON show) ---
#: The route the policy picks (``PolicyDecision.route``).
Route = Literal["llm_only", "rag", "conversation", "adaptive", "profile", "profile_update", "privacy", "notes"]
#: A trace's route: a policy route, or the always baseline, an agent turn, an empty turn.
TraceRoute = Literal[Route, "always_rag", "agent", "none"]
#: What the intent classifier decides (``IntentResult.intent``).
Intent = Literal["general", "continuation", "knowledge_base", "profile", "privacy", "chitchat"]
#: The kind of a chit-chat message.
ChitchatKind = Literal["greeting", "thanks", "goodbye", "acknowledgement", "testing", "meta"]
#: How to behave this turn (``BehaviorDecision.mode``).
BehaviorMode = Literal["standard", "greeting", "repetition_aware", "testing_aware", "meta_aware",
                       "frustration_recovery", "rapid_fire", "exploratory"]
#: The named similarity floors of knowledge-base routes (``floor_kb``, ``floor_continuation``, ``floor_general``).
FloorName = Literal["kb", "continuation", "general"]
#: Memory tiers a policy may open; the trace counts the first four per turn.
Tier = Literal["kb", "profile", "notes", "qa", "episodic"]
#: Assistants over the gated pipeline, and every mode a surface (chat, serve, eval) may run.
PipelineMode = Literal["gated", "always"]
AssistantMode = Literal["gated", "always", "agent"]
#: Reference replies an evaluation may store instead of the mode's own ("last2": the dataset's).
ReferenceMode = Literal["last2"]

ROUTES: tuple[Route, ...] = get_args(Route)
INTENTS: tuple[Intent, ...] = get_args(Intent)
CHITCHAT_KINDS: tuple[ChitchatKind, ...] = get_args(ChitchatKind)
BEHAVIOR_MODES: tuple[BehaviorMode, ...] = get_args(BehaviorMode)
PIPELINE_MODES: tuple[PipelineMode, ...] = get_args(PipelineMode)
ASSISTANT_MODES: tuple[AssistantMode, ...] = get_args(AssistantMode)


def text_hash(text: str) -> str:
    """sha256 hex of the UTF-8 text; the identity of a chunk's or file's content."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Chunk:
    """One retrievable span of a document, with where it came from."""

    text: str
    source: str
    ordinal: int
    start: int  # character offset of the span in the source text
    end: int
    section: str = ""  # e.g. "3.2"
    title: str = ""  # e.g. "Message Format"
    content_hash: str = ""

    def __post_init__(self) -> None:
        if not self.content_hash:
            object.__setattr__(self, "content_hash", text_hash(self.text))


@dataclass(frozen=True)
class Document:
    """A whole source (file, record, memory item) about to be stored as chunks."""

    source: str
    content_hash: str
    chunks: tuple[Chunk, ...]
    collection: str = "kb"
    owner: str = SHARED
    title: str = ""
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ArmScore:
    """Rank (1-based) and raw score of a candidate in one retrieval arm; None when absent."""

    rank: int | None = None
    score: float | None = None


@dataclass(frozen=True, eq=False)
class SearchRequest:
    """What a Store needs to run hybrid search; built by the retriever."""

    terms: tuple[str, ...]  # analysed lexical terms (already stemmed, stopwords removed)
    vector: np.ndarray | None  # L2-normalised query embedding
    limit: int  # candidates fetched per arm (candidate_multiplier * k)
    owners: tuple[str, ...] = (SHARED,)
    collections: tuple[str, ...] = ("kb",)
    use_lexical: bool = True
    use_dense: bool = True
    weight_lexical: float = 1.0
    weight_dense: float = 1.0
    rrf_k: int = 60
    title_weight: float = 2.0
    skip_scope_test: bool = True  # Settings.lexical_skip_scope_test (SQLite's lexical arm)
    in_memory_lexical: bool = True  # Settings.lexical_in_memory (SQLite's lexical arm)
    in_memory_min_chunks: int = 1000  # Settings.lexical_in_memory_min_chunks
    in_memory_after: int = 20  # Settings.lexical_in_memory_after_searches


@dataclass(frozen=True)
class Candidate:
    """A fused candidate as a Store returns it, before floors and reranking."""

    chunk_id: int
    fused: float
    lexical: ArmScore
    dense: ArmScore
    similarity: float  # cosine(query, chunk); the floor applies to this


@dataclass(frozen=True)
class StoreSearchResult:
    candidates: tuple[Candidate, ...]
    lexical_hits: int
    dense_hits: int
    timings_ms: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StoredChunk:
    """A chunk as read back from a Store."""

    id: int
    text: str
    source: str
    section: str
    title: str
    collection: str
    owner: str
    ordinal: int
    start: int
    end: int
    meta: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Hit:
    """A retrieved chunk with every score the trace shows. Two scales: ``similarity`` (alias ``cosine``) is
    the cosine of query and chunk, -1..1, what a ``floor`` compares; ``fused`` is the weighted reciprocal
    rank fusion score that orders the hits (about 1/61 = 0.016 per arm at rank 1, so ~0.03 at best);
    ``score`` is what ordered them: ``fused``, or ``rerank_score`` when a reranker ran."""

    chunk: StoredChunk
    score: float  # final ranking score (fused, or rerank score when reranked)
    similarity: float  # cosine(query, chunk); the floor applies to this
    lexical: ArmScore
    dense: ArmScore
    fused: float
    rerank_score: float | None = None

    @property
    def id(self) -> int:
        return self.chunk.id

    @property
    def cosine(self) -> float:
        """cosine(query, chunk), the score ``floor`` compares (same as ``similarity``)."""
        return self.similarity

    def __repr__(self) -> str:
        """Each score named by its scale (the chunk's text is left out: ``hit.chunk.text``)."""
        where = f"{self.chunk.source} §{self.chunk.section}" if self.chunk.section else self.chunk.source
        order = "rerank" if self.rerank_score is not None else "fused"
        return (f"Hit({where!r}, cosine={self.similarity:.3f}, fused={self.fused:.4f}, "
                f"score={self.score:.4f} ({order}, orders the hits), id={self.chunk.id})")


class Status(str, Enum):
    OK = "ok"
    EMPTY = "empty"
    DEGRADED = "degraded"


@dataclass(frozen=True)
class RetrievalOutcome:
    """The result of one search: ok, empty, or degraded with reasons."""

    status: Status
    query: str
    hits: tuple[Hit, ...] = ()
    dropped: tuple[Hit, ...] = ()  # the best candidates the similarity floor removed (up to k)
    reasons: tuple[str, ...] = ()
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    n_dropped: int = 0  # how many candidates the floor removed in all

    @property
    def ok(self) -> bool:
        return self.status is Status.OK


@dataclass(frozen=True)
class Utterance:
    """One message of a conversation's history, as the understand stage sees it."""

    role: str  # "user" | "assistant"
    text: str
