"""`bara mcp --user U [--db DB]`: bara's tools over MCP on stdio (for Claude Desktop, IDEs, agent frameworks).

stdout carries the MCP protocol only; diagnostics go to stderr.
"""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from bara.cli.common import shown, utf8_callback
from bara.errors import BaraError

err = Console(stderr=True, highlight=False)


def register(app: typer.Typer) -> None:
    app.command("mcp")(mcp)


def mcp(user: str = typer.Option(..., "--user", help="The user every tool acts for (fixed for the session).",
                                  callback=utf8_callback("user id")),
        db: Optional[str] = typer.Option(None, "--db", help="Store location. Default: settings / $BARA_DB.")
        ) -> None:
    """Serve search_knowledge, recall, remember (and the fund tools when fund data is loaded) over MCP stdio."""
    import anyio

    from bara.app import Bara
    from bara.mcp import serve_stdio
    from bara.prompts.mcp import EMPTY_USER
    from bara.settings import load_settings

    from bara.cli.serve import require_store
    from bara.memory.api_keys import check_user_id

    if not user.strip():
        err.print(f"[red]error:[/red] {EMPTY_USER}")
        raise typer.Exit(2)
    try:
        check_user_id(user.strip())
        settings = load_settings(db=db)
        require_store(settings.db)
        with Bara(settings) as bara:
            bara.check_vectors(write=True, say=lambda m: err.print(m, markup=False))  # as chat and serve do
            anyio.run(serve_stdio, bara, user.strip())
    except BaraError as exc:
        err.print(f"[red]error:[/red] {shown(exc)}")
        raise typer.Exit(2) from exc
