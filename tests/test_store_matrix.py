"""The SQLite store's cached scope matrices (``bara.store.sqlite_matrix``): this connection's own
inserts extend them at commit instead of a re-read of every vector, and whatever else moves a
scope's generation (a rollback, a replaced or deleted document, another connection's write) still
re-reads. Each case compares the cache with a fresh store's read of the same file, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from store_contract import DIM, doc, request, vecs

from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_matrix import ROW_INDEX_BYTES, Matrix

SCOPES = [(("alice",), ("qa",)), (("", "alice"), ("kb", "qa")), (("alice", "bob"), ("notes", "qa"))]


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "m.db")
    s.write_document(doc("kb.txt", ["a knowledge base chunk", "another one"]), vecs(2))
    s.write_document(doc("qa:c:1", ["first question"], owner="alice", collection="qa"), vecs(1, start=3))
    s.write_document(doc("n:1", ["a note"], owner="bob", collection="notes"), vecs(1, start=5))
    yield s
    s.close()


def _reads(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store.trace(seen.append)
    return seen


def _same_as_fresh(store: SQLiteStore, owners: tuple, colls: tuple) -> None:
    cached = store._matrix(owners, colls)
    fresh = SQLiteStore(store.location, mode="read")
    try:
        read = fresh._matrix(owners, colls)
        assert cached.gens == read.gens and np.array_equal(cached.ids, read.ids)
        assert cached.vectors.tobytes() == read.vectors.tobytes() and cached.vectors.shape == read.vectors.shape
        assert [cached.position(int(i)) for i in read.ids] == list(range(len(read.ids)))
        assert cached.rows.used == len(cached.ids) and len(cached.rows.row) == len(read.ids)  # the buffer's last
    finally:
        fresh.close()


def _vector_reads(seen: list[str]) -> int:
    return sum("SELECT id, embedding" in q for q in seen)


def _another_process_writes(store: SQLiteStore, source: str, start: int) -> None:
    other = SQLiteStore(store.location)
    try:
        other.write_document(doc(source, [f"written elsewhere ({source})"], owner="alice", collection="qa"),
                             vecs(1, start=start))
    finally:
        other.close()


@pytest.mark.parametrize("owners, colls", SCOPES)
def test_own_inserts_extend_the_cached_matrix_at_commit(store, owners, colls):
    store._matrix(owners, colls)
    store.write_document(doc("qa:c:2", ["second question"], owner="alice", collection="qa"), vecs(1, start=7))
    with store.transaction():  # two documents in one transaction, one of them in another scope
        store.write_document(doc("qa:c:3", ["third", "fourth"], owner="alice", collection="qa"), vecs(2, start=9))
        store.write_document(doc("n:2", ["bob's note"], owner="bob", collection="notes"), vecs(1, start=11))
    seen = _reads(store)
    _same_as_fresh(store, owners, colls)
    assert _vector_reads(seen) == 0  # extended in memory, never read again


def test_an_empty_scope_is_extended_too(store):
    store._matrix(("carol",), ("qa",))
    store.write_document(doc("qa:c:1", ["carol asks"], owner="carol", collection="qa"), vecs(1, start=2))
    seen = _reads(store)
    _same_as_fresh(store, ("carol",), ("qa",))
    assert _vector_reads(seen) == 0


def test_a_rolled_back_insert_leaves_no_row_behind(store):
    store._matrix(("alice",), ("qa",))
    with pytest.raises(RuntimeError), store.transaction():
        store.write_document(doc("qa:c:9", ["never stored"], owner="alice", collection="qa"), vecs(1, start=4))
        raise RuntimeError("the turn failed")
    _same_as_fresh(store, ("alice",), ("qa",))
    store.write_document(doc("qa:c:2", ["the next turn's"], owner="alice", collection="qa"), vecs(1, start=5))
    _same_as_fresh(store, ("alice",), ("qa",))  # the undone insert is not applied with the next commit
    assert store._matrix(("alice",), ("qa",)).ids.size == 2


def test_a_rolled_back_savepoint_keeps_only_what_its_transaction_committed(store):
    store._matrix(("alice",), ("qa",))
    with store.transaction():
        store.write_document(doc("qa:c:2", ["kept"], owner="alice", collection="qa"), vecs(1, start=6))
        with pytest.raises(RuntimeError), store.transaction():
            store.write_document(doc("qa:c:3", ["undone"], owner="alice", collection="qa"), vecs(1, start=8))
            raise RuntimeError("one write failed")
    _same_as_fresh(store, ("alice",), ("qa",))
    assert store.count_chunks("alice", "qa") == store._matrix(("alice",), ("qa",)).ids.size == 2


@pytest.mark.parametrize("change", ["replace", "delete", "other connection", "knowledge base"])
def test_any_other_change_reads_the_scope_again(store, change):
    scope = (("",), ("kb",)) if change == "knowledge base" else (("alice",), ("qa",))
    store._matrix(*scope)
    if change == "knowledge base":  # large and written by ingest only: read again once, not copied per file
        store.write_document(doc("kb2.txt", ["a new knowledge base file"]), vecs(1, start=15))
    elif change == "replace":
        store.write_document(doc("qa:c:1", ["first question, reworded"], owner="alice", collection="qa"),
                             vecs(1, start=12))
    elif change == "delete":
        store.delete_document("qa:c:1", owner="alice", collection="qa")
    else:
        _another_process_writes(store, "qa:c:2", 13)
    seen = _reads(store)
    _same_as_fresh(store, *scope)
    assert _vector_reads(seen) == 1


def test_search_after_appends_ranks_as_a_fresh_store_does(store):
    store._matrix(("alice",), ("qa",))
    for n in range(2, 8):
        store.write_document(doc(f"qa:c:{n}", [f"question {n}"], owner="alice", collection="qa"), vecs(1, start=n))
    fresh = SQLiteStore(store.location, mode="read")
    try:
        req = request("question", vecs(1, start=4)[0], owners=("alice",), collections=("qa",), limit=5)
        assert store.search(req).candidates == fresh.search(req).candidates
    finally:
        fresh.close()


def test_an_own_insert_after_another_connections_write_reads_again(store):
    """The generation before this connection's insert is not the cached one: another process wrote in
    between, and its rows must not be missed by extending the old matrix."""
    store._matrix(("alice",), ("qa",))
    _another_process_writes(store, "qa:c:2", 13)
    store.write_document(doc("qa:c:3", ["this worker's turn"], owner="alice", collection="qa"), vecs(1, start=14))
    _same_as_fresh(store, ("alice",), ("qa",))
    assert store._matrix(("alice",), ("qa",)).ids.size == 3


def test_the_cache_keeps_the_most_recently_searched_scopes(tmp_path):
    """A server searches one scope per user tier: at most ``store_matrix_cache_scopes`` stay in memory,
    the least recently searched dropped first, and a dropped scope is read again, whole and current."""
    s = SQLiteStore(tmp_path / "lru.db", matrix_scopes=2)
    try:
        for n, user in enumerate(("ann", "ben", "cy")):
            s.write_document(doc(f"qa:{user}", [f"{user} asks"], owner=user, collection="qa"), vecs(1, start=n))
        s._matrix(("ann",), ("qa",))
        s._matrix(("ben",), ("qa",))
        s._matrix(("ann",), ("qa",))  # ann is now the more recent
        s._matrix(("cy",), ("qa",))  # drops ben
        assert len(s._matrices) == 2
        assert s._matrices.get((("ben",), ("qa",))) is None and s._matrices.get((("ann",), ("qa",))) is not None
        s.write_document(doc("qa:ben:2", ["ben again"], owner="ben", collection="qa"), vecs(1, start=7))
        seen = _reads(s)
        _same_as_fresh(s, ("ben",), ("qa",))  # its append found no cached matrix: read again, with the new row
        assert _vector_reads(seen) == 1 and s._matrix(("ben",), ("qa",)).ids.size == 2
    finally:
        s.close()


def test_a_bara_store_takes_its_bound_from_settings(tmp_path):
    from bara.app import Bara
    from bara.settings import Settings

    with Bara(Settings().override(db=str(tmp_path / "b.db"), store_matrix_cache_scopes=3)) as bara:
        assert bara.store._matrices.capacity == 3


def _sizes(s: SQLiteStore) -> int:
    return sum(m.nbytes for m in s._matrices._cache.values())


def test_the_cache_keeps_within_its_byte_budget(tmp_path):
    """However few the scopes, their vectors stay within ``store_matrix_cache_mb``: the least recently
    searched go first, the byte count follows puts, extensions and drops, and one scope larger than the
    whole budget is still kept, alone."""
    row = DIM * 4 + 8 + ROW_INDEX_BYTES  # one row's vector, id and index entry
    s = SQLiteStore(tmp_path / "mb.db", matrix_scopes=100, matrix_mb=3.5 * row / 2**20)  # room for 3 rows
    try:
        for n, user in enumerate(("ann", "ben", "cy")):
            s.write_document(doc(f"qa:{user}", [f"{user} asks"], owner=user, collection="qa"), vecs(1, start=n))
        for user in ("ann", "ben", "cy"):
            s._matrix((user,), ("qa",))
        assert len(s._matrices) == 3 and s._matrices.nbytes == _sizes(s) <= s._matrices.budget
        s.write_document(doc("qa:ann:2", ["ann again"], owner="ann", collection="qa"), vecs(1, start=5))
        s._matrix(("ann",), ("qa",))  # extended to 2 rows at commit: now 4 rows cached, ben (oldest) goes
        assert s._matrices.get((("ben",), ("qa",))) is None
        assert s._matrices.nbytes == _sizes(s) <= s._matrices.budget and len(s._matrices) == 2
        _same_as_fresh(s, ("ann",), ("qa",))
        for n in range(4):  # a scope of 5 rows: over the whole budget on its own
            s.write_document(doc(f"qa:dan:{n}", ["dan asks"], owner="dan", collection="qa"), vecs(1, start=6 + n))
        s.write_document(doc("qa:dan:4", ["dan asks"], owner="dan", collection="qa"), vecs(1, start=11))
        big = s._matrix(("dan",), ("qa",))
        assert list(s._matrices._cache) == [(("dan",), ("qa",))] and s._matrices.nbytes == big.nbytes
        assert s._matrix(("dan",), ("qa",)) is big  # kept: the next search reads nothing again
    finally:
        s.close()


def test_a_bara_store_takes_its_byte_budget_from_settings(tmp_path):
    from bara.app import Bara
    from bara.settings import Settings

    with Bara(Settings().override(db=str(tmp_path / "b.db"), store_matrix_cache_mb=64)) as bara:
        assert bara.store._matrices.budget == 64 * 2**20


def test_appends_share_one_buffer_and_grow_it_geometrically(store):
    """Storing a turn's rows costs their own size, not the tier's: 300 single-row writes reallocate the
    scope's buffer a logarithmic number of times (each write copied every row before)."""
    store._matrix(("alice",), ("qa",))
    buffers = set()
    for n in range(300):
        store.write_document(doc(f"qa:g:{n}", [f"question {n}"], owner="alice", collection="qa"), vecs(1, start=n))
        buffers.add(id(store._matrix(("alice",), ("qa",)).rows.vectors))
    assert len(buffers) <= 16
    _same_as_fresh(store, ("alice",), ("qa",))


