"""The shared knowledge base's full-text arm scored in memory (``bara.store.sqlite_bm25``, issue 16):
the same rows, scores bit for bit and order as FTS5's own ``bm25()`` query, whatever the title weight,
limit, ties, other shared scopes' rows (table-wide statistics), words FTS5 tokenises differently, and
writes. Users' rows live in another table (``memory_fts``) and change none of it."""

from __future__ import annotations

import contextlib
import random
import sqlite3
from dataclasses import replace

import numpy as np
import pytest
from store_contract import doc, request, vecs

from bara.store import sqlite_lexical
from bara.store.sqlite import SQLiteStore
from bara.store.sqlite_bm25 import build_lexicon, fts5_tokens, varints
from bara.store.sqlite_lexicons import Lexicons, agrees_with_fts5
from bara.store.sqlite_lexical import LEXICAL_SQL, lexical_params, lexical_rows, read_snapshot, runner
from bara.text.lexical import analyze

WORDS = ("retransmission timer backoff congestion window growth header checksum cipher suite certificate "
         "renegotiation handshake record fragment alert session ticket resumption").split()
ODD = ["Café naïve façade Straße", "x²y and ½ past the über-proxy", "東京 server 日本語 text", "naïve café timer"]


def _texts(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30))) for _ in range(n)]


@pytest.fixture
def store(tmp_path):
    rng = random.Random(7)
    s = SQLiteStore(tmp_path / "bm25.db")
    for n in range(12):  # repeated words: many tied and near-tied scores
        s.write_document(doc(f"kb{n}.txt", _texts(rng, 4) + ([ODD[n % 4]] if n % 3 == 0 else [])),
                         vecs(4 + (n % 3 == 0)))
    s.write_document(doc("notes", _texts(rng, 5), owner="alice", collection="notes"), vecs(5))
    yield s
    s.close()


def _fts5(store: SQLiteStore, terms: tuple[str, ...], title_weight: float, limit: int) -> list[tuple[int, float]]:
    req = replace(request("", None, limit=limit), terms=terms, title_weight=title_weight)
    return lexical_rows(store.query(LEXICAL_SQL, lexical_params(req)))


def _lexicon(store: SQLiteStore):
    gens = store._matrix(("",), ("kb",)).gens
    lexicon = build_lexicon(store.query, ("",), ("kb",), gens)
    assert lexicon is not None
    return lexicon


@pytest.mark.parametrize("title_weight", [2.0, 1.0, 0.0, 0.3, 1.7])
def test_every_query_gets_fts5s_rows_and_scores_bit_for_bit(store, title_weight):
    lexicon, rng = _lexicon(store), random.Random(title_weight)
    vocabulary = sorted(set(analyze(" ".join(WORDS))) | {"cafe", "naiv", "tokyo", "past", "x", "uber", "absent"})
    for _ in range(150):
        terms = tuple(rng.sample(vocabulary, rng.randint(1, 9)))
        limit = rng.choice([1, 3, 8, 60])
        assert lexicon.rows(store.query, terms, title_weight, limit) == _fts5(store, terms, title_weight, limit)


def test_the_statistics_are_table_wide_as_fts5s_are(store):
    """Another shared collection changes the knowledge base's IDF and average length in FTS5; so here."""
    lexicon, terms = _lexicon(store), tuple(analyze("retransmission timer backoff"))
    before = lexicon.rows(store.query, terms, 2.0, 10)
    store.write_document(doc("more", ["retransmission " * 40] * 6, collection="faq"), vecs(6))
    after = lexicon.rows(store.query, terms, 2.0, 10)  # the knowledge base itself did not change
    assert after == _fts5(store, terms, 2.0, 10) and after != before


def test_users_memory_leaves_the_knowledge_bases_statistics_alone(store):
    """Users' rows are in their own table: the knowledge base's scores and its "whole table" shortcut
    (no row counts read) hold however much memory users store (it failed with one table)."""
    lexicon, terms = _lexicon(store), tuple(analyze("retransmission timer backoff"))
    before = lexicon.rows(store.query, terms, 2.0, 10)
    for user in ("bob", "carol"):
        store.write_document(doc("more", ["retransmission " * 40] * 6, owner=user, collection="notes"), vecs(6))
    seen: list[str] = []
    store.trace(seen.append)
    assert lexicon.rows(store.query, terms, 2.0, 10) == before == _fts5(store, terms, 2.0, 10)
    assert lexicon.hint.whole and not any("bara_fts_rows" in q for q in seen[:-1])


