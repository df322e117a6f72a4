"""The SQLite store's cached scope matrices (``bara.store.sqlite_matrix``): this connection's own
inserts extend them at commit instead of a re-read of every vector, and whatever else moves a
scope's generation (a rollback, a replaced or deleted document, another connection's write) still
re-reads. Each case compares the store's searches with a fresh store's searches of the same file, bit
for bit, and counts the reads through the store's public ``scope_reads``."""

from __future__ import annotations

import numpy as np
import pytest
from store_contract import DIM, doc, request, vecs

from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_matrix import ROW_INDEX_BYTES, Matrices, Matrix

SCOPES = [(("alice",), ("qa",)), (("", "alice"), ("kb", "qa")), (("alice", "bob"), ("notes", "qa"))]
ROW = DIM * 4 + 8 + ROW_INDEX_BYTES  # one cached row: its vector, its id and its index entry


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "m.db")
    s.write_document(doc("kb.txt", ["a knowledge base chunk", "another one"]), vecs(2))
    s.write_document(doc("qa:c:1", ["first question"], owner="alice", collection="qa"), vecs(1, start=3))
    s.write_document(doc("n:1", ["a note"], owner="bob", collection="notes"), vecs(1, start=5))
    yield s
    s.close()


def _dense(store: SQLiteStore, owners: tuple, colls: tuple) -> list:
    """Every row of the scope as the dense arm sees it, once per axis: the similarity to a unit axis vector
    is that vector component exactly, so equal results mean equal ids and equal vectors, bit for bit."""
    return [store.search(request("", axis, owners=owners, collections=colls, limit=10_000)).candidates
            for axis in np.eye(DIM, dtype=np.float32)]


def _same_as_fresh(store: SQLiteStore, owners: tuple, colls: tuple) -> int:
    """The scope as this store searches it equals a fresh store's read of the file; returns its row count."""
    cached = _dense(store, owners, colls)
    fresh = SQLiteStore(store.location, mode="read")
    try:
        read = _dense(fresh, owners, colls)
    finally:
        fresh.close()
    assert cached == read
    return len(read[0])


def _search(store: SQLiteStore, owner: str) -> int:
    """Search one user's Q&A scope; the scope reads it cost."""
    before = store.scope_reads
    store.search(request("", vecs(1)[0], owners=(owner,), collections=("qa",)))
    return store.scope_reads - before


def _another_process_writes(store: SQLiteStore, source: str, start: int) -> None:
    other = SQLiteStore(store.location)
    try:
        other.write_document(doc(source, [f"written elsewhere ({source})"], owner="alice", collection="qa"),
                             vecs(1, start=start))
    finally:
        other.close()


@pytest.mark.parametrize("owners, colls", SCOPES)
def test_own_inserts_extend_the_cached_matrix_at_commit(store, owners, colls):
    _dense(store, owners, colls)
    store.write_document(doc("qa:c:2", ["second question"], owner="alice", collection="qa"), vecs(1, start=7))
    with store.transaction():  # two documents in one transaction, one of them in another scope
        store.write_document(doc("qa:c:3", ["third", "fourth"], owner="alice", collection="qa"), vecs(2, start=9))
        store.write_document(doc("n:2", ["bob's note"], owner="bob", collection="notes"), vecs(1, start=11))
    reads = store.scope_reads
    rows = _same_as_fresh(store, owners, colls)
    assert store.scope_reads == reads  # extended in memory, never read again
    assert rows == sum(store.count_chunks(o, c) for o in owners for c in colls)


def test_an_empty_scope_is_extended_too(store):
    _dense(store, ("carol",), ("qa",))
    store.write_document(doc("qa:c:1", ["carol asks"], owner="carol", collection="qa"), vecs(1, start=2))
    reads = store.scope_reads
    assert _same_as_fresh(store, ("carol",), ("qa",)) == 1
    assert store.scope_reads == reads


def test_a_rolled_back_insert_leaves_no_row_behind(store):
    _dense(store, ("alice",), ("qa",))
    with pytest.raises(RuntimeError), store.transaction():
        store.write_document(doc("qa:c:9", ["never stored"], owner="alice", collection="qa"), vecs(1, start=4))
        raise RuntimeError("the turn failed")
    _same_as_fresh(store, ("alice",), ("qa",))
    store.write_document(doc("qa:c:2", ["the next turn's"], owner="alice", collection="qa"), vecs(1, start=5))
    # the undone insert is not applied with the next commit
    assert _same_as_fresh(store, ("alice",), ("qa",)) == 2


