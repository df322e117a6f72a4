"""PostgreSQL search plans: what the application role's hybrid statement can use under row-level
security (the GIN full-text index, HNSW for a large per-user tier) and that the choices give the
same answers as the exact paths."""

from __future__ import annotations

import json
import re

import numpy as np
import psycopg
from pgvector.psycopg import register_vector

from bara.store import pg_sql
from bara.store.pg_rows import search_params as _search_params
from bara.types import SearchRequest
from store_contract import doc, unit, vecs


def _plan(pg_server_urls, schema: str, req: SearchRequest, private_exact_max: int, *settings: str) -> str:
    """EXPLAIN ANALYZE of the hybrid statement as the application role, in ``req``'s scope."""
    with psycopg.connect(pg_server_urls.app_url, autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}, public")
        register_vector(conn)
        with conn.transaction():
            conn.execute(pg_sql.SET_SEARCH, (json.dumps(list(req.owners)), "100", "20000"))
            for s in settings:
                conn.execute(s)
            rows = conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + pg_sql.hybrid("ts_rank"),
                                _search_params(req, private_exact_max)).fetchall()
    return "\n".join(r[0] for r in rows)


def _ann_rows(plan: str) -> int:
    """Rows the ``private_ann`` CTE (HNSW) returned in an EXPLAIN ANALYZE text."""
    found = re.search(r"CTE private_ann\n(?:.*\n)*?.*Limit \(actual time=\S+ rows=(\d+)", plan)
    assert found, plan
    return int(found.group(1))


def test_the_full_text_index_is_usable_under_row_level_security(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory()
    texts = [f"{'congestion window' if i % 100 == 0 else 'checksum header'} {i}" for i in range(600)]
    store.write_document(doc("a.txt", texts), vecs(600))
    with psycopg.connect(pg_server_urls.owner_url, autocommit=True) as conn:
        conn.execute(f"VACUUM ANALYZE {pg_schema}.chunks")  # 6 of 600 rows match: GIN is the cheap path
    req = SearchRequest(("window",), None, limit=5, use_dense=False)
    # the planner may read the GIN index under a policy only if the match operator is leakproof
    plan = _plan(pg_server_urls, pg_schema, req, 2000, "SET LOCAL enable_seqscan = off",
                 "SET LOCAL enable_indexscan = off")  # left: a bitmap of the scope index, or of GIN
    assert "chunks_tsv" in plan, plan


def test_a_large_user_tier_is_searched_through_the_hnsw_index(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory()
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store.write_document(doc("n", [f"note {i}" for i in range(60)], owner="alice", collection="notes"), vectors)
    q = unit(0.3)
    req = SearchRequest((), q, limit=5, owners=("alice",), collections=("notes",), use_lexical=False)
    small, large = (_plan(pg_server_urls, pg_schema, req, m) for m in (1000, 10))
    assert _ann_rows(small) == 0, small  # under the size: exact distance only
    assert _ann_rows(large) == 5, large  # over it: the index answered
    exact = [c.chunk_id for c in store.search(req).candidates]
    big = type(store)(store.location, dim=8, schema=pg_schema, private_exact_max=10)
    try:
        assert [c.chunk_id for c in big.search(req).candidates] == exact
    finally:
        big.close()


def test_an_unknown_rank_function_is_refused_before_connecting():
    import pytest

    from bara.errors import StoreError
    from bara.store.postgres import PostgresStore

    with pytest.raises(StoreError, match="pg_lexical_rank must be one of .*ts_rank.*, not .bm25."):
        PostgresStore("postgresql://nobody@/nowhere?host=/nonexistent", lexical_rank="bm25")


def _match_leakproof(pg_server_urls) -> bool:
    with psycopg.connect(pg_server_urls.superuser_url, autocommit=True) as conn:
        return conn.execute("SELECT proleakproof FROM pg_proc WHERE oid ="
                            " 'ts_match_vq(tsvector, tsquery)'::regprocedure").fetchone()[0]


def test_db_migrate_marks_the_match_leakproof_or_says_who_must(pg_server_urls, pg_schema, monkeypatch):
    """A server `bara db start` did not create lacks the mark: `bara db migrate` as a superuser sets it,
    and as any other role (the schema owner) names the statement a superuser must run."""
    from typer.testing import CliRunner

    from bara.cli import app

    monkeypatch.setenv("BARA_PG_SCHEMA", pg_schema)
    monkeypatch.setenv("BARA_PG_EMBEDDING_DIM", "8")
    with psycopg.connect(pg_server_urls.superuser_url, autocommit=True) as conn:
        conn.execute("ALTER FUNCTION ts_match_vq(tsvector, tsquery) NOT LEAKPROOF")  # as on another server
    try:
        owner = CliRunner().invoke(app, ["db", "migrate", "--db", pg_server_urls.owner_url])
        assert owner.exit_code == 0, owner.output
        assert f"{pg_sql.LEAKPROOF_MATCH};" in owner.output and not _match_leakproof(pg_server_urls)
        from bara.store.pg_admin import mark_match_leakproof

        assert mark_match_leakproof(pg_server_urls.superuser_url) is None  # a superuser marks it
        assert _match_leakproof(pg_server_urls)
        again = CliRunner().invoke(app, ["db", "migrate", "--db", pg_server_urls.owner_url])
        assert again.exit_code == 0 and "LEAKPROOF" not in again.output, again.output
    finally:
        with psycopg.connect(pg_server_urls.superuser_url, autocommit=True) as conn:
            conn.execute(pg_sql.LEAKPROOF_MATCH)
