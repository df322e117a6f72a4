"""What every `bara` command shares: failing with exit code 2, opening the store in the right
mode, and validating numbers and text that came from the command line.

Exit codes: 2 (:func:`fail`) when the user must change something (an argument, an option, a file, a
setting, the --db path); 1 (:data:`FAULT`) only for a runtime fault that is not the user's input (a tool
that crashed or timed out): the same command may work when run again; 3 (:data:`STORE_FAULT`) when the
store failed in use (disk full, I/O error, busy past store_busy_timeout_s, read-only file system, database
server unreachable): nothing of the failed step was stored, and the same command works once it clears.

Arguments arrive as ``str`` decoded from the OS with ``surrogateescape``: bytes that are not UTF-8
show up as lone surrogates, which cannot be stored, printed or sent anywhere. Ids (users,
conversations) with such bytes are refused; free text (queries, messages) has them replaced.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable, NoReturn, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from bara.app import Bara
from bara.errors import BaraError, EmbedderError, MissingStoreError, StoreFaultError
from bara.settings import Settings, load_settings
from bara.text.surrogates import has_surrogates, no_surrogates

err = Console(stderr=True, highlight=False, soft_wrap=True)


def _bound(field: str, kind: str) -> Any:
    for item in Settings.model_fields[field].metadata:
        if hasattr(item, kind):
            return getattr(item, kind)
    raise LookupError(f"Settings.{field} has no {kind} bound")


K_MIN, K_MAX = _bound("k", "ge"), _bound("k", "le")  # the same cap BARA_K enforces


BAD_INPUT, FAULT = 2, 1  # exit codes: the user must change something / a runtime fault, not the input
STORE_FAULT = 3  # exit code: the store failed in use (disk full, I/O error, busy, read-only, unreachable)


def fail(message: str | BaraError) -> NoReturn:
    """Print ``error: message`` to stderr and exit 2: the user must change something, and ``message``
    says what. The one failure exit of every `bara` command (a caught :class:`BaraError` may be passed
    as is); there is no code argument, so a refused input can never leave with another code."""
    err.print(Text("error: ", style="red") + Text(printable(str(message))))
    raise typer.Exit(exit_code(message))


def exit_code(message: str | BaseException) -> int:
    """2, unless the failure is a store fault (the one passed, or the one being handled): then 3, since
    the input was fine and the same command works once the store does."""
    handled = sys.exc_info()[1]
    return STORE_FAULT if isinstance(message, StoreFaultError) or isinstance(handled, StoreFaultError) else BAD_INPUT


def printable(text: str) -> str:
    """``text`` with undecodable bytes shown as escapes, so it can be printed anywhere."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def shown(value: object) -> str:
    """Data (a document's text, a user id, a path) for a rich markup string: printable, and its square
    brackets escaped, so "[/bold]" in a document is shown as written instead of failing as markup."""
    return escape(printable(str(value)))


def say(message: str) -> None:
    """A notice on stderr, shown as written (it may name paths and embedders with brackets in them)."""
    err.print(Text(printable(message)))


def bara_warnings_as_notices(show: Callable[..., None]) -> Callable[..., None]:
    """A ``warnings.showwarning`` that prints bara's own warnings (an unknown ``BARA_*`` variable...) as one
    ``warning: ...`` line on stderr, without a source line meant for developers; others go to ``show``."""
    def shown_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                      file: Any = None, line: Optional[str] = None) -> None:
        if category.__module__.startswith("bara."):
            err.print(Text("warning: ", style="yellow") + Text(printable(str(message))))
        else:
            show(message, category, filename, lineno, file, line)
    return shown_warning


def open_bara(db: Optional[str], mode: str = "read", create_with: str = "", **overrides: Any) -> Bara:
    """A Bara over the store at ``db`` (settings/$BARA_DB when None). ``mode``: ``read`` needs an
    existing store and works on a read-only one; ``write`` may create it; ``update`` may not.
    ``create_with``: the command that makes the store this one needs, named when there is none."""
    return _open_bara(db, mode, create_with, False, overrides)


def open_writer(db: Optional[str], **overrides: Any) -> Bara:
    """A Bara that may create the store at ``db``, its embedding model loaded before the store is opened
    (or created): when the model cannot load, exit 2 with what to install, having written nothing. A
    writer must never store chunks without vectors."""
    return _open_bara(db, "write", "", True, overrides)


