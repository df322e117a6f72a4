"""The object a program holds: built from Settings, it owns the store, embedder and retriever
and the memory tiers (conversations, profile, notes, Q&A, episodic), and it is the one front door of
every surface: ``search``, ``ingest``, ``memory(user)``, ``forget(user, ...)`` and ``turn(...)``.

No globals: two ``Bara`` objects with different settings can live side by side.
Parts are built lazily, so a command that only reads the store never loads a model.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from bara import plugins

from bara.memory.admin import Forgotten, UserMemory
from bara.memory.conversations import Conversations
from bara.memory.episodic import EpisodicMemory
from bara.memory.knowledge import FileOutcome, IngestReport, KnowledgeBase, Selection
from bara.memory.notes import NotesMemory
from bara.memory.service_records import forget_service_records
from bara.memory.profile import ProfileMemory
from bara.memory.qa import QAMemory
from bara.memory.writebehind import WriteBehind
from bara.retrieval.embed_cache import warm_embedder
from bara.retrieval.embedders import build_embedder
from bara.retrieval.hybrid import HybridRetriever
from bara.retrieval.protocol import Embedder
from bara.retrieval.rerank import Reranker, build_reranker
from bara.settings import Settings, load_settings
from bara.store import Store, open_store
from bara.trace import TurnTrace
from bara.types import RetrievalOutcome


@dataclass(frozen=True)
class TurnResult:
    answer: str
    trace: TurnTrace
    conversation_id: str


class TurnAssistant(Protocol):
    """An assistant a surface can hand turns to: the gated and always pipeline (``bara.turn``) and a
    domain's own assistant (``agent`` mode) implement it."""

    @property
    def mode(self) -> str: ...

    def turn(self, user_id: str, message: str | bytes, conversation_id: str | None = None) -> TurnResult: ...

    def open_conversation(self, user_id: str, conversation_id: str | None = None, create: bool = False) -> str: ...


