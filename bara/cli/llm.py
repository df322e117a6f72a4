"""`bara llm serve-local [--port N]`: the local llama.cpp server (built by `make llm`) on loopback.

It runs in the foreground until Ctrl-C and prints the two settings that point bara at it.
"""

from __future__ import annotations

import signal
import time

import typer
from rich.console import Console

from bara.cli.common import fail

err = Console(stderr=True, highlight=False)
llm_app = typer.Typer(help="A real model on loopback (built by `make llm`).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(llm_app, name="llm")


@llm_app.command("serve-local")
def serve_local(port: int = typer.Option(8080, "--port", min=1, max=65535,
                                         help="Loopback port to listen on (127.0.0.1)."),
                log: str = typer.Option("", "--log", help="Append the server's output to this file.")) -> None:
    """Start llama-cpp-python's OpenAI-compatible server with SmolLM2-135M on 127.0.0.1."""
    from pathlib import Path

    from bara.errors import BaraError
    from bara.llm.local import LOCAL_ALIAS, start_local_server
    from bara.settings import load_settings

    if _busy(port):
        fail(f"port {port} on 127.0.0.1 is in use: pass another --port")
    try:
        server = start_local_server(load_settings(), port=port, log=Path(log) if log else None)
    except BaraError as exc:
        fail(exc)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server too, as Ctrl-C does
    err.print(f"llama.cpp server ready at {server.base_url} (model {LOCAL_ALIAS}); point bara at it with\n"
              f"  export BARA_MODEL=openai:{LOCAL_ALIAS} BARA_LLM_BASE_URL={server.base_url}\n"
              "Ctrl-C stops it.")
    try:
        while server.alive():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    if server.process.returncode not in (0, -2, -15, None):
        err.print(f"the server exited with code {server.process.returncode}")
        raise typer.Exit(1)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _busy(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False
