"""JSON-over-HTTPS with retries, backoff, Retry-After and an overall deadline.

Why it is shaped like this:

* 429 and 5xx (and connection failures) are usually transient, so they are
  retried with exponential backoff plus jitter; jitter keeps many clients that
  failed together from retrying together. A provider's ``Retry-After`` wins
  over the computed delay because the provider knows when it will accept work.
* The caller's deadline bounds everything, in wall-clock time: httpx's timeout
  is per read, so a provider trickling a byte every 0.25 s would never trip it.
  Every call therefore has a total deadline (the caller's, or the policy's
  ``deadline_s``, whichever is sooner); the body is streamed and the deadline
  checked between chunks, and the caller waits for the worker thread no longer
  than the deadline plus :data:`DEADLINE_GRACE_S`. A retry whose delay
  (``Retry-After`` included) would overrun the deadline is not attempted: fail
  now with :class:`LLMDeadlineError` rather than after the caller has given up.
* A 2xx body that is not a JSON object, is nested deeper than the policy's
  ``max_json_depth`` or larger than ``max_response_bytes`` is a
  :class:`MalformedResponse`, never a RecursionError or MemoryError.
* 401/403 are never retried: a wrong key does not become right. The error
  names the *environment variable* to fix, never the key. The key lives in a
  :class:`Secret`, whose repr is masked, and is only placed into headers at
  request time.
"""

from __future__ import annotations

import email.utils
import logging
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import httpx

from bara.llm.errors import (LLMAuthError, LLMDeadlineError, LLMRequestError, LLMUnavailableError,
                             MalformedResponse, redact)

log = logging.getLogger(__name__)

#: Statuses worth retrying: timeouts, rate limits, server errors, Anthropic's 529 "overloaded".
RETRYABLE = frozenset({408, 429, 500, 502, 503, 504, 529})

#: A transport timeout this close to the deadline counts as the deadline passing.
DEADLINE_SLACK_S = 0.05

#: How long past the deadline the caller waits for the worker to raise its own (more precise) error.
DEADLINE_GRACE_S = 0.2


@dataclass(frozen=True)
class Secret:
    """A credential that never shows up in repr/str."""

    value: str = field(repr=False)

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff_s: float = 0.5
    backoff_max_s: float = 8.0
    timeout_s: float = 60.0  # one attempt (httpx: per connect/read, not total)
    deadline_s: float = 120.0  # whole call, retries and waits included (wall clock)
    max_json_depth: int = 64  # deeper 2xx bodies are malformed
    max_response_bytes: int = 8_000_000  # larger 2xx bodies are malformed

    def delay(self, retry: int, jitter: float) -> float:
        """Delay before retry number ``retry`` (0-based): half fixed, half jittered."""
        base = min(self.backoff_max_s, self.backoff_s * (2 ** retry))
        return base / 2 + base / 2 * jitter


@dataclass(frozen=True)
class HttpReply:
    body: dict[str, Any]
    status: int
    attempts: int


@dataclass(frozen=True)
class Endpoint:
    """Where and how to POST JSON to one provider.

    ``auth_header``/``auth_prefix`` say how the key is sent (``Authorization:
    Bearer`` for OpenAI, ``x-api-key`` for Anthropic); ``key_env`` is the name of
    the variable it came from, used in error messages.
    """

    provider: str
    base_url: str
    key: Secret | None = None
    key_env: str = ""
    auth_header: str = "Authorization"
    auth_prefix: str = "Bearer "
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    policy: RetryPolicy = RetryPolicy()
    client: httpx.Client | None = field(default=None, repr=False, compare=False)
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False, compare=False)
    jitter: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + "/" + path.lstrip("/")

    def headers(self) -> dict[str, str]:
        out = {"content-type": "application/json", **self.extra_headers}
        if self.key is not None:
            out[self.auth_header] = self.auth_prefix + self.key.value
        return out


