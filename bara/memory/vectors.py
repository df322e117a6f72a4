"""Per-message vector cache: a turn's vectors ride in its user message's meta.

A searched turn stores the embedding of the user's words (``vec``) and the
conversation topic vector after it (``topic``, see ``bara.understand.topic``) with
the embedder's id. A later turn reads them instead of re-encoding its history.
History stored without them (imported or replayed conversations, another
embedder) falls back to encoding the recent content-bearing user messages once,
through the caller's (usually disk-cached) embedder.

Vectors are stored as float16 (cosine error ~1e-3, half the bytes), base64 so the
meta stays JSON; no schema change is needed.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Mapping, Sequence

import numpy as np

from bara.memory.conversations import StoredMessage
from bara.settings import Settings
from bara.understand.rewrite import has_content
from bara.understand.topic import topic_from_history

VEC, TOPIC, EMBEDDER, SEARCHED = "vec", "topic", "embedder", "searched"
#: User messages encoded when no stored topic vector exists (``memory_topic_fallback_messages``).
FALLBACK_MESSAGES: int = Settings.model_fields["memory_topic_fallback_messages"].default


def encode_vector(vector: np.ndarray) -> str:
    """base64 of the float16 bytes of ``vector`` (raveled)."""
    return base64.b64encode(np.asarray(vector, dtype=np.float16).ravel().tobytes()).decode("ascii")


def decode_vector(meta: Mapping[str, Any], key: str, embedder_id: str) -> np.ndarray | None:
    """The cached vector ``key`` of a message (read-only); None when absent, unreadable or from another
    embedder."""
    raw = meta.get(key) if isinstance(meta, Mapping) else None
    if not isinstance(raw, str) or meta.get(EMBEDDER) != embedder_id:
        return None
    return _decoded(raw)


@lru_cache(maxsize=1024)
def _decoded(raw: str) -> np.ndarray | None:
    """A pure function of the stored text, cached: every turn reads the topic its
    predecessor stored, and that turn's preparation decodes it after the answer. The array is
    shared, hence read-only."""
    try:
        vec = np.frombuffer(base64.b64decode(raw, validate=True), dtype=np.float16).astype(np.float32)
    except (ValueError, TypeError):
        return None
    if not vec.size or not bool(np.all(np.isfinite(vec))):
        return None
    vec.setflags(write=False)
    return vec


def message_meta(embedder_id: str, searched: bool, vector: np.ndarray | None,
                 topic: np.ndarray | None) -> dict[str, Any]:
    """The user message's meta for this turn: whether it searched, and its vectors when known."""
    meta: dict[str, Any] = {SEARCHED: searched}
    if vector is not None:
        meta.update({EMBEDDER: embedder_id, VEC: encode_vector(vector)})
        if topic is not None:
            meta[TOPIC] = encode_vector(topic)
    return meta


def skipped(message: Any) -> bool:
    """A user turn the gate decided not to search (small talk): it carries no topic. Anything
    without a meta (a plain ``Utterance``) was never gated, so it is not skipped."""
    meta = getattr(message, "meta", None)
    return message.role == "user" and isinstance(meta, Mapping) and meta.get(SEARCHED) is False


@dataclass(frozen=True)
class HistoryTopic:
    """The topic vector before this turn, whether any earlier user turn carries a topic, and
    how many messages had to be encoded to know it (0 when the cache served)."""

    topic: np.ndarray | None
    has_context: bool
    encoded: int = 0


def history_topic(messages: Sequence[StoredMessage], embedder_id: str, embed: Any,
                  weight: float, fallback_messages: int = FALLBACK_MESSAGES) -> HistoryTopic:
    """Walk the window back to the latest topic-bearing user turn; ``embed(texts)`` only on a miss."""
    users = [m for m in messages if m.role == "user" and not skipped(m) and has_content(m.text)]
    if not users:
        return HistoryTopic(None, False)
    for m in reversed(users):
        topic = decode_vector(m.meta, TOPIC, embedder_id)
        if topic is not None:
            return HistoryTopic(topic, True)
    recent = users[-fallback_messages:]
    vectors = embed([m.text for m in recent])
    if vectors is None:
        return HistoryTopic(None, True)
    return HistoryTopic(topic_from_history(list(vectors), weight), True, len(recent))
