"""PostgreSQL's bounded full-text arm (bara/store/pg_lexical.py): the per-scope term frequencies follow
every write, delete and backfill (per term only in scopes of ``lexical_terms_min_rows`` rows or more, the
row count in every scope); above the size threshold only the rarest terms' rows are ranked, with the exact
arm's score, counted in the searched scope alone, whether a scope keeps its counts or not; below it the
exact arm answers."""

from __future__ import annotations

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql

from bara.store import pg_server, pg_sql
from bara.store.migrations import postgres_migrations
from bara.store.pg_admin import migrate
from bara.store.pg_lexical import MARKER, REBUILD, rebuild_statements
from bara.types import SHARED
from store_contract import doc, request, unit, vecs


def _owner(pg_server_urls, schema: str) -> psycopg.Connection:
    conn = psycopg.connect(pg_server_urls.owner_url, autocommit=True)
    conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(schema)))
    return conn


def _frequencies(pg_server_urls, schema: str) -> tuple[dict, dict]:
    """(the table's counts, the same counted from the chunks now: every scope's row count, and the terms of
    the scopes marked as keeping them), as the owner in maintenance scope."""
    with _owner(pg_server_urls, schema) as conn, conn.transaction():
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        rows = list(conn.execute("SELECT owner, collection, term, df FROM chunk_terms"))
        marked = {r[:2] for r in rows if r[2] == MARKER}
        kept = {r[:3]: r[3] for r in rows if r[2] != MARKER}
        counted = {r[:3]: r[3] for r in conn.execute(
            "SELECT owner, collection, term, count(*) FROM (SELECT owner, collection,"
            " unnest(array_append(tsvector_to_array(tsv), ''::text)) AS term FROM chunks) s GROUP BY 1, 2, 3")
            if r[2] == "" or r[:2] in marked}
    return kept, counted


def _marked(pg_server_urls, schema: str) -> set[tuple[str, str]]:
    with _owner(pg_server_urls, schema) as conn, conn.transaction():
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        return {r[:2] for r in conn.execute("SELECT owner, collection FROM chunk_terms WHERE term = %s", (MARKER,))}


