"""A NUL character (U+0000) in text given to the memory tiers: PostgreSQL text cannot hold it, SQLite can.
Both stores drop it (``bara.store.base.storable``), so the same calls store and return the same values on
either backend; PostgreSQL raised a driver DataError from every tier's write."""

from __future__ import annotations

from datetime import datetime

from bara.memory.conversations import Conversations
from bara.memory.episodic import EpisodicMemory
from bara.memory.notes import Note, NotesMemory
from bara.memory.profile import ProfileFact, ProfileMemory
from bara.memory.qa import QAMemory
from bara.settings import Settings

TEXT = "nul\x00 byte in Zq\x00rexa's name"


def _memory(store, embedder) -> dict:
    s = Settings()
    convs, profile = Conversations(store), ProfileMemory(store)
    notes, qa, episodic = NotesMemory(store, embedder, s), QAMemory(store, embedder, s), EpisodicMemory(store, embedder, s)
    with store.scoped(["u"]):
        cid = convs.create("u")
        convs.append("u", cid, "user", TEXT)
        profile.set_facts("u", [ProfileFact("name", TEXT, TEXT)])
        notes.add("u", cid, [Note(kind="decision", text=TEXT)])
        qa.add("u", cid, TEXT, "answer " + TEXT)
        episodic.remember("u", cid, 1, "Ann", TEXT, when=datetime(2023, 5, 8))
        return {"messages": [m.text for m in convs.history("u", cid)], "profile": profile.get("u"),
                "notes": [n.text for n in notes.list("u")], "qa": [(h.question, h.answer) for h in qa.list("u")],
                "qa_found": [h.question for h in qa.search("u", TEXT, k=3)],
                "episodic": [t.text for c in episodic.overview("u").conversations for t in c.remembered]}


def test_nul_characters_are_dropped_alike_on_sqlite_and_postgres(tmp_path, pg_store_factory, embedder):
    from bara.store.sqlite import SQLiteStore

    sqlite = SQLiteStore(tmp_path / "m.db")
    try:
        on_sqlite = _memory(sqlite, embedder)
    finally:
        sqlite.close()
    on_postgres = _memory(pg_store_factory(dim=embedder.dim), embedder)
    clean = TEXT.replace("\x00", "")
    assert on_sqlite == on_postgres
    assert on_sqlite["messages"] == [clean] and on_sqlite["profile"] == {"name": clean}
    assert [q for q, _ in on_sqlite["qa"]] == on_sqlite["qa_found"] == [clean]  # (the answer is JSON in meta)
