"""What one server process holds: the Bara object (and its one assistant per mode), keys and stored traces.

Every request is served by a worker thread (FastAPI runs these sync calls in its thread pool); the
pipeline serialises turns on one conversation (``Conversations.turn_lock``, shared by every mode
here) and the database orders writes across processes. Nothing else is held between requests, so
any number of processes over one PostgreSQL serve the same users (docs/scaling.md).
"""

from __future__ import annotations

import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from bara.app import Bara
from bara.domain import TurnAssistant, agent_domain
from bara.turn.persist import TURN_STORED
from bara.memory.api_keys import KeyStore
from bara.memory.service_records import ThreadLinks, TraceRecords
from bara.settings import Settings
from bara.text.surrogates import no_surrogates
from bara.trace import StoredRecord, TurnTrace
from bara.types import ASSISTANT_MODES

MODES = ASSISTANT_MODES


@dataclass(frozen=True)
class TurnOutcome:
    answer: str
    conversation_id: str
    trace: dict[str, Any]  # TurnTrace.to_json() plus trace_id, message, degraded, errors
    stored: StoredRecord = StoredRecord()  # what the turn stored (the trace's ``stored``, typed)


_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """Request text as every store can hold it: lone surrogates become U+FFFD and NUL characters go
    (PostgreSQL text cannot hold NUL; SQLite can, so a NUL would work on one store and fail on the other)."""
    return no_surrogates(text).replace("\x00", "")


def can_exist(identifier: str) -> bool:
    """False for an id no store can hold (a NUL or a lone surrogate in it): such an id is nobody's, and
    looking it up would fail on PostgreSQL instead of finding nothing."""
    return not _UNSTORABLE.search(identifier)


def trace_json(trace: TurnTrace, message: str) -> dict[str, Any]:
    """The trace as the API shows it: every TurnTrace field, plus ``trace_id``, the user's own words
    (``message``; compare with ``retrieval_query`` for the rewrite), ``errors`` (reason codes of failed
    stages and hooks) and ``degraded`` (any error, or an answer produced by a fallback)."""
    out = trace.to_json()
    errors = [r for r in out["reasons"] if "failed" in r or ":degraded" in r]
    out.update(trace_id=uuid.uuid4().hex, message=message, errors=errors, degraded=bool(errors))
    return out


class Runtime:
    """One per process: ``run_turn`` is thread-safe; ``Bara.assistant`` builds one assistant per mode on
    first use (without the offline fallback: a model failure is a 502/504)."""

    def __init__(self, settings: Settings, mode: str = "gated", bara: Bara | None = None):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}")
        self.settings, self.mode = settings, mode
        self.bara = bara or Bara(settings)
        self.store = self.bara.store
        self.keys = KeyStore(self.store)
        self.traces = TraceRecords(self.store)
        self.threads = ThreadLinks(self.store)
        self.conversations = self.bara.conversations  # the turn lock every mode's assistant takes
        self.observer: Any = None  # bara.observe.export.Observer when OpenTelemetry export is on
        self._fault: tuple[str, float] | None = None  # the last store fault: (code, monotonic time)

    def assistant(self, mode: str) -> TurnAssistant:
        """The assistant ``run_turn`` hands a turn of ``mode`` to (hooks added to it apply to those turns)."""
        return self.bara.assistant(mode, fallback_offline=False)

    def warm(self) -> None:
        """Before the first request: build the default assistant, load the embedder, and fill the shared
        knowledge base's search caches (its vector matrix; the full-text worker and its connection)."""
        self.assistant(self.mode)
        self.bara.warm()

    def run_turn(self, user_id: str, message: str, conversation_id: str | None, mode: str | None = None,
                 create: bool = False, headers: Mapping[str, str] | None = None) -> TurnOutcome:
        """One turn. ``conversation_id`` None starts a conversation; an unknown id raises InputError
        unless ``create`` (then it is created for this user; ids are per user). Its learning writes are
        left queued when ``serve_learn_after_response`` (the endpoint stores them once the response is
        out: :meth:`learn_later`), else stored before this returns."""
        message = no_surrogates(message)
        if (mode or self.mode) == "agent":
            self._check_agent_user(user_id)
        if conversation_id is not None and create:
            self.conversations.open(user_id, conversation_id, create=True)
        saved: dict[str, Any] = {}

        def journal(trace: TurnTrace) -> None:  # the transaction storing the turn: its last write, with its COMMIT
            saved.update(trace_json(trace, message))
            self.traces.save(user_id, saved)

        # learning after the response keeps the write-behind, so it cannot be in the turn's transaction
        token = TURN_STORED.set(None if self.settings.serve_learn_after_response else journal)
        try:
            result = self.bara.turn(user_id, conversation_id, message, mode=mode or self.mode, fallback_offline=False)
        finally:
            TURN_STORED.reset(token)
        if self.observer is not None:  # spans continue the caller's W3C traceparent (``headers``)
            self.observer.turn(result.trace, message, headers)
        if not self.settings.serve_learn_after_response:
            # Stored before the response: with several workers the next turn may reach another process,
            # whose own flush cannot see this one's queue (bara.memory.writebehind).
            self.bara.flush()
        if saved:  # stored with the turn, in its final form (it lacks only the time of the COMMIT storing it)
            trace = saved
        else:
            trace = trace_json(result.trace, message)
            if result.trace.stored.turn:  # no journal: learning is stored after the response
                self.traces.save(user_id, trace)
        return TurnOutcome(result.answer, result.conversation_id, trace, result.trace.stored)

    def learn_later(self, background: Any) -> None:
        """Queue the flush of what the turn learned on ``background`` (FastAPI's ``BackgroundTasks``,
        run once the response is sent), when this process stores learning after its responses."""
        if self.settings.serve_learn_after_response:
            background.add_task(self.bara.flush)

    def _check_agent_user(self, user_id: str) -> None:
        """Agent mode answers from the caller's funds account; without one, say what an API caller can
        change (the CLI's advice to pick another --user does not apply: the key fixes the user)."""
        from bara.errors import InputError
        from bara.serve.errors import ApiError

        try:
            agent_domain().check_user(self.store, user_id)
        except InputError:
            raise ApiError(400, "no_funds_account", f"agent mode answers from a funds account, and this API key's "
                           f"user {user_id!r} has none: use model bara-gated or bara-always (mode gated or "
                           "always), or ask the operator for a key of a user listed by `bara funds users`") from None

    def store_fault(self, code: str) -> None:
        """Note a store fault a request met (``/api/health`` reports the store down for a while)."""
        self._fault = (code, time.monotonic())

    def store_health(self) -> str | None:
        """None when the store works, else the code of its fault: one met in the last
        ``serve_health_fault_window_s``, or what a one-row read of it raises now."""
        fault = self._fault
        if fault is not None and time.monotonic() - fault[1] < self.settings.serve_health_fault_window_s:
            return fault[0]
        from bara.errors import StoreFaultError

        try:
            self.keys.probe()
        except StoreFaultError as exc:
            return exc.code
        except Exception:  # noqa: BLE001 - any failure of the probe means the store does not answer
            return "store_unavailable"
        return None

    def close(self) -> None:
        self.bara.close()