def test_a_version_a_reader_holds_keeps_its_rows_after_later_appends(store):
    older = store._matrix(("alice",), ("qa",))
    ids, vectors = older.ids.copy(), older.vectors.copy()
    for n in range(40):
        store.write_document(doc(f"qa:r:{n}", [f"later {n}"], owner="alice", collection="qa"), vecs(1, start=n))
    newer = store._matrix(("alice",), ("qa",))
    assert newer.rows is older.rows and len(newer.ids) == len(ids) + 40
    assert np.array_equal(older.ids, ids) and older.vectors.tobytes() == vectors.tobytes()
    assert all(int(i) not in older and older.position(int(i)) is None for i in newer.ids[len(ids):])
    assert all(int(i) in older for i in ids)


def test_extending_an_older_version_copies_instead_of_writing_over_a_newer_one():
    first = Matrix((1,), np.array([1, 2], dtype=np.int64), vecs(2))
    second = first.extended(0, 2, np.array([3], dtype=np.int64), vecs(1, start=3))
    third = first.extended(0, 2, np.array([4], dtype=np.int64), vecs(1, start=4))  # not the buffer's last version
    assert list(second.ids) == [1, 2, 3] and list(third.ids) == [1, 2, 4]
    assert second.vectors[2].tobytes() == vecs(1, start=3)[0].tobytes()
    assert third.vectors[2].tobytes() == vecs(1, start=4)[0].tobytes()
    assert 4 not in second and 3 not in third and third.position(4) == 2 and second.position(3) == 2
