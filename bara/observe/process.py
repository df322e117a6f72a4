"""The exporter in a process of its own: a turn hands its finished trace over and is done.

Building a turn's spans with the SDK and encoding them for OTLP is pure-Python work, about 3 ms of
CPU for ten spans; on a thread of the serving process it holds the interpreter lock the next turn
needs, and made the gated turn's p50 ~5-15% slower in ``bench/bench_otel.py``. So
:func:`bara.observe.build_observer` starts one child per process (``python -m bara.observe.process``,
not multiprocessing's spawn, which would re-run an unguarded ``__main__`` script) that runs the
:class:`~bara.observe.export.Observer` (planning, SDK, batch export, metrics). The turn only puts its
trace on a bounded queue; a feeder thread pickles it down the child's stdin. A full queue drops that
turn's telemetry (counted in ``dropped``), never delays the turn.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import subprocess
import sys
import threading
from typing import IO, Any, Mapping

from bara.observe.config import ObserveConfig
from bara.trace import TurnTrace

log = logging.getLogger(__name__)
FLUSH_TIMEOUT_S = 60.0  # bound on waiting for the child to export what was queued (force_flush, shutdown)
ACK = b"ok\n"


class ProcessObserver:
    """Same calls as :class:`~bara.observe.export.Observer`; the work runs in a child process."""

    def __init__(self, config: ObserveConfig) -> None:
        self.config = config
        self.dropped = 0
        self._queue: queue.Queue[Any] = queue.Queue(config.queue_turns)
        self._acks: queue.Queue[bool] = queue.Queue()
        self._lock = threading.Lock()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self._child: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-m", "bara.observe.process"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        assert self._child.stdin is not None and self._child.stdout is not None
        _send(self._child.stdin, config)
        threading.Thread(target=self._feed, args=(self._child.stdin,), name="bara-observe-feed", daemon=True).start()
        threading.Thread(target=self._read_acks, args=(self._child.stdout,), name="bara-observe-acks",
                         daemon=True).start()

    def turn(self, trace: TurnTrace, message: str = "", headers: Mapping[str, str] | None = None) -> None:
        try:
            self._queue.put_nowait(("turn", trace, message, dict(headers) if headers else None))
        except queue.Full:
            self.dropped += 1

    def force_flush(self) -> None:
        """Every turn queued so far exported (or the bound passed)."""
        with self._lock:
            if self._child is not None:
                self._queue.put(("flush",))
                self._wait_ack()

    def shutdown(self) -> None:
        """Export what is queued, then end the child."""
        with self._lock:
            child, self._child = self._child, None
            if child is None:
                return
            self._queue.put(None)
            self._wait_ack()
            try:
                child.wait(FLUSH_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(10)

    def _feed(self, pipe: IO[bytes]) -> None:
        while True:
            item = self._queue.get()
            try:
                _send(pipe, item)
            except (OSError, pickle.PicklingError) as exc:  # the child is gone: telemetry stops, turns go on
                log.warning("bara.observe: the exporter process stopped taking turns: %s", exc)
                return
            if item is None:
                return

    def _read_acks(self, pipe: IO[bytes]) -> None:
        for _line in iter(pipe.readline, b""):
            self._acks.put(True)

    def _wait_ack(self) -> None:
        try:
            self._acks.get(timeout=FLUSH_TIMEOUT_S)
        except queue.Empty:
            log.warning("bara.observe: the exporter process did not flush within %.0f s", FLUSH_TIMEOUT_S)


def _send(pipe: IO[bytes], item: Any) -> None:
    pickle.dump(item, pipe, protocol=pickle.HIGHEST_PROTOCOL)
    pipe.flush()


def serve(inbox: IO[bytes], acks: IO[bytes]) -> None:
    """The child: the config, then each turn's spans and metrics; ``("flush",)`` flushes and
    acknowledges; None (or the parent gone) flushes, acknowledges and ends."""
    from bara.observe.export import Observer

    observer = Observer(pickle.load(inbox))
    while True:
        try:
            item = pickle.load(inbox)
        except EOFError:
            item = None
        if item is None or item[0] == "flush":
            observer.force_flush()
            acks.write(ACK)
            acks.flush()
            if item is None:
                break
            continue
        try:
            observer.turn(*item[1:])
        except Exception as exc:  # noqa: BLE001 - telemetry never takes the service down; say why per turn
            log.warning("bara.observe could not export a turn: %s: %s", type(exc).__name__, exc)
    observer.shutdown()


if __name__ == "__main__":
    acks_out = sys.stdout.buffer
    sys.stdout = sys.stderr  # anything a library prints goes to the log, never into the acknowledgements
    serve(sys.stdin.buffer, acks_out)
