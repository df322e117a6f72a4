"""Provider faults against a loopback fake server, in every mode that calls a model.

For each fault (trickled bytes, a long Retry-After, 429 and 5xx storms, well-formed replies of the
wrong shape, a nesting bomb, a hang) and each mode (the model called directly, a gated turn, an agent
turn): the call ends within its configured deadline plus one second, with a typed error, and what
the user sees names neither the provider's URL nor the key.

The one-second bound is a correctness bound (httpx's timeout is per read, so without a wall-clock
deadline a trickling provider holds a turn for as long as it likes), not a speed target.
"""

from __future__ import annotations

import json
import time

import httpx
import pytest

from bara.domains.funds.assistant import AgentAssistant
from bara.app import Bara
from bara.domains.funds.repo import FundsRepo
from bara.llm import LLMDeadlineError, LLMError, LLMUnavailableError, MalformedResponse, build_model
from bara.messages import UserMessage
from bara.turn.gated import Assistant
from bara.settings import Settings
from faults_server import SECRET, Fault, FaultServer, deep_json, elapsed, openai_ok, reply

DEADLINE_S = 2.0
BOUND_S = DEADLINE_S + 1.0
USER = "u_fault"

_OK = openai_ok()
WRONG_SHAPES = {
    "message_is_a_string": {"choices": [{"index": 0, "message": "hello", "finish_reason": "stop"}]},
    "usage_not_numeric": {**_OK, "usage": {"prompt_tokens": "many", "completion_tokens": [1]}},
    "content_is_an_integer": {"choices": [{"message": {"role": "assistant", "content": 42}}]},
    "tool_calls_is_a_string": {"choices": [{"message": {"role": "assistant", "content": None,
                                                        "tool_calls": "compute_xirr"}}]},
    "choices_is_a_string": {"choices": "none"},
    "tool_call_name_not_text": {"choices": [{"message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": 7, "arguments": "{}"}}]}}]},
    "top_level_array": [_OK],
}

FAULTS: dict[str, tuple[tuple[Fault, ...], tuple[type[LLMError], ...]]] = {
    "trickled_bytes": ((Fault("trickle", gap_s=0.25),), (LLMDeadlineError,)),
    "retry_after_3600": ((reply({"error": {"message": "slow down"}}, 429, retry_after="3600"),), (LLMDeadlineError,)),
    "storm_429": ((reply({"error": {"message": "rate"}}, 429),), (LLMDeadlineError, LLMUnavailableError)),
    "storm_5xx": ((reply({"error": {"message": "boom"}}, 503), reply(b"<html>bad gateway</html>", 502)),
                  (LLMDeadlineError, LLMUnavailableError)),
    "hang": ((Fault("hang", hang_s=10.0),), (LLMDeadlineError,)),
    "deep_json_3000": ((reply(deep_json(3000)),), (MalformedResponse,)),
    "deep_json_200": ((reply(deep_json(200)),), (MalformedResponse,)),
    "not_json": ((reply(b"<html>hello</html>"),), (MalformedResponse,)),
    **{name: ((reply(body),), (MalformedResponse,)) for name, body in WRONG_SHAPES.items()},
}


def settings_for(server: FaultServer, db: str = ":memory:", cache=None) -> Settings:
    where = {"db": db} if cache is None else {"db": db, "cache_dir": cache}
    return Settings(**where, model="openai:gpt-fault", llm_base_url=server.url + "/v1",
                    llm_deadline_s=DEADLINE_S, gated_deadline_s=DEADLINE_S, agent_deadline_s=DEADLINE_S,
                    llm_timeout_s=30.0, llm_max_retries=3, llm_backoff_s=0.2)


def model_for(settings: Settings):
    return build_model(settings, environ={"OPENAI_API_KEY": SECRET}, client=httpx.Client(trust_env=False))


@pytest.fixture(scope="module")
def kb(rfc_kb, embedder):
    db = rfc_kb("faults")
    with Bara(Settings(db=str(db), cache_dir=db.parent), embedder=embedder) as bara:
        FundsRepo(bara.store)  # funds tables, then one account for agent turns (no holdings needed)
        bara.store.execute("INSERT INTO funds_users (id, name, created) VALUES (?, ?, ?)",
                           (USER, "Fay", "2026-01-01"))
    return db


def assert_private(text: str, server: FaultServer) -> None:
    port = str(server.server.server_address[1])
    for leak in (SECRET, server.url, "127.0.0.1", port):
        assert leak not in text


@pytest.mark.parametrize("fault", list(FAULTS))
def test_model_call_is_bounded_and_typed(fault):
    faults, expected = FAULTS[fault]
    with FaultServer(*faults) as server:
        model = model_for(settings_for(server))
        start = time.monotonic()
        with pytest.raises(LLMError) as info:
            model.complete([UserMessage("What is HSTS?")])
        took = elapsed(start)
    assert took <= BOUND_S, f"{fault}: {took:.2f}s"
    assert isinstance(info.value, expected), repr(info.value)
    assert SECRET not in str(info.value)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_gated_turn_is_bounded_typed_and_private(fault, kb, embedder):
    faults, expected = FAULTS[fault]
    with FaultServer(*faults) as server:
        settings = settings_for(server, str(kb), kb.parent)
        with Bara(settings, embedder=embedder) as bara:
            assistant = Assistant(bara, model_for(settings))
            start = time.monotonic()
            result = assistant.turn(f"user-{fault}", "What is HTTP Strict Transport Security?")
            took = elapsed(start)
    generate_s = result.trace.latency_ms["generate"] / 1e3
    assert generate_s <= BOUND_S, f"{fault}: generation took {generate_s:.2f}s of {took:.2f}s"
    failed = [r for r in result.trace.reasons if r.startswith("generate:model_failed_offline_used:")]
    assert failed and failed[0].rsplit(":", 1)[1] in {e.__name__ for e in expected}, result.trace.reasons
    assert result.answer.strip()  # the offline answer stands in
    assert_private(result.answer, server)
    assert_private(json.dumps(result.trace.to_json()), server)


@pytest.mark.parametrize("fault", list(FAULTS))
def test_agent_turn_is_bounded_typed_and_private(fault, kb, embedder):
    faults, expected = FAULTS[fault]
    with FaultServer(*faults) as server:
        settings = settings_for(server, str(kb), kb.parent)
        with Bara(settings, embedder=embedder) as bara:
            agent = AgentAssistant(bara, model=model_for(settings))
            result = agent.turn(USER, "What is my XIRR?")
    agent_s = result.trace.latency_ms["agent"] / 1e3
    assert agent_s <= BOUND_S, f"{fault}: agent loop took {agent_s:.2f}s"
    run = result.trace.gates.agent
    assert run is not None and run.status == "error" and run.error is not None
    assert any(e.__name__ in run.error for e in expected), run.error
    assert "couldn't complete" in result.answer
    assert_private(result.answer, server)
    assert_private(json.dumps(result.trace.to_json()), server)


def test_slow_but_steady_reply_within_the_deadline_still_succeeds():
    """The deadline cuts only what overruns it: a reply trickled in well under it is read whole."""
    with FaultServer(Fault("trickle", gap_s=0.001)) as server:
        response = model_for(settings_for(server)).complete([UserMessage("q")])
    assert response.message.text == "trickled answer"


def test_retry_after_within_the_deadline_is_honoured():
    with FaultServer(reply({}, 429, retry_after="0.3"), reply(openai_ok("after wait"))) as server:
        start = time.monotonic()
        response = model_for(settings_for(server)).complete([UserMessage("q")])
    assert response.message.text == "after wait" and response.attempts == 2
    assert elapsed(start) >= 0.3
