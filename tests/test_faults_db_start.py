"""`bara db start` leaves the server it started migrated: the URL it prints works at once for
`bara ingest --db <URL>` (as the application role, which may not create tables itself)."""

from __future__ import annotations

from typer.testing import CliRunner

from bara.cli import app


def test_db_start_prints_a_url_that_ingest_can_use_at_once(pg_server_urls, pg_schema, data_dir, tmp_path):
    # A fresh schema of the session's server (BARA_PG_SCHEMA), so other tests' schemas are untouched.
    env = {"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_DATABASE_URL": None, "BARA_PG_ADMIN_URL": None,
           "BARA_PG_APP_ROLE": None, "BARA_PG_SCHEMA": pg_schema}
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
