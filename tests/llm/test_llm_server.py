"""bara against a real OpenAI-compatible server: llama-cpp-python with SmolLM2-135M on loopback.

What the loopback fakes (tests/llm_fixtures.py, test_providers.py) cannot show: that a real server
accepts bara's payloads (max_tokens, a tool round trip), that the usage bara reads is the server's own
count, and that gated and always chats and `bara serve`'s stream work with a model answering. The
model is too small for its answers to be judged; only shapes and counts are asserted.
"""

from __future__ import annotations

import httpx
import pytest

from bara.app import Bara
from bara.llm.base import STOP_MAX_TOKENS
from bara.llm.local import LOCAL_ALIAS
from bara.llm.metered import MeteredModel
from bara.messages import SystemMessage, UserMessage
from bara.turn.gated import Assistant
from llm_fixtures import SPEC, transcript
from llm_local import SLOW_S, skip_unless_built, MAX_TOKENS, llm_model, llm_settings, module_server

pytestmark = [pytest.mark.llm, skip_unless_built()]

KNOWLEDGE_Q = "What does HTTP Strict Transport Security protect against?"
SMALL_TALK = "thanks, that's all for now"


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory):
    yield from module_server(tmp_path_factory)


def tokenize(server, text: str) -> int:
    """The server's own token count of ``text`` (llama-cpp-python's /extras/tokenize/count)."""
    reply = httpx.post(server.base_url.removesuffix("/v1") + "/extras/tokenize/count",
                       json={"model": LOCAL_ALIAS, "input": text}, timeout=30)
    reply.raise_for_status()
    return int(reply.json()["count"])


def test_usage_is_the_servers_count_and_max_tokens_caps_the_answer(llm_server):
    model = llm_model(llm_settings(llm_server, llm_max_tokens=4))
    short = model.complete([SystemMessage("Be brief."), UserMessage("Name a colour.")])
    padding = " ".join(["transport"] * 200)
    long = model.complete([SystemMessage("Be brief."), UserMessage(f"Name a colour. {padding}")])
    assert 0 < short.usage.input_tokens < long.usage.input_tokens
    # the extra prompt tokens are exactly the server's tokenisation of the extra text (same template)
    extra = long.usage.input_tokens - short.usage.input_tokens
    assert abs(extra - tokenize(llm_server, f" {padding}")) <= 2
    for reply in (short, long):
        assert 1 <= reply.usage.output_tokens <= 4
        assert reply.stop_reason in ("end", STOP_MAX_TOKENS)
        assert reply.stop_reason == "end" or reply.usage.output_tokens == 4
        assert reply.raw is not None and reply.raw["usage"]["prompt_tokens"] == reply.usage.input_tokens


def test_without_max_tokens_the_cap_is_not_sent(llm_server):
    """Off by default (OpenAI's newer models refuse max_tokens): the payload then names none."""
    settings = llm_settings(llm_server, llm_send_max_tokens=False)
    assert llm_model(settings).max_tokens is None


def test_a_tool_round_trip_is_accepted(llm_server):
    """The assistant tool_calls message (content null), two tool results and the tools list: the real
    server takes bara's wire shape and answers with a parsable reply."""
    model = llm_model(llm_settings(llm_server))
    reply = model.complete(transcript(), [SPEC])
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens >= 1
    assert isinstance(reply.message.text, str)
    for call in reply.message.tool_calls:  # SmolLM2's ChatML template has no tools: calls are unlikely
        assert call.name and call.id


@pytest.fixture(scope="module")
def kb(rfc_kb):
    return rfc_kb("llm_server")


@pytest.mark.parametrize("mode", ["gated", "always"])
def test_a_chat_is_answered_by_the_model(llm_server, kb, embedder, mode):
    settings = llm_settings(llm_server, db=str(kb), cache_dir=kb.parent)
    meter = MeteredModel(llm_model(settings))
    with Bara(settings, embedder=embedder) as bara:
        assistant = Assistant(bara, meter, mode=mode)
        first = assistant.turn(f"u-{mode}", KNOWLEDGE_Q)
        second = assistant.turn(f"u-{mode}", SMALL_TALK, conversation_id=first.conversation_id)
    totals = meter.take()
    for result in (first, second):
        assert result.trace.generator == f"model:{LOCAL_ALIAS}"
        assert not [r for r in result.trace.reasons if r.startswith("generate:model_failed")], result.trace.reasons
    assert first.trace.retrieved and first.trace.hits
    assert totals.calls == 2 and totals.prompt_tokens > 0 and 2 <= totals.completion_tokens <= 2 * MAX_TOKENS


def test_gating_sends_the_model_fewer_prompt_tokens_for_small_talk(llm_server, kb, embedder):
    """The seed's claim at its smallest: after a knowledge turn, 'thanks' costs the gated chat fewer
    prompt tokens than the always chat, as the server counts them."""
    settings = llm_settings(llm_server, db=str(kb), cache_dir=kb.parent)
    spent = {}
    with Bara(settings, embedder=embedder) as bara:
        for mode in ("gated", "always"):
            meter = MeteredModel(llm_model(settings))
            assistant = Assistant(bara, meter, mode=mode)
            first = assistant.turn(f"v-{mode}", KNOWLEDGE_Q)
            meter.take()
            assistant.turn(f"v-{mode}", SMALL_TALK, conversation_id=first.conversation_id)
            spent[mode] = meter.take().prompt_tokens
    assert 0 < spent["gated"] < spent["always"], spent


def test_bara_serve_streams_the_models_answer_to_the_openai_client(llm_server, kb, embedder):
    """`bara serve` in front of the real model: the official client streams the answer the model wrote."""
    import openai

    from serve_helpers import live_server, make_app, sqlite_runtime

    runtime = sqlite_runtime(kb, embedder, **llm_settings(llm_server).model_dump(
        include={"model", "llm_base_url", "llm_send_max_tokens", "llm_max_tokens", "k", "llm_timeout_s",
                 "llm_deadline_s", "gated_deadline_s"}))
    try:
        key = runtime.keys.create("alice").key
        with live_server(make_app(runtime)) as url:
            client = openai.OpenAI(base_url=f"{url}/v1", api_key=key, max_retries=0, timeout=SLOW_S)
            chunks = list(client.chat.completions.create(
                model="bara-gated", messages=[{"role": "user", "content": KNOWLEDGE_Q}], stream=True,
                stream_options={"include_usage": True}))
    finally:
        runtime.close()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    finals = [c for c in chunks if c.choices and c.choices[0].finish_reason]
    assert text.strip() and len(finals) == 1
    trace = (finals[0].model_extra or {})["bara"]["trace"]
    assert trace["generator"] == f"model:{LOCAL_ALIAS}" and trace["answer"] == text
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens > 0