class Bara:
    def __init__(self, settings: Settings | None = None, *, store: Store | None = None,
                 embedder: Embedder | None = None):
        self.settings = settings or load_settings()
        self._assistants: dict[tuple[str, bool], TurnAssistant] = {}
        self._assistants_lock = threading.Lock()  # serve's worker threads ask for one at once
        if store is not None:
            self.__dict__["store"] = store
        if embedder is not None:
            self.__dict__["embedder"] = embedder

    @classmethod
    def open(cls, db: str | None = None, **overrides: Any) -> "Bara":
        return cls(load_settings(db=db, **overrides))

    @cached_property
    def store(self) -> Store:
        return open_store(self.settings.db, settings=self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        return build_embedder(self.settings)

    @cached_property
    def reranker(self) -> Reranker:
        return build_reranker(self.settings)

    @cached_property
    def retriever(self) -> HybridRetriever:
        return HybridRetriever(self.store, self.embedder, self.settings, self.reranker)

    def warm(self) -> None:
        """Do the knowledge base's one-time search work now: load the embedding model, read its vector
        matrix, start its full-text worker and build its in-memory full-text index
        (``bara.store.sqlite_bm25``): ``bara serve`` before its first request, ``bara chat`` while the
        user types the first message."""
        warm_embedder(self.embedder)
        eager = HybridRetriever(self.store, self.embedder, self.settings.override(lexical_in_memory_after_searches=1),
                                self.reranker)  # its first search starts the index build
        eager.search("warm up", k=1, prefetched=eager.prefetch("warm up", k=1))
        wait = getattr(self.store, "wait_for_indexes", None)  # SQLite builds its index on another thread
        if callable(wait):
            wait()

    @cached_property
    def knowledge(self) -> KnowledgeBase:
        return KnowledgeBase(self.store, self.embedder, self.settings)

    # ------------------------------------------------------------------ memory tiers
    @cached_property
    def conversations(self) -> Conversations:
        """One per Bara: its ``turn_lock`` serialises turns of every mode on a conversation."""
        return Conversations(self.store)

    @cached_property
    def profile(self) -> ProfileMemory:
        return ProfileMemory(self.store)

    @cached_property
    def notes(self) -> NotesMemory:
        return NotesMemory(self.store, self.embedder, self.settings)

    @cached_property
    def qa(self) -> QAMemory:
        return QAMemory(self.store, self.embedder, self.settings)

    @cached_property
    def episodic(self) -> EpisodicMemory:
        return EpisodicMemory(self.store, self.embedder, self.settings)

    @cached_property
    def learning(self) -> WriteBehind:
        """What turns learned and have not stored yet (notes, Q&A, episodic records): see
        ``bara.memory.writebehind``; flushed at the next turn, before memory is read, and on close."""
        return WriteBehind(self.store)

    def flush(self) -> int:
        """Store every pending learning write now (a no-op when nothing is pending)."""
        return self.learning.flush() if "learning" in self.__dict__ else 0

    # ------------------------------------------------------------ the shared knowledge base
    def search(self, query: str, *, k: int | None = None, floor: float | None = None,
               rerank: bool | None = None) -> RetrievalOutcome:
        """Hybrid search of the shared knowledge base (``bara search``, ``GET /api/search``); ``k`` and
        ``floor`` None: the settings' defaults."""
        return self.retriever.search(query, k=k, floor=floor, rerank=rerank)

    def ingest(self, paths: Sequence[str | Path] | str | Path, *, prune: bool = False,
               progress: Callable[[FileOutcome], None] | None = None,
               select: Selection | None = None) -> IngestReport:
        """Index every file under ``paths`` that ``select`` takes into the shared knowledge base."""
        return self.knowledge.ingest(paths, prune=prune, progress=progress, select=select)

    def upload(self, source: str, data: bytes) -> FileOutcome:
        """Index one uploaded file's bytes under ``source`` (raises Unreadable with nothing stored)."""
        return self.knowledge.add_upload(source, data)

    # ------------------------------------------------------------------------ turns
    def assistant(self, mode: str = "gated", *, fallback_offline: bool = True) -> TurnAssistant:
        """The assistant of ``mode`` (gated, always or agent) over this Bara, with the model the settings
        name, built on first use and kept (its hooks stay on it). ``fallback_offline`` False: a model
        failure raises (the HTTP service answers 502/504) instead of an offline answer. The assistants sit
        in layers above this one, so they are named by the plug-in registry (``plugins.ASSISTANTS``)."""
        with self._assistants_lock:
            key = (mode, fallback_offline)
            if key not in self._assistants:
                build = plugins.load_object(plugins.ASSISTANTS)
                self._assistants[key] = build(self, mode, fallback_offline)
            return self._assistants[key]

    def set_assistant(self, mode: str, assistant: TurnAssistant, *, fallback_offline: bool = True) -> None:
        """Hand this Bara's turns of ``mode`` to ``assistant`` (e.g. one over another model) from now on."""
        with self._assistants_lock:
            self._assistants[(mode, fallback_offline)] = assistant

    def turn(self, user: str, conversation: str | None, message: str | bytes, *, mode: str = "gated",
             fallback_offline: bool = True) -> TurnResult:
        """Answer one message of ``user`` in ``conversation`` (None starts one) with :meth:`assistant`."""
        return self.assistant(mode, fallback_offline=fallback_offline).turn(user, message, conversation)

    # ------------------------------------------------------------ use cases of a user's memory
    def memory(self, user: str) -> UserMemory:
        """Everything stored about ``user``: profile, notes, Q&A, episodic memory, conversations
        (what earlier turns learned is stored first, so it is shown)."""
        self.flush()
        with self.store.scoped((user,)):
            return UserMemory(user, tuple(self.profile.entries(user)), tuple(self.notes.list(user)),
                              tuple(self.qa.list(user)), self.episodic.overview(user),
                              tuple(self.conversations.list(user)))

    def forget(self, user: str, *, fact: str | None = None, conversations: bool = False) -> Forgotten:
        """Delete one profile fact (``fact``), or the user's profile, notes, Q&A and episodic memory (and,
        with ``conversations``, every conversation with the HTTP service's traces and thread links of it),
        in one transaction under the user's scope. What earlier turns learned is stored first, or it
        would land after the delete."""
        self.flush()
        with self.store.scoped((user,)), self.store.transaction():
            if fact is not None:
                return Forgotten(profile=self.profile.forget(user, fact))
            gone = Forgotten(self.profile.forget(user), self.notes.forget(user), self.qa.forget(user),
                             self.episodic.forget(user))
            if conversations:  # the traces before the conversations, whose delete would take them along
                gone = replace(gone, traces=forget_service_records(self.store, user),
                               conversations=self.conversations.delete(user))
            return gone

    def check_vectors(self, write: bool, say: Callable[[str], None] | None = None) -> int:
        """Before a command touches vectors: a writer re-embeds a store whose vectors another embedder
        made (returns how many chunks), a reader refuses it (bara/memory/reembed.py)."""
        from bara.memory.reembed import check_readable, ensure_current

        if write:
            return ensure_current(self.store, self.embedder, say)
        check_readable(self.store, self.embedder)
        return 0

    def close(self) -> None:
        if "store" in self.__dict__:
            try:
                self.flush()  # nothing a turn learned is lost on a normal close
            finally:
                self.store.close()

    def __enter__(self) -> "Bara":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
