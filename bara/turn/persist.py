"""The persist stage of a gated turn (``bara.turn.gated``): what the user message taught the profile,
the learning writes queued for after the answer (notes, the episodic record, the Q&A pair), and the
per-message metadata that spares later turns re-encoding."""

from __future__ import annotations

import time
from contextvars import ContextVar
from typing import Any, Callable

from bara.app import Bara
from bara.errors import EmbedderError
from bara.hooks import PersistPlan
from bara.memory.conversations import StoredMessage
from bara.memory.notes import Note
from bara.memory.profile import ProfileFact, ProfileMemory
from bara.memory.vectors import TOPIC, decode_vector, message_meta
from bara.turn.records import Retrieved, TurnInput
from bara.turn.steps import ANSWER_IN_KB, answer_was_hit, topical_history
from bara.settings import Settings
from bara.trace import TurnTrace
from bara.understand.names import has_content
from bara.understand.rewrite import RewriteRules, prepare_history
from bara.understand.scaffold import strip_scaffolding


#: Set by a surface around one turn (``bara serve``: ``Runtime.run_turn``) to make the turn atomic with what
#: it learned and its trace: the persist transaction then runs the turn's learning writes
#: itself (no write-behind) and calls this with the turn's trace before it commits, so the surface stores
#: the trace in the same transaction. A crash leaves the turn, its learning and its trace all, or none.
TURN_STORED: ContextVar[Callable[[TurnTrace], None] | None] = ContextVar("bara_turn_stored", default=None)


def learn_profile(profile: ProfileMemory, t: TurnInput, plan: PersistPlan) -> list[ProfileFact]:
    """Profile facts of the user's own message, extracted once this turn (again only if a hook changed it)."""
    facts = t.facts.profile_of(plan.user_text)
    if facts is None:
        return profile.learn_from_user_turn(t.user_id, plan.user_text)
    if facts:
        profile.set_facts(t.user_id, facts)
    return facts


def learning_writes(bara: Bara, t: TurnInput, plan: PersistPlan, r: Retrieved,
                    notes: list[Note]) -> list[Callable[[], object]]:
    """The writes of what the turn taught besides its profile facts: notes, the episodic record, Q&A."""
    writes: list[Callable[[], object]] = []
    now = time.time()  # items are dated when the turn learned them, not when stored
    if notes:
        writes.append(lambda: bara.notes.add(t.user_id, t.conversation_id, notes, now=now))
    if bara.settings.memory_episodic_record_turns and plan.learn_profile:  # what was said, for later conversations
        name = str(t.profile.get("name") or "User")
        writes.append(lambda: bara.episodic.remember(t.user_id, t.conversation_id, t.turn, name, plan.user_text,
                                                     r.message_vector if r.query else None))
    if plan.add_qa:  # the user's own words, not the rewrite
        writes.append(lambda: bara.qa.add(t.user_id, t.conversation_id, t.clean.query, plan.assistant_text,
                                          r.message_vector, now=now))
    return writes


def user_meta(settings: Settings, embedder_id: str, r: Retrieved, reply: str = "") -> dict[str, Any]:
    """Whether the turn searched, and (cache on) its vectors, so later turns need not re-encode; and whether
    ``reply`` was one of its knowledge hits verbatim (``answer_in_kb``: how the next follow-up searches)."""
    quoted = {ANSWER_IN_KB: True} if answer_was_hit(reply, r.kb, settings.gate_kb_said_containment) else {}
    if not settings.gate_cache_vectors:
        return {"searched": r.searched, **quoted}
    return {**message_meta(embedder_id, r.searched, r.message_vector, r.vector if r.searched else None), **quoted}


def next_turn_preparation(settings: Settings, t: TurnInput, plan: PersistPlan, meta: dict[str, Any],
                          rules: RewriteRules, embedder_id: str) -> Callable[[], object]:
    """Work for the conversation's next turn, done after this answer: analyse the history
    that turn will load (this turn's window plus the two messages just stored) the way its rewrite
    reads it, and decode the topic vector it will start from, so the next turn computes only what its
    new message needs. Pure: it fills caches."""
    def prepare() -> None:
        window = settings.pipeline_history_messages
        if not window:
            return
        cid, uid = t.conversation_id, t.user_id
        stored = (StoredMessage(cid, uid, 0, "user", plan.user_text, 0.0, meta),
                  StoredMessage(cid, uid, 0, "assistant", plan.assistant_text, 0.0, {}))
        has_content(plan.user_text)  # read by the next turn's topic (bara.memory.vectors.history_topic)
        decode_vector(meta, TOPIC, embedder_id)
        recent = (*t.messages, *stored)[-window:]
        opening = (*t.head, *t.messages)[:settings.rewrite_head_messages]  # what the next turn's head will hold
        head = tuple(m for m in opening if m not in recent) if (t.head or (t.messages and t.messages[0].seq == 1)) else ()
        prepare_history(topical_history([*head, *recent]), rules)
    return prepare


def reply_preparation(settings: Settings, plan: PersistPlan, meta: dict[str, Any],
                      embed: Callable[[list[str]], object], passages: bool = False) -> tuple[Callable[[], object], ...]:
    """The vector of the reply just stored, computed after the answer when that reply was one of the turn's
    hits (``meta[ANSWER_IN_KB]``) or the conversation's answers already were (``passages``: an earlier
    searched turn of the window): a follow-up then searches with it (``gate_followup_reply_weight``;
    ``bara.turn.steps.last_reply`` reads the same text), and the embedder's cache serves the next
    turn. An embedder failure here is left for that turn to report."""
    use = settings.gate_followup_reply_weight > 0 and (passages or bool(meta.get(ANSWER_IN_KB)))
    reply = strip_scaffolding(plan.assistant_text) if use else ""
    if not reply:
        return ()

    def prepare() -> None:
        try:
            embed([reply])
        except EmbedderError:
            pass
    return (prepare,)
