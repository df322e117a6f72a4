"""`stop`, `max_tokens` / `max_completion_tokens` and `stream` of /v1/chat/completions, applied and checked
as an OpenAI model would: the official openai SDK against a live bara server on a loopback port."""

from __future__ import annotations

import math

import httpx
import openai
import pytest
from serve_helpers import bearer, keyed_server

QUESTION = "What does the HSTS max-age directive specify?"


@pytest.fixture(scope="module")
def server(rfc_kb, embedder):
    with keyed_server(rfc_kb("serve_output"), embedder) as running:
        yield running


def client(server, user="alice") -> openai.OpenAI:
    url, keys = server
    return openai.OpenAI(base_url=f"{url}/v1", api_key=keys[user], max_retries=0, timeout=60)


def stored_answer(server, cid: str, user="alice") -> str:
    """The whole answer the pipeline gave (the native API's stored turn)."""
    url, keys = server
    r = httpx.get(f"{url}/api/conversations/{cid}/turns", headers=bearer(keys[user]), timeout=30)
    return r.json()["turns"][-1]["assistant"]


def ask(server, stream: bool = False, **kw):
    """(delivered text, finish_reason, usage or None, conversation id) of one completion."""
    c = client(server)
    messages = kw.pop("messages", [{"role": "user", "content": QUESTION}])
    if not stream:
        done = c.chat.completions.create(model="bara-always", messages=messages, **kw)
        return (done.choices[0].message.content, done.choices[0].finish_reason, done.usage,
                done.model_extra["bara"]["conversation_id"])
    chunks = list(c.chat.completions.create(model="bara-always", messages=messages, stream=True,
                                            stream_options={"include_usage": True}, **kw))
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    last = [ch for ch in chunks if ch.choices][-1]
    return text, last.choices[0].finish_reason, chunks[-1].usage, last.model_extra["bara"]["conversation_id"]


def conversations(server, user="alice") -> int:
    url, keys = server
    return len(httpx.get(f"{url}/api/conversations", headers=bearer(keys[user])).json()["conversations"])


@pytest.mark.parametrize("stream", [False, True])
def test_stop_cuts_the_answer_before_the_first_stop_sequence(server, stream):
    text, finish, _, cid = ask(server, stream, stop=["max-age", "zzz-never"])
    whole = stored_answer(server, cid)
    assert "max-age" in whole  # the answer this question gets names the directive
    assert text == whole[:whole.index("max-age")] and finish == "stop"


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("param", ["max_tokens", "max_completion_tokens"])
def test_max_tokens_truncates_the_answer_with_finish_length(server, stream, param):
    text, finish, usage, cid = ask(server, stream, **{param: 5})
    whole = stored_answer(server, cid)
    assert math.ceil(len(whole) / 4) > 5  # longer than 5 tokens by the pipeline's estimate (4 chars each)
    assert text == whole[:20] and finish == "length"
    assert usage.completion_tokens == 5 and usage.total_tokens == usage.prompt_tokens + 5


def test_the_smaller_limit_applies_and_a_large_one_changes_nothing(server):
    text, finish, _, _ = ask(server, max_tokens=100_000, extra_body={"max_completion_tokens": 3})
    assert len(text) == 12 and finish == "length"
    text, finish, usage, cid = ask(server, max_tokens=100_000)
    assert text == stored_answer(server, cid) and finish == "stop"
    assert usage.completion_tokens == math.ceil(len(text) / 4)


def test_a_cut_answer_sent_back_as_history_continues_the_same_conversation(server):
    first, _, _, cid = ask(server, max_tokens=4)
    messages = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": first},
                {"role": "user", "content": "And what about includeSubDomains?"}]
    _, _, _, again = ask(server, messages=messages)
    assert again == cid


@pytest.mark.parametrize("body,param,code", [
    ({"stream": "yes"}, "stream", "invalid_type"), ({"stream": 1}, "stream", "invalid_type"),
    ({"stop": 3}, "stop", "invalid_type"), ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_value"),
    ({"stop": [""]}, "stop", "invalid_value"), ({"max_tokens": 0}, "max_tokens", "invalid_value"),
    ({"max_tokens": "5"}, "max_tokens", "invalid_type"), ({"max_tokens": True}, "max_tokens", "invalid_type"),
    ({"max_completion_tokens": 2.5}, "max_completion_tokens", "invalid_type")])
def test_output_parameters_of_the_wrong_type_or_value_are_a_400_naming_them(server, body, param, code):
    """Before any turn runs (nothing stored), in OpenAI's error shape, saying what to send instead."""
    before = conversations(server)
    with pytest.raises(openai.BadRequestError) as e:
        client(server).chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": "hi"}],
                                               extra_body=body)
    assert e.value.code == code and e.value.param == param and param in e.value.message
    assert set(e.value.body) == {"type", "message", "param", "code"} and "send" in e.value.message
    assert conversations(server) == before


def test_null_output_parameters_mean_none(server):
    text, finish, _, cid = ask(server, extra_body={"stream": None, "stop": None, "max_tokens": None})
    assert text == stored_answer(server, cid) and finish == "stop"
