"""The official openai SDK against a live bara server on a loopback port."""

from __future__ import annotations

import httpx
import openai
import pytest
from serve_helpers import bearer, keyed_server


@pytest.fixture(scope="module")
def server(rfc_kb, embedder):
    with keyed_server(rfc_kb("serve_openai"), embedder) as running:
        yield running


def client(server, user="alice", **kw) -> openai.OpenAI:
    url, keys = server
    return openai.OpenAI(base_url=f"{url}/v1", api_key=keys[user], max_retries=0, timeout=60, **kw)


def turns(server, cid, user="alice"):
    url, keys = server
    r = httpx.get(f"{url}/api/conversations/{cid}/turns", headers=bearer(keys[user]), timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["turns"]


def test_models_lists_the_three_modes(server):
    assert sorted(m.id for m in client(server).models.list()) == ["bara-agent", "bara-always", "bara-gated"]


def test_plain_completion_carries_conversation_trace_and_header(server):
    raw = client(server).chat.completions.with_raw_response.create(
        model="bara-gated", messages=[{"role": "user", "content": "What does the HSTS max-age directive specify?"}])
    done = raw.parse()
    answer = done.choices[0].message.content
    bara = done.model_extra["bara"]
    assert answer and done.choices[0].finish_reason == "stop"
    assert raw.headers["x-bara-trace-id"] == bara["trace"]["trace_id"]
    trace = bara["trace"]
    assert trace["user"] == "alice" and trace["retrieved"] and trace["hits"]
    assert any("6797" in h["source"] for h in trace["hits"])  # the HSTS RFC
    stored = turns(server, bara["conversation_id"])
    assert [(t["user"], t["assistant"]) for t in stored] == [
        ("What does the HSTS max-age directive specify?", answer)]
    assert stored[0]["trace"]["trace_id"] == trace["trace_id"]


def test_streamed_completion_matches_the_stored_answer(server):
    stream = client(server).chat.completions.create(
        model="bara-always", stream=True, messages=[{"role": "user", "content": "What is a Strict-Transport-Security host?"}])
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert chunks[-1].choices[0].finish_reason == "stop"
    cid = chunks[-1].model_extra["bara"]["conversation_id"]
    assert chunks[-1].model_extra["bara"]["trace"]["mode"] == "always"
    assert turns(server, cid)[-1]["assistant"] == text and text


def test_stream_ends_with_done_on_the_wire(server):
    url, keys = server
    body = {"model": "bara-gated", "stream": True, "messages": [{"role": "user", "content": "hello there"}]}
    with httpx.stream("POST", f"{url}/v1/chat/completions", json=body, headers=bearer(keys["alice"]), timeout=60) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line for line in r.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "data: [DONE]" and len(events) >= 3


def test_history_in_messages_is_one_conversation(server):
    c = client(server)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "My name is Priya."}]
    cids = []
    for follow_up in ("What does RFC 2119 say MUST means?", "and what does SHOULD mean?", "what is my name?"):
        done = c.chat.completions.create(model="bara-gated", messages=messages)
        cids.append(done.model_extra["bara"]["conversation_id"])
        messages += [{"role": "assistant", "content": done.choices[0].message.content},
                     {"role": "user", "content": follow_up}]
    done = c.chat.completions.create(model="bara-gated", messages=messages)
    cids.append(done.model_extra["bara"]["conversation_id"])
    assert len(set(cids)) == 1
    stored = turns(server, cids[0])
    assert [t["user"] for t in stored] == [m["content"] for m in messages if m["role"] == "user"]
    assert "Priya" in done.choices[0].message.content  # the profile fact learnt on turn 1
    # a different first message is a different conversation
    other = c.chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": "My name is Ola."}])
    assert other.model_extra["bara"]["conversation_id"] != cids[0]


def test_unseen_history_starts_a_seeded_conversation(server):
    messages = [{"role": "user", "content": "We use TLS 1.3 only."}, {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "What does HSTS protect against?"}]
    done = client(server).chat.completions.create(model="bara-gated", messages=messages)
    stored = turns(server, done.model_extra["bara"]["conversation_id"])
    assert [(t["user"], t["assistant"]) for t in stored][:1] == [("We use TLS 1.3 only.", "Noted.")]
    assert stored[0]["trace"] is None and stored[1]["trace"]["turn"] == 2


