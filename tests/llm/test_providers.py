"""Provider adapters over HTTP: responses (validated as real SDK response models) parsed into typed
messages, and the request path exercised against a loopback fake server: success, tool calls,
retries, exhaustion, auth failure, deadlines, key hygiene. Request payload shapes are pinned
against the SDK request types in test_llm_messages.py."""

from __future__ import annotations

import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pydantic
import pytest
from anthropic.types import Message as AnthropicMessage
from openai.types.chat import ChatCompletion

from bara.agent import Tool, ToolContext, run_agent
from bara.llm import LLMAuthError, LLMDeadlineError, LLMRequestError, LLMUnavailableError, build_model
from bara.llm.anthropic import AnthropicModel, anthropic_payload, parse_anthropic_response
from bara.llm.http import RetryPolicy, _retry_after
from bara.llm.openai_compat import OpenAICompatModel, openai_payload, parse_openai_response
from bara.messages import AssistantMessage, ToolCall, UserMessage
from bara.settings import Settings
from llm_fixtures import SPEC, transcript
from loopback import LoopbackServer

SECRET = "sk-test-0123456789abcdefSECRETTAIL"


def openai_body(content: str | None = None, calls: tuple = (), finish: str = "stop", usage=(11, 7)) -> dict:
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = [{"id": i, "type": "function", "function": {"name": n, "arguments": a}}
                                 for i, n, a in calls]
    body = {"id": "chatcmpl-1", "object": "chat.completion", "created": 1_700_000_000, "model": "gpt-test",
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}}
    ChatCompletion.model_validate(body)  # the canned body is a real Chat Completions response
    return body


def test_openai_response_parsed_into_typed_parallel_calls():
    body = openai_body(None, (("c1", "search_documents", '{"query": "q"}'), ("c2", "get_xirr", "[1]")),
                       "tool_calls")
    resp = parse_openai_response(body)
    assert resp.message.text == ""
    assert resp.message.tool_calls[0] == ToolCall("c1", "search_documents", {"query": "q"})
    assert resp.message.tool_calls[1] == ToolCall("c2", "get_xirr", raw_arguments="[1]")
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.stop_reason) == (11, 7, "tool_calls")


def anthropic_body(blocks: list, stop: str = "end_turn", usage=(20, 5)) -> dict:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test", "content": blocks,
            "stop_reason": stop, "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]}}
    AnthropicMessage.model_validate(body)
    return body


def test_anthropic_response_parsed_into_typed_parallel_calls():
    body = anthropic_body([{"type": "text", "text": "Let me look."},
                           {"type": "tool_use", "id": "toolu_1", "name": "search_documents", "input": {"query": "a"}},
                           {"type": "tool_use", "id": "toolu_2", "name": "get_xirr", "input": {"fund": "F1"}}],
                          "tool_use")
    resp = parse_anthropic_response(body)
    assert resp.message == AssistantMessage("Let me look.", (ToolCall("toolu_1", "search_documents", {"query": "a"}),
                                                             ToolCall("toolu_2", "get_xirr", {"fund": "F1"})))
    assert (resp.usage.input_tokens, resp.usage.output_tokens, resp.stop_reason) == (20, 5, "tool_calls")


# --------------------------------------------------------------------------- loopback fake provider
@dataclass
class Canned:
    status: int = 200
    body: Any = None
    headers: dict = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict
    body: Any


class FakeProvider(LoopbackServer):
    """An HTTP server on 127.0.0.1 that replays canned replies and records requests."""

    def __init__(self, *replies: Canned) -> None:
        self.replies, self.requests = deque(replies), []
        super().__init__(self._handler())

    def _handler(self) -> type:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                fake.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                          json.loads(raw)))
                reply = fake.replies.popleft() if fake.replies else Canned(500, {"error": {"message": "none"}})
                time.sleep(reply.delay_s)
                data = json.dumps(reply.body).encode()
                try:
                    self.send_response(reply.status)
                    for k, v in {"content-type": "application/json", **reply.headers}.items():
                        self.send_header(k, v)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def openai_model(fake: FakeProvider, sleeps: list | None = None, **settings: Any) -> OpenAICompatModel:
    s = Settings(model="openai:gpt-test", llm_base_url=fake.url + "/v1", llm_max_retries=2, **settings)
    model = build_model(s, environ={"OPENAI_API_KEY": SECRET}, client=httpx.Client(trust_env=False))
    assert isinstance(model, OpenAICompatModel)
    return replace(model, endpoint=replace(model.endpoint, sleep=(sleeps.append if sleeps is not None else
                                                                  model.endpoint.sleep)))


def test_openai_success_sends_exact_request_with_bearer_key():
    with FakeProvider(Canned(body=openai_body("Hello"))) as fake:
        resp = openai_model(fake).complete(transcript(), [SPEC])
    (seen,) = fake.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {SECRET}"
    assert seen.body == openai_payload("gpt-test", transcript(), [SPEC])
    assert resp.message == AssistantMessage("Hello") and resp.attempts == 1


def test_openai_tool_call_response_over_http():
    body = openai_body(None, (("c1", "search_documents", '{"query": "exit load"}'),), "tool_calls")
    with FakeProvider(Canned(body=body)) as fake:
        resp = openai_model(fake).complete([UserMessage("q")], [SPEC])
    assert resp.message.tool_calls == (ToolCall("c1", "search_documents", {"query": "exit load"}),)


def test_429_then_success_is_retried_respecting_retry_after():
    sleeps: list[float] = []
    with FakeProvider(Canned(429, {"error": {"message": "slow down"}}, {"retry-after": "1.5"}),
                      Canned(body=openai_body("ok"))) as fake:
        resp = openai_model(fake, sleeps).complete([UserMessage("q")])
    assert resp.attempts == 2 and len(fake.requests) == 2
    assert sleeps == [1.5]


