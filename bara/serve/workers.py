"""`bara serve --workers N`: N processes, each with its own listening socket on the port (SO_REUSEPORT).

uvicorn's own supervisor hands every worker one shared listening socket. A worker's event loop, when
woken, accepts every connection waiting on it (asyncio accepts up to the backlog per wake-up), so a burst
of keep-alive connections (a client's pool, a proxy's upstream connections, a load test's users) lands on
whichever worker woke first and stays there: with 32 connections opened at once, one of two workers served
almost every turn in 4 of 12 load phases (docs/benchmarks.md, issue 33).

Here each worker listens on a socket of its own, all bound to the same address with ``SO_REUSEPORT``;
Linux then spreads new connections over the listening sockets by a hash of their addresses (the
balancing nginx's and gunicorn's ``reuseport`` options use). The supervisor binds the sockets and keeps
them: a worker listens on its socket once its app has started, so one still loading its model receives
no connection, and a worker that dies is replaced on the same socket (connections the kernel queued
there wait for the replacement). Signals, health checks and restarts are uvicorn's
(:class:`uvicorn.supervisors.Multiprocess`); only which socket a worker gets differs. Where
``SO_REUSEPORT`` does not balance (not Linux), uvicorn's shared socket is used as before.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.supervisors.multiprocess import Multiprocess, Process, logger

APP = "bara.serve.app:factory"


def balanced_available() -> bool:
    """Whether the kernel balances connections over ``SO_REUSEPORT`` listeners (Linux 3.9+)."""
    return sys.platform.startswith("linux") and hasattr(socket, "SO_REUSEPORT")


def serve(host: str, port: int, workers: int, log_level: str = "warning") -> None:
    """Run the app: one process for one worker, else a supervisor and ``workers`` processes."""
    if workers > 1 and balanced_available():
        run_balanced(host, port, workers, log_level)
    else:
        uvicorn.run(APP, factory=True, host=host, port=port, workers=workers, log_level=log_level)


def reuseport_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` with ``SO_REUSEPORT`` (not listening yet)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def run_balanced(host: str, port: int, workers: int, log_level: str) -> None:
    config = uvicorn.Config(APP, factory=True, host=host, port=port, workers=workers, log_level=log_level)
    sockets = [reuseport_socket(host, port) for _ in range(workers)]
    try:
        Balanced(config, sockets).run()
    except KeyboardInterrupt:
        pass
    finally:
        for sock in sockets:
            sock.close()


class Balanced(Multiprocess):
    """uvicorn's supervisor, giving worker ``i`` socket ``i`` (uvicorn is pinned: its two methods that
    start a worker are copied with only the socket argument changed)."""

    def _spawn(self, idx: int) -> Process:
        process = Process(self.config, [self.sockets[idx]])
        process.start()
        return process

    def init_processes(self) -> None:
        self.processes = [self._spawn(idx) for idx in range(len(self.sockets))]

    def restart_all(self) -> None:  # SIGHUP: each worker replaced once its replacement is ready
        for idx, old in enumerate(self.processes):
            if self.should_exit.is_set():
                return
            new = self._spawn(idx)
            if not new.wait_until_ready(self.config.timeout_worker_healthcheck, self.should_exit):
                new.kill()
                new.join()
                if not self.should_exit.is_set():
                    logger.error(f"New child process [{new.pid}] was not ready in time; "
                                 f"keeping worker [{old.pid}] and aborting the restart.")
                return
            old.terminate()
            old.join()
            self.processes[idx] = new

    def keep_subprocess_alive(self) -> None:
        if self.should_exit.is_set():
            return
        for idx, process in enumerate(self.processes):
            if process.is_alive(timeout=self.config.timeout_worker_healthcheck):
                continue
            process.kill()
            process.join()
            if process.exitcode == STARTUP_FAILURE:  # the app cannot start: every restart would fail
                logger.error(f"Child process [{process.pid}] failed to start, stopping the parent process.")
                self.should_exit.set()
                return
            if self.should_exit.is_set():
                return
            logger.info(f"Child process [{process.pid}] died")
            self.processes[idx] = self._spawn(idx)
