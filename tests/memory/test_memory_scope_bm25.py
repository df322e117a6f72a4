"""A users' memory search is scored over the searched scope's own BM25 statistics
(``bara.store.sqlite_scope_bm25``, issue 16): another user's rows, however many and whatever their
words, change nothing in it, and its scores are, bit for bit, FTS5's ``bm25()`` over a table that
holds the scope's rows alone."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from store_contract import doc, request, unit, vecs

from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_bm25 import build_lexicon
from bara.store.sqlite_lexical import MEMORY_FTS, lexical_params, lexical_rows, lexical_sql
from bara.store.sqlite_scope_bm25 import FOLD_MIN, ScopeLexicons, merged
from bara.text.lexical import analyze

WORDS = ("retransmission timer backoff congestion window growth header checksum cipher suite certificate "
         "renegotiation handshake record fragment alert session ticket resumption").split() + [f"w{i}" for i in range(40)]
QUERIES = ("retransmission timer backoff", "cipher suite handshake alert", "session ticket resumption window",
           "naive cafe timer", "café naïve über", "東京 server")
ODD = ["Café naïve timer", "x²y and the über-proxy", "東京 server text"]


def _texts(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 25))) + (f" {rng.choice(ODD)}" if rng.random()
            < 0.2 else "") for _ in range(n)]


def _item(store: SQLiteStore, user: str, source: str, texts: list[str], collection: str = "notes") -> None:
    store.write_document(doc(source, texts, owner=user, collection=collection), vecs(len(texts)))


def _alice(store: SQLiteStore, seed: int = 1, n: int = 12) -> None:
    rng = random.Random(seed)
    for i in range(n):
        _item(store, "alice", f"note{i}", _texts(rng, rng.randint(1, 3)) + (ODD if i == 4 else []))


def _mallory(store: SQLiteStore, seed: int, n: int = 15) -> None:
    """Another user's rows, heavy in alice's terms (they would move her IDF and average length)."""
    rng = random.Random(seed)
    for i in range(n):
        _item(store, "mallory", f"m{seed}-{i}", [("retransmission cipher session " * rng.randint(1, 9)) + t
                                                 for t in _texts(rng, 2)])


def _by_source(store: SQLiteStore, req) -> list[tuple]:
    """Alice's lexical arm as (source, ordinal, score, rank): chunk ids differ between stores."""
    cands = [c for c in store.search(req).candidates if c.lexical.rank is not None]
    chunks = {c.id: c for c in store.get_chunks([c.chunk_id for c in cands])}
    return [(chunks[c.chunk_id].source, chunks[c.chunk_id].ordinal, c.lexical.score, c.lexical.rank) for c in cands]


def _requests(owners=("alice",), collections=("notes",)):
    return [request(q, unit(1.0), owners=owners, collections=collections, limit=limit, title_weight=w)
            for q in QUERIES for limit, w in ((5, 2.0), (40, 0.3))]


def test_other_users_rows_change_nothing_in_a_users_memory_search(tmp_path):
    """The side channel: with one table's statistics, mallory's notes moved alice's scores and ranks."""
    alone, shared = SQLiteStore(tmp_path / "alone.db"), SQLiteStore(tmp_path / "shared.db")
    try:
        _alice(alone)
        _mallory(shared, seed=5)  # before, between and after alice's rows
        _alice(shared)
        reqs = _requests()
        before = [_by_source(shared, r) for r in reqs]
        assert all(before) and before == [_by_source(alone, r) for r in reqs]
        _mallory(shared, seed=6, n=40)
        assert [_by_source(shared, r) for r in reqs] == before
        assert [_by_source(shared, replace(r, in_memory_lexical=False)) for r in reqs] == before
    finally:
        alone.close()
        shared.close()


def _lexical(store: SQLiteStore, req) -> list[tuple[int, float]]:
    """The lexical arm's (id, score) in its own rank order."""
    ranked = sorted((c.lexical.rank, c.chunk_id, c.lexical.score) for c in store.search(req).candidates
                    if c.lexical.rank is not None)
    return [(i, score) for _, i, score in ranked]


def _fts5_alone(store: SQLiteStore, req) -> list[tuple[int, float]]:
    return lexical_rows(store.query(lexical_sql(MEMORY_FTS), lexical_params(req)))


def test_the_scores_are_fts5s_over_the_scope_alone_bit_for_bit(tmp_path):
    """In a store that holds only the scope's rows FTS5's own table-wide statistics are the scope's: its
    query there and the scope's scores must agree exactly, for many queries, weights, limits and ties,
    on one collection and on two."""
    s = SQLiteStore(tmp_path / "alone.db")
    try:
        _alice(s, n=20)
        rng = random.Random(3)
        vocabulary = sorted(set(analyze(" ".join(WORDS + ODD))) | {"absent"})
        for collections in (("notes",), ("notes", "qa")):
            for i in range(6 if collections == ("notes", "qa") else 0):  # the table holds the scope alone
                _item(s, "alice", f"qa{i}", _texts(rng, 1), collection="qa")
            for _ in range(60):
                req = replace(request("", unit(1.0), owners=("alice",), collections=collections,
                                      limit=rng.choice([1, 3, 8, 60]), title_weight=rng.choice([2.0, 1.0, 0.3])),
                              terms=tuple(rng.sample(vocabulary, rng.randint(1, 6))))
                assert _lexical(s, req) == _fts5_alone(s, req)
    finally:
        s.close()


