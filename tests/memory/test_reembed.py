"""Old vectors are never mixed with new ones: the store's embedder stamp, re-embedding by writers,
refusal by readers. Real stores (SQLite file and embedded PostgreSQL) and real MiniLM variants:
round 1's ``int8`` file plays the old embedder, the session's default embedder the new one."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.memory.knowledge import KnowledgeBase
from bara.memory.notes import Note, NotesMemory
from bara.memory.qa import QAMemory
from bara.memory.reembed import (LEGACY_KEY, VectorMismatchError, check_readable, ensure_current, read_meta,
                                 stored_key, vector_key)
from bara.retrieval.embedders import OnnxMiniLMEmbedder
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

KB_TEXT = ("1. Introduction\n\nThe retransmission timer of TCP doubles after each timeout, up to a bound that "
           "the implementation chooses. A timer that fires too early wastes bandwidth on copies.\n\n"
           "2. Congestion\n\nA sender halves its congestion window when it detects a lost segment. Three "
           "duplicate acknowledgements are taken as the sign of a loss, before any timer fires.\n")
SETTINGS = Settings(chunk_size_chars=200, chunk_overlap_chars=0, min_chunk_chars=10)


@pytest.fixture(scope="module")
def old_embedder():
    """Round 1's default: the model every unstamped store's vectors came from."""
    return OnnxMiniLMEmbedder(variant="int8")


def fill(store, embedder) -> None:
    """Knowledge base, notes and Q&A of two users: every kind of vector the store keeps."""
    KnowledgeBase(store, embedder, SETTINGS).add_text("/docs/tcp.txt", KB_TEXT)
    NotesMemory(store, embedder, SETTINGS).add("alice", "c1", [Note(text="Alice prefers SCTP over TCP",
                                                                    kind="decision")])
    QAMemory(store, embedder, SETTINGS).add("bob", "c2", "what port does smtp use", "25")


def as_round_one(store) -> None:
    """What migration 0201 did to a store that already held vectors: one written before the stamp."""
    from bara.store.migrations import STORE_META

    with store.transaction():
        store.execute("DELETE FROM store_meta")
        for sql in STORE_META.statements[1:]:
            store.execute(sql)


def vectors(store) -> dict[tuple, np.ndarray]:
    """Every stored vector by (owner, collection, text), whatever the backend's column type."""
    rows = store.query("SELECT owner, collection, text, embedding FROM chunks")
    out = {}
    for owner, coll, text, emb in rows:
        out[(owner, coll, text)] = (np.frombuffer(emb, dtype=np.float32) if isinstance(emb, bytes)
                                    else np.asarray(emb.to_numpy() if hasattr(emb, "to_numpy") else emb,
                                                    dtype=np.float32))
    return out


class CountingStop:
    """The new embedder, interrupted (as by Ctrl-C) on its ``stop_at``-th call."""

    def __init__(self, inner, stop_at: int):
        self.inner, self.stop_at, self.calls = inner, stop_at, 0
        self.model_id, self.dim = inner.model_id, inner.dim
        self.cache_key = vector_key(inner)

    def embed(self, texts):
        self.calls += 1
        if self.calls == self.stop_at:
            raise KeyboardInterrupt
        return self.inner.embed(texts)