def test_a_rolled_back_savepoint_keeps_only_what_its_transaction_committed(store):
    _dense(store, ("alice",), ("qa",))
    with store.transaction():
        store.write_document(doc("qa:c:2", ["kept"], owner="alice", collection="qa"), vecs(1, start=6))
        with pytest.raises(RuntimeError), store.transaction():
            store.write_document(doc("qa:c:3", ["undone"], owner="alice", collection="qa"), vecs(1, start=8))
            raise RuntimeError("one write failed")
    assert store.count_chunks("alice", "qa") == _same_as_fresh(store, ("alice",), ("qa",)) == 2


@pytest.mark.parametrize("change", ["replace", "delete", "other connection", "knowledge base"])
def test_any_other_change_reads_the_scope_again(store, change):
    scope = (("",), ("kb",)) if change == "knowledge base" else (("alice",), ("qa",))
    _dense(store, *scope)
    if change == "knowledge base":  # large and written by ingest only: read again once, not copied per file
        store.write_document(doc("kb2.txt", ["a new knowledge base file"]), vecs(1, start=15))
    elif change == "replace":
        store.write_document(doc("qa:c:1", ["first question, reworded"], owner="alice", collection="qa"),
                             vecs(1, start=12))
    elif change == "delete":
        store.delete_document("qa:c:1", owner="alice", collection="qa")
    else:
        _another_process_writes(store, "qa:c:2", 13)
    reads = store.scope_reads
    _same_as_fresh(store, *scope)
    assert store.scope_reads == reads + 1  # once, then cached again for the other axes' searches


def test_search_after_appends_ranks_as_a_fresh_store_does(store):
    _dense(store, ("alice",), ("qa",))
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
    _dense(store, ("alice",), ("qa",))
    _another_process_writes(store, "qa:c:2", 13)
    store.write_document(doc("qa:c:3", ["this worker's turn"], owner="alice", collection="qa"), vecs(1, start=14))
    assert _same_as_fresh(store, ("alice",), ("qa",)) == 3


def test_the_cache_keeps_the_most_recently_searched_scopes(tmp_path):
    """A server searches one scope per user tier: at most ``store_matrix_cache_scopes`` stay in memory,
    the least recently searched dropped first, and a dropped scope is read again, whole and current."""
    s = SQLiteStore(tmp_path / "lru.db", matrix_scopes=2)
    try:
        for n, user in enumerate(("ann", "ben", "cy")):
            s.write_document(doc(f"qa:{user}", [f"{user} asks"], owner=user, collection="qa"), vecs(1, start=n))
        assert [_search(s, u) for u in ("ann", "ben", "ann", "cy")] == [1, 1, 0, 1]  # ann is now the more recent
        assert [_search(s, u) for u in ("ann", "cy")] == [0, 0]  # both kept: cy dropped ben, not ann
        s.write_document(doc("qa:ben:2", ["ben again"], owner="ben", collection="qa"), vecs(1, start=7))
        reads = s.scope_reads
        # its append found no cached matrix: read again, with the new row
        assert _same_as_fresh(s, ("ben",), ("qa",)) == 2 and s.scope_reads == reads + 1
        assert _search(s, "ann") == 1  # the least recently searched of two went for ben
    finally:
        s.close()


def _users(store, names) -> None:
    for n, user in enumerate(names):
        store.write_document(doc(f"qa:{user}", [f"{user} asks"], owner=user, collection="qa"), vecs(1, start=n))


def test_a_bara_store_takes_its_bound_from_settings(tmp_path):
    from bara.app import Bara
    from bara.settings import Settings

    with Bara(Settings().override(db=str(tmp_path / "b.db"), store_matrix_cache_scopes=3)) as bara:
        store = bara.store
        assert isinstance(store, SQLiteStore)
        _users(store, ("u0", "u1", "u2", "u3"))
        assert [_search(store, u) for u in ("u0", "u1", "u2")] == [1, 1, 1]
        assert [_search(store, u) for u in ("u0", "u1", "u2")] == [0, 0, 0]  # three fit
        assert [_search(store, u) for u in ("u3", "u0")] == [1, 1]  # a fourth drops the oldest


