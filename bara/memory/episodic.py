"""The episodic tier: what was said, per user, across conversations, with its time.

Each stored turn is one chunk in collection ``episodic`` owned by the user, so it
shares the Store's hybrid search (BM25 + dense, RRF) with the other tiers and no
query can reach another user's rows. A batch of turns (one dialogue session, or
one chat turn) is one Store document: ``ep:<conversation>:<session>``. A chunk's
text is what the prompt shows, ``[8 May 2023] Caroline: I went ... yesterday (7
May 2023) ...``: the session date and every relative date resolved against it
(:mod:`bara.memory.dates`) are written with the words, so "when did ..." finds a
date. ``section`` holds the turn id, ``title`` the speaker (lexically weighted,
so a question naming a person favours what that person said).

The table ``episodic_sessions`` (migration ``0010_episodic``) records each
batch's date, speakers and the names said in it; ``episodic_names`` (``0015``,
:mod:`bara.memory.episodic_names`) indexes those names per user and conversation,
kept in the same transactions: the gate asks it which of a message's words the
memory knows.

Multi-hop without a model: when a question joins two facts (``joins_facts``), a
second round searches again seeded by what the first round's best hits mention
(people, places, titles, dates) that the question did not, and the rounds are
fused with weighted RRF; the number of second-round queries is capped by
``memory_episodic_hop_queries``.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Sequence

import numpy as np

from bara.memory import episodic_attribution as attribution
from bara.memory import episodic_audit
from bara.memory import episodic_names as name_index
from bara.memory.dates import annotate, fmt_day
from bara.retrieval.hybrid import HybridRetriever
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.store.base import Read, Store
from bara.text.fusion import weighted_rrf
from bara.text.lexical import analyze
from bara.text.stopwords import RETRIEVAL_STOPWORDS
from bara.understand.attribution import question_names
from bara.types import Chunk, Document, Hit, text_hash

COLLECTION = "episodic"

_CAPITALISED = re.compile(r"\b[A-Z][a-z][\w'\-]*(?:\s+[A-Z][a-z][\w'\-]*)*")
_DATE_VALUE = re.compile(r"\((?:around |the week of |the weekend of )?(\d{1,2} [A-Z][a-z]+ \d{4}|[A-Z][a-z]+ \d{4}|"
                         r"\d{4})\)")
_JOIN = re.compile(
    r"\b(both|in common|what (?:kinds?|types?|sorts?) of|which \w+s\b|how many|"
    r"what (?:activities|things|events|books|places|hobbies|items|pets|instruments|games|sports|ways|"
    r"countries|cities|symbols|plans|changes|causes|traits|names)|where has|where have|list|all the|"
    r"what (?:has|have) \w+ (?:\w+ )?(?:done|made|painted|bought|read|visited|tried))\b", re.I)
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)([A-Z][\w'\-]*)")
_GENERIC_CAPS = frozenset("""i i'm i've i'd i'll hey hi hello oh yeah yes no wow thanks thank sure omg okay ok so
but and it's that's what when where how why who which do did does have has was were is are the a an my
""".split())


@dataclass(frozen=True)
class Turn:
    """One utterance to remember: who said it and, optionally, its id in the source dialogue."""

    speaker: str
    text: str
    turn_id: str = ""


@dataclass(frozen=True)
class EpisodeHit:
    source: str  # ep:<conversation>:<session>
    turn_id: str  # "D3:7" in LoCoMo; "<n>" for chat turns
    speaker: str
    text: str  # as stored: "[date] Speaker: words (resolved dates)"
    date: str  # "8 May 2023"; "" when unknown
    similarity: float  # cosine(query, turn); the floor applies to this
    score: float  # fused over rounds (plus the speaker boost)
    round: int = 1  # 2 = found by the multi-hop round


@dataclass(frozen=True)
class EpisodicResult:
    hits: tuple[EpisodeHit, ...]
    hop_queries: tuple[str, ...] = ()  # second-round queries that ran (empty = one round)
    reasons: tuple[str, ...] = ()
    attribution: attribution.Attribution | None = None  # whose event the best turns tell


def episode_text(speaker: str, text: str, when: datetime | None) -> str:
    """What one stored turn says: ``[8 May 2023] Caroline: ... yesterday (7 May 2023) ...``."""
    body = annotate(" ".join(text.split()), when)
    stamp = f"[{fmt_day(when)}] " if when else ""
    return f"{stamp}{speaker}: {body}" if speaker else f"{stamp}{body}"


def context_vectors(vectors: np.ndarray, weight: float) -> np.ndarray:
    """Each turn's vector leaned towards its neighbours in the same batch, re-normalised:

        v'_i = normalise(v_i + weight * (v_{i-1} + v_{i+1}))

    A reply ("Yes, it was amazing!") is found by what it answers; the text shown stays the turn's own.
    """
    v = np.asarray(vectors, dtype=np.float32)
    if weight <= 0 or len(v) < 2:
        return v
    ctx = np.zeros_like(v)
    ctx[1:] += v[:-1]
    ctx[:-1] += v[1:]
    out = v + weight * ctx
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def joins_facts(question: str) -> bool:
    """True when the question asks for several facts at once (lists, counts, "both", "in common")."""
    return bool(_JOIN.search(question or ""))


def mentioned(text: str) -> list[str]:
    """Names, titles and dates a text mentions, in order (sentence-initial common words dropped)."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    out: list[str] = []
    for m in _CAPITALISED.finditer(text):
        word = m.group(0)
        if m.start() in starts and " " not in word and word.lower() in _GENERIC_CAPS | RETRIEVAL_STOPWORDS:
            continue
        if word.lower() not in _GENERIC_CAPS and word not in out:
            out.append(word)
    out += [d for d in _DATE_VALUE.findall(text) if d not in out]
    return out


