"""The behaviour every Store backend must show. Backends subclass StoreContract
and provide a ``store`` fixture (a fresh, empty, migrated store)."""

from __future__ import annotations

import numpy as np
import pytest

from bara.errors import StoreError
from bara.text.lexical import analyze
from bara.types import SHARED, Chunk, Document, SearchRequest

DIM = 8


def unit(*weights: float) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(weights)] = weights
    return v / np.linalg.norm(v)


def doc(source: str, texts: list[str], owner: str = SHARED, collection: str = "kb", version: str = "1") -> Document:
    chunks = tuple(Chunk(text=t, source=source, ordinal=i, start=i * 100, end=i * 100 + len(t), section=f"{i + 1}",
                         title=f"Part {i + 1}") for i, t in enumerate(texts))
    return Document(source=source, content_hash=f"{source}-{version}", chunks=chunks, collection=collection,
                    owner=owner, title=f"Title of {source}")


def vecs(n: int, start: int = 0) -> np.ndarray:
    return np.stack([unit(*([0.0] * ((start + i) % DIM)), 1.0) for i in range(n)])


def request(text: str, vector: np.ndarray | None, owners=(SHARED,), collections=("kb",), limit=10, **kw) -> SearchRequest:
    return SearchRequest(terms=tuple(analyze(text)), vector=vector, limit=limit, owners=tuple(owners),
                         collections=tuple(collections), **kw)