def test_a_whole_table_scope_counts_its_own_rows(tmp_path):
    s = SQLiteStore(tmp_path / "whole.db")
    try:
        s.write_document(doc("kb.txt", _texts(random.Random(3), 20)), vecs(20))
        lexicon, seen = _lexicon(s), []
        s.trace(seen.append)
        terms = tuple(analyze("cipher suite handshake alert"))
        assert lexicon.rows(s.query, terms, 2.0, 5) == _fts5(s, terms, 2.0, 5)
        assert not any("bara_fts_rows" in q for q in seen[:-1])  # no row counts read: the postings are them
    finally:
        s.close()


def test_a_query_reads_the_table_wide_statistics_in_one_statement(store):
    """The averages record and the row counts come from one statement, so from one snapshot: a write
    by another process cannot fall between them."""
    store.write_document(doc("faq", _texts(random.Random(9), 3), collection="faq"), vecs(3))  # not whole
    lexicon, seen = _lexicon(store), []
    terms = tuple(analyze("cipher suite handshake"))
    lexicon.rows(store.query, terms, 2.0, 5)  # the connection's first ask creates the fts5vocab table
    store.trace(seen.append)
    assert lexicon.rows(store.query, terms, 2.0, 5) == _fts5(store, terms, 2.0, 5)
    reads = [q for q in seen[:-1] if "chunks_fts_data" in q or "bara_fts_rows" in q]
    assert len(reads) == 1 and "chunks_fts_data" in reads[0] and "bara_fts_rows" in reads[0]


def test_a_query_the_scope_cannot_match_reads_no_statistics(store):
    """Only another shared collection holds "zebra": the knowledge base matches nothing, as in FTS5, and
    its statistics are not read; a phrase the scope lacks is not counted either."""
    store.write_document(doc("zoo", ["zebra zebra okapi"], collection="faq"), vecs(1))
    lexicon, seen = _lexicon(store), []
    lexicon.rows(store.query, ("cipher",), 2.0, 5)  # the connection's first ask creates the fts5vocab table
    store.trace(seen.append)
    assert lexicon.rows(store.query, ("zebra", "okapi"), 2.0, 5) == [] == _fts5(store, ("zebra", "okapi"), 2.0, 5)
    assert not any("chunks_fts_data" in q for q in seen[:-1])
    expected, seen[:] = _fts5(store, ("zebra", "cipher"), 2.0, 5), []
    assert lexicon.rows(store.query, ("zebra", "cipher"), 2.0, 5) == expected
    assert any("bara_fts_rows" in q for q in seen) and not any("zebra" in q for q in seen)


def test_a_whole_table_scope_that_stops_being_whole_counts_rows_table_wide(tmp_path):
    s = SQLiteStore(tmp_path / "grows.db")
    try:
        s.write_document(doc("kb.txt", _texts(random.Random(5), 20)), vecs(20))
        lexicon, terms = _lexicon(s), tuple(analyze("cipher suite handshake alert"))
        assert lexicon.rows(s.query, terms, 2.0, 5) == _fts5(s, terms, 2.0, 5)
        s.write_document(doc("notes", ["cipher cipher alert"] * 7, collection="faq"), vecs(7))
        for _ in range(2):  # the first query finds the table grown, the next asks for the counts at once
            assert lexicon.rows(s.query, terms, 2.0, 5) == _fts5(s, terms, 2.0, 5)
    finally:
        s.close()


def test_words_fts5_tokenises_differently_are_counted_with_its_tokens(store):
    tokens = fts5_tokens({"naïve", "façade"})
    assert tokens == {"naïve": ("naive",), "façade": ("facade",)}
    lexicon = _lexicon(store)
    for query in ("naive cafe", "facade timer", "uber proxy"):
        terms = tuple(analyze(query))
        assert lexicon.rows(store.query, terms, 2.0, 10) == _fts5(store, terms, 2.0, 10)


def test_a_query_term_fts5_would_tokenise_is_left_to_fts5(store):
    assert _lexicon(store).rows(store.query, ("café",), 2.0, 5) is None
    assert _lexicon(store).rows(store.query, (), 2.0, 5) is None


