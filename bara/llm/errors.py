"""Errors raised while talking to an LLM provider.

Every message names who must act and how. None of them ever contains an API
key: messages are built from the provider name, the *name* of the environment
variable holding the key, HTTP status codes and provider error text that has
been passed through :func:`redact`.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from bara.errors import BaraError, InputError


class LLMError(BaraError):
    """Base class for provider failures; the agent loop turns these into ``status='error'``."""


class LLMAuthError(LLMError):
    """HTTP 401/403: the operator must set a valid API key."""


class LLMRequestError(LLMError):
    """A 4xx other than auth/rate limit: the request itself was refused (bad model name, bad payload)."""


class LLMUnavailableError(LLMError):
    """429/5xx/connection failures persisted through every retry: retry later or raise llm_max_retries."""


class LLMDeadlineError(LLMError):
    """The caller's deadline passed before the provider answered."""


class LLMResponseError(LLMError):
    """The provider answered 2xx with a body bara cannot parse (wrong base_url or API flavour)."""


class MalformedResponse(LLMResponseError):
    """A 2xx body of the wrong shape: not an object, too deep, too big, or fields of the wrong type."""


class ScriptExhaustedError(LLMError):
    """A ScriptedModel was called more often than the test queued replies for."""


#: What a user is told when a provider call fails, by error class; details (never keys) go to logs and traces.
PUBLIC_REASONS = {
    "LLMAuthError": "the model provider refused bara's credentials",
    "LLMRequestError": "the model provider refused the request",
    "LLMUnavailableError": "the model provider is unavailable right now",
    "LLMDeadlineError": "the model did not answer in time",
    "MalformedResponse": "the model provider sent a reply bara could not read",
    "LLMResponseError": "the model provider sent a reply bara could not read",
}


def public_reason(exc: BaseException) -> str:
    """A user-safe phrase for a failed model call: names no URL, key or provider error text."""
    for cls in type(exc).__mro__:
        if cls.__name__ in PUBLIC_REASONS:
            return PUBLIC_REASONS[cls.__name__]
    return "the model call failed"


def redact(text: str, secret: str | None) -> str:
    """Return ``text`` with ``secret`` masked, so provider error bodies can be quoted safely."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "***")
    return text


@contextmanager
def malformed_guard(what: str) -> Iterator[None]:
    """Turn any shape error met while reading a decoded provider body into :class:`MalformedResponse`.

    A well-formed reply of the wrong shape (a string where an object belongs,
    non-numeric token counts, a nesting bomb) must end the call with a typed
    error, never AttributeError/TypeError/ValueError/RecursionError.
    """
    try:
        yield
    except (AttributeError, TypeError, ValueError, KeyError, IndexError, OverflowError, RecursionError,
            InputError) as exc:
        raise MalformedResponse(f"{what} has the wrong shape ({type(exc).__name__}); check llm_base_url and "
                                "llm_provider point at a compatible API") from exc