class StoreContract:
    def test_write_and_read_back(self, store):
        store.write_document(doc("a.txt", ["TCP retransmission timer", "UDP checksum"]), vecs(2))
        assert store.document_hash("a.txt") == "a.txt-1"
        assert store.list_sources() == ["a.txt"]
        assert store.count_chunks(SHARED, "kb") == 2
        res = store.search(request("retransmission", unit(1.0)))
        chunk = store.get_chunks([res.candidates[0].chunk_id])[0]
        assert (chunk.source, chunk.section, chunk.title, chunk.start) == ("a.txt", "1", "Part 1", 0)
        assert chunk.text == "TCP retransmission timer"

    def test_changed_document_replaces_all_chunks(self, store):
        store.write_document(doc("a.txt", ["old one", "old two", "old three"]), vecs(3))
        store.write_document(doc("a.txt", ["new text only"], version="2"), vecs(1))
        assert store.count_chunks() == 1
        assert store.document_hash("a.txt") == "a.txt-2"
        assert store.search(request("old", unit(1.0))).lexical_hits == 0

    def test_failure_mid_document_leaves_previous_version_whole(self, store):
        store.write_document(doc("a.txt", ["first version"]), vecs(1))
        broken = doc("a.txt", ["fine chunk", "broken chunk"], version="2")
        bad = Document(**{**broken.__dict__, "chunks": (broken.chunks[0], Chunk(text=None, source="a.txt",  # type: ignore[arg-type]
                       ordinal=1, start=0, end=1, content_hash="x"))})
        with pytest.raises(Exception):  # noqa: B017 - each backend raises its own driver error
            store.write_document(bad, vecs(2))
        assert store.document_hash("a.txt") == "a.txt-1"
        assert [c.text for c in store.get_chunks([r.chunk_id for r in store.search(
            request("version", unit(1.0))).candidates])] == ["first version"]

    def test_vector_count_must_match(self, store):
        with pytest.raises(ValueError):
            store.write_document(doc("a.txt", ["one", "two"]), vecs(1))
        assert store.list_sources() == []

    def test_owner_scoping(self, store):
        store.write_document(doc("alice.txt", ["alice secret token"], owner="alice", collection="notes"), vecs(1))
        store.write_document(doc("bob.txt", ["bob secret token"], owner="bob", collection="notes"), vecs(1))
        res = store.search(request("secret token", unit(1.0), owners=("alice",), collections=("notes",)))
        chunks = store.get_chunks([c.chunk_id for c in res.candidates])
        assert [c.owner for c in chunks] == ["alice"]
        bob_ids = [c.chunk_id for c in store.search(request("secret", unit(1.0), owners=("bob",),
                                                            collections=("notes",))).candidates]
        assert store.get_chunks(bob_ids, owners=("alice",)) == []
        assert store.search(request("secret", unit(1.0))).candidates == ()

    def test_hybrid_ranks_and_scores_per_arm(self, store):
        store.write_document(doc("a.txt", ["congestion window growth", "checksum of the header",
                                           "window scaling option"]), np.stack([unit(1, 0), unit(0, 1), unit(1, 1)]))
        res = store.search(request("window", unit(0, 1)))
        by_text = {store.get_chunks([c.chunk_id])[0].text: c for c in res.candidates}
        header = by_text["checksum of the header"]
        assert header.lexical.rank is None and header.dense.rank == 1
        assert by_text["window scaling option"].lexical.rank is not None
        assert all(c.dense.rank is not None for c in res.candidates)
        assert header.similarity == pytest.approx(1.0, abs=1e-5)
        assert [c.fused for c in res.candidates] == sorted((c.fused for c in res.candidates), reverse=True)

    def test_similarity_known_for_lexical_only_candidates(self, store):
        store.write_document(doc("a.txt", ["alpha beta", "gamma delta"]), np.stack([unit(1, 0), unit(0, 1)]))
        res = store.search(request("alpha", unit(0, 1), limit=1))
        alpha = [c for c in res.candidates if c.lexical.rank == 1][0]
        assert alpha.dense.rank is None and alpha.similarity == pytest.approx(0.0, abs=1e-5)

    def test_lexical_and_dense_switches(self, store):
        store.write_document(doc("a.txt", ["alpha beta", "gamma delta"]), np.stack([unit(1, 0), unit(0, 1)]))
        lex = store.search(request("alpha", unit(0, 1), use_dense=False))
        assert lex.dense_hits == 0 and all(c.dense.rank is None for c in lex.candidates)
        den = store.search(request("alpha", unit(0, 1), use_lexical=False))
        assert den.lexical_hits == 0 and den.candidates[0].dense.rank == 1

    def test_sql_and_fts_metacharacters_are_inert(self, store):
        nasty = "'; DROP TABLE chunks; -- \"NEAR(a b)\" * : AND OR ( )"
        store.write_document(doc(nasty, [nasty + " payload"]), vecs(1))
        res = store.search(request(nasty, unit(1.0)))
        assert store.get_chunks([res.candidates[0].chunk_id])[0].source == nasty
        assert store.count_chunks() == 1

    def test_delete_document_and_owner(self, store):
        store.write_document(doc("a.txt", ["one"]), vecs(1))
        store.write_document(doc("n1", ["note"], owner="u1", collection="notes"), vecs(1))
        store.write_document(doc("n2", ["note"], owner="u1", collection="qa"), vecs(1))
        assert store.delete_document("a.txt") and not store.delete_document("a.txt")
        assert store.delete_owner("u1") == 2
        assert store.count_chunks() == 0

    def test_has_chunks_answers_per_scope(self, store):
        assert not store.has_chunks("u1", "notes")  # an empty store
        store.write_document(doc("n1", ["note"], owner="u1", collection="notes"), vecs(1))
        store.write_document(doc("a.txt", ["one"]), vecs(1))
        assert store.has_chunks("u1", "notes") and store.has_chunks(SHARED, "kb")
        assert not store.has_chunks("u1", "qa") and not store.has_chunks("u2", "notes")
        assert not store.has_chunks(SHARED, "notes")  # another owner's collection of the same name
        store.delete_owner("u1")
        assert not store.has_chunks("u1", "notes") and store.has_chunks(SHARED, "kb")

    def test_list_sources_by_prefix_reads_only_that_prefix(self, store):
        """A memory tier numbers its items per conversation (``qa:<conversation>:<n>``) and asks for one
        conversation's sources only; a prefix must match exactly, whatever sorts next to it."""
        sources = ["qa:c1:1", "qa:c1:2", "qa:c1:10", "qa:c10:1", "qa:c1;x", "qa:c1", "qa:d:1", "qa:c1:é",
                   "qa:c1\U0010ffff", "qa:C1:1", "qa:é:1", "qa:é:2", "qa:éa:1", "qa:\U0010ffff:1", "qa:\U0010ffffx"]
        for n, source in enumerate(sources):
            store.write_document(doc(source, [f"item {n}"], owner="u", collection="qa"), vecs(1, start=n))
        store.write_document(doc("qa:c1:99", ["another user's"], owner="v", collection="qa"), vecs(1))
        store.write_document(doc("qa:c1:98", ["another tier's"], owner="u", collection="notes"), vecs(1))
        for prefix in ("qa:c1:", "qa:c1", "qa:é:", "qa:\U0010ffff", "qa:", "zz", "qa:c1:1"):
            expected = sorted(s for s in sources if s.startswith(prefix))
            assert sorted(store.list_sources("u", "qa", prefix)) == expected, prefix
        assert sorted(store.list_sources("u", "qa")) == sorted(sources)

    def test_search_sees_writes_after_cache(self, store):
        store.write_document(doc("a.txt", ["alpha"]), vecs(1))
        assert len(store.search(request("zzz", unit(1.0))).candidates) == 1
        store.write_document(doc("b.txt", ["beta"]), vecs(1, start=1))
        assert len(store.search(request("zzz", unit(1.0))).candidates) == 2

    def test_nested_transaction_rolls_back_inner_only(self, store):
        store.execute("CREATE TABLE IF NOT EXISTS t_contract (v TEXT)")
        with store.transaction():
            store.execute("INSERT INTO t_contract (v) VALUES (?)", ("outer",))
            with pytest.raises(RuntimeError):
                with store.transaction():
                    store.execute("INSERT INTO t_contract (v) VALUES (?)", ("inner",))
                    raise RuntimeError("boom")
        assert store.query("SELECT v FROM t_contract") == [("outer",)]

    def test_a_flat_transaction_commits_its_nested_levels_whole(self, store):
        store.execute("CREATE TABLE IF NOT EXISTS t_flat (v TEXT)")
        with store.transaction(flat=True):
            store.execute("INSERT INTO t_flat (v) VALUES (?)", ("outer",))
            with store.transaction():
                store.write("INSERT INTO t_flat (v) VALUES (?)", ("inner",))
                with store.transaction(flat=False):  # a nested level's own flat is ignored
                    store.write_document(doc("n.txt", ["nested write"], owner="u", collection="notes"), vecs(1))
        assert sorted(store.query("SELECT v FROM t_flat")) == [("inner",), ("outer",)]
        assert store.list_sources("u", "notes") == ["n.txt"]

    def test_a_failure_inside_a_flat_transaction_stores_none_of_it(self, store):
        store.execute("CREATE TABLE IF NOT EXISTS t_flat (v TEXT)")
        with pytest.raises(RuntimeError):
            with store.transaction(flat=True):
                store.execute("INSERT INTO t_flat (v) VALUES (?)", ("outer",))
                with store.transaction():
                    store.write("INSERT INTO t_flat (v) VALUES (?)", ("inner",))
                    raise RuntimeError("boom")
        # a caller that catches the inner failure gets a refusal at the end, not a half-stored transaction
        # (with savepoints the outer row would commit; flat has nothing to roll the inner level back to)
        with pytest.raises(StoreError, match="flat transaction"):
            with store.transaction(flat=True):
                store.execute("INSERT INTO t_flat (v) VALUES (?)", ("outer",))
                store.write_document(doc("f.txt", ["kept?"], owner="u", collection="notes"), vecs(1))
                try:
                    with store.transaction():
                        store.write("INSERT INTO t_flat (v) VALUES (?)", ("inner",))
                        raise RuntimeError("caught inside")
                except RuntimeError:
                    pass
        assert store.query("SELECT v FROM t_flat") == [] and store.list_sources("u", "notes") == []
        with store.transaction(flat=True):  # the next transaction starts clean
            store.execute("INSERT INTO t_flat (v) VALUES (?)", ("after",))
        assert store.query("SELECT v FROM t_flat") == [("after",)]

    def test_empty_store_search(self, store):
        res = store.search(request("anything", unit(1.0)))
        assert res.candidates == () and res.lexical_hits == 0 and res.dense_hits == 0

    def test_query_many_answers_each_read_as_query_does(self, store):
        store.execute("CREATE TABLE IF NOT EXISTS t_many (k TEXT, v INTEGER)")
        store.executemany("INSERT INTO t_many (k, v) VALUES (?, ?)", [("a", 1), ("b", 2), ("a", 3)])
        reads = [("SELECT v FROM t_many WHERE k=? ORDER BY v", ("a",)), ("SELECT COUNT(*) FROM t_many", ()),
                 ("SELECT v FROM t_many WHERE k=?", ("zzz",))]
        assert store.query_many(reads) == [store.query(sql, p) for sql, p in reads] == [[(1,), (3,)], [(3,)], []]
        with store.transaction():  # inside a transaction: its own uncommitted rows too
            store.execute("INSERT INTO t_many (k, v) VALUES (?, ?)", ("a", 4))
            assert store.query_many(reads[:1]) == [[(1,), (3,), (4,)]]
        assert store.query_many([]) == []
        with pytest.raises(Exception, match="nope"):  # the backend's own error for an unknown column
            store.query_many([("SELECT v FROM t_many", ()), ("SELECT nope FROM t_many", ())])
        assert store.query_many(reads[1:2]) == [[(4,)]]  # the store still answers after a failed batch