def test_a_row_whose_tokens_do_not_add_up_gives_no_lexicon(store):
    """The check that guards exactness: FTS5's docsize against the tokens read back."""
    any_id = int(store.query("SELECT id FROM chunks WHERE owner='' LIMIT 1")[0][0])
    store.execute("UPDATE chunks_fts_docsize SET sz = ? WHERE id = ?", (bytes([99, 0, 1]), any_id))
    assert build_lexicon(store.query, ("",), ("kb",), (1,)) is None
    assert varints(bytes([0x81, 0x00, 0x05])) == [128, 5]


def test_the_store_searches_with_it_once_built_in_the_background_and_after_writes(store):
    req = request("retransmission timer backoff congestion", None, limit=6, in_memory_min_chunks=0,
                  in_memory_after=2)
    expected = store.search(replace(req, in_memory_lexical=False)).candidates
    seen: list[str] = []
    store.trace(seen.append)
    for _ in range(2):  # FTS5 answers the first two; the second starts the build on its own thread
        seen.clear()
        assert store.search(req).candidates == expected
        assert any("bm25(" in q for q in seen)
    store.wait_for_indexes()
    seen.clear()
    assert store.search(req).candidates == expected
    assert seen and not any("bm25(" in q for q in seen)  # scored in memory
    first = store.prefetch_lexical(req)  # the worker connection, opened now
    assert first is not None and first.rows.result() == _fts5(store, req.terms, req.title_weight, req.limit)
    worker: list[str] = []
    store._worker._conn.set_trace_callback(worker.append)
    ahead = store.prefetch_lexical(req)  # the worker scores in memory too, on its own connection
    assert ahead is not None and ahead.rows.result() == _fts5(store, req.terms, req.title_weight, req.limit)
    assert worker and not any("bm25(" in q for q in worker)
    assert store.search_prefetched(req, ahead).candidates == expected
    store.write_document(doc("late.txt", ["retransmission backoff backoff", "timer"]), vecs(2, start=3))
    fresh = store.search(replace(req, in_memory_lexical=False)).candidates
    assert store.search(req).candidates == fresh != expected  # FTS5 while the new generation is built
    store.wait_for_indexes()
    seen.clear()
    assert store.search(req).candidates == fresh and not any("bm25(" in q for q in seen)


def test_an_in_memory_database_is_never_indexed(tmp_path):
    s = SQLiteStore(":memory:")
    try:
        s.write_document(doc("kb.txt", _texts(random.Random(5), 8)), vecs(8))
        req = request("cipher suite handshake", None, limit=4, in_memory_min_chunks=0, in_memory_after=1)
        for _ in range(3):
            assert s.search(req).candidates == s.search(replace(req, in_memory_lexical=False)).candidates
        s.wait_for_indexes()
        assert s._lexicons.current(("",), ("kb",), s._matrix(("",), ("kb",)).gens) is None
    finally:
        s.close()


def test_memory_scopes_are_not_the_shared_lexicons_and_the_setting_off_changes_nothing(store):
    """Memory scopes are scored over their own statistics (``sqlite_scope_bm25``, its own tests)."""
    lexicons = Lexicons("", None)
    for _ in range(3):
        assert lexicons.lexicon(("alice",), ("notes",), (1,), lambda run: (1,), after=1) is None
    notes = request("retransmission timer", None, owners=("alice",), collections=("notes",), limit=3)
    for _ in range(3):
        assert store.search(notes).candidates == store.search(replace(notes, in_memory_lexical=False)).candidates
    assert np.all(store._matrix(("alice",), ("notes",)).ids > 0)


def test_an_empty_scope_and_an_empty_table_match_nothing(tmp_path):
    s = SQLiteStore(tmp_path / "empty.db")
    try:
        assert build_lexicon(s.query, ("",), ("kb",), (0,)).rows(s.query, ("timer",), 2.0, 5) == []
        s.write_document(doc("notes", ["timer"], owner="alice", collection="notes"), vecs(1))
        assert build_lexicon(s.query, ("",), ("kb",), (0,)).rows(s.query, ("timer",), 2.0, 5) == []
        assert _fts5(s, ("timer",), 2.0, 5) == []
    finally:
        s.close()