def test_500_exhausts_retries_with_backoff(caplog):
    sleeps: list[float] = []
    with caplog.at_level(logging.DEBUG), FakeProvider(*[Canned(500, {"error": {"message": "boom"}})] * 3) as fake:
        with pytest.raises(LLMUnavailableError, match="3 attempts") as info:
            openai_model(fake, sleeps, llm_backoff_s=0.2).complete([UserMessage("q")])
    assert len(fake.requests) == 3
    assert 0.1 <= sleeps[0] <= 0.2 and 0.2 <= sleeps[1] <= 0.4  # doubled, half of it jittered
    assert SECRET not in str(info.value) and SECRET not in caplog.text and "HTTP 500" in caplog.text


def test_401_names_the_variable_never_the_key(caplog):
    with caplog.at_level(logging.DEBUG), FakeProvider(Canned(401, {"error": {"message": f"bad key {SECRET}"}})) as fake:
        model = openai_model(fake)
        with pytest.raises(LLMAuthError) as info:
            model.complete([UserMessage("q")])
    message = str(info.value)
    assert "$OPENAI_API_KEY" in message and "set a valid key" in message
    assert len(fake.requests) == 1  # never retried
    for text in (message, repr(info.value), repr(model), repr(model.endpoint), caplog.text):
        assert SECRET not in text


def test_400_quotes_provider_error_with_key_redacted():
    with FakeProvider(Canned(400, {"error": {"message": f"model nope; key {SECRET} ok"}})) as fake:
        with pytest.raises(LLMRequestError, match=r"HTTP 400\): model nope; key \*\*\* ok") as info:
            openai_model(fake).complete([UserMessage("q")])
    assert SECRET not in str(info.value)


def test_deadline_exceeded_fails_fast():
    with FakeProvider(Canned(body=openai_body("late"), delay_s=2.0)) as fake:
        start = time.monotonic()
        with pytest.raises(LLMDeadlineError, match="deadline"):
            openai_model(fake).complete([UserMessage("q")], deadline=time.monotonic() + 0.3)
        assert time.monotonic() - start < 1.5


def test_retry_that_would_overrun_deadline_is_not_attempted():
    with FakeProvider(Canned(429, {}, {"retry-after": "30"})) as fake:
        with pytest.raises(LLMDeadlineError, match="past the deadline"):
            openai_model(fake, []).complete([UserMessage("q")], deadline=time.monotonic() + 5)
    assert len(fake.requests) == 1


def test_anthropic_over_http_headers_path_and_parse():
    body = anthropic_body([{"type": "tool_use", "id": "toolu_1", "name": "search_documents",
                            "input": {"query": "q"}}], "tool_use")
    with FakeProvider(Canned(body=body)) as fake:
        s = Settings(model="anthropic:claude-test", llm_base_url=fake.url, llm_max_tokens=256)
        model = build_model(s, environ={"ANTHROPIC_API_KEY": SECRET}, client=httpx.Client(trust_env=False))
        assert isinstance(model, AnthropicModel)
        resp = model.complete(transcript()[:2], [SPEC])
    (seen,) = fake.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == SECRET and seen.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in seen.headers
    assert seen.body == anthropic_payload("claude-test", transcript()[:2], [SPEC], 256)
    assert resp.message.tool_calls == (ToolCall("toolu_1", "search_documents", {"query": "q"}),)
    assert SECRET not in repr(model)


def test_anthropic_401_names_anthropic_variable():
    with FakeProvider(Canned(401, {"type": "error", "error": {"type": "authentication_error"}})) as fake:
        s = Settings(model="claude-test", llm_base_url=fake.url)
        model = build_model(s, environ={"ANTHROPIC_API_KEY": SECRET}, client=httpx.Client(trust_env=False))
        with pytest.raises(LLMAuthError, match=r"\$ANTHROPIC_API_KEY"):
            model.complete([UserMessage("q")])


def test_retry_after_http_date_and_garbage():
    assert _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # in the past: no wait
    assert _retry_after("soon") is None and _retry_after(None) is None
    assert RetryPolicy(backoff_s=1, backoff_max_s=3).delay(5, 1.0) == 3.0


# --------------------------------------------------------------------------- the loop over real HTTP
class Query(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    query: str


def test_agent_loop_over_openai_wire_sends_results_back_exactly():
    tool = Tool("search_documents", SPEC.description, Query, lambda ctx, a: [f"hit for {a.query}"])
    first = openai_body(None, (("c1", "search_documents", '{"query": "exit load"}'),
                               ("c2", "search_documents", '{"quer": "typo"}')), "tool_calls", (30, 9))
    with FakeProvider(Canned(body=first), Canned(body=openai_body("1% exit load.", usage=(50, 4)))) as fake:
        ctx = ToolContext("u1", None, Settings(), time.monotonic() + 10)
        run = run_agent(openai_model(fake), [UserMessage("exit load?")], [tool], ctx)
    assert run.status == "complete" and run.answer == "1% exit load."
    assert (run.usage.input_tokens, run.usage.output_tokens) == (80, 13)
    second = fake.requests[1].body
    assert second == openai_payload("gpt-test", run.messages[:-1], [tool.spec()])
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "tool", "tool"]
    assert json.loads(second["messages"][2]["content"]) == {"ok": True, "data": ["hit for exit load"]}
    assert second["messages"][3]["tool_call_id"] == "c2"
    assert json.loads(second["messages"][3]["content"])["error"] == (
        "query: Field required; quer: Extra inputs are not permitted")
