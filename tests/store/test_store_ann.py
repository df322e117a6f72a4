"""The SQLite store's approximate dense arm (``bara.store.sqlite_ann``, issue 34): a scope at or above
``store_ann_min_chunks`` is searched through its HNSW graph and its candidates scored exactly.

The rows are real: the MiniLM vectors of the session's RFC knowledge base, each also written again with
small Gaussian noise (sigma 0.02 per dimension, renormalised) to reach a few thousand rows, as the scale
bench builds its stores; the queries are real questions encoded by the session embedder."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from store_contract import doc, request

from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_ann import AnnConfig, folder
from bara.types import SHARED

QUESTIONS = ["What do MUST and SHOULD mean in a specification?", "How does HTTP over TLS check the server name?",
             "How long does a browser remember the HSTS policy?", "What happens when the certificate is invalid?",
             "Can a site include its subdomains in the policy?", "What port does HTTPS use?",
             "Why is a man in the middle attack possible?", "What is a known HSTS host?",
             "How is the max-age directive parsed?", "What does OPTIONAL allow an implementation to do?"]
COPIES = 12
LOW = AnnConfig(min_chunks=500, min_user_chunks=1)  # every scope of these tests goes through its graph
OFF = AnnConfig(min_chunks=0, min_user_chunks=0)


@pytest.fixture(scope="module")
def real(rfc_kb, embedder, tmp_path_factory):
    """(a store file of real RFC vectors and noisy copies, the query vectors)."""
    source = SQLiteStore(rfc_kb("ann_source"), mode="read")
    rows = source.query("SELECT text, embedding FROM chunks WHERE owner=? ORDER BY id", (SHARED,))
    source.close()
    texts = [r[0] for r in rows]
    base = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    rng = np.random.default_rng(34)
    path = tmp_path_factory.mktemp("ann") / "kb.db"
    with SQLiteStore(path, ann=OFF) as store, store.transaction():
        for copy in range(COPIES):
            noisy = base if copy == 0 else base + rng.normal(0, 0.02, base.shape).astype(np.float32)
            noisy = noisy / np.linalg.norm(noisy, axis=1, keepdims=True)
            for start in range(0, len(texts), 50):
                part = texts[start:start + 50]
                store.write_document(doc(f"rfc-{copy}-{start}", [f"{t} ({copy})" for t in part]),
                                     noisy[start:start + len(part)])
    return path, embedder.embed(QUESTIONS)


def _copy(real, tmp_path) -> str:
    dest = tmp_path / "kb.db"
    shutil.copy(real[0], dest)
    return str(dest)


def _dense(store: SQLiteStore, q: np.ndarray, limit: int = 10, **kw) -> list[int]:
    return [c.chunk_id for c in store.search(request("", q, limit=limit, use_lexical=False, **kw)).candidates]


def test_the_graph_agrees_with_exact_search_on_real_vectors(real, tmp_path):
    db = _copy(real, tmp_path)
    with SQLiteStore(db, ann=OFF) as exact, SQLiteStore(db, ann=LOW) as ann:
        assert exact.count_chunks() >= 1000
        recalls = []
        for q in real[1]:
            want, got = _dense(exact, q), _dense(ann, q)
            assert not exact._matrix((SHARED,), ("kb",)).approximate and ann._matrix((SHARED,), ("kb",)).approximate
            recalls.append(len(set(want) & set(got)) / len(want))
            same = [c for c in got if c in want]
            assert same == [c for c in want if c in got]  # exact scores: the shared hits in the same order
        assert np.mean(recalls) >= 0.98
        hybrid_exact = exact.search(request("HSTS max-age policy", real[1][2]))
        hybrid_ann = ann.search(request("HSTS max-age policy", real[1][2]))
        exact_sims = {c.chunk_id: c.similarity for c in hybrid_exact.candidates}
        for c in hybrid_ann.candidates:  # every fused candidate's similarity is the stored vector's
            if c.chunk_id in exact_sims:
                assert c.similarity == pytest.approx(exact_sims[c.chunk_id], abs=1e-6)


def test_a_lexical_only_search_gets_exact_similarities_through_the_graph(real, tmp_path):
    db = _copy(real, tmp_path)
    with SQLiteStore(db, ann=OFF) as exact, SQLiteStore(db, ann=LOW) as ann:
        want = exact.search(request("HSTS max-age policy", real[1][2], use_dense=False))
        got = ann.search(request("HSTS max-age policy", real[1][2], use_dense=False))
        assert got.dense_hits == 0 and got.candidates
        assert [(c.chunk_id, c.fused) for c in got.candidates] == [(c.chunk_id, c.fused) for c in want.candidates]
        assert [c.similarity for c in got.candidates] == pytest.approx([c.similarity for c in want.candidates], abs=1e-6)


def test_the_threshold_switches_between_exact_and_graph(real, tmp_path):
    db = _copy(real, tmp_path)
    with SQLiteStore(db, mode="read") as store:
        n = store.count_chunks()
    with SQLiteStore(db, ann=AnnConfig(n + 1, 0)) as below, SQLiteStore(db, ann=AnnConfig(n, 0)) as at:
        _dense(below, real[1][0]), _dense(at, real[1][0])
        assert not below._matrix((SHARED,), ("kb",)).approximate
        assert at._matrix((SHARED,), ("kb",)).approximate
    assert not folder(db).exists() or any(folder(db).iterdir())  # only the graph scope wrote a file


def test_a_graph_never_returns_another_owners_chunk(real, tmp_path):
    db = _copy(real, tmp_path)
    q = real[1][1]
    with SQLiteStore(db, ann=LOW) as store:
        before = _dense(store, q)  # the knowledge base's graph is built first, without the user's rows
        store.write_document(doc("n:1", ["alice's note, the query itself"], owner="alice", collection="notes"), q[None, :])
        store.write_document(doc("qa:1", ["alice's answer"], owner="alice", collection="qa"), q[None, :])
        kb = store.search(request("", q, limit=50, use_lexical=False))
        assert {c.chunk_id for c in kb.candidates}.isdisjoint(_ids(store, "alice"))
        assert _dense(store, q) == before
        store.write_document(doc("n:2", ["bob's note, also the query"], owner="bob", collection="notes"), q[None, :])
        mine = _dense(store, q, owners=("alice",), collections=("notes",))
        assert set(mine) == set(_ids(store, "alice", "notes"))
        assert store._matrix(("alice",), ("notes",)).approximate  # the user's tier went through its own graph
        both = _dense(store, q, owners=("alice",), collections=("notes", "qa"))
        assert set(both) == set(_ids(store, "alice"))
        assert set(_dense(store, q, owners=("bob",), collections=("notes",))) == set(_ids(store, "bob"))


def _ids(store: SQLiteStore, owner: str, collection: str | None = None) -> list[int]:
    sql, params = "SELECT id FROM chunks WHERE owner=?", [owner]
    if collection:
        sql, params = sql + " AND collection=?", [owner, collection]
    return [r[0] for r in store.query(sql, tuple(params))]


def test_ingest_and_delete_update_the_graph_with_no_stale_hit(real, tmp_path):
    db = _copy(real, tmp_path)
    q = real[1][3]
    with SQLiteStore(db, ann=LOW) as store:
        first = _dense(store, q)
        store.write_document(doc("new.txt", ["the answer, written after the graph was built"]), q[None, :])
        (new_id,) = _ids_of(store, "new.txt")
        assert _dense(store, q)[0] == new_id
        store.delete_document("new.txt")
        assert _dense(store, q) == first
        # SQLite reuses the deleted last row's id: a different text (and vector) under the same id
        store.write_document(doc("other.txt", ["something else entirely"]), -q[None, :])
        assert _ids_of(store, "other.txt") == [new_id]
        assert new_id not in _dense(store, q)
        assert _dense(store, -q)[0] == new_id


def _ids_of(store: SQLiteStore, source: str) -> list[int]:
    return [r[0] for r in store.query("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id"
                                      " WHERE d.source=?", (source,))]


def test_the_graph_persists_beside_the_file_and_reopens(real, tmp_path):
    db = _copy(real, tmp_path)
    with SQLiteStore(db, ann=LOW) as store:
        got = [_dense(store, q) for q in real[1]]
    files = sorted(folder(db).iterdir())
    assert [f.suffix for f in files] == [".npz", ".usearch"]
    stamps = [f.stat().st_mtime_ns for f in files]
    with SQLiteStore(db, ann=LOW) as again:
        assert [_dense(again, q) for q in real[1]] == got
    assert [f.stat().st_mtime_ns for f in files] == stamps  # loaded, not rebuilt
    with SQLiteStore(db, ann=OFF) as writer:  # a write by a store that does not use graphs
        writer.write_document(doc("late.txt", ["late"]), real[1][4][None, :])
        (late,) = _ids_of(writer, "late.txt")
    with SQLiteStore(db, ann=LOW) as reopened:
        assert _dense(reopened, real[1][4])[0] == late  # the loaded graph was brought up to date


def test_a_mapped_graph_is_read_whole_before_it_changes_even_if_another_store_replaced_it(real, tmp_path):
    """A reopened graph is mapped from its file (searchable, never changed in place); the first write it
    must take loads the file whole, as another store on the same file may have saved it since."""
    db = _copy(real, tmp_path)
    q = real[1]
    with SQLiteStore(db, ann=LOW) as builder:
        before = _dense(builder, q[0])  # builds and saves the graph
    reader = SQLiteStore(db, ann=LOW)
    try:
        assert _dense(reader, q[0]) == before  # the saved graph, mapped
        with SQLiteStore(db, ann=LOW) as other:  # another process: writes, synchronises and saves the graph
            other.write_document(doc("b.txt", ["written by the other store"]), q[5][None, :])
            (b,) = _ids_of(other, "b.txt")
            assert _dense(other, q[5])[0] == b
        reader.write_document(doc("c.txt", ["written by the reader"]), q[6][None, :])
        (c,) = _ids_of(reader, "c.txt")
        assert _dense(reader, q[5])[0] == b  # the other store's row, through the file read again
        assert _dense(reader, q[6])[0] == c  # and the reader's own, added to it
        reader.delete_document("b.txt")  # a removal on the graph read whole (on a mapped one usearch crashes)
        assert b not in _dense(reader, q[5])
    finally:
        reader.close()
    with SQLiteStore(db, ann=LOW) as again:
        assert _dense(again, q[6])[0] == c and b not in _dense(again, q[5])
