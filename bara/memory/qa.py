"""The Q&A tier: answers the assistant already gave, reused when a question nearly repeats.

Each pair is one Store document in collection ``qa`` owned by the user; its one
chunk holds the question and its vector is the question's embedding (a repeat is
judged question to question), the answer rides in the document's meta. Search
covers all of the user's conversations and no one else's (``owners=(user_id,)``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from bara.identity import require_user_id
from bara.memory.notes import read_items, write_item
from bara.retrieval.hybrid import Arms, HybridRetriever
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.store.base import Store
from bara.types import Hit

COLLECTION = "qa"


@dataclass(frozen=True)
class QAHit:
    user_id: str
    source: str  # qa:<conversation>:<n>
    conversation_id: str
    question: str
    answer: str
    created_at: float
    similarity: float  # cosine(query, stored question); the floor applies to this
    recency_bonus: float
    conversation_bonus: float
    score: float  # similarity + recency_bonus + conversation_bonus


def recency_bonus(age_s: float, weight: float, half_life_s: float) -> float:
    """``weight * 0.5 ** (age / half_life)``: full weight now, half after one half-life."""
    return weight * math.pow(0.5, max(0.0, age_s) / half_life_s)


class QAMemory:
    """Per-user question/answer pairs, ranked by similarity, recency and conversation."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings):
        self.store, self.embedder, self.settings = store, embedder, settings
        self.retriever = HybridRetriever(store, embedder, settings)

    def add(self, user_id: str, conversation_id: str, question: str, answer: str,
            question_vector: np.ndarray | None = None, now: float | None = None) -> str:
        """Store one pair (pass ``question_vector`` if the query was already embedded); returns its source."""
        require_user_id(user_id)
        vector = self.embedder.embed([question])[0] if question_vector is None else question_vector
        meta = {"answer": answer, "conversation_id": conversation_id,
                "created_at": time.time() if now is None else now}
        return write_item(self.store, user_id, COLLECTION, f"qa:{conversation_id}:", question, vector, meta)

    def list(self, user_id: str) -> list[QAHit]:
        """Every stored pair of the user, oldest first (scores are 0)."""
        require_user_id(user_id)
        items = [_hit(owner, src, text, meta, 0.0, 0.0, 0.0) for owner, src, text, meta
                 in read_items(self.store, user_id, COLLECTION)]
        return sorted(items, key=lambda h: (h.created_at, h.source))

    def forget(self, user_id: str) -> int:
        require_user_id(user_id)
        return self.store.delete_owner(user_id, COLLECTION)

    def search(self, user_id: str, query: str, conversation_id: str | None = None, k: int | None = None,
               floor: float | None = None, vector: np.ndarray | None = None,
               now: float | None = None) -> tuple[QAHit, ...]:
        """Earlier answers to (nearly) this question, best first.

        Dense search over the user's stored questions keeps those with
        ``similarity >= floor`` (default ``settings.floor_qa``), then ranks them by

            score = similarity
                  + memory_qa_recency_weight * 0.5 ** (age_s / memory_qa_recency_half_life_s)
                  + (memory_qa_same_conversation_bonus if asked in ``conversation_id`` else 0)

        The bonuses only reorder pairs that passed the floor; they never admit one.
        """
        require_user_id(user_id)
        s = self.settings
        k = k or s.k
        floor = s.floor_qa if floor is None else floor
        outcome = self.retriever.search(query, k=k * s.candidate_multiplier, floor=floor, owners=(user_id,),
                                        collections=(COLLECTION,), arms=Arms.DENSE, vector=vector)
        now = time.time() if now is None else now
        hits = [self._ranked(h, conversation_id, now) for h in outcome.hits if h.chunk.owner == user_id]
        return tuple(sorted(hits, key=lambda h: (-h.score, -h.created_at, h.source))[:k])

    def _ranked(self, hit: Hit, conversation_id: str | None, now: float) -> QAHit:
        s, meta = self.settings, hit.chunk.meta
        age = now - float(meta.get("created_at", 0.0))
        recency = recency_bonus(age, s.memory_qa_recency_weight, s.memory_qa_recency_half_life_s)
        same = s.memory_qa_same_conversation_bonus if meta.get("conversation_id") == conversation_id else 0.0
        return _hit(hit.chunk.owner, hit.chunk.source, hit.chunk.text, meta, hit.similarity, recency, same)


def _hit(owner: str, source: str, question: str, meta: Mapping[str, Any], similarity: float,
         recency: float, same: float) -> QAHit:
    return QAHit(user_id=owner, source=source, conversation_id=str(meta.get("conversation_id", "")),
                 question=question, answer=str(meta.get("answer", "")),
                 created_at=float(meta.get("created_at", 0.0)), similarity=similarity,
                 recency_bonus=recency, conversation_bonus=same, score=similarity + recency + same)
