"""The Model interface and provider adapters (OpenAI-compatible, Anthropic); typed messages live in :mod:`bara.messages`."""

from bara.llm.base import Model, ModelResponse
from bara.llm.build import build_model, resolve_model
from bara.llm.errors import (LLMAuthError, LLMDeadlineError, LLMError, LLMRequestError, LLMResponseError,
                             LLMUnavailableError, MalformedResponse, ScriptExhaustedError)
from bara.llm.scripted import ModelCall, ScriptedModel

__all__ = [
    "LLMAuthError", "LLMDeadlineError", "LLMError", "LLMRequestError", "LLMResponseError", "LLMUnavailableError",
    "MalformedResponse", "Model", "ModelCall", "ModelResponse", "ScriptExhaustedError", "ScriptedModel",
    "build_model", "resolve_model",
]
