"""The exporter in a process of its own: a turn hands its finished trace over and is done.

Building a turn's spans with the SDK and encoding them for OTLP is pure-Python work, about 3 ms of
CPU for ten spans; on a thread of the serving process it holds the interpreter lock the next turn
needs, and made the gated turn's p50 ~5-10% slower in ``bench/bench_otel.py``. So
:func:`bara.observe.build_observer` starts one spawned child per process that runs the
:class:`~bara.observe.export.Observer` (planning, SDK, batch export, metrics); the turn only puts its
trace on a bounded queue (pickled by the queue's feeder thread, ~0.1 ms). A full queue drops that
turn's telemetry (counted in ``dropped``), never delays the turn.
"""

from __future__ import annotations

import logging
import multiprocessing
import queue
import threading
from typing import Any, Mapping

from bara.observe.config import ObserveConfig
from bara.trace import TurnTrace

log = logging.getLogger(__name__)
FLUSH_TIMEOUT_S = 60.0  # bound on waiting for the child to export what was queued (force_flush, shutdown)


def _serve(config: ObserveConfig, inbox: Any, acks: Any) -> None:
    """The child's loop: each turn's spans and metrics; ``("flush",)`` flushes and acknowledges; None ends."""
    from bara.observe.export import Observer

    observer = Observer(config)
    while (item := inbox.get()) is not None:
        if item[0] == "flush":
            observer.force_flush()
            acks.put(True)
            continue
        try:
            observer.turn(*item[1:])
        except Exception as exc:  # noqa: BLE001 - telemetry never takes the service down; say why per turn
            log.warning("bara.observe could not export a turn: %s: %s", type(exc).__name__, exc)
    observer.shutdown()
    acks.put(True)


class ProcessObserver:
    """Same calls as :class:`~bara.observe.export.Observer`; the work runs in a spawned child process."""

    def __init__(self, config: ObserveConfig) -> None:
        context = multiprocessing.get_context("spawn")  # no fork of a process with threads (encoder, server)
        self.config = config
        self.dropped = 0
        self._inbox = context.Queue(config.queue_turns)
        self._acks = context.Queue()
        self._lock = threading.Lock()
        self._process: Any = context.Process(target=_serve, args=(config, self._inbox, self._acks),
                                             name="bara-observe", daemon=True)
        self._process.start()

    def turn(self, trace: TurnTrace, message: str = "", headers: Mapping[str, str] | None = None) -> None:
        try:
            self._inbox.put_nowait(("turn", trace, message, dict(headers) if headers else None))
        except queue.Full:
            self.dropped += 1

    def force_flush(self) -> None:
        """Every turn queued so far exported (or the bound passed)."""
        with self._lock:
            if self._process is None:
                return
            self._inbox.put(("flush",))
            self._wait_ack()

    def shutdown(self) -> None:
        """Export what is queued, then end the child."""
        with self._lock:
            if self._process is None:
                return
            self._inbox.put(None)
            self._wait_ack()
            self._process.join(FLUSH_TIMEOUT_S)
            if self._process.is_alive():
                self._process.terminate()
            self._process = None

    def _wait_ack(self) -> None:
        try:
            self._acks.get(timeout=FLUSH_TIMEOUT_S)
        except queue.Empty:
            log.warning("bara.observe: the exporter process did not flush within %.0f s", FLUSH_TIMEOUT_S)