def test_the_cache_keeps_within_its_byte_budget(tmp_path):
    """However few the scopes, their vectors stay within ``store_matrix_cache_mb``: the least recently
    searched go first, the count follows puts, extensions and drops, and one scope larger than the
    whole budget is still kept, alone."""
    s = SQLiteStore(tmp_path / "mb.db", matrix_scopes=100, matrix_mb=3.5 * ROW / 2**20)  # room for 3 rows
    try:
        _users(s, ("ann", "ben", "cy"))
        assert [_search(s, u) for u in ("ann", "ben", "cy")] == [1, 1, 1]
        assert [_search(s, u) for u in ("ann", "ben", "cy")] == [0, 0, 0]  # 3 rows: all kept
        s.write_document(doc("qa:ann:2", ["ann again"], owner="ann", collection="qa"), vecs(1, start=5))
        # extended to 2 rows at commit, 4 rows do not fit: the least recently searched, ann itself, goes;
        # reading it again drops the next oldest, ben, and keeps cy
        assert [_search(s, u) for u in ("ann", "cy", "ben")] == [1, 0, 1]
        assert _same_as_fresh(s, ("ann",), ("qa",)) == 2
        for n in range(5):  # a scope of 5 rows: over the whole budget on its own
            s.write_document(doc(f"qa:dan:{n}", ["dan asks"], owner="dan", collection="qa"), vecs(1, start=6 + n))
        assert [_search(s, "dan"), _search(s, "dan")] == [1, 0]  # kept: the next search reads nothing again
        assert [_search(s, u) for u in ("ann", "cy")] == [1, 1]  # ... and alone: every other scope went
    finally:
        s.close()


def test_a_bara_store_takes_its_byte_budget_from_settings(tmp_path):
    from bara.app import Bara
    from bara.settings import Settings

    settings = Settings().override(db=str(tmp_path / "b.db"), store_matrix_cache_mb=2.5 * ROW / 2**20)
    with Bara(settings) as bara:  # room for two one-row scopes
        store = bara.store
        assert isinstance(store, SQLiteStore)
        _users(store, ("ann", "ben", "cy"))
        assert [_search(store, u) for u in ("ann", "ben", "ann", "ben")] == [1, 1, 0, 0]
        assert [_search(store, u) for u in ("cy", "ann")] == [1, 1]  # a third row drops the oldest


def test_the_matrices_count_their_bytes_through_puts_extensions_and_drops():
    cache = Matrices(capacity=100, budget_mb=3.5 * ROW / 2**20)
    one = {u: Matrix((1,), np.array([n], dtype=np.int64), vecs(1, start=n)) for n, u in enumerate(("ann", "ben", "cy"))}
    for user, matrix in one.items():
        cache.put(((user,), ("qa",)), matrix)
    assert len(cache) == 3 and cache.nbytes == 3 * ROW <= cache.budget
    grown = one["ann"].extended(0, 2, np.array([9], dtype=np.int64), vecs(1, start=9))
    cache.put((("ann",), ("qa",)), grown)  # 4 rows and more: ben, the least recently put, goes
    assert cache.get((("ben",), ("qa",))) is None and len(cache) == 2
    assert cache.nbytes == grown.nbytes + one["cy"].nbytes <= cache.budget


def test_appends_share_one_buffer_and_grow_it_geometrically(store):
    """Storing a turn's rows costs their own size, not the tier's: 300 single-row appends reallocate the
    scope's buffer a logarithmic number of times (each write copied every row before), and the store's
    writes extend its cached matrix in place of reading it again."""
    matrix = Matrix((1,), np.array([1], dtype=np.int64), vecs(1))
    buffers: list[np.ndarray] = []
    for n in range(300):
        matrix = matrix.extended(0, n + 2, np.array([n + 2], dtype=np.int64), vecs(1, start=n))
        if not any(matrix.rows.vectors is b for b in buffers):
            buffers.append(matrix.rows.vectors)
    assert len(buffers) <= 16 and matrix.rows.used == len(matrix.ids) == 301  # the buffer's last version
    assert matrix.vectors.tobytes() == np.concatenate([vecs(1), vecs(300)]).tobytes()
    _dense(store, ("alice",), ("qa",))
    reads = store.scope_reads
    for n in range(300):
        store.write_document(doc(f"qa:g:{n}", [f"question {n}"], owner="alice", collection="qa"), vecs(1, start=n))
        _search(store, "alice")
    assert store.scope_reads == reads
    assert _same_as_fresh(store, ("alice",), ("qa",)) == 301


def test_a_version_a_reader_holds_keeps_its_rows_after_later_appends():
    older = Matrix((1,), np.array([1, 2], dtype=np.int64), vecs(2))
    ids, vectors = older.ids.copy(), older.vectors.copy()
    newer = older
    for n in range(40):
        newer = newer.extended(0, n + 2, np.array([n + 3], dtype=np.int64), vecs(1, start=n))
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
