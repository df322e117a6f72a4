"""PostgreSQL backend: the shared contract, then what only a server database has (one round trip,
row-level security, iterative HNSW scan, connection and schema errors)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest
from psycopg import sql

from bara.errors import StoreError
from bara.store import pg_server
from bara.store.migrations import Migration, postgres_migrations
from bara.store.pg_admin import migrate
from bara.store.postgres import PostgresStore
from pg_fixtures import superuser
from store_contract import StoreContract, doc, request, unit, vecs


class TestPostgresContract(StoreContract):
    @pytest.fixture
    def store(self, pg_store_factory):
        return pg_store_factory()


def test_search_is_one_statement_in_one_round_trip(pg_store_factory, monkeypatch):
    store = pg_store_factory()
    store.write_document(doc("a.txt", ["congestion window", "checksum"]), vecs(2))
    sent, pipelines = [], []
    real_execute, real_pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
    me = threading.get_ident()  # the pool configures new connections (SET search_path) on its own threads

    def execute(self, q, *a, **k):
        if threading.get_ident() == me:
            sent.append(str(q))
        return real_execute(self, q, *a, **k)

    monkeypatch.setattr(psycopg.Connection, "execute", execute)
    monkeypatch.setattr(psycopg.Connection, "pipeline", lambda self: pipelines.append(1) or real_pipeline(self))
    res = store.search(request("window", unit(1.0)))
    assert len(res.candidates) == 2 and len(pipelines) == 1  # one pipeline = one Sync = one round trip
    assert [s.split()[0] for s in sent] == ["SELECT", "WITH"]  # set_config, hybrid: one implicit transaction


def _owners_seen(store) -> set[str]:
    """A deliberately careless query (no WHERE) in alice's scope: only RLS can keep bob out."""
    with store.scoped(["alice"]):
        return {r[0] for r in store.query("SELECT owner FROM chunks")} | {
            r[0] for r in store.query("SELECT owner FROM documents")}


def test_row_level_security_isolates_owners_and_negative_control(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory()
    store.write_document(doc("a", ["alice private"], owner="alice", collection="notes"), vecs(1))
    store.write_document(doc("b", ["bob private"], owner="bob", collection="notes"), vecs(1))
    assert _owners_seen(store) == {"alice"}
    with psycopg.connect(pg_server_urls.owner_url, autocommit=True) as owner:  # remove the policy deliberately
        owner.execute(sql.SQL("ALTER TABLE {}.chunks DISABLE ROW LEVEL SECURITY").format(sql.Identifier(pg_schema)))
        owner.execute(sql.SQL("ALTER TABLE {}.documents DISABLE ROW LEVEL SECURITY").format(sql.Identifier(pg_schema)))
    assert _owners_seen(store) == {"alice", "bob"}  # the isolation check detects the leak: it is not vacuous


def test_application_role_neither_owns_nor_bypasses(pg_store_factory, pg_server_urls, pg_schema):
    pg_store_factory()
    with superuser(pg_server_urls) as conn:
        owners = {r[0] for r in conn.execute(
            "SELECT tableowner FROM pg_tables WHERE schemaname = %s AND tablename IN"
            " ('documents','chunks','conversations','messages','profile')", (pg_schema,))}
        bypass = conn.execute("SELECT rolbypassrls, rolsuper FROM pg_roles WHERE rolname = %s",
                              (pg_server.APP_ROLE,)).fetchone()
    assert owners == {pg_server.OWNER_ROLE} and bypass == (False, False)


def test_unscoped_connection_sees_nothing(pg_store_factory, pg_server_urls, pg_schema):
    store = pg_store_factory()
    store.write_document(doc("a", ["shared text"]), vecs(1))
    with psycopg.connect(pg_server_urls.app_url) as conn:
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(pg_schema)))
        assert conn.execute("SELECT count(*) FROM chunks").fetchone()[0] == 0  # fails closed


def test_writing_outside_the_scope_is_refused_by_the_database(pg_store_factory):
    store = pg_store_factory()
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        with store.scoped(["alice"]):
            store.execute("INSERT INTO documents (owner, collection, source, content_hash, updated_at)"
                          " VALUES (?, 'notes', 'x', 'h', 0)", ("bob",))