def test_term_frequencies_follow_writes_replacements_and_deletes(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory(lexical_terms_min_rows=0)  # every scope keeps its terms
    store.write_document(doc("a", ["congestion window", "window scaling", "checksum"]), vecs(3))
    store.write_document(doc("n", ["window of alice"], owner="alice", collection="notes"), vecs(1))
    store.write_document(doc("m", ["bob window", "bob again"], owner="bob", collection="notes"), vecs(2))
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted
    assert kept[(SHARED, "kb", "window")] == 2 and kept[(SHARED, "kb", "")] == 3
    assert kept[("bob", "notes", "bob")] == 2 and kept[("alice", "notes", "")] == 1
    store.write_document(doc("a", ["checksum only"], version="2"), vecs(1))  # replaces a's three chunks
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and (SHARED, "kb", "window") not in kept and kept[(SHARED, "kb", "")] == 1
    assert store.delete_document("n", owner="alice", collection="notes")
    store.delete_owner("bob")
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and not any(k[0] in ("alice", "bob") for k in kept)  # nothing of theirs kept
    with _owner(pg_server_urls, pg_schema) as conn, conn.transaction():  # an UPDATE of the analysed text
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        conn.execute("UPDATE chunks SET body_terms = 'checksum checksum retransmit'")
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[(SHARED, "kb", "retransmit")] == 1


def _kb(store) -> None:
    texts = [f"common filler {i}" for i in range(30)] + [f"common rare marker {i}" for i in range(3)]
    store.write_document(doc("kb.txt", texts), vecs(len(texts)))


def test_above_the_threshold_only_the_rarest_terms_rows_are_ranked_with_the_exact_score(pg_store_factory):
    exact = pg_store_factory(lexical_bounded_min_rows=0)
    _kb(exact)
    req = request("common rare", None, limit=40, use_dense=False)
    full = {c.chunk_id: c.lexical.score for c in exact.search(req).candidates}
    assert len(full) == 33
    bounded = pg_store_factory(lexical_bounded_min_rows=10, lexical_candidates=5)
    res = bounded.search(req)
    rare = {c.id for c in exact.get_chunks(list(full)) if "rare" in c.text}
    assert {c.chunk_id for c in res.candidates} == rare and res.lexical_hits == 3  # df(rare) = 3 fits 5
    assert all(c.lexical.score == full[c.chunk_id] for c in res.candidates)  # the same rank expression
    wide = pg_store_factory(lexical_bounded_min_rows=10, lexical_candidates=36)  # 3 + 33: both terms fit, every match
    assert [c.chunk_id for c in wide.search(req).candidates] == [c.chunk_id for c in exact.search(req).candidates]
    small = pg_store_factory(lexical_bounded_min_rows=34, lexical_candidates=5)  # 33 rows: below, exact
    assert [c.chunk_id for c in small.search(req).candidates] == [c.chunk_id for c in exact.search(req).candidates]
    only_common = request("common", None, limit=40, use_dense=False)  # the rarest term is taken even over budget
    assert bounded.search(only_common).lexical_hits == 33
    assert bounded.search(request("absent", None, use_dense=False)).candidates == ()


def test_frequencies_and_rows_are_the_searched_scopes_alone(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory(lexical_bounded_min_rows=1, lexical_candidates=5)
    store.write_document(doc("a", [f"zeta x{i}" for i in range(3)] + [f"alpha y{i}" for i in range(6)],
                              owner="alice", collection="notes"), vecs(9))
    store.write_document(doc("b", [f"zeta z{i}" for i in range(50)], owner="bob", collection="notes"), vecs(50))
    req = request("alpha zeta", None, owners=("alice",), collections=("notes",), limit=20, use_dense=False)
    found = store.get_chunks([c.chunk_id for c in store.search(req).candidates])
    # alice's df(zeta) is 3, within the budget: bob's 50 would have made alpha (6) the rarer term
    assert sorted(c.text for c in found) == ["zeta x0", "zeta x1", "zeta x2"]
    with store.scoped(["alice"]):
        assert {r[0] for r in store.query("SELECT owner FROM chunk_terms")} == {"alice"}
    with psycopg.connect(pg_server_urls.app_url, autocommit=True) as conn:  # no scope set: nothing
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(pg_schema)))
        assert conn.execute("SELECT count(*) FROM chunk_terms").fetchone()[0] == 0
    shared = request("zeta", None, owners=(SHARED, "bob"), collections=("notes",), limit=60, use_dense=False)
    assert {c.owner for c in store.get_chunks([c.chunk_id for c in store.search(shared).candidates])} == {"bob"}


def test_the_step_backfills_a_store_written_before_it(pg_server_urls, pg_schema, pg_store_factory):
    later = ("0031_pg_chunk_terms", "0032_pg_chunk_terms_lazy", "0033_pg_flat_vectors")  # 0033 needs chunk_terms
    before = [s for s in postgres_migrations(8) if s.name not in later]
    migrate(pg_server_urls.owner_url, dim=8, schema=pg_schema, app_role=pg_server.APP_ROLE, steps=before)
    with _owner(pg_server_urls, pg_schema) as conn, conn.transaction():
        register_vector(conn)
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        for owner, texts in ((SHARED, ["window one", "window two"]), ("alice", ["alice window"])):
            conn.execute(pg_sql.INSERT_DOCUMENT, (owner, "kb", f"{owner}.txt", "", "h", "{}", 0.0))
            for i, text in enumerate(texts):
                conn.execute(pg_sql.INSERT_CHUNK, (owner, "kb", i, text, "", "", 0, 1, "h", text, "", unit(1.0)))
        assert not conn.execute("SELECT to_regclass('chunk_terms')").fetchone()[0]
    pg_store_factory()  # migrates: the step runs its backfill
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[(SHARED, "kb", "window")] == 2 and kept[("alice", "kb", "window")] == 1
    assert _marked(pg_server_urls, pg_schema) == {(SHARED, "kb"), ("alice", "kb")}  # 0032 keeps what 0031 counted
    assert REBUILD[0].startswith("SELECT set_config('bara.owners', '*'")  # the backfill reads every owner


