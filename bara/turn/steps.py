"""Helpers of the gated turn (``bara.turn.gated``): which history the rewrite reads, which hits
survive the relative gap, which hits a follow-up drops because an earlier reply already said them,
which turns are remembered as Q&A, per-message vectors for curation, and
the guessed knowledge-base query whose lexical arm starts before the message is encoded (the one
helper here that is not pure: it starts the store's background search)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Mapping, Sequence

import numpy as np

from bara.decide import SEARCHING_INTENTS, GateResult
from bara.decide.behavior import largest_k
from bara.memory.conversations import StoredMessage
from bara.memory.notes import Note, extract_notes
from bara.memory.profile import ProfileFact, extract_profile_facts
from bara.prompts.frames import NoteItem
from bara.memory.vectors import skipped
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import Settings
from bara.store.base import LexicalPrefetch
from bara.trace import TurnRecorder
from bara.text.lexical import analyze
from bara.types import RetrievalOutcome, Utterance
from bara.understand.rewrite import RewriteResult, RewriteRules, rewrite_query
from bara.understand.scaffold import strip_scaffolding

@dataclass(frozen=True)
class LexicalGuess:
    """The knowledge-base query a turn expects to search, started before its message is encoded:
    the rewrite when there is history to carry (``rewrite`` None otherwise) and the
    lexical arm running on the store's second connection (None when the store cannot)."""

    rewrite: RewriteResult | None = None
    prefetched: LexicalPrefetch | None = None


def rewrite_for(query: str, messages: Sequence[StoredMessage], settings: Settings,
                rules: RewriteRules, head: Sequence[StoredMessage] = ()) -> RewriteResult:
    """The turn's rewrite: ``query`` standalone, given the topical part of the conversation's opening
    (``head``, when the recent window no longer holds it) and of the recent window."""
    return rewrite_query(query, topical_history([*head, *messages]), max_chars=settings.max_query_chars, rules=rules)


def lexical_guess(query: str, messages: Sequence[StoredMessage], retriever: HybridRetriever, settings: Settings,
                  rules: RewriteRules, rec: TurnRecorder, head: Sequence[StoredMessage] = ()) -> LexicalGuess:
    """Issue 16: the query the knowledge-base search will most likely use (the rewrite, when there is
    history to carry), its lexical arm started now so that it scores while the message is encoded.
    The rewrite is pure, so retrieval reuses it. The arm ranks enough rows for the largest k the gate
    may choose (plus the spare a follow-up searches when earlier replies may be dropped: :func:`drop_said`),
    so a reduced or boosted search takes its leading rows (``bara.store.sqlite_lexical``); a search for
    another query ignores the prefetch and runs its own lexical arm."""
    rewrite = None
    if messages:
        with rec.stage("rewrite"):
            rewrite = rewrite_for(query, messages, settings, rules, head)
    with rec.stage("gate"):  # not retrieve_kb: the gate may still close the knowledge base
        spare = settings.gate_kb_said_spare if any(m.role != "user" for m in messages) else 0
        prefetched = retriever.prefetch(rewrite.query if rewrite else query, k=largest_k(settings) + spare)
    return LexicalGuess(rewrite, prefetched)


@dataclass(frozen=True)
class TurnFacts:
    """What the user's message states, extracted once per turn: the generator is handed them
    (``PromptInputs.learned`` / ``noted``) and persist stores the same ones."""

    text: str
    profile: tuple[ProfileFact, ...]
    notes: tuple[Note, ...]
    max_concepts: int  # Settings.memory_notes_max_concepts

    @classmethod
    def of(cls, text: str, max_concepts: int) -> "TurnFacts":
        notes = extract_notes(text, max_concepts=max_concepts)
        return cls(text, tuple(extract_profile_facts(text)), tuple(notes), max_concepts)

    @property
    def learned(self) -> tuple[tuple[str, str], ...]:
        return tuple((f.key, f.value) for f in self.profile)

    @property
    def noted(self) -> tuple[NoteItem, ...]:
        return tuple(NoteItem(n.kind, n.text) for n in self.notes)

    def profile_of(self, user_text: str) -> list[ProfileFact] | None:
        """The facts of ``user_text`` when it is this turn's message (a hook may have changed it), else None."""
        return list(self.profile) if user_text == self.text else None

    def notes_of(self, user_text: str, reply: str) -> list[Note]:
        """Notes of the turn: the message's (reused when unchanged), then the reply's."""
        return extract_notes(user_text, reply, list(self.notes) if user_text == self.text else None,
                             max_concepts=self.max_concepts)


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
            skipping = skipped(m) or states_facts(m.text)
        if not skipping:
            kept.append(Utterance(m.role, m.text))
    return kept


@lru_cache(maxsize=4096)
def states_facts(text: str) -> bool:
    """Whether the user states a fact about themselves in ``text``: pure, cached per message text,
    since every turn's rewrite re-reads the same recent history."""
    return bool(extract_profile_facts(text))


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


