"""Session-wide embedded PostgreSQL for the tests: started in a fresh /tmp data directory, stopped
at the end. No skip: when the server cannot start, every Postgres test errors, loudly."""

from __future__ import annotations

import shutil
import tempfile
import uuid

import pytest

from bara.store import pg_server


@pytest.fixture(scope="session")
def pg_server_urls():
    """The started server (a pg_server.LocalServer): owner, application and superuser URLs."""
    data = tempfile.mkdtemp(prefix="bara-pg-test-", dir="/tmp")
    local = pg_server.start(data)  # raises StoreError naming the cause: the tests error, never skip
    yield local
    pg_server.stop(data)
    shutil.rmtree(data, ignore_errors=True)


def superuser(local):
    import psycopg

    return psycopg.connect(local.superuser_url, autocommit=True)


@pytest.fixture
def pg_schema(pg_server_urls):
    """A fresh schema owned by the owner role; the application role may use it (and create scratch
    tables, which the contract's nested-transaction test needs), never own bara's tables."""
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    ident = sql.Identifier(name)
    with superuser(pg_server_urls) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident, sql.Identifier(pg_server.OWNER_ROLE)))
        conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA {} TO {}").format(ident, sql.Identifier(pg_server.APP_ROLE)))
    yield name
    with superuser(pg_server_urls) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(ident))


@pytest.fixture
def pg_store_factory(pg_server_urls, pg_schema):
    """Opens PostgresStores on the fresh schema as the application role (migrated by the owner)."""
    from bara.store.postgres import PostgresStore

    opened = []

    def make(dim: int = 8, **kw):
        kw = {"schema": pg_schema, "admin_url": pg_server_urls.owner_url, "app_role": pg_server.APP_ROLE, **kw}
        store = PostgresStore(pg_server_urls.app_url, dim=dim, **kw)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