def test_appends_extend_the_cached_lexicon_as_a_fresh_read_builds_it(sqlite_store):
    s = sqlite_store
    _alice(s)
    reqs = _requests()
    for r in reqs:
        s.search(r)
    key = (("alice",), ("notes",))
    seen: list[str] = []
    s.trace(seen.append)
    rng = random.Random(4)
    late = [["retransmission timer timer", "cipher alert"], ["brand new words here"], *(_texts(rng, 2) for _ in range(4))]
    for n, texts in enumerate(late):
        _item(s, "alice", f"late{n}", texts)
        _mallory(s, seed=9 + n, n=1)
    cached = s._scopes._cache[key]
    assert cached.gens == s._matrix(("alice",), ("notes",)).gens  # extended at commit, not dropped
    reads = [q for q in seen if "memory_fts_docsize" in q and q.startswith("SELECT")]
    assert len(reads) == len(late) and all("c.id IN (" in q for q in reads)  # only each append's rows were read
    fresh = build_lexicon(s.query, ("alice",), ("notes",), cached.gens, MEMORY_FTS)
    assert fresh is not None and cached.recent is not None  # the appends wait beside the scope's lexicon
    whole = merged(cached.base, cached.recent, cached.gens)  # and merge into it as a fresh read builds it
    assert fresh.terms == whole.terms and fresh.tokens == whole.tokens
    for field in ("ids", "length", "start", "rows_of", "counts"):
        assert getattr(fresh, field).tolist() == getattr(whole, field).tolist()
    for r in reqs:  # two parts score as the one lexicon does, bit for bit
        assert cached.rows(r.terms, r.title_weight, r.limit) == fresh.rows(s.query, r.terms, r.title_weight, r.limit)
    seen.clear()
    for r in reqs:
        assert _lexical(s, r)
    assert not any("bm25(" in q or "memory_fts_docsize" in q for q in seen)  # scored in memory, nothing read


def test_deletes_and_replaced_documents_read_the_scope_again(tmp_path):
    alone, shared = SQLiteStore(tmp_path / "alone.db"), SQLiteStore(tmp_path / "shared.db")
    try:
        for s in (alone, shared):
            _alice(s)
        _mallory(shared, seed=4)
        reqs = _requests()
        for r in reqs:
            shared.search(r)
        for s in (alone, shared):
            assert s.delete_document("note3", owner="alice", collection="notes")
            _item(s, "alice", "note11", ["a replaced note on session tickets"])  # the newest rowid is reused
        assert [_by_source(shared, r) for r in reqs] == [_by_source(alone, r) for r in reqs]
        assert (("alice",), ("notes",)) in shared._scopes._cache
        shared.delete_owner("alice")  # a forgotten user's terms leave the cache at once
        assert (("alice",), ("notes",)) not in shared._scopes._cache and all(not _by_source(shared, r) for r in reqs)
    finally:
        alone.close()
        shared.close()


def test_the_prefetch_worker_scores_the_scope_too(sqlite_store):
    s = sqlite_store
    _alice(s)
    _mallory(s, seed=2)
    for r in _requests():
        ahead = s.prefetch_lexical(r)
        assert ahead is not None
        assert ahead.rows.result() == _lexical(s, r)


def test_a_mixed_search_scores_its_users_part_over_their_own_rows(sqlite_store):
    """Shared owner and a user together: the user's rows keep the scores of the user's own search."""
    s = sqlite_store
    s.write_document(doc("kb.txt", _texts(random.Random(8), 6)), vecs(6))
    _alice(s)
    _mallory(s, seed=3)
    mixed = request("retransmission cipher session", unit(1.0), owners=("", "alice"), collections=("kb", "notes"),
                    limit=200, use_dense=False)
    own = dict((c.chunk_id, c.lexical.score) for c in s.search(replace(mixed, owners=("alice",))).candidates)
    rows = [(c.chunk_id, c.lexical.score) for c in s.search(mixed).candidates]
    assert {i for i, _ in rows} >= set(own) and all(own[i] == score for i, score in rows if i in own)


def test_the_cache_keeps_at_most_its_capacity(sqlite_store):
    s = sqlite_store
    s._scopes = ScopeLexicons(2)
    for user in ("u1", "u2", "u3"):
        _item(s, user, "n", ["cipher suite"])
        s.search(request("cipher", unit(1.0), owners=(user,), collections=("notes",)))
    assert len(s._scopes) == 2 and (("u1",), ("notes",)) not in s._scopes._cache
    with pytest.raises(ValueError):
        ScopeLexicons(0)


def test_many_appends_cost_their_own_rows_and_merge_now_and_then(sqlite_store):
    """Appends wait beside the scope's lexicon and are merged into it once they outgrow a share of it:
    each append reads only its own rows, a merge comes now and then (not at every append), and every
    search in between scores bit for bit as a fresh read of the scope."""
    s = sqlite_store
    _alice(s, n=4)
    reqs = _requests()[:4]
    s.search(reqs[0])
    key, rng, bases = (("alice",), ("notes",)), random.Random(8), set()
    for n in range(3 * FOLD_MIN):
        _item(s, "alice", f"grow{n}", _texts(rng, 1))
        cached = s._scopes._cache[key]
        bases.add(id(cached.base))
        if n % 37 == 0 or n == 3 * FOLD_MIN - 1:
            fresh = build_lexicon(s.query, ("alice",), ("notes",), cached.gens, MEMORY_FTS)
            assert fresh is not None
            for r in reqs:
                assert cached.rows(r.terms, r.title_weight, r.limit) == fresh.rows(s.query, r.terms, r.title_weight,
                                                                                   r.limit)
    assert 2 <= len(bases) <= 4  # merged a few times in 192 appends, not at each
    assert s._scopes._cache[key].gens == s._matrix(("alice",), ("notes",)).gens