def post_json(ep: Endpoint, path: str, payload: Mapping[str, Any], deadline: float | None = None) -> HttpReply:
    """POST ``payload`` and return the decoded 2xx body, retrying transient failures.

    ``deadline`` is a ``time.monotonic()`` instant; the call never outlives it (or
    ``ep.policy.deadline_s`` from now, whichever is sooner) by more than
    :data:`DEADLINE_GRACE_S`, however slowly the provider sends.
    """
    deadline = effective_deadline(ep.policy, deadline)
    client = ep.client or httpx.Client()
    try:
        return _bounded(ep, lambda: _attempts(ep, client, ep.url(path), payload, deadline), deadline)
    finally:
        if ep.client is None:
            client.close()


def effective_deadline(policy: RetryPolicy, deadline: float | None) -> float:
    """The sooner of the caller's deadline and the policy's per-call budget from now."""
    own = time.monotonic() + policy.deadline_s
    return own if deadline is None else min(deadline, own)


def _bounded(ep: Endpoint, work: Callable[[], HttpReply], deadline: float) -> HttpReply:
    """Run ``work`` in a daemon thread and wait for it until the deadline (plus grace).

    A worker still blocked in a read when the caller gives up ends on its own:
    its reads time out at the deadline and the streamed body is checked between chunks.
    """
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["reply"] = work()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread unchanged
            box["error"] = exc

    worker = threading.Thread(target=run, name=f"bara-llm-{ep.provider}", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()) + DEADLINE_GRACE_S)
    if worker.is_alive():
        _deadline_error(ep, 0, "the provider was still sending when the deadline passed")
    if "error" in box:
        raise box["error"]
    return box["reply"]


@dataclass(frozen=True)
class _Raw:
    """One HTTP answer, read whole within the deadline."""

    status_code: int
    headers: httpx.Headers
    content: bytes


def _attempts(ep: Endpoint, client: httpx.Client, url: str, payload: Mapping[str, Any],
              deadline: float | None) -> HttpReply:
    last = ""
    for attempt in range(ep.policy.max_retries + 1):
        timeout = _attempt_timeout(ep, deadline, attempt, last)
        try:
            resp = _send(ep, client, url, payload, timeout, deadline, attempt)
        except httpx.TransportError as exc:
            _raise_if_past(ep, deadline, attempt + 1, f"{type(exc).__name__} after {timeout:.1f}s")
            last, retry_after = f"{type(exc).__name__} reaching the provider", None
        else:
            if resp.status_code < 300:
                return HttpReply(_decode(ep, resp), resp.status_code, attempt + 1)
            _raise_if_final(ep, resp)
            last, retry_after = f"HTTP {resp.status_code}", _retry_after(resp.headers.get("retry-after"))
        if attempt < ep.policy.max_retries:
            _wait(ep, attempt, retry_after, deadline, last)
    raise LLMUnavailableError(
        f"{ep.provider} kept failing ({last}) on {ep.policy.max_retries + 1} attempts; "
        "the provider is overloaded or down: retry later, or raise llm_max_retries")


def _send(ep: Endpoint, client: httpx.Client, url: str, payload: Mapping[str, Any], timeout: float,
          deadline: float | None, attempt: int) -> _Raw:
    """POST and read the body chunk by chunk, checking the deadline and size cap between chunks."""
    with client.stream("POST", url, json=payload, headers=ep.headers(), timeout=timeout) as resp:
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.iter_bytes():
            _raise_if_past(ep, deadline, attempt + 1, f"HTTP {resp.status_code} body still arriving")
            size += len(chunk)
            if size > ep.policy.max_response_bytes:
                raise MalformedResponse(f"{ep.provider} sent more than {ep.policy.max_response_bytes} bytes; "
                                        "check llm_base_url points at a chat API")
            chunks.append(chunk)
        return _Raw(resp.status_code, resp.headers, b"".join(chunks))


def _attempt_timeout(ep: Endpoint, deadline: float | None, attempt: int, last: str) -> float:
    if deadline is None:
        return ep.policy.timeout_s
    left = deadline - time.monotonic()
    if left <= 0:
        _deadline_error(ep, attempt, last or "no answer yet")
    return min(ep.policy.timeout_s, left)