def last_reply(messages: Sequence[StoredMessage]) -> str:
    """The latest reply of the topical history (small talk and the replies to it left out), without its
    scaffolding: what the answer a follow-up leans on was about ("" when there is none)."""
    for utt in reversed(topical_history(messages)):
        if utt.role != "user":
            return strip_scaffolding(utt.text)
    return ""


@lru_cache(maxsize=1024)
def _terms(text: str) -> frozenset[str]:
    return frozenset(analyze(text))


def said_terms(messages: Sequence[StoredMessage]) -> tuple[frozenset[str], ...]:
    """The analysed terms of each reply in the window (cached per text: the next turn reads them again)."""
    return tuple(t for m in messages if m.role != "user" and (t := _terms(m.text)))


def drop_said(kb: RetrievalOutcome | None, said: Sequence[frozenset[str]], containment: float,
              k: int) -> RetrievalOutcome | None:
    """The first ``k`` hits that no earlier reply already is: a hit is dropped when it and one reply
    share at least ``containment`` of each one's distinct terms (reason ``said_before:N``).

    When the assistant's answers are passages of the knowledge base (an FAQ, extractive answers), the
    passage the last answer was is the best match for the follow-up's words too, and would take a
    slot that a passage saying something new should have: the conversation already holds it. Both
    ways, not one: a reply that quotes a short passage among other things leaves it a hit (on MTRAG-UN
    dev the one-way test dropped two passages judged relevant to the follow-up, the two-way test none)."""
    if kb is None or not kb.hits:
        return kb
    kept = tuple(h for h in kb.hits if not _contained(h.chunk.text, said, containment))
    n = len(kb.hits) - len(kept)
    if not n and len(kb.hits) <= k:
        return kb
    return replace(kb, hits=kept[:k], reasons=kb.reasons + ((f"said_before:{n}",) if n else ()))


#: The user message's meta key: the reply to it was one of that turn's knowledge hits (``answer_was_hit``).
ANSWER_IN_KB = "answer_in_kb"


def answer_was_hit(reply: str, kb: RetrievalOutcome | None, containment: float) -> bool:
    """Whether ``reply`` is one of ``kb``'s hits (the two-way test of :func:`drop_said`): the assistant
    answers with the knowledge base's passages themselves (an FAQ, extractive answers)."""
    if kb is None or not kb.hits or not reply:
        return False
    terms = _terms(reply)
    return bool(terms) and any(_contained(h.chunk.text, (terms,), containment) for h in kb.hits)


_IDENTIFIER = re.compile(r"(?<![\w.-])(?=[\w.-]*\d)(?=[\w.-]*[^\W\d_])\w[\w.-]*\w(?![\w.-])|(?<![\w.])\d{3,}(?![\w.])")


def names_identifier(text: str) -> bool:
    """Whether ``text`` names an identifier: a token mixing letters and digits ("E1234", "IPv6", "v2.3") or a
    number of three or more digits ("RFC 7231", "port 443"), which only the full-text arm matches exactly."""
    return bool(_IDENTIFIER.search(text))


def answers_are_passages(messages: Sequence[StoredMessage]) -> bool:
    """Whether a searched user turn of the window was answered with one of its hits verbatim: the assistant
    answers with the knowledge base's passages. A property of the conversation, not of the last turn: a
    turn whose search missed the passage its answer was cannot show it, and its follow-up is the one that
    most needs the passage it was just told (CAsT 2022 dev half R@5: 0.887 read from the last turn, 0.907 so)."""
    return any(m.role == "user" and not skipped(m) and isinstance(m.meta, Mapping) and bool(m.meta.get(ANSWER_IN_KB))
               for m in messages)


def _contained(text: str, said: Sequence[frozenset[str]], containment: float) -> bool:
    terms = _terms(text)
    return bool(terms) and any(len(terms & reply) >= containment * max(len(terms), len(reply)) for reply in said)


def learns_qa(gate: GateResult) -> bool:
    """Only a real question is remembered as a Q&A pair: not a statement ("let's go with TLS 1.2"),
    not a recap of our own notes, not a profile statement."""
    f = gate.features
    return (f.is_question and not f.notes_request and gate.intent.intent in SEARCHING_INTENTS
            and not f.is_profile_statement)


def mark_rerank(rec: TurnRecorder, kb: RetrievalOutcome | None, settings: Settings) -> None:
    """When the knowledge search reranked (``timings_ms["rerank"]``), its interval on the turn's
    timeline, ending now (the rerank is the search's last step), for span exporters."""
    ms = kb.timings_ms.get("rerank") if kb is not None else None
    if kb is None or not ms:
        return
    end = rec.wall_ns()
    rec.mark("rerank", end - int(ms * 1e6), end, model=settings.rerank_model, top_k=len(kb.hits),
             status=kb.status.value)
