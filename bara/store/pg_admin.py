"""PostgreSQL connection diagnosis and migrations (run as the schema's owner, never per query)."""

from __future__ import annotations

import time
from typing import LiteralString, Sequence, cast

import psycopg
from psycopg import errors as pgerr
from psycopg import sql as pgsql

from bara.errors import StoreError
from bara.store.migrations import Migration, announce_upgrade, postgres_migrations
from bara.store.pg_sql import LEAKPROOF_MATCH, MIGRATIONS_TABLE

_LOCK_KEY = 0x62617261  # advisory lock: one migrator at a time per database


def redact(url: str) -> str:
    """The URL without its password, for error messages."""
    head, sep, tail = url.partition("@")
    if not sep or ":" not in head.split("//", 1)[-1]:
        return url
    scheme, _, cred = head.partition("//")
    return f"{scheme}//{cred.split(':', 1)[0]}:***@{tail}"


def connect_error(url: str, exc: Exception) -> StoreError:
    """A connection failure rephrased as who must act and how."""
    text, where = str(exc), redact(url)
    if "password authentication failed" in text or "no password supplied" in text:
        return StoreError(f"PostgreSQL at {where} refused the credentials: fix the user/password in the "
                          f"--db URL (or BARA_DATABASE_URL). Server said: {text.strip()}")
    if "does not exist" in text and "database" in text:
        return StoreError(f"the database in {where} does not exist: create it (createdb) or fix the --db URL")
    return StoreError(f"cannot reach PostgreSQL at {where}: start the server (`bara db start` for a local "
                      f"one) or fix host/port in the --db URL. Driver said: {text.strip()}")


def _connect(url: str, schema: str, *, create: bool = False) -> psycopg.Connection:
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        raise connect_error(url, exc) from exc
    if schema:
        if create:
            _create_schema(conn, url, schema)
        use_schema(conn, url, schema)
    return conn


def use_schema(conn: psycopg.Connection, url: str, schema: str) -> None:
    """Put ``schema`` first on the path, refusing one that does not exist: PostgreSQL skips a missing
    schema in ``search_path``, so its tables would silently be public's."""
    conn.execute(pgsql.SQL("SET search_path TO {}, public").format(pgsql.Identifier(schema)))
    row = conn.execute("SELECT current_schema()").fetchone()
    if row is None or row[0] != schema:
        raise StoreError(f"schema {schema!r} does not exist in {redact(url)} (or this role may not use it): run "
                         "`bara db migrate` with the owner's URL, which creates it, or fix pg_schema (BARA_PG_SCHEMA)")


def _create_schema(conn: psycopg.Connection, url: str, schema: str) -> None:
    if conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone():
        return
    try:
        conn.execute(pgsql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(pgsql.Identifier(schema)))
    except pgerr.InsufficientPrivilege as exc:
        raise StoreError(f"schema {schema!r} does not exist in {redact(url)} and this role may not create it: a "
                         f"database owner must run CREATE SCHEMA {schema} AUTHORIZATION <owner role>, or fix "
                         "pg_schema (BARA_PG_SCHEMA)") from exc


def ensure_vector(conn: psycopg.Connection, url: str) -> None:
    if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
        return
    if not conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone():
        raise StoreError(f"the PostgreSQL server of {redact(url)} has no pgvector: its administrator must "
                         "install pgvector >= 0.8 (https://github.com/pgvector/pgvector), or use `bara db start`")
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as exc:
        raise StoreError(f"the `vector` extension is not enabled in {redact(url)} and this role may not enable "
                         "it: a database owner or superuser must run CREATE EXTENSION vector") from exc


def vector_dim(conn: psycopg.Connection, url: str) -> int:
    row = conn.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = to_regclass('chunks')"
                       " AND attname = 'embedding'").fetchone()
    if row is None:
        raise StoreError(f"{redact(url)} has no bara schema visible to this role: run `bara db migrate --db "
                         "<owner URL>` and grant the application role access")
    return int(row[0])


