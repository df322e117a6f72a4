"""OpenAI-compatible ``/v1/chat/completions`` and ``/v1/models``.

Which conversation a request continues:

1. ``X-Bara-Conversation: <id>`` names it (created for this user on first use; ids are per user).
   The server's stored history is then the conversation; earlier ``messages`` are not re-read.
2. Without the header, the ``messages`` history is the conversation. After every answered turn the
   server records a fingerprint of the whole exchange (every user and assistant text so far,
   whitespace-normalised; system and tool messages are left out because clients rewrite them) under
   the caller's user. A request whose history (all messages before the last user message) matches a
   fingerprint continues that conversation. A history the server has never seen (edited, or made
   elsewhere) starts a new conversation seeded with that history, so the gate still sees context;
   an empty history starts a fresh one. Re-sending the same history (regenerate) continues the same
   conversation again.

The reply is a standard ``chat.completion`` (or ``chat.completion.chunk`` events ending with
``data: [DONE]`` when ``stream`` is true) plus ``"bara": {"conversation_id", "trace"}`` and the
``X-Bara-Trace-Id`` / ``X-Bara-Conversation`` headers. The ``user`` field is never used as identity.
Parameters bara cannot honour (``n`` > 1, ``tools``, ``logprobs``, a JSON ``response_format``...) get a
400 naming the parameter (:mod:`bara.serve.openai_params`), never an answer that ignores them; ``stop``
and ``max_tokens`` / ``max_completion_tokens`` are applied to the answer delivered (finish_reason
``stop`` / ``length``), and ``stream`` must be a JSON boolean.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from typing import Any, Iterator, Literal

from fastapi import APIRouter, BackgroundTasks, Depends, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from bara.serve.auth import caller
from bara.serve.errors import ApiError
from bara.memory.api_keys import ApiKey
from bara.serve.native import check_message, run_turn
from bara.prompts.frames import estimate_tokens
from bara.serve.openai_params import apply_output, output_params, refuse_unsupported
from bara.serve.runtime import can_exist, storable

router = APIRouter(prefix="/v1", tags=["openai"])
MODELS = {"bara-gated": "gated", "bara-always": "always", "bara-agent": "agent"}
_SPACE = re.compile(r"\s+")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    name: str | None = None


class ChatRequest(BaseModel):
    """OpenAI's request body; sampling hints and unknown fields are accepted and ignored, parameters bara
    cannot honour (n>1, tools, logprobs, response_format...) are refused, and stream, stop and max_tokens
    are checked as sent (not coerced: "yes" is no boolean) and applied (bara.serve.openai_params)."""

    model_config = ConfigDict(extra="allow")
    model: str = Field(description="bara-gated | bara-always | bara-agent")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: Any = Field(False, json_schema_extra={"type": "boolean"}, description="a JSON boolean")
    stop: Any = Field(None, json_schema_extra={"anyOf": [{"type": "string"}, {"type": "array", "items": {
        "type": "string"}, "maxItems": 4}]}, description="the answer ends before the first of these")
    max_tokens: Any = Field(None, json_schema_extra={"type": "integer", "minimum": 1},
                            description="the answer is cut to this many tokens (bara's estimate: 4 characters each)")
    max_completion_tokens: Any = Field(None, json_schema_extra={"type": "integer", "minimum": 1},
                                       description="as max_tokens (the smaller applies when both are sent)")
    stream_options: dict[str, Any] | None = None
    user: str | None = Field(None, description="ignored for identity: the user is the API key's")


class ChatChoice(BaseModel):
    index: int
    message: dict[str, Any]
    finish_reason: str
    logprobs: None = None


class BaraExtra(BaseModel):
    conversation_id: str
    trace: dict[str, Any] = Field(description="the turn's full trace (TraceOut in the native API)")


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: dict[str, int]
    system_fingerprint: str | None = None
    bara: BaraExtra


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "bara"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


def text_of(m: ChatMessage) -> str:
    """The message's text as stored (:func:`storable`), so a history imported from ``messages`` and its
    fingerprint hold on every store."""
    if isinstance(m.content, str):
        return storable(m.content)
    parts = m.content or []
    return storable("\n".join(p["text"] for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str)))


def thread_hash(turns: list[tuple[str, str]]) -> str:
    """sha256 of the user/assistant texts in order (whitespace-normalised)."""
    body = json.dumps([(r, _SPACE.sub(" ", t).strip()) for r, t in turns], ensure_ascii=False)
    return hashlib.sha256(body.encode()).hexdigest()


def dialogue(messages: list[ChatMessage]) -> list[tuple[str, str]]:
    return [(m.role, text_of(m)) for m in messages if m.role in ("user", "assistant") and text_of(m).strip()]


@router.get("/models", response_model=ModelList)
def list_models(key: ApiKey = Depends(caller)) -> ModelList:
    """The three modes as models."""
    return ModelList(data=[ModelCard(id=name, created=0) for name in MODELS])


@router.post("/chat/completions", response_model=ChatCompletion,
             responses={200: {"content": {"text/event-stream": {}}}})
def chat_completions(body: ChatRequest, request: Request, background: BackgroundTasks, key: ApiKey = Depends(caller),
                     x_bara_conversation: str | None = Header(None, max_length=200)) -> Any:
    """One turn for the last user message (see the module docstring for how the conversation is found)."""
    mode = MODELS.get(body.model)
    if mode is None:
        raise ApiError(404, "model_not_found", f"model {body.model!r} does not exist: use one of "
                       f"{', '.join(MODELS)} (GET /v1/models)")
    refuse_unsupported(body.model_extra or {})
    form = output_params({"stream": body.stream, "stop": body.stop, "max_tokens": body.max_tokens,
                          "max_completion_tokens": body.max_completion_tokens, "stream_options": body.stream_options})
    settings = request.app.state.runtime.settings
    if len(body.messages) > settings.serve_max_messages:
        raise ApiError(413, "too_many_messages", f"{len(body.messages)} messages; the limit is "
                       f"{settings.serve_max_messages}: send fewer (or use X-Bara-Conversation and only the new one)")
    last = body.messages[-1]
    message = text_of(last)
    if last.role != "user" or not message.strip():
        raise ApiError(422, "invalid_request", "the last message must be a user message with text content")
    check_message(request, message)
    user = key.user_id
    if x_bara_conversation is not None:
        if not x_bara_conversation.strip() or not can_exist(x_bara_conversation):
            raise ApiError(422, "invalid_request", "X-Bara-Conversation must be a non-empty id without NUL "
                           "characters: omit it or send an id")
        cid, create, prior = x_bara_conversation, True, []
    else:
        check_history(settings, body.messages[:-1])  # all of it before any of it is imported
        prior = dialogue(body.messages[:-1])
        cid, create = _continue(request, user, prior), False
    out = run_turn(request, user, message, cid, mode, background, create=create)
    answer, finish = apply_output(out.answer, form)
    if x_bara_conversation is None and out.stored.turn:
        # the client sends back the answer it got: that is the history its next request continues
        _remember(request, user, [*prior, ("user", message), ("assistant", answer)], out.conversation_id)
    headers = {"X-Bara-Trace-Id": out.trace["trace_id"], "X-Bara-Conversation": out.conversation_id}
    extra = {"conversation_id": out.conversation_id, "trace": out.trace}
    cmpl_id, created = f"chatcmpl-{out.trace['trace_id']}", int(time.time())
    if form.stream:
        return StreamingResponse(_chunks(cmpl_id, created, body.model, (answer, finish), extra, out.trace,
                                         form.include_usage),
                                 media_type="text/event-stream", headers={**headers, "Cache-Control": "no-cache"})
    payload = ChatCompletion(id=cmpl_id, created=created, model=body.model, bara=BaraExtra(**extra),
                             choices=[ChatChoice(index=0, message={"role": "assistant", "content": answer},
                                                 finish_reason=finish)], usage=_usage(out.trace, answer))
    return JSONResponse(payload.model_dump(), headers=headers)


def check_history(settings: Any, earlier: list[ChatMessage]) -> None:
    """Every earlier message within ``serve_max_history_message_chars``, and all of them together within
    ``serve_max_history_chars``; else a 413 naming the first message over (nothing is imported)."""
    total = 0
    for i, m in enumerate(earlier):
        n = len(text_of(m))
        total += n
        if n > settings.serve_max_history_message_chars:
            raise ApiError(413, "message_too_long", f"messages[{i}] has {n} characters; an earlier message may have "
                           f"at most {settings.serve_max_history_message_chars}: shorten it, or send only the new "
                           "message with X-Bara-Conversation", param=f"messages.{i}.content")
        if total > settings.serve_max_history_chars:
            raise ApiError(413, "history_too_long", f"the earlier messages reach {total} characters at messages[{i}]; "
                           f"the limit is {settings.serve_max_history_chars}: send a shorter history, or only the "
                           "new message with X-Bara-Conversation", param=f"messages.{i}.content")


def _usage(trace: dict[str, Any], answer: str) -> dict[str, int]:
    """Token counts as the pipeline's prompt budget counts them, the delivered answer's too (so that
    ``completion_tokens`` never exceeds ``max_tokens``)."""
    prompt, completion = int(trace.get("prompt_tokens") or 0), estimate_tokens(answer)
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


def _continue(request: Request, user: str, prior: list[tuple[str, str]]) -> str | None:
    """The conversation this history continues; a new one seeded with ``prior`` when unseen; None if empty."""
    if not prior:
        return None
    rt = request.app.state.runtime
    linked = rt.threads.find(user, thread_hash(prior))
    if linked is not None and rt.conversations.get(user, linked) is not None:
        return linked
    cid = rt.conversations.create(user)
    with rt.store.transaction():
        for role, text in prior:
            rt.conversations.append(user, cid, role, text, {"imported": True})
    return cid


def _remember(request: Request, user: str, turns: list[tuple[str, str]], cid: str) -> None:
    request.app.state.runtime.threads.link(user, thread_hash(turns), cid)


def _chunks(cmpl_id: str, created: int, model: str, delivered: tuple[str, str], extra: dict[str, Any],
            trace: dict[str, Any], usage: bool) -> Iterator[str]:
    """OpenAI ``chat.completion.chunk`` events: role, the answer in word-sized pieces, the finish_reason,
    [DONE]."""
    answer, finish = delivered
    def event(delta: dict[str, Any], finish: str | None = None, **more: Any) -> str:
        chunk = {"id": cmpl_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "system_fingerprint": None,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}], **more}
        return f"data: {json.dumps(chunk)}\n\n"

    yield event({"role": "assistant", "content": ""})
    for piece in re.findall(r"\S+\s*|\s+", answer):
        yield event({"content": piece})
    yield event({}, finish, bara=extra)
    if usage:
        chunk = {"id": cmpl_id, "object": "chat.completion.chunk", "created": created, "model": model,
                 "choices": [], "usage": _usage(trace, answer)}
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"