def test_a_knowledge_base_below_the_size_threshold_stays_with_fts5(store):
    """Under ``lexical_in_memory_min_chunks`` FTS5 is as fast and leaves the interpreter lock free."""
    req = request("retransmission timer backoff congestion", None, limit=6, in_memory_after=1)  # default size
    assert len(store._matrix(("",), ("kb",)).ids) < req.in_memory_min_chunks
    seen: list[str] = []
    store.trace(seen.append)
    for _ in range(3):
        seen.clear()
        store.search(req)
        store.wait_for_indexes()
        assert any("bm25(" in q for q in seen)
    assert store._lexicons.current(("",), ("kb",), store._matrix(("",), ("kb",)).gens) is None
    store.search(replace(req, in_memory_min_chunks=len(store._matrix(("",), ("kb",)).ids)))
    store.wait_for_indexes()  # at the threshold it is built
    assert store._lexicons.current(("",), ("kb",), store._matrix(("",), ("kb",)).gens) is not None


def test_a_lexicon_that_ranks_otherwise_than_fts5_fails_the_probe(store):
    """Before first use a lexicon must rank three of the scope's terms as FTS5 does; one whose row
    lengths are off by a token (as if FTS5 counted otherwise) fails it."""
    lexicon = _lexicon(store)
    assert agrees_with_fts5(store.query, lexicon, ("",), ("kb",))
    assert not agrees_with_fts5(store.query, replace(lexicon, length=lexicon.length + 1), ("",), ("kb",))


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_probe_reads_one_snapshot_while_another_connection_commits(store, tmp_path, snapshot):
    """A lexicon is built and probed on its own connection while turns go on writing: a learning write
    (here to another shared collection: users' notes have their own table) committed between the probe's
    two rankings changes the table-wide statistics
    under one of them. Inside one read snapshot both rank as of the same moment and agree; outside
    one they disagree, which is why the build reads in one (a false alarm left FTS5 answering)."""
    lexicon = _lexicon(store)
    reader = sqlite3.connect(tmp_path / "bm25.db", check_same_thread=False)
    run, wrote = runner(reader), []

    def interleaved(sql: str, params: tuple) -> list[tuple]:
        if "bm25(" in sql and not wrote:  # the in-memory ranking is read; FTS5's is next: a turn's write commits
            store.write_document(doc("later", ["retransmission " * 40] * 6, collection="faq"), vecs(6))
            wrote.append(sql)
        return run(sql, params)
    try:
        if snapshot:
            with read_snapshot(reader):
                assert agrees_with_fts5(interleaved, lexicon, ("",), ("kb",))
        else:
            assert not agrees_with_fts5(interleaved, lexicon, ("",), ("kb",))
        assert wrote and not reader.in_transaction
    finally:
        reader.close()


@pytest.mark.parametrize("snapshot", [True, False])
def test_the_prefetch_reads_generations_and_statistics_as_of_one_moment(store, monkeypatch, snapshot):
    """The prefetch worker reads the scope's generations (is the in-memory lexicon current?) and then the
    statistics the lexicon scores with, in two statements. A write committed between them (an ingest into
    the knowledge base while a turn runs) would give the old postings the new statistics: scores as of no
    moment at all. The worker reads inside one snapshot, so it answers exactly as FTS5 did before the write."""
    req = request("retransmission timer backoff", None, limit=8, use_dense=False, in_memory_min_chunks=0,
                  in_memory_after=1)
    store.search(req)
    store.wait_for_indexes()
    before = _fts5(store, req.terms, req.title_weight, req.limit)
    real, wrote = sqlite_lexical.runner, []

    def runner_committing(conn):
        run = real(conn)

        def interleaved(sql: str, params: tuple) -> list[tuple]:
            rows = run(sql, params)
            if "scope_generation" in sql and not wrote:  # generations read; the statistics are next
                store.write_document(doc("ingested", ["retransmission timer " * 30] * 8), vecs(8))
                wrote.append(sql)
            return rows
        return interleaved
    monkeypatch.setattr(sqlite_lexical, "runner", runner_committing)
    if not snapshot:
        monkeypatch.setattr(sqlite_lexical, "read_snapshot", lambda conn: contextlib.nullcontext())
    prefetched = store.prefetch_lexical(req)
    assert prefetched is not None
    rows = prefetched.rows.result()
    assert wrote  # the write did fall between the two reads
    after = _fts5(store, req.terms, req.title_weight, req.limit)
    assert after != before
    if snapshot:
        assert rows == before
    else:
        assert rows != before and rows != after
