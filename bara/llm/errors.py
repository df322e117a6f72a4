"""Errors raised while talking to an LLM provider.

Every message names who must act and how. None of them ever contains an API
key: messages are built from the provider name, the *name* of the environment
variable holding the key, HTTP status codes and provider error text that has
been passed through :func:`redact`.
"""

from __future__ import annotations

from bara.errors import BaraError


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


class ScriptExhaustedError(LLMError):
    """A ScriptedModel was called more often than the test queued replies for."""


def redact(text: str, secret: str | None) -> str:
    """Return ``text`` with ``secret`` masked, so provider error bodies can be quoted safely."""
    if secret and len(secret) >= 4:
        return text.replace(secret, "***")
    return text
