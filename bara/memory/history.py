"""Curated history: the recent window, plus older turns that match a continuation.

Pure: no store, no embedder. The caller passes the messages (oldest first) and,
for continuations, the query vector and one vector per message.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from bara.memory.conversations import StoredMessage


def _turns(messages: Sequence[StoredMessage]) -> list[list[int]]:
    """Indexes grouped into turns: a user message and the replies that follow it."""
    turns: list[list[int]] = []
    for i, msg in enumerate(messages):
        if msg.role == "user" or not turns:
            turns.append([i])
        else:
            turns[-1].append(i)
    return turns


def _turn_scores(turns: list[list[int]], query_vector: np.ndarray, vectors: np.ndarray) -> list[float]:
    """A turn scores its best message's cosine to the query (vectors are unit length)."""
    sims = np.asarray(vectors, dtype=np.float32) @ np.asarray(query_vector, dtype=np.float32).ravel()
    return [float(max(sims[i] for i in turn)) for turn in turns]


def curate_history(messages: Sequence[StoredMessage], last_n: int, continuation: bool,
                   query_vector: np.ndarray | None = None, vectors: np.ndarray | Sequence[np.ndarray] | None = None,
                   older_k: int = 2, floor: float = 0.0) -> tuple[StoredMessage, ...]:
    """The last ``last_n`` messages; for a continuation, also the ``older_k`` older turns most
    similar to ``query_vector`` (scored >= ``floor``), all in their original order.

    ``vectors`` holds one unit vector per message, aligned with ``messages``. Without
    vectors (or for a non-continuation) only the recent window is returned.
    """
    cut = max(0, len(messages) - max(0, last_n))
    recent = tuple(messages[cut:])
    if not continuation or query_vector is None or vectors is None or older_k <= 0 or cut == 0:
        return recent
    if len(vectors) != len(messages):
        raise ValueError(f"{len(vectors)} vectors for {len(messages)} messages: the caller must align them")
    turns = _turns(messages[:cut])
    scores = _turn_scores(turns, query_vector, np.asarray(vectors)[:cut])
    best = sorted(range(len(turns)), key=lambda t: (-scores[t], -t))[:older_k]
    picked = sorted(i for t in best if scores[t] >= floor for i in turns[t])
    return tuple(messages[i] for i in picked) + recent