def proper_names(text: str) -> list[str]:
    """Capitalised words inside a sentence (never its first word): names of people, pets, places."""
    starts = {m.start(1) for m in _SENTENCE_START.finditer(text)}
    out = []
    for m in re.finditer(r"\b[A-Z][a-z]{2,}\b", text):
        word = m.group(0)
        if m.start() not in starts and word.lower() not in _GENERIC_CAPS | RETRIEVAL_STOPWORDS and word not in out:
            out.append(word)
    return out


class EpisodicMemory:
    """Per-user episodes in a Store; every read binds the user."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings):
        self.store, self.embedder, self.settings = store, embedder, settings
        self.retriever = HybridRetriever(store, embedder, settings)

    # ------------------------------------------------------------------ write
    def add_session(self, user_id: str, conversation_id: str, session: str, turns: Sequence[Turn],
                    when: datetime | None = None, vectors: np.ndarray | None = None) -> str:
        """Store one batch of turns said at ``when`` (one embedding call); returns its source."""
        source = f"ep:{conversation_id}:{session}"
        turns = [t for t in turns if t.text and t.text.strip()]
        if not turns:
            return source
        texts = [episode_text(t.speaker, t.text, when) for t in turns]
        if vectors is None:
            vectors = context_vectors(self.embedder.embed(texts), self.settings.memory_episodic_context_weight)
        chunks, pos = [], 0
        for i, (t, text) in enumerate(zip(turns, texts, strict=False)):
            chunks.append(Chunk(text=text, source=source, ordinal=i, start=pos, end=pos + len(text),
                                section=t.turn_id or str(i + 1), title=t.speaker))
            pos += len(text) + 1
        date = fmt_day(when) if when else ""
        meta = {"conversation_id": conversation_id, "session": session, "date": date,
                "said_at": when.timestamp() if when else time.time()}
        doc = Document(source=source, content_hash=text_hash("\n".join(texts)), chunks=tuple(chunks),
                       collection=COLLECTION, owner=user_id, meta=meta)
        speakers = sorted({t.speaker for t in turns if t.speaker})
        names = sorted({n for t in turns for n in proper_names(t.text)} - set(speakers))
        with self.store.transaction():
            before = self._session_names(user_id, conversation_id, session)  # a replaced session's names
            self.store.write_document(doc, np.asarray(vectors, dtype=np.float32))
            self.store.write("INSERT INTO episodic_sessions (user_id, conversation_id, session, said_at, date_text,"
                               " speakers, mentions, turns) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
                               " ON CONFLICT (user_id, conversation_id, session) DO UPDATE SET said_at=excluded.said_at,"
                               " date_text=excluded.date_text, speakers=excluded.speakers, mentions=excluded.mentions,"
                               " turns=excluded.turns",  # a replaced session: one statement
                               (user_id, conversation_id, session, meta["said_at"], date, json.dumps(speakers),
                                json.dumps(names), len(turns)))
            name_index.replace_session(self.store, user_id, conversation_id, before,
                                       name_index.session_names(speakers, names))
        return source

    def _session_names(self, user_id: str, conversation_id: str, session: str) -> set[str]:
        rows = self.store.query("SELECT speakers, mentions FROM episodic_sessions WHERE user_id=? AND"
                                " conversation_id=? AND session=?", (user_id, conversation_id, session))
        return {n for a, b in rows for n in name_index.session_names(json.loads(a or "[]"), json.loads(b or "[]"))}

    def remember(self, user_id: str, conversation_id: str, turn: int, speaker: str, text: str,
                 vector: np.ndarray | None = None, when: datetime | None = None) -> str:
        """One chat turn's words as an episode said now (``vector``: the words' embedding, if known)."""
        if not text.strip():
            return ""
        vectors = None if vector is None else np.asarray(vector, dtype=np.float32).reshape(1, -1)
        return self.add_session(user_id, conversation_id, f"t{turn}", [Turn(speaker, text)],
                                when or datetime.now(), vectors)

    def forget(self, user_id: str) -> int:
        with self.store.transaction():
            self.store.execute("DELETE FROM episodic_sessions WHERE user_id=?", (user_id,))
            name_index.forget(self.store, user_id)
            return self.store.delete_owner(user_id, COLLECTION)

    # ------------------------------------------------------------------- read
    def people(self, user_id: str) -> frozenset[str]:
        """Every speaker the user's episodes record (what the gate matches questions against)."""
        rows = self.store.query("SELECT DISTINCT speakers FROM episodic_sessions WHERE user_id=?", (user_id,))
        return frozenset(p for (raw,) in rows for p in json.loads(raw or "[]"))

    def names(self, user_id: str, exclude_conversation: str = "") -> frozenset[str]:
        """Speakers and the names they mention mid-sentence (pets, friends, places): what the gate
        recognises as "about something this user's memory holds". ``exclude_conversation``: the
        conversation under way, whose turns are in its own history already. Read from the name index
        (one row per conversation and name, not per stored turn)."""
        return name_index.every_name(self.store, user_id, exclude_conversation)

    def known_names(self, user_id: str, exclude_conversation: str, words: Sequence[str]) -> frozenset[str]:
        """The names of :meth:`names` that equal or start with one of ``words`` (case-insensitively): what
        the gate needs for a message whose capitalised words are ``words``
        (:func:`bara.decide.policy.capitalised_words`), one indexed query whatever the history's length
        (``bench/bench_episodic_names.py``)."""
        return name_index.candidates(self.store, user_id, exclude_conversation, words)

    def holds_other(self, user_id: str, conversation_id: str) -> bool:
        """True when the user has episodes from any conversation but ``conversation_id``."""
        read = self.holds_other_read(user_id, conversation_id)
        return read.parse(self.store.query(read.sql, read.params))

    @staticmethod
    def holds_other_read(user_id: str, conversation_id: str) -> Read:
        """:meth:`holds_other` as a :class:`~bara.store.base.Read`, to send with a turn's first reads."""
        return Read("SELECT 1 FROM episodic_sessions WHERE user_id=? AND conversation_id<>? LIMIT 1",
                    (user_id, conversation_id), bool)

    def _turns_in(self, user_id: str, conversation_id: str) -> int:
        rows = self.store.query("SELECT COALESCE(SUM(turns), 0) FROM episodic_sessions WHERE user_id=? "
                                "AND conversation_id=?", (user_id, conversation_id))
        return int(rows[0][0]) if rows else 0

    def sessions(self, user_id: str) -> list[tuple[str, str, str, int]]:
        """(conversation, session, date, turns) of every stored batch, oldest first."""
        rows = self.store.query("SELECT conversation_id, session, date_text, turns FROM episodic_sessions"
                                " WHERE user_id=? ORDER BY said_at, conversation_id, session", (user_id,))
        return [(c, s, d, int(n)) for c, s, d, n in rows]

    def overview(self, user_id: str) -> episodic_audit.EpisodicOverview:
        """What the user can audit of this tier, per conversation (:mod:`bara.memory.episodic_audit`),
        within the ``memory_inspect_episodic_*`` settings."""
        s = self.settings
        bounds = episodic_audit.Bounds(s.memory_inspect_episodic_conversations, s.memory_inspect_episodic_turns,
                                       s.memory_inspect_episodic_names)
        return episodic_audit.overview(self.store, user_id, bounds, COLLECTION)

    def search(self, user_id: str, query: str, k: int | None = None, floor: float | None = None,
               vector: np.ndarray | None = None, hops: bool | None = None,
               exclude_conversation: str = "") -> EpisodicResult:
        """The user's turns about ``query``, best first, at most ``k``; turns of
        ``exclude_conversation`` (the one under way: its turns are in its history) are left out.

        Round 1 is the Store's hybrid search (weighted RRF of BM25 and dense ranks, Cormack et al.
        2009) over the user's episodes, cosine floor ``floor``. When ``hops`` (default:
        ``joins_facts(query)``), round 2 runs up to ``memory_episodic_hop_queries`` searches of
        "query + one thing a top round-1 hit mentions" and the lists are fused again with weighted
        RRF (round-2 lists weighted ``memory_episodic_hop_weight``).
        """
        s = self.settings
        k = k or s.memory_episodic_k
        floor = s.memory_floor_episodic if floor is None else floor
        skip = (exclude_conversation, self._turns_in(user_id, exclude_conversation)) if exclude_conversation else None
        first = self._round(user_id, query, k, floor, vector, skip=skip)
        hops = joins_facts(query) if hops is None else hops
        if not hops or not first or s.memory_episodic_hop_queries == 0:
            return self._attributed(user_id, query, EpisodicResult(self._windows(user_id, first[:k])), k, floor, skip)
        seeds = self._seeds(query, first)
        lists, weights, queries = [first], [1.0], []
        for seed in seeds:
            hop_query = f"{query} {seed}"
            lists.append(self._round(user_id, hop_query, k, floor, None, round_no=2, skip=skip))
            weights.append(s.memory_episodic_hop_weight)
            queries.append(hop_query)
        return self._attributed(user_id, query, EpisodicResult(
            self._windows(user_id, self._fuse(lists, weights, k)), tuple(queries),
            (f"episodic:hop2_queries:{len(queries)}",) if queries else ("episodic:hop2_no_seeds",)), k, floor, skip)

    def _attributed(self, user_id: str, query: str, result: EpisodicResult, k: int, floor: float,
                    skip: tuple[str, int] | None) -> EpisodicResult:
        """``result`` with the attribution check of :mod:`bara.memory.episodic_attribution`: the
        items stay; ``attribution`` and a reason code say whether the memory records this of someone else."""
        s, names = self.settings, question_names(query)
        if not s.memory_episodic_attribution or not result.hits or not names:
            return result
        search = (lambda q: self._round(user_id, q, k, floor, None, skip=skip)) \
            if s.memory_episodic_attribution_search else None
        found = attribution.check(query, names, sorted(self.people(user_id)), result.hits, search,
                                  s.memory_episodic_attribution_turns,
                                  lambda source: attribution.session_speakers(self.store, user_id, source),
                                  s.memory_episodic_attribution_shown)
        if found is None:
            return result
        return replace(result, attribution=found, reasons=(*result.reasons, found.reason))

    def _windows(self, user_id: str, hits: Sequence[EpisodeHit]) -> tuple[EpisodeHit, ...]:
        """Each hit with the ``memory_episodic_window`` turns that follow it in its session (the reply
        that confirms or dates it); a turn already shown by a better hit is not repeated."""
        n = self.settings.memory_episodic_window
        if n == 0 or not hits:
            return tuple(hits)
        shown = {(h.source, h.turn_id) for h in hits}
        out = []
        for h in hits:
            rows = self.store.query(
                "SELECT c.section, c.text FROM chunks c JOIN documents d ON d.id = c.doc_id"
                " WHERE d.owner=? AND c.owner=? AND d.collection=? AND d.source=? AND c.ordinal > "
                "(SELECT c2.ordinal FROM chunks c2 WHERE c2.doc_id = d.id AND c2.section=?) AND c.ordinal <= "
                "(SELECT c2.ordinal FROM chunks c2 WHERE c2.doc_id = d.id AND c2.section=?) + ? ORDER BY c.ordinal",
                (user_id, user_id, COLLECTION, h.source, h.turn_id, h.turn_id, n))
            extra = [(sec, text) for sec, text in rows if (h.source, sec) not in shown]
            shown |= {(h.source, sec) for sec, _ in extra}
            if extra:
                h = replace(h, turn_id="|".join([h.turn_id, *(sec for sec, _ in extra)]),
                            text="\n".join([h.text, *(text for _, text in extra)]))
            out.append(h)
        return tuple(out)

    def _seeds(self, query: str, first: Sequence[EpisodeHit]) -> list[str]:
        """Things the best round-1 hits mention that the query does not (capped by settings)."""
        s = self.settings
        known = set(analyze(query)) | {h.speaker.lower() for h in first}
        seeds: list[str] = []
        for hit in first[:s.memory_episodic_hop_seed_hits]:
            body = hit.text.split(": ", 1)[-1]
            for thing in mentioned(body):
                terms = set(analyze(thing))
                if terms and not terms <= known and thing not in seeds:
                    seeds.append(thing)
                    known |= terms
        return seeds[:s.memory_episodic_hop_queries]

    def _round(self, user_id: str, query: str, k: int, floor: float, vector: np.ndarray | None,
               round_no: int = 1, skip: tuple[str, int] | None = None) -> list[EpisodeHit]:
        """One hybrid search; with ``skip`` = (conversation, its turn count) that conversation's turns
        are fetched in addition to the k wanted, then dropped."""
        s = self.settings
        extra = min(skip[1], 100) if skip else 0
        outcome = self.retriever.search(query, k=k * s.memory_episodic_candidates + extra, floor=floor,
                                        owners=(user_id,), collections=(COLLECTION,), vector=vector, rerank=False)
        named = {p.lower() for p in _names_in(query) if len(p) >= 3}
        prefix = f"ep:{skip[0]}:" if skip else None
        hits = [self._hit(h, named, round_no) for h in outcome.hits
                if h.chunk.owner == user_id and not (prefix and h.chunk.source.startswith(prefix))]
        return sorted(hits, key=lambda h: (-h.score, h.source, h.turn_id))

    def _hit(self, hit: Hit, named: set[str], round_no: int) -> EpisodeHit:
        c = hit.chunk
        said_by_named = any(c.title.lower().startswith(n) for n in named) if c.title else False
        boost = self.settings.memory_episodic_speaker_boost if said_by_named else 0.0
        return EpisodeHit(source=c.source, turn_id=c.section, speaker=c.title, text=c.text,
                          date=str(c.meta.get("date", "")), similarity=float(hit.similarity),
                          score=float(hit.fused) * (1.0 + boost), round=round_no)

    @staticmethod
    def _fuse(lists: list[list[EpisodeHit]], weights: list[float], k: int) -> tuple[EpisodeHit, ...]:
        by_key: dict[tuple[str, str], EpisodeHit] = {}
        rankings = []
        for hits in lists:
            rankings.append([(h.source, h.turn_id) for h in hits])
            for h in hits:
                by_key.setdefault((h.source, h.turn_id), h)
        fused = weighted_rrf(rankings, weights)
        return tuple(_with_score(by_key[key], score) for key, score in fused[:k])


def _with_score(hit: EpisodeHit, score: float) -> EpisodeHit:
    from dataclasses import replace

    return replace(hit, score=score)


def _names_in(text: str) -> list[str]:
    """Capitalised words of a question (possessive 's stripped): the people it may name."""
    return [w[:-2] if w.endswith("'s") else w for w in re.findall(r"\b[A-Z][a-z][\w']*", text)]