def _open_bara(db: Optional[str], mode: str, create_with: str, embedder_first: bool, overrides: dict) -> Bara:
    from bara.store import open_store

    try:
        settings = load_settings(db=db, **overrides)
        kept(settings.db)
        embedder = loaded_embedder(settings) if embedder_first else None
        return Bara(settings, store=open_store(settings.db, mode=mode, settings=settings), embedder=embedder)
    except MissingStoreError as exc:
        fail(f"no store at {exc.location}: run `{create_with} --db {exc.location}` first; check the --db path"
             if create_with else str(exc))
    except BaraError as exc:
        fail(str(exc))


def loaded_embedder(settings: Settings, consequence: str = "so nothing was written") -> Any:
    """The settings' embedder with its model loaded (behind the cache, whose hits never load it); when
    it cannot load, exit 2 with ``consequence`` and what to install."""
    from bara.retrieval.embed_cache import warm_embedder
    from bara.retrieval.embedders import build_embedder

    embedder = build_embedder(settings)
    try:
        warm_embedder(embedder)
        _ = embedder.dim  # an embedder without warm() (sentence-transformers) loads its model to answer
    except EmbedderError as exc:
        fail(f"embedder {settings.embedder} cannot load, {consequence}: {exc}")
    return embedder


def new_sqlite(location: str) -> bool:
    """True when ``location`` names a SQLite file that does not exist yet (opening it for writing creates it)."""
    from pathlib import Path

    return not location.startswith(("postgresql://", "postgres://")) and location != ":memory:" \
        and not Path(location).exists()


def note_knowledge(bara: Bara, created: bool) -> None:
    """A note on stderr when a chat starts over no knowledge base: a new store (a mistyped --db?) or one
    no `bara ingest` filled, whose every answer would say it finds nothing."""
    from bara.types import SHARED

    where = bara.settings.db
    if created:
        say(f"note: no store at {where} yet: starting with an empty one (check --db; add documents with "
            f"`bara ingest PATH --db {where}`)")
    elif not bara.store.has_chunks(SHARED, "kb"):
        say(f"note: the store at {where} has no knowledge base (no document ingested): answers will find "
            f"nothing to cite; add documents with `bara ingest PATH --db {where}`")


def kept(location: str) -> str:
    """``location`` unless it is ``:memory:``: a store that vanishes when this one command ends would lose
    everything it wrote (a key printed that can never be used) and show nothing to a reader. The library
    and the long-running `bara serve` and `bara mcp` may use it."""
    if location == ":memory:":
        fail("--db :memory: keeps nothing once this command ends: pass a file path (an in-memory store is for "
             "the library and the long-running `bara serve`)")
    return location


def k_option(default: Optional[int] = None, help: str = "How many results.") -> Any:
    return typer.Option(default, "--k", min=K_MIN, max=K_MAX, help=f"{help} ({K_MIN} to {K_MAX}).")


def _floor(value: Optional[float]) -> Optional[float]:
    if value is not None and not (math.isfinite(value) and -1.0 <= value <= 1.0):
        raise typer.BadParameter(f"{value} is not a cosine similarity: pass a number from -1 to 1")
    return value


def floor_option(help: str = "Cosine similarity floor.") -> Any:
    return typer.Option(None, "--floor", callback=_floor, help=f"{help} (-1 to 1).")


def identifier(value: Optional[str], name: str = "id") -> Optional[str]:
    """An id from the command line: valid UTF-8, not blank, no control characters."""
    if value is None:
        return None
    if has_surrogates(value):
        raise typer.BadParameter(f"{printable(value)!r} contains bytes that are not UTF-8: "
                                 f"pass the {name} as UTF-8 text")
    if not value.strip() or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise typer.BadParameter(f"{value!r} is not a usable {name}: pass visible text")
    return value


def id_callback(name: str) -> Any:
    return lambda value: identifier(value, name)


def utf8_callback(name: str) -> Any:
    """For ids whose other checks live elsewhere (``check_user_id``): refuse only bytes that are not UTF-8
    (they cannot be stored, hashed or sent: a UnicodeEncodeError deep inside)."""
    def check(value: Optional[str]) -> Optional[str]:
        if value is not None and has_surrogates(value):
            raise typer.BadParameter(f"{printable(value)!r} contains bytes that are not UTF-8: "
                                     f"pass the {name} as UTF-8 text")
        return value
    return check


def free_text(value: Optional[str]) -> Optional[str]:
    """Query or message text: undecodable bytes become U+FFFD (search never fails on odd text)."""
    return None if value is None else no_surrogates(value)
