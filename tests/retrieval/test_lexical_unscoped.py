"""SQLite's lexical arm without FTS5's scope test (issue 16): when the searched scopes hold every chunk,
it ranks without the test and keeps the scope's rows. The rows and scores must be the scoped query's
own, whether that ranking fills the limit, runs out of matches, or (a write slipped in) falls back.
"Every chunk" is every row of the searched full-text table: users' rows have their own (``memory_fts``),
so only another shared collection stops a knowledge base being whole."""

from __future__ import annotations

from dataclasses import replace

import pytest
from store_contract import doc, vecs
from store_contract import request as any_request

from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_lexical import LEXICAL_SQL, lexical_arm, lexical_params, lexical_rows

KB = [f"retransmission timer {w} backoff" for w in ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")] + \
     [f"congestion window {w} growth" for w in ("eta", "theta", "iota", "kappa")]
# Texts that match "retransmission" better than any knowledge-base chunk does (short texts): another
# shared collection's (the knowledge base's table) and a user's notes (the memory table).
MEMORY = ["retransmission retransmission", "retransmission timer", "retransmission noted"]


def request(*args, **kw):
    """FTS5's own query is what these tests are about: not the in-memory copy (test_lexical_memory.py)."""
    return any_request(*args, in_memory_lexical=False, **kw)


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "unscoped.db")
    for n, text in enumerate(KB):
        s.write_document(doc(f"kb{n}.txt", [text, f"filler paragraph {n} about headers"]), vecs(2))
    s.write_document(doc("faq", MEMORY, collection="faq"), vecs(len(MEMORY)))
    s.write_document(doc("notes", MEMORY, owner="alice", collection="notes"), vecs(len(MEMORY)))
    yield s
    s.close()


def _ran(store: SQLiteStore) -> list[str]:
    seen: list[str] = []
    store.trace(seen.append)  # the statements SQLite runs on the store's connection
    return seen


@pytest.mark.parametrize("query", ["retransmission backoff", "retransmission", "congestion growth", "timer window"])
@pytest.mark.parametrize("limit", [1, 2, 3, 6, 40])
def test_the_arm_returns_the_scoped_rows_whichever_query_it_runs(store, query, limit):
    req = request(query, None, limit=limit)
    scoped = lexical_rows(store.query(LEXICAL_SQL, lexical_params(req)))
    members = {cid for cid, _ in lexical_rows(store.query(
        "SELECT id, 0.0 FROM chunks WHERE owner='' AND collection='kb'"))}
    assert lexical_arm(store.query, req, members) == scoped
    assert lexical_arm(store.query, req, None) == scoped


def test_each_path_is_taken_and_agrees(store):
    members = {cid for (cid,) in store.query("SELECT id FROM chunks WHERE owner='' AND collection='kb'")}
    seen = _ran(store)
    filled = request("retransmission backoff", None, limit=2)  # the faq ranks first; 2 KB rows follow
    got = lexical_arm(store.query, filled, members)
    arms = [s for s in seen if "bm25(" in s]
    assert len(arms) == 1 and "scope" not in arms[0]  # the unscoped ranking filled the limit by itself
    assert got == lexical_rows(store.query(LEXICAL_SQL, lexical_params(filled)))
    seen.clear()
    crowded = request("retransmission", None, limit=1)  # the top 2 are the faq's: nothing to keep
    got = lexical_arm(store.query, crowded, members)
    arms = [s for s in seen if "bm25(" in s]
    assert len(arms) == 2 and "scope" not in arms[0] and "scope" in arms[1]  # then the scoped query
    assert got == lexical_rows(store.query(LEXICAL_SQL, lexical_params(crowded)))


def _arms(seen: list[str]) -> list[str]:
    return [s for s in seen if "bm25(" in s]


def test_a_scope_that_is_not_its_whole_table_keeps_the_scope_test(store):
    """The knowledge base beside a shared faq keeps it; both together, or alice's notes (the only user's
    rows in the memory table), are their table and drop it; a search mixing the two tables keeps it."""
    cases = ((("",), ("kb",), False), (("",), ("kb", "faq"), True), (("alice",), ("notes",), True),
             (("", "alice"), ("kb", "notes"), False))
    for owners, colls, whole in cases:
        for query in ("retransmission backoff", "retransmission", "congestion growth", "filler headers"):
            req = request(query, None, owners=owners, collections=colls, limit=3)
            expected = store.search(replace(req, skip_scope_test=False)).candidates
            seen = _ran(store)
            assert store.search(req).candidates == expected
            assert all(("scope" in arm) is not whole for arm in _arms(seen)), _arms(seen)
            prefetched = store.prefetch_lexical(req)
            assert prefetched is not None
            assert store.search_prefetched(req, prefetched).candidates == expected
            store.trace(None)


def test_a_knowledge_base_alone_is_ranked_without_the_scope_test(tmp_path):
    store = SQLiteStore(tmp_path / "kb-only.db")
    try:
        for n, text in enumerate(KB):
            store.write_document(doc(f"kb{n}.txt", [text, f"filler paragraph {n} about headers"]), vecs(2))
        for query in ("retransmission backoff", "congestion growth", "timer window", "filler headers"):
            for limit in (1, 3, 40):
                req = request(query, None, limit=limit)
                expected = store.search(replace(req, skip_scope_test=False)).candidates
                store.search(req)  # reads the matrix: the scope is then known to be the whole table
                seen = _ran(store)
                assert store.search(req).candidates == expected
                assert [("scope" in arm) for arm in _arms(seen)] == [False]  # one query, no scope test
                store.trace(None)
                prefetched = store.prefetch_lexical(req)
                assert prefetched is not None and store.search_prefetched(req, prefetched).candidates == expected
        store.write_document(doc("notes", MEMORY, owner="alice", collection="notes"), vecs(len(MEMORY)))
        seen = _ran(store)  # a user's memory is in its own table: the knowledge base is still its table
        store.search(request("retransmission", None, limit=2))
        assert [("scope" in arm) for arm in _arms(seen)] == [False]
        store.trace(None)
        store.write_document(doc("faq", MEMORY, collection="faq"), vecs(len(MEMORY)))
        seen = _ran(store)  # another shared collection now sits beside it: the scope test is back
        store.search(request("retransmission", None, limit=2))
        assert [("scope" in arm) for arm in _arms(seen)] == [True]
    finally:
        store.close()
