"""QA regressions on `bara serve` as a new user and an attacker meet it: every refusal a JSON 4xx
that says what to change (oversized chunked bodies, unknown paths, wrong methods, broken JSON, empty
messages), conversation ids with a slash still reachable, and a failed long message in the web page
not flooding the status line."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, live_server, make_app, sqlite_runtime

LIMIT = 4000  # a small body limit, so the oversize tests stay small


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("qa_serve"), embedder, serve_max_body_bytes=LIMIT, serve_max_message_chars=200)
    keys = {"sam": runtime.keys.create("sam").key, "eve": runtime.keys.create("eve").key}
    with TestClient(make_app(runtime)) as c:
        yield c, keys, runtime
    runtime.close()


def _error(r, status):
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["type"] and body["message"]
    assert "Traceback" not in r.text
    return body


def test_chunked_body_over_the_limit_is_a_json_413(api):
    c, keys, _ = api
    chunks = (b'{"message": "' + b"y" * 1000 for _ in range(10))  # no Content-Length: streamed, 10 kB
    r = c.post("/api/turns", content=chunks, headers={**bearer(keys["sam"]), "content-type": "application/json"})
    body = _error(r, 413)
    assert body["type"] == "request_too_large" and str(LIMIT) in body["message"] and "send less" in body["message"]


def test_unknown_path_and_wrong_method_say_what_to_change(api):
    c, keys, _ = api
    missing = _error(c.get("/api/nothing-here", headers=bearer(keys["sam"])), 404)
    assert "/api/nothing-here" in missing["message"] and "/docs" in missing["message"]
    wrong = _error(c.put("/api/health"), 405)
    assert "PUT" in wrong["message"] and "GET" in wrong["message"]


def test_broken_json_says_the_body_is_not_json(api):
    c, keys, _ = api
    r = c.post("/api/turns", content=b'{"message": "hi"', headers={**bearer(keys["sam"]),
                                                                   "content-type": "application/json"})
    body = _error(r, 422)
    assert "not valid JSON" in body["message"]


@pytest.mark.parametrize("message", ["", "   ", "\u0000\u0007", "\n\t "])
def test_empty_message_is_refused_not_answered(api, message):
    c, keys, runtime = api
    before = len(runtime.conversations.list("sam"))
    body = _error(c.post("/api/turns", json={"message": message}, headers=bearer(keys["sam"])), 422)
    assert body["type"] == "empty_message" and "send some text" in body["message"]
    assert len(runtime.conversations.list("sam")) == before  # nothing stored


def test_conversation_named_with_a_slash_is_reachable_and_still_private(api):
    c, keys, _ = api
    cid = "team/project-x/../notes"
    r = c.post("/v1/chat/completions", headers={**bearer(keys["sam"]), "X-Bara-Conversation": cid},
               json={"model": "bara-gated", "messages": [{"role": "user", "content": "What is HSTS?"}]})
    assert r.status_code == 200, r.text
    assert r.json()["bara"]["conversation_id"] == cid
    path = "/api/conversations/" + cid.replace("/", "%2F") + "/turns"
    turns = c.get(path, headers=bearer(keys["sam"]))
    assert turns.status_code == 200, turns.text
    assert turns.json()["conversation_id"] == cid and turns.json()["turns"][0]["user"] == "What is HSTS?"
    other = _error(c.get(path, headers=bearer(keys["eve"])), 404)
    assert other["type"] == "not_found"


CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium missing (apt-get install chromium)")
def test_web_page_keeps_a_too_long_message_without_flooding_the_status(api):
    from playwright.sync_api import sync_playwright

    _, keys, runtime = api
    message = "why " * 150  # 600 characters: over this server's 200
    with live_server(make_app(runtime)) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(url + "/")
            page.fill("[data-testid=api-key]", keys["sam"])
            page.keyboard.press("Enter")
            page.wait_for_selector("[data-testid=message-input]", state="visible", timeout=30_000)
            page.fill("[data-testid=message-input]", message)
            page.keyboard.press("Enter")
            status = page.locator("#chat-status")
            status.filter(has_text="failed").wait_for(timeout=30_000)
            text = status.inner_text()
            assert "200" in text and message.strip() not in text and len(text) < 400
            assert page.input_value("[data-testid=message-input]") == message.strip()  # nothing lost
            assert page.evaluate("(e => e.scrollWidth <= e.clientWidth + 1)(document.getElementById('chat-status'))")
        finally:
            browser.close()


def test_mcp_endpoint_refusal_has_the_api_error_shape(api):
    from bara.serve.app import mount_mcp_server

    _, keys, runtime = api
    app = make_app(runtime, warm=False)
    mount_mcp_server(app)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    with TestClient(app) as c:
        for headers in ({}, bearer("bara_nope_x")):
            err = _error(c.post("/mcp/", json=body, headers={**headers, **accept}), 401)
            assert err["type"] == "invalid_api_key" and "Bearer" in err["message"]


def test_docs_need_no_network(api):
    import re

    c, _, _ = api
    r = c.get("/docs")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    external = re.findall(r"""(?:src|href)=["'](https?:)?//""", r.text)
    assert not external, "the API reference must load nothing from another host"
    for asset in re.findall(r"""src=["']([^"']+)["']""", r.text):
        assert c.get("/" + asset.lstrip("/")).status_code == 200


@pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium missing (apt-get install chromium)")
def test_docs_page_lists_every_path_offline(api):
    from playwright.sync_api import sync_playwright

    _, _, runtime = api
    with live_server(make_app(runtime)) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            outside: list[str] = []
            page.on("request", lambda req: outside.append(req.url) if not req.url.startswith(url) else None)
            page.goto(url + "/docs")
            page.locator("[data-testid=api-operation]").first.wait_for(timeout=30_000)
            spec = page.evaluate("fetch('/openapi.json').then(r => r.json())")
            text = page.inner_text("#ops")
            assert all(path in text for path in spec["paths"])
            assert not [u for u in outside if not u.startswith("data:")]
        finally:
            browser.close()


def test_agent_mode_without_a_funds_account_says_what_an_api_caller_can_do(api):
    c, keys, runtime = api
    before = len(runtime.conversations.list("eve"))
    native = _error(c.post("/api/turns", json={"message": "what is my XIRR?", "mode": "agent"},
                           headers=bearer(keys["eve"])), 400)
    assert native["type"] == "no_funds_account" and "bara-gated" in native["message"]
    for stream in (False, True):
        r = c.post("/v1/chat/completions", headers={**bearer(keys["eve"]), "X-Bara-Conversation": "agent-try"},
                   json={"model": "bara-agent", "stream": stream,
                         "messages": [{"role": "user", "content": "what is my XIRR?"}]})
        assert _error(r, 400)["type"] == "no_funds_account"
    assert len(runtime.conversations.list("eve")) == before  # no empty conversation left behind


def test_lone_surrogate_in_a_message_is_answered_not_a_500(api):
    c, keys, runtime = api
    raw = b'{"message": "What is HSTS? \\ud83d and \\u202e\\u200b"}'  # a lone high surrogate, as JSON allows
    r = c.post("/api/turns", content=raw, headers={**bearer(keys["sam"]), "content-type": "application/json"})
    assert r.status_code == 200, r.text
    out = r.json()
    assert "\ufffd" in out["trace"]["message"]
    turns = c.get(f"/api/conversations/{out['conversation_id']}/turns", headers=bearer(keys["sam"])).json()["turns"]
    assert len(turns) == 1  # stored once, readable back
    chat = b'{"model": "bara-gated", "messages": [{"role": "user", "content": "hi \\udc00"}]}'
    r = c.post("/v1/chat/completions", content=chat,
               headers={**bearer(keys["sam"]), "content-type": "application/json"})
    assert r.status_code == 200, r.text


def test_a_stored_trace_with_a_lone_surrogate_still_reads(api):
    c, keys, runtime = api
    out = c.post("/api/turns", json={"message": "What is HSTS?"}, headers=bearer(keys["sam"])).json()
    legacy = {**out["trace"], "trace_id": "legacy" + out["trace"]["trace_id"][6:], "message": "old \ud83d text"}
    runtime.traces.save("sam", legacy)  # as a server before the edge cleaning stored it
    turns = c.get(f"/api/conversations/{out['conversation_id']}/turns", headers=bearer(keys["sam"]))
    assert turns.status_code == 200, turns.text
    assert turns.json()["turns"][0]["trace"]["message"] == "old \ufffd text"
    one = c.get(f"/api/traces/{legacy['trace_id']}", headers=bearer(keys["sam"]))
    assert one.status_code == 200 and one.json()["message"] == "old \ufffd text"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_json_sent_without_the_json_content_type_says_to_set_it(api, content_type):
    """`curl -d '{...}'` sends a form Content-Type: the refusal names the header, not "fix these fields"."""
    c, keys, _ = api
    headers = {**bearer(keys["sam"]), **({"content-type": content_type} if content_type else {})}
    for path, body in (("/api/turns", b'{"message": "hello"}'),
                       ("/v1/chat/completions", b'{"model": "bara-gated", "messages": [{"role": "user", "content": "hi"}]}')):
        err = _error(c.post(path, content=body, headers=headers), 422)
        assert "Content-Type: application/json" in err["message"] and (content_type or "none") in err["message"]
    sent = c.post("/api/turns", content=b'{"message": "hello"}',
                  headers={**bearer(keys["sam"]), "content-type": "application/json; charset=utf-8"})
    assert sent.status_code == 200, sent.text


def test_a_body_that_cannot_be_parsed_is_a_documented_400_saying_what_to_send(api):
    """Nesting past the parser's depth and a broken multipart upload: a 400 (documented for every POST)
    that says what to send, not 'send a complete JSON object' for a complete one."""
    c, keys, runtime = api
    deep = b'{"message": ' + b"[" * 1900 + b"]" * 1900 + b"}"
    err = _error(c.post("/api/turns", content=deep, headers={**bearer(keys["sam"]), "content-type": "application/json"}),
                 400)
    assert err["type"] == "invalid_body" and "nested" in err["message"]
    broken = b"--b\r\n[[1, 2], {\"a\": 3}]--b--\r\n"
    err = _error(c.post("/api/ingest", content=broken, headers={**bearer(runtime.keys.create("root", admin=True).key),
                                                                "content-type": "multipart/form-data; boundary=b"}), 400)
    assert "multipart" in err["message"] and "file=@" in err["message"]
    responses = c.get("/openapi.json").json()["paths"]
    assert all("400" in ops["post"]["responses"] for ops in responses.values() if "post" in ops)
