"""Building the configured chat model from Settings (above the base interface and the provider adapters).

``build_model`` returns None when no model is configured: bara must keep working
offline, so callers treat "no LLM" as a normal state, not an error.
"""

from __future__ import annotations

import os
from typing import Mapping

import httpx

from bara.errors import ConfigError
from bara.llm.anthropic import AnthropicModel
from bara.llm.base import Model
from bara.llm.http import Endpoint, RetryPolicy, Secret
from bara.llm.openai_compat import OpenAICompatModel
from bara.settings import Settings

PROVIDERS = ("openai", "anthropic")
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
DEFAULT_KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}


def resolve_model(settings: Settings) -> tuple[str, str] | None:
    """(provider, model name) from ``settings.model``/``llm_provider``; None when no model is set.

    ``openai:llama3.1:8b`` splits on the first colon only when the prefix is a
    provider, so Ollama-style names keep their tag.
    """
    spec = settings.model.strip()
    if not spec:
        return None
    prefix, _, rest = spec.partition(":")
    named = prefix if prefix in PROVIDERS and rest else ""
    name = rest if named else spec
    if named and settings.llm_provider and named != settings.llm_provider:
        raise ConfigError(f"model {spec!r} names provider {named!r} but llm_provider is "
                          f"{settings.llm_provider!r}; make them agree or drop one")
    provider = named or settings.llm_provider or ("anthropic" if name.startswith("claude") else "openai")
    return provider, name


def build_model(settings: Settings, environ: Mapping[str, str] | None = None,
                client: httpx.Client | None = None) -> Model | None:
    """The configured provider model, or None when ``settings.model`` is empty.

    Raises ConfigError when the public API is targeted without a key in the
    environment. A custom ``llm_base_url`` (vLLM, Ollama, llama.cpp) may run keyless.
    """
    resolved = resolve_model(settings)
    if resolved is None:
        return None
    provider, name = resolved
    endpoint = _endpoint(settings, provider, dict(os.environ if environ is None else environ), client)
    if provider == "anthropic":
        return AnthropicModel(name=name, endpoint=endpoint, max_tokens=settings.llm_max_tokens)
    return OpenAICompatModel(name=name, endpoint=endpoint,
                             max_tokens=settings.llm_max_tokens if settings.llm_send_max_tokens else None)


def _endpoint(settings: Settings, provider: str, environ: dict[str, str],
              client: httpx.Client | None) -> Endpoint:
    key_env = settings.llm_api_key_env or DEFAULT_KEY_ENVS[provider]
    key = environ.get(key_env, "").strip()
    base_url = settings.llm_base_url or DEFAULT_BASE_URLS[provider]
    if not key and not settings.llm_base_url:
        raise ConfigError(f"model {settings.model!r} needs an API key: export {key_env}=<your key>, or set "
                          "llm_base_url to a local OpenAI-compatible server, or unset BARA_MODEL to run offline")
    policy = RetryPolicy(settings.llm_max_retries, settings.llm_backoff_s, settings.llm_backoff_max_s,
                         settings.llm_timeout_s, settings.llm_deadline_s, settings.llm_max_json_depth,
                         settings.llm_max_response_bytes)
    auth = ("x-api-key", "") if provider == "anthropic" else ("Authorization", "Bearer ")
    extra = {"anthropic-version": "2023-06-01"} if provider == "anthropic" else {}
    return Endpoint(provider=provider, base_url=base_url, key=Secret(key) if key else None, key_env=key_env,
                    auth_header=auth[0], auth_prefix=auth[1], extra_headers=extra, policy=policy,
                    client=client or httpx.Client())  # one client per model: connections are reused
