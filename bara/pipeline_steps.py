"""Pure helpers of the gated turn (``bara.pipeline``): which history the rewrite reads, which hits
survive the relative gap, which turns are remembered as Q&A, per-message vectors for curation."""

from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from bara.decide import GateResult
from bara.memory.conversations import StoredMessage
from bara.memory.profile import extract_profile_facts
from bara.memory.vectors import skipped
from bara.types import RetrievalOutcome, Utterance

SEARCHING_INTENTS = frozenset({"knowledge_base", "continuation", "general"})


def per_message(messages: tuple[StoredMessage, ...], question_vectors: np.ndarray) -> np.ndarray:
    """One vector per message: each reply borrows its question's (a turn is judged by what was asked)."""
    rows, n = [], -1
    for m in messages:
        n += m.role == "user"
        rows.append(question_vectors[max(n, 0)])
    return np.asarray(rows)


def topical_history(messages: Sequence[StoredMessage | Utterance]) -> list[Utterance]:
    """History for the rewrite without the user's statements about themselves and the turns the gate
    did not search (small talk), nor the replies to them: a name said in passing ("my name is Sam")
    or an inserted "what's the weather like?" is not a topic for the KB query."""
    kept: list[Utterance] = []
    skipping = False
    for m in messages:
        if m.role == "user":
            skipping = skipped(m) or bool(extract_profile_facts(m.text))
        if not skipping:
            kept.append(Utterance(m.role, m.text))
    return kept


def within_gap(kb: RetrievalOutcome | None, gap: float) -> RetrievalOutcome | None:
    """Drop hits whose cosine is more than ``gap`` below the best hit's: a relative floor.

    A fixed floor must admit the weakest relevant hit of any query; relative to the best hit, a
    chunk far below it is rarely what the query meant (on the MTRAG-UN dev half a 0.3 gap keeps
    R@5 within 0.001 and drops ~10% of chunks). Dropped hits count in ``n_dropped``."""
    if kb is None or not kb.hits or gap >= 2.0:
        return kb
    best = max(h.similarity for h in kb.hits)
    kept = tuple(h for h in kb.hits if h.similarity >= best - gap)
    if len(kept) == len(kb.hits):
        return kb
    return replace(kb, hits=kept, n_dropped=kb.n_dropped + len(kb.hits) - len(kept),
                   reasons=kb.reasons + ("below_relative_gap",))


def learns_qa(gate: GateResult) -> bool:
    """Only a real question is remembered as a Q&A pair: not a statement ("let's go with TLS 1.2"),
    not a recap of our own notes, not a profile statement."""
    f = gate.features
    return (f.is_question and not f.notes_request and gate.intent.intent in SEARCHING_INTENTS
            and not f.is_profile_statement)
