"""Typed chat messages, the Model interface and provider adapters (OpenAI-compatible, Anthropic)."""

from bara.llm.base import Model, ModelResponse, build_model, resolve_model
from bara.llm.errors import (LLMAuthError, LLMDeadlineError, LLMError, LLMRequestError, LLMResponseError,
                             LLMUnavailableError, MalformedResponse, ScriptExhaustedError)
from bara.llm.messages import (AssistantMessage, Message, SystemMessage, ToolCall, ToolResultMessage, ToolSpec,
                               Usage, UserMessage)
from bara.llm.scripted import ModelCall, ScriptedModel

__all__ = [
    "AssistantMessage", "LLMAuthError", "LLMDeadlineError", "LLMError", "LLMRequestError", "LLMResponseError",
    "LLMUnavailableError", "MalformedResponse", "Message", "Model", "ModelCall", "ModelResponse", "ScriptExhaustedError",
    "ScriptedModel", "SystemMessage", "ToolCall", "ToolResultMessage", "ToolSpec", "Usage", "UserMessage",
    "build_model", "resolve_model",
]
