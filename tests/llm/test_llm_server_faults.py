"""The real local server failing under bara: killed mid-reply, and hung (SIGSTOP) mid-reply.

Each test starts its own server (it is killed or frozen). The bounds are correctness bounds on the
deadline (configured deadline plus one second), as in test_faults_providers.py, not speed targets.
"""

from __future__ import annotations

import json
import threading
import time

import openai
import pytest

from bara.app import Bara
from bara.llm import LLMDeadlineError, LLMError, LLMUnavailableError
from bara.messages import UserMessage
from bara.turn.gated import Assistant
from llm_local import skip_unless_built, llm_model, llm_settings, start

pytestmark = [pytest.mark.llm, skip_unless_built()]

DEADLINE_S = 3.0
BOUND_S = DEADLINE_S + 1.0
LONG = "Write a long story about a lighthouse keeper, with many chapters."


@pytest.fixture
def server(tmp_path):
    running = start(tmp_path)
    try:
        yield running
    finally:
        running.stop()


def in_flight(server, after_s: float, action) -> threading.Thread:
    """Do ``action(server)`` once the server has been busy with a request for ``after_s``."""
    timer = threading.Timer(after_s, action, args=(server,))
    timer.start()
    return timer


def test_server_killed_mid_reply_is_unavailable_not_a_hang(server):
    settings = llm_settings(server, llm_max_tokens=2000, llm_max_retries=1, llm_backoff_s=0.1,
                            llm_deadline_s=60.0)
    model = llm_model(settings)
    timer = in_flight(server, 0.3, lambda s: s.kill())
    start_t = time.monotonic()
    with pytest.raises(LLMUnavailableError) as info:
        model.complete([UserMessage(LONG)])
    timer.join()
    assert time.monotonic() - start_t < 30, "a dropped connection must fail fast, not wait out the deadline"
    assert "kept failing" in str(info.value) and "2 attempts" in str(info.value)


def test_server_hung_mid_reply_ends_at_the_deadline(server):
    settings = llm_settings(server, llm_max_tokens=2000, llm_deadline_s=DEADLINE_S, llm_max_retries=3)
    model = llm_model(settings)
    timer = in_flight(server, 0.3, lambda s: s.pause())
    start_t = time.monotonic()
    try:
        with pytest.raises(LLMDeadlineError):
            model.complete([UserMessage(LONG)])
        took = time.monotonic() - start_t
    finally:
        timer.join()
        server.resume()
    assert took <= BOUND_S, f"{took:.2f}s"


def test_gated_turn_falls_back_offline_when_the_server_dies(server, rfc_kb, embedder):
    db = rfc_kb("llm_faults")
    settings = llm_settings(server, db=str(db), cache_dir=db.parent, llm_max_tokens=2000, llm_max_retries=1,
                            llm_backoff_s=0.1, gated_deadline_s=DEADLINE_S * 10)
    with Bara(settings, embedder=embedder) as bara:
        assistant = Assistant(bara, llm_model(settings))
        timer = in_flight(server, 0.3, lambda s: s.kill())
        result = assistant.turn("u-dies", "Write a long story about HTTP Strict Transport Security.")
        timer.join()
    failed = [r for r in result.trace.reasons if r.startswith("generate:model_failed_offline_used:")]
    assert failed == ["generate:model_failed_offline_used:LLMUnavailableError"], result.trace.reasons
    assert result.answer.strip()
    assert server.base_url not in json.dumps(result.trace.to_json())


def test_bara_serve_maps_a_hung_server_to_504_and_a_dead_one_to_502(server, rfc_kb, embedder):
    from serve_helpers import live_server, make_app, sqlite_runtime

    db = rfc_kb("llm_faults_serve")
    overrides = llm_settings(server, llm_max_tokens=2000, gated_deadline_s=DEADLINE_S, llm_max_retries=0).model_dump(
        include={"model", "llm_base_url", "llm_send_max_tokens", "llm_max_tokens", "gated_deadline_s",
                 "llm_max_retries"})
    runtime = sqlite_runtime(db, embedder, **overrides)
    codes = {}
    try:
        key = runtime.keys.create("alice").key
        with live_server(make_app(runtime)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=60)
            for what, action in (("hung", lambda s: s.pause()), ("dead", lambda s: s.kill())):
                timer = in_flight(server, 0.3, action)
                with pytest.raises(openai.APIStatusError) as info:
                    client.chat.completions.create(model="bara-gated", stream=True,
                                                   messages=[{"role": "user", "content": LONG}])
                timer.join()
                codes[what] = (info.value.status_code, info.value.message)
                if what == "hung":
                    server.resume()
    finally:
        runtime.close()
    assert codes["hung"][0] == 504 and codes["dead"][0] == 502, codes
    for _, message in codes.values():
        assert server.base_url not in message and str(server.port) not in message


def test_errors_are_typed(server):
    """Connection refused after the server stopped is an LLMError the callers already handle."""
    settings = llm_settings(server, llm_max_retries=0)
    server.stop()
    with pytest.raises(LLMError):
        llm_model(settings).complete([UserMessage("hello")])