def _raise_if_past(ep: Endpoint, deadline: float | None, attempts: int, what: str) -> None:
    if deadline is not None and time.monotonic() >= deadline - DEADLINE_SLACK_S:
        _deadline_error(ep, attempts, what)


def _deadline_error(ep: Endpoint, attempts: int, what: str) -> None:
    raise LLMDeadlineError(f"{ep.provider} did not answer before the deadline ({attempts} attempt(s), "
                           f"last: {what}); give the run more time (agent_deadline_s / llm_timeout_s) "
                           "or use a faster model")


def _wait(ep: Endpoint, attempt: int, retry_after: float | None, deadline: float | None, last: str) -> None:
    delay = retry_after if retry_after is not None else ep.policy.delay(attempt, ep.jitter())
    if deadline is not None and time.monotonic() + delay >= deadline:
        _deadline_error(ep, attempt + 1, f"{last}; next retry due in {delay:.1f}s, past the deadline")
    log.warning("%s: %s, retry %d/%d in %.2fs", ep.provider, last, attempt + 1, ep.policy.max_retries, delay)
    ep.sleep(delay)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None if absent/garbled."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _raise_if_final(ep: Endpoint, resp: _Raw) -> None:
    code = resp.status_code
    if code in (401, 403):
        var = f"${ep.key_env}" if ep.key_env else "the configured key variable"
        raise LLMAuthError(f"{ep.provider} rejected the request with HTTP {code}: the API key in {var} was "
                           f"rejected or lacks access to this model; set a valid key in {var}")
    if code not in RETRYABLE:
        detail = redact(_error_text(resp), ep.key.value if ep.key else None)
        raise LLMRequestError(f"{ep.provider} refused the request (HTTP {code}): {detail}; check the model "
                              "name and llm_base_url, or report a bara bug if the payload is at fault")


def _error_text(resp: _Raw) -> str:
    text = resp.content[:2000].decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except (ValueError, RecursionError):
        return text[:300]
    err = body.get("error", {}) if isinstance(body, dict) else body
    if isinstance(err, dict):
        return str(err.get("message") or err)[:300]
    return str(err)[:300]


def _decode(ep: Endpoint, resp: _Raw) -> dict[str, Any]:
    try:
        body = json.loads(resp.content)
    except RecursionError as exc:
        raise MalformedResponse(f"{ep.provider} answered {resp.status_code} with JSON nested too deeply to "
                                "parse; check llm_base_url points at a chat API") from exc
    except ValueError as exc:
        raise MalformedResponse(f"{ep.provider} answered {resp.status_code} with non-JSON ({type(exc).__name__}); "
                                "check llm_base_url points at the API root") from exc
    if not isinstance(body, dict):
        raise MalformedResponse(f"{ep.provider} answered with a JSON {type(body).__name__}, not an object; "
                                "check llm_base_url and llm_provider")
    if json_depth(body, ep.policy.max_json_depth) > ep.policy.max_json_depth:
        raise MalformedResponse(f"{ep.provider} answered with JSON nested deeper than "
                                f"{ep.policy.max_json_depth} levels; check llm_base_url points at a chat API")
    return body


class DuplicateKey(ValueError):
    """A JSON object names one key twice (``json.loads`` alone would keep the last value silently)."""

    def __init__(self, key: str) -> None:
        super().__init__(f"key {key!r} appears more than once in one object")
        self.key = key


def loads_strict(text: str) -> Any:
    """``json.loads`` that refuses NaN, Infinity and -Infinity (ValueError), as standard JSON does:
    a model's tool arguments holding them would otherwise reach traces that must stay strict JSON.
    A key repeated within one object is refused too (:class:`DuplicateKey`): which of two values a
    model meant is a guess, and RFC 8259 leaves it to the parser."""
    return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise DuplicateKey(key)
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of decoded JSON (a scalar is 0), computed without recursion; stops counting past ``limit``."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (dict, list)):
            depth += 1
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            stack.extend((v, depth) for v in (item.values() if isinstance(item, dict) else item))
    return deepest
