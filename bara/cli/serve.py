"""`bara serve` (the HTTP service on uvicorn) and `bara keys create|list|revoke` (its API keys)."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from bara.cli.common import fail, kept, loaded_embedder, say, shown, utf8_callback
from bara.errors import BaraError

out, err = Console(soft_wrap=True, highlight=False), Console(stderr=True, soft_wrap=True, highlight=False)
keys_app = typer.Typer(help="API keys of `bara serve` (stored only as hashes).", no_args_is_help=True)
SERVE_MODES = ("gated", "always", "agent")

DbOption = typer.Option(None, "--db", help="Store location (SQLite file or postgresql:// URL). Default: $BARA_DB.")


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.add_typer(keys_app, name="keys")


def serve(db: Optional[str] = DbOption,
          host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (loopback unless told otherwise)."),
          port: int = typer.Option(8000, "--port", help="TCP port."),
          workers: int = typer.Option(1, "--workers", help="Worker processes (use PostgreSQL for more than one)."),
          mode: str = typer.Option("gated", "--mode", help="Default mode: gated, always or agent."),
          otlp: Optional[str] = typer.Option(None, "--otlp", help="Export each turn's spans and metrics over "
                                             "OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (needs bara[otel]); "
                                             "an incoming W3C traceparent is continued.")) -> None:
    """Serve the OpenAI-compatible /v1 API, the native /api, /metrics, /docs and the web timeline."""
    if mode not in SERVE_MODES:
        fail(f"--mode must be one of {', '.join(SERVE_MODES)}, not {mode!r}")
    if workers < 1:
        fail("--workers must be 1 or more")
    if not 0 < port < 65536:
        fail("--port must be between 1 and 65535")
    from bara.settings import load_settings

    try:
        settings = load_settings(db=db)
    except BaraError as exc:
        fail(str(exc))
    loaded_embedder(settings, "so bara serve cannot answer a search or a turn")  # before a store is created
    if _is_new_sqlite(settings.db):
        err.print(f"[yellow]note:[/yellow] no store at {shown(settings.db)} yet: starting with an empty one (check "
                  f"--db; add documents with `bara ingest PATH --db {shown(settings.db)}`)")
    _check_store(settings)
    _check_port(host, port)
    if workers > 1 and not settings.db.startswith(("postgresql://", "postgres://")):
        err.print("[yellow]note:[/yellow] several workers on one SQLite file serialise their writes; "
                  "use PostgreSQL (`bara db start`) to scale")
    from bara.serve import workers as serving
    from bara.serve.app import ENV_MODE

    if db:
        os.environ["BARA_DB"] = db
    if workers > 1 and "embed_spin_in_call" not in settings.model_fields_set:
        # Worker processes share the cores: an encoder thread spinning for its peers would only burn
        # the CPU another process needs (7% fewer turns/s with 2 workers on 2 cores, docs/benchmarks.md).
        os.environ["BARA_EMBED_SPIN_IN_CALL"] = "false"
    if workers > 1 and "serve_learn_after_response" not in settings.model_fields_set:
        # The next turn may reach another worker, which cannot flush this one's queue: store what a turn
        # learned before its response (bara.memory.writebehind).
        os.environ["BARA_SERVE_LEARN_AFTER_RESPONSE"] = "false"
    os.environ[ENV_MODE] = mode
    _export_to(otlp)
    err.print(f"bara serve: http://{host}:{port}  (docs /docs, mode {mode}, {workers} worker(s), db {shown(_safe(settings.db))})")
    serving.serve(host, port, workers)  # several workers: one SO_REUSEPORT socket each (bara.serve.workers)


def _export_to(url: str | None) -> None:
    """``--otlp URL`` as the standard variable the workers' exporters read (``bara.observe.config``): its
    OTLP/HTTP base address (a ``/v1/traces`` URL is accepted too); exit 2 if it is not a URL."""
    from bara.observe.config import TRACES_PATH, otlp_endpoints

    if not url:
        return
    try:
        traces, _ = otlp_endpoints(url)
    except BaraError as exc:
        fail(str(exc))
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = traces[: -len(TRACES_PATH)]


def _check_store(settings) -> None:
    """Open (and migrate) the store once before any worker starts, so a bad --db is a clear error;
    a store whose vectors another embedder made is re-embedded here, once, not by every worker."""
    from bara.app import Bara

    try:
        with Bara(settings) as bara:
            bara.check_vectors(write=True, say=say)
    except BaraError as exc:
        fail(str(exc))


def _check_port(host: str, port: int) -> None:
    import socket

    try:
        with socket.create_server((host, port)):
            pass
    except OSError as exc:
        fail(f"cannot listen on {host}:{port} ({exc.strerror or exc}): pass another --port or --host")


def _safe(location: str) -> str:
    """A database location without its password."""
    if "://" in location and "@" in location:
        scheme, rest = location.split("://", 1)
        return f"{scheme}://***@{rest.split('@', 1)[1]}"
    return location


def _keys(db: Optional[str], existing: bool = False):
    """A Bara over the store and its KeyStore; ``existing``: refuse (exit 2) a SQLite file that does
    not exist yet instead of creating an empty store (list and revoke only read or change keys)."""
    from bara.app import Bara
    from bara.memory.api_keys import KeyStore
    from bara.settings import load_settings

    settings = load_settings(db=db)
    kept(settings.db)
    if existing:
        require_store(settings.db)
    bara = Bara(settings)
    return bara, KeyStore(bara.store)


def _is_new_sqlite(location: str) -> bool:
    return not location.startswith(("postgresql://", "postgres://")) and location != ":memory:" \
        and not Path(location).exists()


def require_store(location: str) -> None:
    """Exit 2 when a SQLite store does not exist: a mistyped --db must not silently create an empty one."""
    if _is_new_sqlite(location) or Path(location).is_dir():
        fail(f"no bara store at {location}: pass the --db you created (with `bara ingest ... --db` or "
              "`bara keys create --db`), or set $BARA_DB")


@keys_app.command("create")
def create(user: str = typer.Option(..., "--user", help="The user this key acts as.", callback=utf8_callback("user id")),
           admin: bool = typer.Option(False, "--admin", help="May also add to the shared knowledge base."),
           db: Optional[str] = DbOption,
           json_out: bool = typer.Option(False, "--json", help='Print {"user": ..., "key": ...}.')) -> None:
    """Create an API key and print it once (only its hash is stored)."""
    from bara.memory.api_keys import check_user_id

    try:
        check_user_id(user)
        bara, keys = _keys(db)
        with bara:
            new = keys.create(user, admin=admin)
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps({"user": user, "key": new.key, "key_id": new.info.key_id, "admin": admin}))
        return
    out.print(new.key)
    err.print(f"key {new.info.key_id} for user {shown(repr(user))}{' (admin)' if admin else ''}: store it now, it is not "
              "shown again")


@keys_app.command("list")
def list_keys(user: Optional[str] = typer.Option(None, "--user", help="Only this user's keys.",
                                                callback=utf8_callback("user id")),
              db: Optional[str] = DbOption,
              json_out: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """List keys (ids, users, admin flag, created/revoked times; never the secrets)."""
    from bara.memory.api_keys import check_user_id

    try:
        if user is not None:
            check_user_id(user)
        bara, keys = _keys(db, existing=True)
        with bara:
            rows = keys.list(user)
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps([{"key_id": k.key_id, "user": k.user_id, "admin": k.admin, "created_at": k.created_at,
                           "revoked_at": k.revoked_at} for k in rows]))
        return
    if not rows:
        err.print("no keys" + (f" for user {shown(repr(user))}" if user else "") + ": create one with `bara keys create "
                  "--user U`")
    for k in rows:
        state = "revoked " + _when(k.revoked_at) if k.revoked_at else "active"
        out.print(f"{shown(k.key_id)}  {shown(k.user_id)}  {'admin' if k.admin else 'user'}  created {_when(k.created_at)}  "
                  f"{state}")


@keys_app.command("revoke")
def revoke(key_id: str = typer.Argument(..., help="A key id from `bara keys list` (or the whole key).",
                                        callback=utf8_callback("key id")),
           db: Optional[str] = DbOption) -> None:
    """Revoke a key: requests with it get 401 from then on."""
    try:
        bara, keys = _keys(db, existing=True)
        with bara:
            n = keys.revoke(key_id)
    except BaraError as exc:
        fail(str(exc))
    shown_id = shown(_key_id(key_id))  # never print a whole key (a secret) back
    if not n:
        fail(f"no active key {_key_id(key_id)!r}: see `bara keys list`")
    out.print(f"revoked {shown_id}")


def _key_id(given: str) -> str:
    """The key id of a whole key (``bara_<key_id>_<secret>``), or ``given`` when it is already an id."""
    from bara.memory.api_keys import PREFIX

    if given.startswith(PREFIX) and given.count("_") >= 2:
        return given[len(PREFIX):].split("_", 1)[0]
    return given


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts or 0, timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