def migrate(url: str, *, dim: int = 384, schema: str = "", app_role: str = "",
            steps: Sequence[Migration] | None = None) -> list[str]:
    """Apply pending steps in order under an advisory lock; returns the names applied."""
    steps = list(steps) if steps is not None else postgres_migrations(dim)
    with _connect(url, schema, create=True) as conn:
        ensure_vector(conn, url)
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            done = _apply_pending(conn, url, steps)
            if app_role:
                grant(conn, app_role, schema or "public")
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return done


def mark_match_leakproof(url: str) -> str | None:
    """Mark the full-text match leakproof in ``url``'s database when its role may (a superuser); None
    when it is marked (now or before), else what the server's administrator must run, and why."""
    with _connect(url, "") as conn:
        row = conn.execute("SELECT p.proleakproof, r.rolsuper FROM pg_proc p, pg_roles r WHERE p.oid ="
                           " 'ts_match_vq(tsvector, tsquery)'::regprocedure AND r.rolname = current_user").fetchone()
        if row is None or row[0]:
            return None
        if row[1]:
            conn.execute(LEAKPROOF_MATCH)
            return None
    return (f"full-text search in {redact(url)} cannot use its index under row-level security (every search "
            f"tests every row of its scope: correct, only slower): a superuser must run, once in this database, "
            f"`{LEAKPROOF_MATCH};` (docs/postgres.md says why it is safe)")


def _applied(conn: psycopg.Connection) -> list[str]:
    # in the schema migrated (the path's first), not through the path: "<schema>, public" would find
    # public's table when public holds another bara store, and leave the schema unmigrated
    row = conn.execute("SELECT to_regclass(format('%I.bara_migrations', current_schema()))").fetchone()
    if row is None or row[0] is None:
        conn.execute(MIGRATIONS_TABLE)
    return [r[0] for r in conn.execute("SELECT name FROM bara_migrations ORDER BY seq")]


def _apply_pending(conn: psycopg.Connection, url: str, steps: list[Migration]) -> list[str]:
    try:
        applied = _applied(conn)
    except pgerr.InsufficientPrivilege as exc:
        raise _privilege_error(url) from exc
    unknown = [n for n in applied if n not in {s.name for s in steps}]
    if unknown:
        raise StoreError(f"{redact(url)} has schema steps this bara does not know ({', '.join(unknown)}): it was "
                         "written by a newer bara. Upgrade bara, or point --db at another database.")
    pending = [s for s in steps if s.name not in applied]
    announce_upgrade(redact(url), applied, [s.name for s in pending])
    for step in pending:
        _apply(conn, url, step)
    return [s.name for s in pending]


def _apply(conn: psycopg.Connection, url: str, step: Migration) -> None:
    try:
        with conn.transaction():
            for statement in step.statements:
                conn.execute(cast(LiteralString, statement))  # migrations are bara's own SQL text
            conn.execute("INSERT INTO bara_migrations (name, applied_at) VALUES (%s, %s)", (step.name, time.time()))
    except pgerr.InsufficientPrivilege as exc:
        raise _privilege_error(url) from exc


def _privilege_error(url: str) -> StoreError:
    return StoreError(f"the role in {redact(url)} may not create bara's tables: run `bara db migrate --db <URL of "
                      "the schema owner>` once (set BARA_PG_APP_ROLE to grant this role access)")


def grant(conn: psycopg.Connection, role: str, schema: str) -> None:
    """Row access (never ownership) for the application role; RLS still applies to it."""
    ident, sch = pgsql.Identifier(role), pgsql.Identifier(schema)
    for stmt in ("GRANT USAGE ON SCHEMA {s} TO {r}",
                 "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA {s} TO {r}",
                 "GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {s} TO {r}",
                 "GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA {s} TO {r}"):
        conn.execute(pgsql.SQL(stmt).format(s=sch, r=ident))
