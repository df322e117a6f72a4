"""D3 (issue 33): every message /v1/chat/completions would import is within limits, each and all together;
a refusal is a 413 naming the message's index, and nothing of the history is imported."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, make_app, sqlite_runtime


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("history_limits"), embedder, serve_max_history_message_chars=2000,
                             serve_max_history_chars=6000)
    key = runtime.keys.create("alice").key
    with TestClient(make_app(runtime)) as c:
        yield c, bearer(key), runtime
    runtime.close()


def _stored(runtime) -> tuple[int, int]:
    return (runtime.store.query("SELECT COUNT(*) FROM conversations")[0][0],
            runtime.store.query("SELECT COUNT(*) FROM messages")[0][0])


def _chat(c, headers, history):
    return c.post("/v1/chat/completions", headers=headers, json={
        "model": "bara-gated", "messages": [*history, {"role": "user", "content": "What does MUST mean?"}]})


def _refused(r, index: int, code: str) -> None:
    assert r.status_code == 413, r.text
    err = r.json()["error"]
    assert err["code"] == code and err["param"] == f"messages.{index}.content", err
    assert f"messages[{index}]" in err["message"]


def test_one_long_earlier_message_is_refused_by_index(api):
    c, headers, runtime = api
    before = _stored(runtime)
    history = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"},
               {"role": "user", "content": "x " * 1500}, {"role": "assistant", "content": "ok"}]
    _refused(_chat(c, headers, history), 2, "message_too_long")
    long_answer = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": [{"type": "text", "text": "y" * 2500}]}]
    _refused(_chat(c, headers, long_answer), 1, "message_too_long")
    assert _stored(runtime) == before  # nothing imported


def test_a_long_history_of_short_messages_is_refused_where_it_passes_the_limit(api):
    c, headers, runtime = api
    before = _stored(runtime)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": "z" * 1500} for i in range(6)]
    _refused(_chat(c, headers, history), 4, "history_too_long")  # 5 x 1500 > 6000
    assert _stored(runtime) == before
    ok = _chat(c, headers, history[:2])  # within both limits: imported and answered
    assert ok.status_code == 200, ok.text
    assert _stored(runtime)[1] == before[1] + 4


@pytest.mark.parametrize("sent", ["no", "false", 0, 1, [], {"x": 1}])
def test_include_usage_must_be_a_json_boolean(api, sent):
    """D7 (issue 33): "no" was taken as true (any truthy value); now a 400 invalid_type, nothing stored."""
    c, headers, runtime = api
    before = _stored(runtime)
    r = c.post("/v1/chat/completions", headers=headers, json={
        "model": "bara-gated", "stream": True, "stream_options": {"include_usage": sent},
        "messages": [{"role": "user", "content": "What does MUST mean?"}]})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "invalid_type" and err["param"] == "stream_options.include_usage", err
    assert _stored(runtime) == before


@pytest.mark.parametrize("sent", [True, False, None])
def test_include_usage_as_a_boolean_is_honoured(api, sent):
    c, headers, _ = api
    r = c.post("/v1/chat/completions", headers=headers, json={
        "model": "bara-gated", "stream": True, "stream_options": {"include_usage": sent},
        "messages": [{"role": "user", "content": "What does MUST mean?"}]})
    assert r.status_code == 200, r.text
    assert ('"usage"' in r.text) is bool(sent)
