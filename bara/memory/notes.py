"""The research-notes tier: decisions, conclusions, hypotheses and open questions.

Notes are read from a turn by cue phrases (no model): the user's text may give
any kind; the assistant's text only conclusions and open questions (it may sum
up, but only the user decides or hypothesises for the user). Each note is one
Store document in collection ``notes`` owned by the user, searched with the
hybrid retriever restricted to ``owners=(user_id,)``, so "what did we decide
about X?" finds it across all of the user's conversations and nobody else's.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

import numpy as np

from bara.identity import require_user_id
from bara.retrieval.hybrid import HybridRetriever
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.store.base import Store
from bara.text.lexical import analyze
from bara.text.stopwords import RETRIEVAL_STOPWORDS
from bara.types import Chunk, Document, Hit, text_hash
from bara.understand.note_cues import CUES as _CUES

KINDS = ("decision", "conclusion", "hypothesis", "open_question")
COLLECTION = "notes"
#: Concepts kept per note (``memory_notes_max_concepts``): a handful; more is keyword soup.
MAX_CONCEPTS: int = Settings.model_fields["memory_notes_max_concepts"].default

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_ASSISTANT_KINDS = frozenset({"conclusion", "open_question"})
_RECAP = re.compile(
    r"\b(what did we (decide|conclude|agree|settle|say|think)( on| about| regarding| for| to)?|"
    r"what (were|are) (our|the) (decisions?|conclusions?|hypothes[ie]s|open questions?)( on| about| for)?|"
    r"(our|the) (decisions?|conclusions?|hypothes[ie]s)( so far)?( on| about| for)?|"
    r"open questions?( on| about| for)?|where did we leave off|recap|remind me)\b", re.I)
_ASKED_KIND = (("decision", re.compile(r"\b(decid|decision|agree|settle|go with)", re.I)),
               ("conclusion", re.compile(r"\b(conclu|takeaway|bottom line)", re.I)),
               ("hypothesis", re.compile(r"\b(hypothes|suspect|guess|theor)", re.I)),
               ("open_question", re.compile(r"\b(open question|unresolved|figure out|still need|pending)", re.I)))

_QUOTED = re.compile(r"[\"\u201c`]([^\"\u201d`]{2,40})[\"\u201d`]|(?<!\w)'([^']{2,40})'(?!\w)")
_ACRONYM = re.compile(r"\b[A-Z][A-Z0-9]{1,9}(?:/\d+(?:\.\d+)?)?(?![\w/])")
_CAPITALISED = re.compile(r"\b[A-Z][\w\-]*[a-z][\w\-]*\b")
_WORD = re.compile(r"\b[a-z][a-z0-9\-]{3,}\b")
_PARTS = re.compile(r"[\W_]+")
_GENERIC = frozenset("""
decide decided decision conclusion conclude concluded think hypothesis suspect guess question open figure need
still let's lets going use using used make want like really maybe probably should would could thing things
something anything everything way ways good better best well sure okay yeah yes right seems seem know
first next also instead actually because rather keep done work works working agreed settled takeaway bottom
line turns unclear unknown remains seen find check needs needed
""".split())
_SKIP = RETRIEVAL_STOPWORDS | _GENERIC


@dataclass(frozen=True)
class Note:
    kind: str  # decision | conclusion | hypothesis | open_question
    text: str
    concepts: tuple[str, ...] = ()


@dataclass(frozen=True)
class StoredNote:
    user_id: str
    source: str  # note:<conversation>:<n>
    conversation_id: str
    kind: str
    text: str
    concepts: tuple[str, ...]
    created_at: float


@dataclass(frozen=True)
class NoteHit:
    note: StoredNote
    similarity: float  # cosine(query topic, note); 0.0 for recap hits
    score: float  # similarity + concept boost + kind boost
    via: str = "search"  # "search" | "recent" (the query named no topic)


# ---------------------------------------------------------------- extraction
def extract_concepts(text: str, limit: int = MAX_CONCEPTS) -> tuple[str, ...]:
    """Key concepts, most specific first: quoted terms, acronyms, Capitalised terms, keywords."""
    found: list[str] = [a or b for a, b in _QUOTED.findall(text)]
    found += _ACRONYM.findall(text)
    found += [w for w in _CAPITALISED.findall(text) if w.lower() not in _SKIP]
    found += [w for w in _WORD.findall(text.lower()) if w not in _SKIP]
    seen: dict[str, str] = {}
    for term in (f.strip() for f in found):
        if term and term.lower() not in seen and not _covered(term, seen):
            seen[term.lower()] = term
    return tuple(seen.values())[:limit]


def _covered(term: str, seen: Mapping[str, str]) -> bool:
    """A keyword already inside a quoted/capitalised concept adds nothing."""
    low = term.lower()
    return any(low in _PARTS.split(s) for s in seen)


def _sentences(text: str) -> Iterator[str]:
    for s in _SENTENCE.split(text or ""):
        s = s.strip()
        if s:
            yield s


def _note_in(sentence: str, kinds: frozenset[str] | None, max_concepts: int) -> Note | None:
    for kind, cue in _CUES:
        if kinds is not None and kind not in kinds:
            continue
        m = cue.search(sentence)
        if not m or (sentence.endswith("?") and kind != "open_question"):
            continue
        if analyze(sentence[m.end():]):  # the cue must be followed by something to remember
            return Note(kind, sentence, extract_concepts(sentence[m.end():], max_concepts))
    return None


def extract_notes(user_text: str, assistant_text: str = "", user_notes: Sequence[Note] | None = None,
                  max_concepts: int = MAX_CONCEPTS) -> list[Note]:
    """Notes stated in one turn, in order: the user's first, then the assistant's; duplicates dropped.

    ``user_notes``: the notes of ``user_text`` already extracted this turn (they are not extracted again)."""
    out: list[Note] = list(user_notes) if user_notes is not None else []
    parts = ((user_text, None),) if user_notes is None else ()
    for text, kinds in (*parts, (assistant_text, _ASSISTANT_KINDS)):
        for sentence in _sentences(text):
            note = _note_in(sentence, kinds, max_concepts)
            if note and all(n.text.lower() != note.text.lower() for n in out):
                out.append(note)
    return out


def recap_topic(query: str) -> tuple[str, frozenset[str]]:
    """The query without its recap cue ("what did we decide about"), and the note kinds it asks for."""
    kinds = frozenset(k for k, pat in _ASKED_KIND if pat.search(query))
    topic = " ".join(_RECAP.sub(" ", query).split()).strip(" ?.!,")
    return topic, kinds


# ------------------------------------------------------------ shared storage
def next_source(store: Store, user_id: str, collection: str, prefix: str) -> str:
    """``<prefix><n>`` with n one past the largest used; call inside the write transaction."""
    require_user_id(user_id)
    used = [s[len(prefix):] for s in store.list_sources(user_id, collection, prefix)]  # this prefix's only
    return f"{prefix}{max((int(u) for u in used if u.isdigit()), default=0) + 1}"


def write_item(store: Store, user_id: str, collection: str, prefix: str, text: str,
               vector: np.ndarray, meta: Mapping[str, Any]) -> str:
    """Store one single-chunk memory item under a fresh source; returns the source."""
    require_user_id(user_id)
    with store.transaction():
        source = next_source(store, user_id, collection, prefix)
        chunk = Chunk(text=text, source=source, ordinal=0, start=0, end=len(text))
        doc = Document(source=source, content_hash=text_hash(text), chunks=(chunk,), collection=collection,
                       owner=user_id, meta=dict(meta))
        store.write_document(doc, np.asarray(vector, dtype=np.float32).reshape(1, -1))
    return source


def read_items(store: Store, user_id: str, collection: str) -> list[tuple[str, str, str, dict]]:
    """(owner, source, text, meta) of every item of the user in ``collection``."""
    require_user_id(user_id)
    rows = store.query("SELECT d.owner, d.source, c.text, d.meta FROM documents d JOIN chunks c ON c.doc_id = d.id"
                       " WHERE d.owner=? AND c.owner=? AND d.collection=? ORDER BY d.id, c.ordinal",
                       (user_id, user_id, collection))
    return [(owner, src, text, json.loads(meta) if meta else {}) for owner, src, text, meta in rows]


# -------------------------------------------------------------------- memory
class NotesMemory:
    """Per-user notes in a Store; every read is restricted to the user's own documents."""

    def __init__(self, store: Store, embedder: Embedder, settings: Settings):
        self.store, self.embedder, self.settings = store, embedder, settings
        self.retriever = HybridRetriever(store, embedder, settings)

    def add(self, user_id: str, conversation_id: str, notes: Sequence[Note],
            now: float | None = None) -> list[str]:
        """Store each note as its own document; returns their sources."""
        require_user_id(user_id)
        if not notes:
            return []
        vectors = self.embedder.embed([n.text for n in notes])
        created = time.time() if now is None else now
        return [write_item(self.store, user_id, COLLECTION, f"note:{conversation_id}:", n.text, v,
                           {"kind": n.kind, "concepts": list(n.concepts), "conversation_id": conversation_id,
                            "created_at": created})
                for n, v in zip(notes, vectors, strict=False)]

    def list(self, user_id: str) -> list[StoredNote]:
        """All of the user's notes, oldest first."""
        require_user_id(user_id)
        notes = [_stored(*item) for item in read_items(self.store, user_id, COLLECTION)]
        return sorted(notes, key=lambda n: (n.created_at, n.source))

    def forget(self, user_id: str) -> int:
        require_user_id(user_id)
        return self.store.delete_owner(user_id, COLLECTION)

    def search(self, user_id: str, query: str, k: int | None = None, floor: float | None = None,
               vector: np.ndarray | None = None) -> tuple[NoteHit, ...]:
        """Notes about the query's topic, best first.

        The recap cue is stripped first ("what did we decide about X" searches "X"); ``vector``
        is used only when nothing was stripped. score = similarity + concept boost (a note
        concept appears in the query) + kind boost (the note is of the asked kind). When the
        query names no topic at all ("what did we decide?"), the k most recent notes of the
        asked kinds are returned with ``via="recent"``.
        """
        require_user_id(user_id)
        k = k or self.settings.gate_notes_k
        floor = self.settings.memory_floor_notes if floor is None else floor
        topic, kinds = recap_topic(query)
        if not analyze(topic):
            return self._recent(user_id, k, kinds)
        outcome = self.retriever.search(topic, k=k * self.settings.candidate_multiplier, floor=floor,
                                        owners=(user_id,), collections=(COLLECTION,),
                                        vector=None if _RECAP.search(query) else vector)
        terms = set(analyze(topic))
        hits = [self._scored(h, terms, kinds) for h in outcome.hits if h.chunk.owner == user_id]
        # The asked kind first ("what are our open questions?" wants open questions, not the decision
        # that happens to be closer), then score; with no kind asked, score alone.
        return tuple(sorted(hits, key=lambda h: (bool(kinds) and h.note.kind not in kinds, -h.score,
                                                 -h.note.created_at, h.note.source))[:k])

    def _scored(self, hit: Hit, terms: set[str], kinds: frozenset[str]) -> NoteHit:
        note = _stored(hit.chunk.owner, hit.chunk.source, hit.chunk.text, hit.chunk.meta)
        s = self.settings
        concept = any(_names(c, terms) for c in note.concepts)
        score = (hit.similarity + s.memory_notes_concept_boost * concept
                 + s.memory_notes_kind_boost * (note.kind in kinds))
        return NoteHit(note, hit.similarity, score)

    def _recent(self, user_id: str, k: int, kinds: frozenset[str]) -> tuple[NoteHit, ...]:
        notes = [n for n in self.list(user_id) if not kinds or n.kind in kinds]
        return tuple(NoteHit(n, 0.0, 0.0, via="recent") for n in reversed(notes[-k:]))


def _names(concept: str, query_terms: set[str]) -> bool:
    """True when every analysed term of ``concept`` occurs in the query ("retry budget" needs both)."""
    terms = set(analyze(concept))
    return bool(terms) and terms <= query_terms


def _stored(user_id: str, source: str, text: str, meta: Mapping[str, Any]) -> StoredNote:
    return StoredNote(user_id=user_id, source=source, conversation_id=str(meta.get("conversation_id", "")),
                      kind=str(meta.get("kind", "")), text=text, concepts=tuple(meta.get("concepts", ())),
                      created_at=float(meta.get("created_at", 0.0)))
