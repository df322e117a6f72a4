"""QA regressions on the native API as a demanding client meets it: a wrong method on any API path is a
405 naming that route's own methods (not the static files' GET, HEAD), an unknown API path a JSON 404."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, make_app, sqlite_runtime

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("qa_native"), embedder)
    keys = {"sam": runtime.keys.create("sam").key, "eve": runtime.keys.create("eve").key}
    app = make_app(runtime)
    with TestClient(app) as c:
        yield c, keys, runtime, app
    runtime.close()


def _error(r, status):
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["type"] and body["message"]
    return body


def _api_routes(app):
    """Every API path of the OpenAPI schema with its methods (path parameters filled in)."""
    for path, ops in app.openapi()["paths"].items():
        if path.startswith(("/api/", "/v1/")):
            yield {m.upper() for m in ops}, re.sub(r"\{[^}]+\}", "x", path)


def test_a_wrong_method_on_any_api_path_names_the_methods_it_takes(api):
    c, keys, _, app = api
    checked = 0
    for methods, path in _api_routes(app):
        for method in (m for m in METHODS if m not in methods):
            r = c.request(method, path, headers=bearer(keys["sam"]))
            body = _error(r, 405)
            allowed = set(r.headers["allow"].replace(" ", "").split(","))
            assert allowed == methods, (method, path, allowed)
            assert method in body["message"] and all(m in body["message"] for m in methods), body
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("method,path", [("DELETE", "/api/conversations/abc"), ("GET", "/api/conversations/abc"),
                                         ("POST", "/api/nothing"), ("PATCH", "/v1/nothing"), ("GET", "/api")])
def test_an_unknown_api_path_is_a_json_404_whatever_the_method(api, method, path):
    c, keys, _, _ = api
    body = _error(c.request(method, path, headers=bearer(keys["sam"])), 404)
    assert body["type"] == "not_found" and path in body["message"]


def test_the_web_timeline_is_still_served(api):
    c, _, _, _ = api
    r = c.get("/")
    assert r.status_code == 200 and "<html" in r.text.lower()


INVISIBLE = ["\u200b\u200b\u200b", "\ufeff \u200e\u202e", "\u2060\u3164\ufe0f  ", "\u00a0\u2028\u200d"]


@pytest.mark.parametrize("message", INVISIBLE)
def test_a_message_of_invisible_characters_is_refused_and_stores_nothing(api, message):
    c, keys, runtime, _ = api
    before = len(runtime.conversations.list("eve"))
    for path, body in (("/api/turns", {"message": message}),
                       ("/v1/chat/completions", {"model": "bara-gated", "messages": [{"role": "user",
                                                                                      "content": message}]})):
        err = _error(c.post(path, json=body, headers=bearer(keys["eve"])), 422)
        assert err["type"] == "empty_message" and "zero-width" in err["message"], err
    assert len(runtime.conversations.list("eve")) == before


@pytest.mark.parametrize("message", INVISIBLE)
def test_the_pipeline_treats_an_invisible_message_as_empty(message):
    from bara.understand.sanitize import sanitize

    clean = sanitize(message, 2000)
    assert clean.text == "" and "input:empty" in clean.reasons


def test_text_with_a_joiner_or_a_mark_inside_words_is_not_blank():
    from bara.text.blank import blank

    assert not blank("\u200bhello") and not blank("\U0001f468\u200d\U0001f469") and not blank("e\u0301")
    assert blank("") and blank(" \t\u200b\ufeff")


@pytest.mark.parametrize("tool,args,field", [("remember", {"text": "\u200b\u200b\u200b\u200b"}, "text"),
                                             ("search_knowledge", {"query": "\ufeff\u200e\u200e\u200e"}, "query"),
                                             ("recall", {"query": "\u2060\u2060\u2060"}, "query")])
def test_mcp_refuses_invisible_text_arguments_and_stores_no_note(api, tool, args, field):
    import anyio
    from mcp import Client

    from bara.mcp import build_server, fixed_identity

    _, _, runtime, _ = api
    bara = runtime.bara

    async def go():
        async with Client(build_server(bara, fixed_identity("eve"))) as client:
            return await client.call_tool(tool, args)

    result = anyio.run(go)
    said = "".join(getattr(c, "text", "") for c in result.content)
    assert result.is_error and said.startswith(f"{field}:") and "invisible" in said, said
    assert bara.notes.list("eve") == []


@pytest.fixture(scope="module")
def admin(api):
    _, _, runtime, _ = api
    return bearer(runtime.keys.create("root", admin=True).key)


def test_an_upload_of_several_files_is_refused_and_indexes_none(api, admin):
    c, keys, runtime, _ = api
    files = [("file", ("first.txt", b"alpha beta gamma delta")), ("file", ("second.txt", b"epsilon zeta eta"))]
    err = _error(c.post("/api/ingest", files=files, headers=admin), 422)
    assert err["type"] == "one_file_per_request" and err["param"] == "file" and "one file" in err["message"]
    sources = {r[0] for r in runtime.store.query("SELECT source FROM documents")}
    assert not any(s.endswith(("first.txt", "second.txt")) for s in sources), sources
    assert _error(c.post("/api/ingest", files=files, headers=bearer(keys["sam"])), 403)["type"] == "admin_required"


@pytest.mark.parametrize("filename", ["   ", "..", ".", "dir/..", "\u200b"])
def test_an_upload_whose_name_shows_nothing_is_stored_as_upload_txt(api, admin, filename):
    c, _, _, _ = api
    r = c.post("/api/ingest", files={"file": (filename, b"some words to index here")}, headers=admin)
    assert r.status_code == 200, r.text
    assert r.json()["source"] == "upload/upload.txt"


def test_two_authorization_headers_are_refused_on_the_api(api):
    c, keys, _, _ = api
    twice = [("authorization", f"Bearer {keys['eve']}"), ("authorization", f"Bearer {keys['sam']}")]
    for method, path in (("GET", "/api/memory"), ("GET", "/api/conversations"), ("GET", "/v1/models")):
        err = _error(c.request(method, path, headers=twice), 401)
        assert err["type"] == "invalid_api_key" and "exactly one" in err["message"]


def test_two_authorization_headers_are_refused_on_mcp(rfc_kb, embedder):
    """The /mcp gate checked the last header and a tool call acted for the first: a revoked key sent first
    and a live one last passed the gate and then failed inside every call."""
    import httpx
    from serve_helpers import live_server

    from bara.serve.app import mount_mcp_server

    runtime = sqlite_runtime(rfc_kb("qa_native_mcp"), embedder)
    try:
        live, revoked = runtime.keys.create("sam").key, runtime.keys.create("sam")
        runtime.keys.revoke(revoked.info.key_id)
        app = make_app(runtime)
        mount_mcp_server(app)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "qa", "version": "1"}}}
        headers = [("authorization", f"Bearer {revoked.key}"), ("authorization", f"Bearer {live}"),
                   ("accept", "application/json, text/event-stream"), ("content-type", "application/json")]
        with live_server(app) as url, httpx.Client(timeout=30) as http:
            r = http.post(f"{url}/mcp/", json=init, headers=headers)
            assert r.status_code == 401, r.text
            assert "exactly one" in r.json()["error"]["message"]
            one = http.post(f"{url}/mcp/", json=init, headers=headers[1:])
            assert one.status_code == 200, one.text
    finally:
        runtime.close()


def test_a_conversation_deleted_while_its_turn_runs_is_a_404_and_stores_nothing(rfc_kb, embedder):
    """DELETE /api/memory?conversations=true landing between a turn's id check and its write: the turn
    answered 400 with the library's "the caller must create it first (Conversations.create)". The delete is
    made from a before_persist hook, so the interleaving is exact."""
    runtime = sqlite_runtime(rfc_kb("qa_native_gone"), embedder)
    try:
        key = bearer(runtime.keys.create("sam").key)
        with TestClient(make_app(runtime)) as c:
            cid = c.post("/api/turns", json={"message": "What does MUST mean?"}, headers=key).json()["conversation_id"]

            def forget(plan, ctx):  # what DELETE /api/memory?conversations=true deletes of them
                runtime.conversations.delete("sam")
                runtime.traces.forget("sam")

            runtime.assistant(runtime.mode).hooks.add("before_persist", forget)
            r = c.post("/api/turns", json={"message": "and SHOULD?", "conversation_id": cid}, headers=key)
            err = _error(r, 404)
            assert err["type"] == "not_found" and "Conversations.create" not in err["message"]
            assert runtime.conversations.list("sam") == [] and runtime.traces.for_conversation("sam", cid) == {}
    finally:
        runtime.close()


def test_every_mcp_refusal_has_the_error_shape_of_the_rest_of_the_server(api):
    """/mcp's own refusals (no key, GET, not started) lacked ``param`` and ``code``, which every other
    refusal of the server carries (OpenAI's shape, documented as ErrorBody)."""
    from bara.serve.app import mount_mcp_server

    _, keys, runtime, _ = api
    app = make_app(runtime, warm=False)
    mount_mcp_server(app)
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    with TestClient(app) as c:
        reference = set(_error(c.get("/api/memory"), 401))
        refusals = [c.post("/mcp/", json=body, headers=accept), c.get("/mcp/", headers={**accept, **bearer(keys["sam"])})]
    refusals.append(TestClient(app).post("/mcp/", json=body, headers={**accept, **bearer(keys["sam"])}))  # not started
    for r, status in zip(refusals, (401, 405, 503), strict=True):
        err = _error(r, status)
        assert set(err) == reference and err["code"] == err["type"] and err["param"] is None, err


@pytest.mark.parametrize("path,unknown", [("/api/search?q=hsts&limit=3", "limit"),
                                          ("/api/conversations?offset=-5&limit=-1", "limit"),
                                          ("/api/memory?user=eve", "user"), ("/api/health?verbose=1", "verbose")])
def test_a_query_parameter_the_route_does_not_take_is_refused_not_ignored(api, path, unknown):
    c, keys, _, _ = api
    err = _error(c.get(path, headers=bearer(keys["sam"])), 422)
    assert err["type"] == "unknown_parameter" and err["param"] == unknown and unknown in err["message"], err


def test_the_query_parameters_a_route_takes_still_work(api):
    c, keys, _, _ = api
    r = c.get("/api/search", params={"q": "hsts", "k": 2, "floor": 0.1}, headers=bearer(keys["sam"]))
    assert r.status_code == 200 and len(r.json()["hits"]) <= 2
    assert c.delete("/api/memory?conversations=false", headers=bearer(keys["eve"])).status_code == 200


@pytest.mark.parametrize("path,repeated", [("/api/search?q=hsts&q=tls", "q"), ("/api/search?q=x&k=1&k=5", "k"),
                                           ("/api/memory?conversations=true&conversations=false", "conversations")])
def test_a_query_parameter_given_twice_is_refused_and_deletes_nothing(api, path, repeated):
    c, keys, runtime, _ = api
    before = len(runtime.conversations.list("sam"))
    c.post("/api/turns", json={"message": "What does MUST mean?"}, headers=bearer(keys["sam"]))
    method = "DELETE" if path.startswith("/api/memory") else "GET"
    err = _error(c.request(method, path, headers=bearer(keys["sam"])), 422)
    assert err["type"] == "repeated_parameter" and err["param"] == repeated, err
    assert len(runtime.conversations.list("sam")) == before + 1