def test_crossed_writers_deadlock_as_a_busy_store_and_keep_counts_exact(pg_store_factory, pg_server_urls, pg_schema):
    """Every writer of a scope updates its row count (``term = ''``): two transactions writing two scopes in
    opposite orders deadlock; PostgreSQL aborts one, which must surface as a retryable busy store (not as
    an unreachable server), with nothing of it kept and the frequencies still exact."""
    import threading

    from bara.errors import StoreBusyError

    store = pg_store_factory()
    barrier, errors = threading.Barrier(2, timeout=20), []

    def write(first: str, second: str) -> None:
        try:
            with store.transaction():
                store.write_document(doc(f"{first}-1", [f"{first} note"], owner=first, collection="notes"), vecs(1))
                barrier.wait()
                store.write_document(doc(f"{first}-2", [f"{second} note"], owner=second, collection="notes"), vecs(1))
        except Exception as exc:  # noqa: BLE001 - the test inspects which fault it was
            errors.append(exc)

    threads = [threading.Thread(target=write, args=pair) for pair in (("alice", "bob"), ("bob", "alice"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(errors) == 1 and isinstance(errors[0], StoreBusyError), errors
    assert "rolled this transaction back" in str(errors[0])
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[("alice", "notes", "")] + kept[("bob", "notes", "")] == 2  # the winner's two


def test_a_scope_keeps_its_terms_from_the_write_that_takes_it_over_the_threshold(pg_store_factory, pg_server_urls,
                                                                                 pg_schema):
    store = pg_store_factory(lexical_terms_min_rows=3)
    store.write_document(doc("n1", ["window of alice", "alice again"], owner="alice", collection="notes"), vecs(2))
    store.write_document(doc("b1", ["bob window"], owner="bob", collection="notes"), vecs(1))
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted == {("alice", "notes", ""): 2, ("bob", "notes", ""): 1}  # row counts only
    assert not _marked(pg_server_urls, pg_schema)
    store.write_document(doc("n2", ["window three"], owner="alice", collection="notes"), vecs(1))  # 3: crosses
    assert _marked(pg_server_urls, pg_schema) == {("alice", "notes")}
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[("alice", "notes", "window")] == 2 and kept[("alice", "notes", "alic")] == 2
    store.write_document(doc("n3", ["window four", "checksum"], owner="alice", collection="notes"), vecs(2))
    store.write_document(doc("n1", ["replaced"], owner="alice", collection="notes", version="2"), vecs(1))
    assert store.delete_document("n2", owner="alice", collection="notes")
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[("alice", "notes", "window")] == 1 and kept[("alice", "notes", "")] == 3
    assert ("alice", "notes", "alic") not in kept  # n1 replaced
    with _owner(pg_server_urls, pg_schema) as conn, conn.transaction():  # UPDATEs of the analysed text
        conn.execute("SELECT set_config('bara.owners', '*', true)")
        conn.execute("UPDATE chunks SET body_terms = 'retransmit window'")
    kept, counted = _frequencies(pg_server_urls, pg_schema)
    assert kept == counted and kept[("alice", "notes", "retransmit")] == 3 and ("bob", "notes", "bob") not in kept


def test_a_bounded_search_counts_a_small_scopes_terms_from_its_rows(pg_store_factory, pg_server_urls, pg_schema):
    """The shared rows alone would make ``apple`` the rarer term (2 against 3); alice's four ``apple`` rows,
    in a scope too small to keep its terms, make it ``berry`` (3 against 6), as when her counts are kept."""
    store = pg_store_factory(lexical_bounded_min_rows=10, lexical_candidates=4, lexical_terms_min_rows=1000)
    shared = [f"filler {i}" for i in range(6)] + ["apple one", "apple two", "berry one", "berry two", "berry three"]
    store.write_document(doc("kb.txt", shared), vecs(len(shared)))
    store.write_document(doc("mine.txt", [f"apple mine {i}" for i in range(4)], owner="alice"), vecs(4))
    assert not _marked(pg_server_urls, pg_schema)  # 11 and 4 rows: neither scope keeps its terms
    req = request("apple berry", None, owners=(SHARED, "alice"), collections=("kb",), limit=20, use_dense=False)

    def texts():
        res = store.search(req)
        return sorted(c.text for c in store.get_chunks([c.chunk_id for c in res.candidates])), res

    lazy, res = texts()
    assert lazy == ["berry one", "berry three", "berry two"]
    with _owner(pg_server_urls, pg_schema) as conn, conn.transaction():  # now every scope keeps its terms
        for statement in rebuild_statements():
            conn.execute(statement)
    assert ("alice", "kb") in _marked(pg_server_urls, pg_schema)
    kept_texts, kept_res = texts()
    assert kept_texts == lazy
    assert [(c.chunk_id, c.lexical.score) for c in kept_res.candidates] == [
        (c.chunk_id, c.lexical.score) for c in res.candidates]