def test_memory_tables_are_row_level_secured(pg_store_factory):
    from bara.memory.conversations import Conversations

    store = pg_store_factory()
    conv = Conversations(store)
    for user in ("alice", "bob"):
        conv.append(user, conv.create(user), "user", f"hello from {user}")
    with store.scoped(["alice"]):
        assert {r[0] for r in store.query("SELECT user_id FROM messages")} == {"alice"}


def test_selective_filter_returns_full_results(pg_store_factory):
    import numpy as np

    store = pg_store_factory(dim=16)
    rng = np.random.default_rng(3)
    def rand(n):
        v = rng.normal(size=(n, 16)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)
    big = rand(3000)
    for i in range(0, 3000, 500):
        store.write_document(doc(f"kb{i}", [f"bulk {j}" for j in range(500)]), big[i:i + 500])
    store.write_document(doc("rare", [f"rare {j}" for j in range(6)], collection="rare"), rand(6))  # 0.2%
    store.write_document(doc("mine", [f"mine {j}" for j in range(4)], owner="u1", collection="notes"), rand(4))
    q = rand(1)[0]
    res = store.search(request("zzz", q, collections=("rare",), limit=6))
    assert res.dense_hits == 6
    res = store.search(request("zzz", q, owners=("u1",), collections=("notes",), limit=10))
    assert res.dense_hits == 4
    res = store.search(request("zzz", q, owners=("", "u1"), collections=("kb", "notes"), limit=12))
    assert res.dense_hits == 12


def test_unreachable_server_names_what_to_do():
    with pytest.raises(StoreError, match="cannot reach PostgreSQL.*bara db start"):
        PostgresStore("postgresql://bara_app:x@/bara?host=/tmp/no-such-bara-socket-dir")


def test_wrong_credentials_name_what_to_do(pg_server_urls):
    url = pg_server_urls.url(pg_server.APP_ROLE, "wrong-password")
    with pytest.raises(StoreError, match="refused the credentials") as err:
        PostgresStore(url)
    assert "wrong-password" not in str(err.value)


def test_missing_vector_extension_names_who_must_act(pg_server_urls):
    with superuser(pg_server_urls) as conn:
        conn.execute("DROP DATABASE IF EXISTS novector")
        conn.execute("CREATE DATABASE novector")
    url = pg_server_urls.url(pg_server.APP_ROLE, pg_server.APP_PASSWORD, "novector")
    with pytest.raises(StoreError, match="CREATE EXTENSION vector"):
        PostgresStore(url)


def test_schema_from_newer_bara_is_refused(pg_server_urls, pg_schema, pg_store_factory):
    migrate(pg_server_urls.owner_url, dim=8, schema=pg_schema,
            steps=[*postgres_migrations(8), Migration("9999_future", ("SELECT 1",))])
    with pytest.raises(StoreError, match="newer bara"):
        pg_store_factory()


def test_application_role_cannot_migrate_and_is_told_how(pg_server_urls, pg_schema):
    with superuser(pg_server_urls) as conn:
        conn.execute(sql.SQL("REVOKE CREATE ON SCHEMA {} FROM {}").format(
            sql.Identifier(pg_schema), sql.Identifier(pg_server.APP_ROLE)))
    with pytest.raises(StoreError, match="bara db migrate"):
        PostgresStore(pg_server_urls.app_url, dim=8, schema=pg_schema)