class ReembedContract:
    def test_a_store_from_before_the_stamp_counts_as_round_one(self, store, old_embedder, embedder):
        assert stored_key(store) is None
        fill(store, old_embedder)
        assert stored_key(store) is None  # written through the library alone: unstamped, read as current
        check_readable(store, embedder)
        as_round_one(store)
        assert stored_key(store) == LEGACY_KEY == vector_key(old_embedder)
        check_readable(store, old_embedder)
        with pytest.raises(VectorMismatchError, match="bara db reembed"):
            check_readable(store, embedder)

    def test_writer_reembeds_every_owner_and_collection(self, store, fresh_store, old_embedder, embedder):
        fill(store, old_embedder)
        as_round_one(store)
        said: list[str] = []
        n = ensure_current(store, embedder, say=said.append)
        assert n == store.count_chunks() >= 4
        assert said == [f"store vectors were made by {LEGACY_KEY}; re-embedding {n} chunks with {vector_key(embedder)}"]
        fill(fresh_store, embedder)  # what writing everything anew with the new model stores
        got, want = vectors(store), vectors(fresh_store)
        assert got.keys() == want.keys() and {k[1] for k in got} == {"kb", "notes", "qa"}
        for key in want:
            np.testing.assert_allclose(got[key], want[key], atol=1e-5)
        assert read_meta(store) == {"embedder": vector_key(embedder)}
        check_readable(store, embedder)
        assert ensure_current(store, embedder) == 0  # stamped: nothing more to do
        with pytest.raises(VectorMismatchError, match=vector_key(embedder)):
            check_readable(store, old_embedder)

    def test_search_after_reembed_finds_with_the_new_model(self, store, old_embedder, embedder):
        fill(store, old_embedder)
        as_round_one(store)
        ensure_current(store, embedder)
        from bara.retrieval.hybrid import HybridRetriever

        hits = HybridRetriever(store, embedder, SETTINGS).search("lost segment halves the window", k=1).hits
        assert hits and "congestion window" in hits[0].chunk.text

    def test_interrupted_reembed_refuses_readers_and_resumes(self, store, old_embedder, embedder):
        fill(store, old_embedder)
        as_round_one(store)
        total = store.count_chunks()
        stopping = CountingStop(embedder, stop_at=3)
        with pytest.raises(KeyboardInterrupt):
            ensure_current(store, stopping, batch=1)
        meta = read_meta(store)
        assert meta["embedder"] == LEGACY_KEY and meta["reembed_target"] == vector_key(embedder)  # old stamp kept
        with pytest.raises(VectorMismatchError, match="interrupted"):
            check_readable(store, embedder)
        said: list[str] = []
        assert ensure_current(store, embedder, say=said.append, batch=1) == total - 2  # two batches committed
        assert f"re-embedding {total - 2} chunks" in said[0]
        check_readable(store, embedder)

    def test_empty_store_takes_the_first_writers_stamp(self, store, embedder):
        assert ensure_current(store, embedder) == 0
        assert read_meta(store) == {"embedder": vector_key(embedder)}
        check_readable(store, embedder)


class TestSQLiteReembed(ReembedContract):
    @pytest.fixture
    def store(self, tmp_path):
        with SQLiteStore(tmp_path / "a.db") as s:
            yield s

    @pytest.fixture
    def fresh_store(self, tmp_path):
        with SQLiteStore(tmp_path / "b.db") as s:
            yield s

    def test_cached_matrix_of_another_handle_sees_new_vectors(self, store, tmp_path, old_embedder, embedder):
        fill(store, old_embedder)
        as_round_one(store)
        with SQLiteStore(tmp_path / "a.db") as other:
            from bara.retrieval.hybrid import HybridRetriever

            before = HybridRetriever(other, embedder, SETTINGS).search("retransmission timer", k=1).hits[0].similarity
            ensure_current(store, embedder)
            after = HybridRetriever(other, embedder, SETTINGS).search("retransmission timer", k=1).hits[0].similarity
        assert after != pytest.approx(before, abs=1e-6)


class TestPostgresReembed(ReembedContract):
    @pytest.fixture
    def store(self, pg_store_factory):
        return pg_store_factory(dim=384)

    @pytest.fixture
    def fresh_store(self, pg_server_urls):
        """A second, separate database schema (same server) for the from-scratch comparison."""
        import uuid

        from psycopg import sql

        from bara.store import pg_server
        from bara.store.postgres import PostgresStore
        from pg_fixtures import superuser

        name = f"t_{uuid.uuid4().hex[:12]}"
        with superuser(pg_server_urls) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(name), sql.Identifier(pg_server.OWNER_ROLE)))
        store = PostgresStore(pg_server_urls.app_url, dim=384, schema=name, admin_url=pg_server_urls.owner_url,
                              app_role=pg_server.APP_ROLE)
        yield store
        store.close()
        with superuser(pg_server_urls) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


# --- the commands: writers re-embed, readers exit 2 saying what to run --------------------------------

def test_cli_reader_exits_2_and_writer_reembeds(tmp_path, monkeypatch, old_embedder, embedder):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BARA_CONFIG", raising=False)
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("BARA_EMBEDDER", f"minilm-{embedder.variant}")  # the session's (default) embedder
    db = str(tmp_path / "old.db")
    with SQLiteStore(db) as store:
        fill(store, old_embedder)
        as_round_one(store)
    runner = CliRunner()
    for args in (["search", "congestion window", "--db", db],
                 ["memory", "query", "smtp port", "--tier", "qa", "--user", "bob", "--db", db]):
        res = runner.invoke(app, args)
        said = " ".join(res.output.split())  # rich wraps long lines
        assert res.exit_code == 2, res.output
        assert "bara db reembed" in said and LEGACY_KEY in said
    res = runner.invoke(app, ["db", "reembed", "--db", db])
    assert res.exit_code == 0, res.output
    with SQLiteStore(db) as store:
        n = store.count_chunks()
    assert f"re-embedding {n} chunks with {vector_key(embedder)}" in " ".join(res.output.split())
    res = runner.invoke(app, ["search", "congestion window", "--db", db, "--json"])
    assert res.exit_code == 0, res.output