def test_header_names_the_conversation_per_user(server):
    header = {"X-Bara-Conversation": "project-x"}
    a, b = client(server, "alice", default_headers=header), client(server, "bob", default_headers=header)
    for text in ("I am a security engineer.", "What is the includeSubDomains directive?"):
        done = a.chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": text}])
        assert done.model_extra["bara"]["conversation_id"] == "project-x"
    done = b.chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": "what is my role?"}])
    assert done.model_extra["bara"]["conversation_id"] == "project-x"
    assert "security engineer" not in done.choices[0].message.content
    assert [t["user"] for t in turns(server, "project-x", "bob")] == ["what is my role?"]
    assert len(turns(server, "project-x", "alice")) == 2


def test_openai_user_field_is_not_identity(server):
    done = client(server).chat.completions.create(model="bara-gated", user="bob",
                                                  messages=[{"role": "user", "content": "hi"}])
    assert done.model_extra["bara"]["trace"]["user"] == "alice"


def test_errors_are_json_the_sdk_understands(server):
    url, _ = server
    bad = openai.OpenAI(base_url=f"{url}/v1", api_key="bara_nope_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError) as e:
        bad.models.list()
    assert "bara keys create" in e.value.body["message"]
    c = client(server)
    with pytest.raises(openai.NotFoundError):
        c.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.UnprocessableEntityError):
        c.chat.completions.create(model="bara-gated", messages=[{"role": "assistant", "content": "x"}])
    with pytest.raises(openai.APIStatusError) as e:
        c.chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": "x" * 9000}])
    assert e.value.status_code == 413 and "shorten" in e.value.body["message"]
    with pytest.raises(openai.APIStatusError) as e:
        c.chat.completions.create(model="bara-gated", messages=[{"role": "user", "content": "y" * 1_100_000}])
    assert e.value.status_code == 413


TOOL = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {}}}}
UNHONOURABLE = [("n", {"n": 2}), ("tools", {"tools": [TOOL]}), ("tool_choice", {"tool_choice": "required"}),
                ("logprobs", {"logprobs": True}), ("top_logprobs", {"top_logprobs": 3}),
                ("response_format", {"response_format": {"type": "json_object"}}),
                ("modalities", {"modalities": ["text", "audio"]}),
                ("functions", {"extra_body": {"functions": [TOOL["function"]]}})]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("param,kw", UNHONOURABLE, ids=[p for p, _ in UNHONOURABLE])
def test_parameters_bara_cannot_honour_are_refused_naming_them(server, param, kw, stream):
    """n>1, tools, logprobs, JSON or audio output: a 400 in OpenAI's shape naming the parameter, before
    any turn runs (nothing is stored), never a plain answer that ignores it."""
    c = client(server)
    before = len(httpx.get(f"{server[0]}/api/conversations", headers=bearer(server[1]["alice"])).json()["conversations"])
    with pytest.raises(openai.BadRequestError) as e:
        c.chat.completions.create(model="bara-gated", stream=stream, messages=[{"role": "user", "content": "hi"}], **kw)
    assert e.value.code == "unsupported_parameter" and e.value.param == param
    assert param in e.value.message and "omit" in e.value.message
    after = httpx.get(f"{server[0]}/api/conversations", headers=bearer(server[1]["alice"])).json()["conversations"]
    assert len(after) == before


def test_neutral_values_and_sampling_hints_are_accepted(server):
    done = client(server).chat.completions.create(
        model="bara-gated", messages=[{"role": "user", "content": "hello"}], n=1, logprobs=False, temperature=0.2,
        top_p=0.9, seed=7, response_format={"type": "text"}, tool_choice="none", modalities=["text"],
        extra_body={"tools": []})
    assert done.choices[0].message.content and len(done.choices) == 1


def test_validation_errors_name_the_field_as_openai_clients_read_it(server):
    with pytest.raises(openai.UnprocessableEntityError) as e:
        client(server).chat.completions.create(model="bara-gated", messages=[{"role": "robot", "content": "x"}])
    assert e.value.param == "messages.0.role" and e.value.code == "invalid_request"
    assert set(e.value.body) == {"type", "message", "param", "code"}


def test_bara_serve_command_starts_and_stops(tmp_path):
    """`bara serve` itself (the uvicorn import-string factory) on a free loopback port."""
    import os
    import socket
    import subprocess
    import sys
    import time
    from pathlib import Path

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    db = tmp_path / "cli.db"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen([sys.executable, "-m", "bara.cli", "serve", "--db", str(db), "--port", str(port),
                             "--mode", "always"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline, health = time.monotonic() + 90, None
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).json()
                break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert health is not None and (health["status"], health["mode"]) == ("ok", "always")
    finally:
        proc.terminate()
        proc.wait(30)