def test_a_missing_schema_is_created_by_migrate_never_served_from_public(pg_server_urls):
    name = f"t_new_{uuid.uuid4().hex[:10]}"
    try:
        store = PostgresStore(pg_server_urls.app_url, dim=8, schema=name, admin_url=pg_server_urls.owner_url,
                              app_role=pg_server.APP_ROLE)
        store.write_document(doc("a", ["kept in its own schema"]), vecs(1))
        store.close()
        with superuser(pg_server_urls) as conn:
            where = conn.execute("SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                                 " WHERE c.relname = 'chunks' AND n.nspname IN (%s, 'public')", (name,)).fetchall()
            assert where == [(name,)]
            assert conn.execute(sql.SQL("SELECT count(*) FROM {}.chunks").format(sql.Identifier(name))).fetchone() == (1,)
    finally:
        with superuser(pg_server_urls) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def test_a_store_naming_a_schema_it_cannot_see_is_refused(pg_server_urls, pg_store_factory):
    pg_store_factory()  # a migrated schema exists elsewhere: the refusal is not about a bare database
    with pytest.raises(StoreError, match="schema 'nowhere_[0-9a-f]+' does not exist"):
        PostgresStore(pg_server_urls.app_url, dim=8, schema=f"nowhere_{uuid.uuid4().hex[:8]}")


def test_placeholder_translation_leaves_literals_alone():
    from bara.store.pg_sql import to_pyformat

    assert to_pyformat("SELECT '?', \"a?\", x LIKE 'a%' -- why?\n WHERE y = ? /* ? */") == \
        "SELECT '?', \"a?\", x LIKE 'a%%' -- why?\n WHERE y = %s /* ? */"
    assert to_pyformat("SELECT 'it''s ?' , ?") == "SELECT 'it''s ?' , %s"


def test_literal_percent_and_question_mark_in_generic_sql(pg_store_factory):
    store = pg_store_factory()
    assert store.query("SELECT '100%?', ?::text", ("x?%",)) == [("100%?", "x?%")]


# ------------------------------------------------------------- portable domain SQL on Postgres
def test_memory_conversations_on_postgres(pg_store_factory):
    from bara.memory.conversations import Conversations

    conv = Conversations(pg_store_factory())
    cid = conv.create("u1")
    assert [conv.append("u1", cid, role, text) for role, text in
            (("user", "hi ? 100%"), ("assistant", "hello"), ("user", "'; DROP TABLE messages; --"))] == [1, 2, 3]
    assert [m.text for m in conv.history("u1", cid)][-1] == "'; DROP TABLE messages; --"
    assert conv.history("u2", cid) == [] and conv.list("u1")[0].turn_count == 2


def test_funds_repo_query_on_postgres(pg_store_factory, data_dir):
    from bara.domains.funds import loader
    from bara.domains.funds.repo import FundsRepo

    from bara.store.sqlite import SQLiteStore

    pg, lite = pg_store_factory(), SQLiteStore(":memory:")
    answers = []
    for store in (pg, lite):
        loader.load_amfi(store, data_dir, only_codes={"122639"})
        repo = FundsRepo(store)
        answers.append((repo.scheme("122639"), repo.latest_nav("122639"), repo.find_scheme("parag parikh flexi")))
    lite.close()
    assert answers[0] == answers[1] and answers[0][0].name == "Parag Parikh Flexi Cap Fund - Direct Plan - Growth"


# ------------------------------------------------------------------------------ concurrency
WORKERS, ROUNDS = 4, 15


def _worker(url: str, schema: str, worker: int, cid: str) -> None:
    from bara.memory.conversations import Conversations

    store = PostgresStore(url, dim=8, schema=schema)
    conv = Conversations(store)
    own = conv.create(f"user{worker}")
    for i in range(ROUNDS):
        store.write_document(doc(f"w{worker}-{i}", [f"worker {worker} round {i}", "second chunk"]), vecs(2))
        conv.append("team", cid, "user", f"{worker}:{i}")
        conv.append(f"user{worker}", own, "user", str(i))
    store.close()


def test_concurrent_workers_lose_nothing_and_keep_order(pg_store_factory, pg_server_urls, pg_schema):
    import multiprocessing as mp

    from bara.memory.conversations import Conversations

    store = pg_store_factory()
    conv = Conversations(store)
    cid = conv.create("team")
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(pg_server_urls.app_url, pg_schema, w, cid)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * WORKERS
    assert store.count_chunks() == WORKERS * ROUNDS * 2
    shared = conv.history("team", cid)
    assert [m.seq for m in shared] == list(range(1, WORKERS * ROUNDS + 1))
    for w in range(WORKERS):
        mine = [int(m.text.split(":")[1]) for m in shared if m.text.startswith(f"{w}:")]
        assert mine == list(range(ROUNDS))
        own = [c for c in conv.list(f"user{w}")][0]
        assert [m.text for m in conv.history(f"user{w}", own.id)] == [str(i) for i in range(ROUNDS)]


def test_a_turn_runs_under_the_users_database_scope(pg_store_factory, embedder, tmp_path):
    """Generic SQL inside a gated turn (here: a careless hook) sees only the turn's user's memory rows."""
    from bara.app import Bara
    from bara.turn.gated import Assistant
    from bara.settings import Settings

    store = pg_store_factory(dim=embedder.dim)  # turns are remembered as episodes: real vectors are written
    bara = Bara(Settings(db="postgresql://unused", cache_dir=tmp_path / "c"), store=store, embedder=embedder)
    assistant = Assistant(bara)
    assistant.turn("bob", "hello, I'm Bob")
    seen: list[set] = []

    def careless(value, ctx):
        seen.append({r[0] for r in store.query("SELECT user_id FROM messages")})
        return None

    assistant.hooks.add("before_generation", careless)
    assistant.turn("alice", "hi there")
    assert seen == [set()] or seen == [{"alice"}]  # alice's own rows only (none stored yet, or hers)
    assert {r[0] for r in store.query("SELECT user_id FROM messages")} == {"alice", "bob"}  # unscoped: all


def test_portfolio_transactions_are_row_level_secured_inside_tools(pg_store_factory, data_dir):
    """A careless tool (no WHERE user_id) run for u_asha sees only u_asha's transactions: the scope set
    around the call reaches the tool's worker thread, and the database enforces it."""
    import time

    import pydantic

    from bara.agent.tools import Tool, ToolContext, run_tool
    from bara.domains.funds import create_demo_users, loader
    from bara.settings import Settings

    store = pg_store_factory()
    loader.load_amfi(store, data_dir)
    users = create_demo_users(store)

    class NoArgs(pydantic.BaseModel):
        model_config = pydantic.ConfigDict(extra="forbid")

    careless = Tool("list_owners", "Lists owners. Do not use in production.", NoArgs,
                    lambda ctx, _: sorted({r[0] for r in ctx.store.query("SELECT user_id FROM funds_transactions")}))
    ctx = ToolContext("u_asha", store, Settings(), time.monotonic() + 30)
    assert len(run_tool({"list_owners": careless}, "list_owners", {}, ctx).data) == len(users)  # unscoped
    with store.scoped(["", "u_asha"]):
        assert run_tool({"list_owners": careless}, "list_owners", {}, ctx).data == ["u_asha"]


def test_a_schema_of_its_own_beside_a_store_in_public(pg_server_urls):
    """``pg_schema`` gives a deployment its own tables even when ``public`` of the same database holds
    another bara store: the search path is "<schema>, public", so the migrations table must be looked up
    in the schema itself (through the path it found public's, saw every step applied, migrated nothing,
    and the schema's store read and wrote public's rows)."""
    import uuid

    from bara.types import SHARED

    name = f"t_db_{uuid.uuid4().hex[:10]}"
    with superuser(pg_server_urls) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(name),
                                                                  sql.Identifier(pg_server.OWNER_ROLE)))
    owner_url, app_url = pg_server_urls.url(pg_server.OWNER_ROLE, pg_server.OWNER_PASSWORD, name), \
        pg_server_urls.url(pg_server.APP_ROLE, pg_server.APP_PASSWORD, name)
    try:
        with psycopg.connect(pg_server_urls.url("postgres", "", name), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION vector")
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(sql.Identifier(name),
                                                                             sql.Identifier(pg_server.APP_ROLE)))
        with psycopg.connect(owner_url, autocommit=True) as conn:
            conn.execute("CREATE SCHEMA second")
        kw = {"dim": 8, "admin_url": owner_url, "app_role": pg_server.APP_ROLE}
        with PostgresStore(app_url, **kw) as public:
            public.write_document(doc("a.txt", ["in public"]), vecs(1))
            with PostgresStore(app_url, schema="second", **kw) as second:
                assert second.count_chunks(SHARED, "kb") == 0
                second.write_document(doc("b.txt", ["in second", "and more"]), vecs(2))
            assert public.count_chunks(SHARED, "kb") == 1
        with psycopg.connect(owner_url) as conn:
            tables = {r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'second'")}
        assert {"bara_migrations", "documents", "chunks"} <= tables
    finally:
        with superuser(pg_server_urls) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
