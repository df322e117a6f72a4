"""The native /api over the in-process ASGI transport: traces, conversations, search, memory, ingest,
limits, metrics, provider faults, and the `bara keys` / `bara serve` command lines."""

from __future__ import annotations

import http.server
import json
import threading
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, live_server, make_app, sqlite_runtime
from typer.testing import CliRunner

from bara.cli import app as cli_app
from bara.store.sqlite import SQLiteStore
from bara.serve.auth import Slots
from bara.serve.errors import ApiError


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("serve_api"), embedder)
    keys = {"alice": runtime.keys.create("alice").key, "bob": runtime.keys.create("bob").key,
            "admin": runtime.keys.create("ops", admin=True).key}
    with TestClient(make_app(runtime)) as c:
        yield c, keys
    runtime.close()


def post_turn(c, key, message, **body):
    r = c.post("/api/turns", json={"message": message, **body}, headers=bearer(key))
    assert r.status_code == 200, r.text
    return r.json()


def test_turn_trace_holds_every_decision(api):
    c, keys = api
    out = post_turn(c, keys["alice"], "What does the HSTS max-age directive mean?")
    t = out["trace"]
    assert out["answer"] == t["answer"] and t["conversation_id"] == out["conversation_id"]
    assert t["message"] == "What does the HSTS max-age directive mean?"
    assert t["route"] and t["intent"] and t["reasons"] and t["gates"]["policy"]
    assert t["kb_floor"] > 0 and t["hits"] and all(h["score"] >= t["kb_floor"] for h in t["hits"])
    assert all(h["score"] < t["kb_floor"] for h in t["dropped_hits"])
    assert len(t["dropped_hits"]) <= t["dropped_by_floor"]
    assert {"gate", "retrieve_kb", "generate", "persist", "total"} <= set(t["latency_ms"])
    assert t["latency_ms"]["total"] >= t["latency_ms"]["retrieve_kb"] > 0
    assert any(h["lexical_rank"] or h["dense_rank"] for h in t["hits"])
    assert t["degraded"] is False and t["errors"] == []


def test_one_message_in_each_mode_side_by_side(api):
    c, keys = api
    gated = post_turn(c, keys["alice"], "thanks, that helps!")
    always = post_turn(c, keys["alice"], "thanks, that helps!", mode="always",
                       conversation_id=gated["conversation_id"])
    assert gated["trace"]["mode"] == "gated" and not gated["trace"]["retrieved"]
    assert always["trace"]["mode"] == "always" and always["trace"]["retrieved"]
    listed = c.get(f"/api/conversations/{gated['conversation_id']}/turns", headers=bearer(keys["alice"])).json()
    assert [t["trace"]["mode"] for t in listed["turns"]] == ["gated", "always"]
    trace_id = always["trace"]["trace_id"]
    assert c.get(f"/api/traces/{trace_id}", headers=bearer(keys["alice"])).json()["mode"] == "always"
    assert c.get(f"/api/traces/{trace_id}", headers=bearer(keys["bob"])).status_code == 404


def test_other_users_ids_answer_like_unknown_ids(api):
    c, keys = api
    cid = post_turn(c, keys["alice"], "hello")["conversation_id"]
    mine = c.get(f"/api/conversations/{cid}/turns", headers=bearer(keys["alice"]))
    theirs = c.get(f"/api/conversations/{cid}/turns", headers=bearer(keys["bob"]))
    unknown = c.get("/api/conversations/no-such-id/turns", headers=bearer(keys["bob"]))
    assert mine.status_code == 200
    assert (theirs.status_code, theirs.json()) == (unknown.status_code, unknown.json()) == (404, unknown.json())
    r = c.post("/api/turns", json={"message": "hi", "conversation_id": cid}, headers=bearer(keys["bob"]))
    assert r.status_code == 404 and r.json() == unknown.json()
    assert cid not in {x["id"] for x in c.get("/api/conversations", headers=bearer(keys["bob"])).json()["conversations"]}


def test_search_reports_both_arms_and_fusion(api):
    c, keys = api
    r = c.get("/api/search", params={"q": "Strict-Transport-Security max-age", "k": 5}, headers=bearer(keys["bob"]))
    hits = r.json()["hits"]
    assert r.status_code == 200 and 0 < len(hits) <= 5
    assert all(h["lexical_rank"] is not None or h["dense_rank"] is not None for h in hits)
    assert [h["fused"] for h in hits] == sorted((h["fused"] for h in hits), reverse=True)
    too_many = c.get("/api/search", params={"q": "x", "k": 51}, headers=bearer(keys["bob"]))
    assert too_many.status_code == 422 and "at most 50" in too_many.json()["error"]["message"]


def test_memory_is_the_callers_and_can_be_forgotten(api):
    c, keys = api
    post_turn(c, keys["bob"], "My name is Bartholomew and I work as a network operator.")
    mem = c.get("/api/memory", headers=bearer(keys["bob"])).json()
    assert mem["user"] == "bob" and "Bartholomew" in json.dumps(mem["profile"])
    assert "Bartholomew" not in c.get("/api/memory", headers=bearer(keys["alice"])).text
    deleted = c.delete("/api/memory", headers=bearer(keys["bob"])).json()["deleted"]
    assert deleted["profile"] >= 1 and deleted["episodic"] >= 1  # the turn's words were remembered
    assert c.delete("/api/memory", headers=bearer(keys["bob"])).json()["deleted"]["episodic"] == 0
    assert c.get("/api/memory", headers=bearer(keys["bob"])).json()["profile"] == {}


def test_memory_shows_the_callers_episodic_memory_and_no_one_elses(api):
    """GET /api/memory's "episodic" (the key DELETE /api/memory reports): per conversation what the caller
    said, never what another user said; after DELETE there is nothing."""
    c, keys = api
    mine = post_turn(c, keys["alice"], "I adopted a puppy named Zqpupa.")["conversation_id"]
    post_turn(c, keys["alice"], "Zqpupa chewed my Zqshoea.", conversation_id=mine)
    post_turn(c, keys["bob"], "My cat Zqcatb sleeps all day.")
    episodic = c.get("/api/memory", headers=bearer(keys["alice"])).json()["episodic"]
    (conv,) = [x for x in episodic["conversations"] if x["conversation_id"] == mine]
    assert conv["turns"] == conv["sessions"] == 2 and conv["remembered_left_out"] == 0
    assert [t["text"].split(": ", 1)[1] for t in conv["remembered"]] == ["I adopted a puppy named Zqpupa.",
                                                                          "Zqpupa chewed my Zqshoea."]
    assert {"Zqpupa", "Zqshoea"} <= set(conv["names"]) and conv["last_said_at"] >= conv["first_said_at"] > 0
    assert episodic["turns"] >= 2 and "Zqcatb" not in json.dumps(episodic)
    theirs = c.get("/api/memory", headers=bearer(keys["bob"])).json()["episodic"]
    assert "Zqcatb" in json.dumps(theirs) and "Zqpupa" not in json.dumps(theirs)
    deleted = c.delete("/api/memory", headers=bearer(keys["alice"])).json()["deleted"]["episodic"]
    assert deleted == episodic["turns"]
    assert c.get("/api/memory", headers=bearer(keys["alice"])).json()["episodic"] == {
        "turns": 0, "conversations": [], "conversations_left_out": 0}
    assert "Zqcatb" in c.get("/api/memory", headers=bearer(keys["bob"])).text


def test_ingest_needs_an_admin_key(api):
    c, keys = api
    doc = ("Zebra routing protocol\n\nThe zebra routing protocol floods quokka advertisements every "
           "seventeen seconds across the marsupial backbone.\n").encode()
    r = c.post("/api/ingest", files={"file": ("zebra.txt", doc, "text/plain")}, headers=bearer(keys["alice"]))
    assert r.status_code == 403 and "--admin" in r.json()["error"]["message"]
    r = c.post("/api/ingest", files={"file": ("zebra.txt", doc, "text/plain")}, headers=bearer(keys["admin"]))
    assert r.status_code == 200 and r.json()["status"] == "written"
    hits = c.get("/api/search", params={"q": "quokka advertisements", "k": 3}, headers=bearer(keys["alice"])).json()
    assert hits["hits"][0]["source"] == "zebra.txt"
    bad = c.post("/api/ingest", files={"file": ("x.bin", b"\xff\xfe\x00", "application/octet-stream")},
                 headers=bearer(keys["admin"]))
    assert bad.status_code == 415


def test_auth_failures_are_401_json(api):
    c, keys = api
    for headers in ({}, {"Authorization": "Basic abc"}, {"Authorization": "Bearer "}, bearer("bara_x_y"),
                    bearer(keys["alice"] + "x")):
        r = c.get("/api/conversations", headers=headers)
        assert r.status_code == 401 and r.json()["error"]["type"] in ("missing_api_key", "invalid_api_key")
    assert c.get("/api/health").json()["status"] == "ok"


def test_revoked_key_is_refused(api):
    c, _ = api
    runtime = c.app.state.runtime
    new = runtime.keys.create("carol")
    assert c.get("/api/conversations", headers=bearer(new.key)).status_code == 200
    assert runtime.keys.revoke(new.info.key_id) == 1
    assert c.get("/api/conversations", headers=bearer(new.key)).status_code == 401
    stored = runtime.store.query("SELECT key_hash FROM serve_keys WHERE key_id=?", (new.info.key_id,))
    assert stored and new.key not in json.dumps(stored)


def test_body_and_message_limits_say_what_to_change(api):
    c, keys = api
    r = c.post("/api/turns", content=b'{"message": "' + b"a" * 1_100_000 + b'"}', headers=bearer(keys["alice"]))
    assert r.status_code == 413 and "send less" in r.json()["error"]["message"]
    r = c.post("/api/turns", json={"message": "b" * 9000}, headers=bearer(keys["alice"]))
    assert r.status_code == 413 and "8000" in r.json()["error"]["message"]
    r = c.post("/api/turns", json={"text": "hi"}, headers=bearer(keys["alice"]))
    assert r.status_code == 422 and "message" in r.json()["error"]["message"]


def test_per_key_concurrency_slots():
    slots = Slots(2)
    with slots.hold("k"), slots.hold("k"):
        with pytest.raises(ApiError) as e:
            with slots.hold("k"):
                pass
        with slots.hold("other"):
            pass
    assert e.value.status == 429 and "wait" in e.value.message
    with slots.hold("k"), slots.hold("k"):
        pass  # released again


def test_metrics_count_requests_stages_and_skips(api):
    c, keys = api
    post_turn(c, keys["alice"], "good morning!")
    text = c.get("/metrics").text
    assert 'bara_http_requests_total{method="POST",route="/api/turns",status="200"}' in text
    assert 'bara_retrievals_total{mode="gated",outcome="skipped"}' in text
    assert 'bara_stage_seconds_count{stage="generate"}' in text


class _Provider(http.server.BaseHTTPRequestHandler):
    delay = 0.0

    def do_POST(self):  # noqa: N802 - http.server's name
        time.sleep(self.delay)
        body = b'{"error": {"message": "boom"}}'
        try:
            self.send_response(500)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            # bara gave up first (the timeout case): without this, the server thread prints a traceback
            # into whatever test runs next, and that test's output checks (no "Traceback") fail.
            pass

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("delay,status", [(0.0, 502), (1.5, 504)])
def test_provider_faults_name_no_url_or_key(tmp_path, embedder, monkeypatch, delay, status):
    handler = type("P", (_Provider,), {"delay": delay})
    provider = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    port = provider.server_address[1]
    monkeypatch.setenv("BARA_TEST_PROVIDER_KEY", "sk-test-secret-4242")
    runtime = sqlite_runtime(tmp_path / "p.db", embedder, model="openai:some-model",
                             llm_base_url=f"http://127.0.0.1:{port}/v1", llm_api_key_env="BARA_TEST_PROVIDER_KEY",
                             llm_max_retries=0, llm_timeout_s=0.5)
    key = runtime.keys.create("alice").key
    try:
        with TestClient(make_app(runtime)) as c:
            r = c.post("/v1/chat/completions", headers=bearer(key),
                       json={"model": "bara-gated", "messages": [{"role": "user", "content": "What is HSTS?"}]})
            assert r.status_code == status
            assert r.json()["error"]["type"] in ("provider_error", "provider_timeout")
            for secret in ("127.0.0.1", str(port), "sk-test-secret", "BARA_TEST_PROVIDER_KEY"):
                assert secret not in r.text
            assert c.get("/api/conversations", headers=bearer(key)).json()["conversations"][0]["turn_count"] == 0
    finally:
        provider.shutdown()
        runtime.close()


def test_keys_cli(tmp_path):
    runner = CliRunner()
    db = str(tmp_path / "k.db")
    for blank in ("", "   ", "\t"):
        r = runner.invoke(cli_app, ["keys", "create", "--user", blank, "--db", db])
        assert r.exit_code == 2 and "non-empty" in r.output
    r = runner.invoke(cli_app, ["keys", "create", "--user", "dana", "--db", db, "--json"])
    made = json.loads(r.stdout)
    assert r.exit_code == 0 and made["user"] == "dana" and len(made["key"]) >= 43
    listed = json.loads(runner.invoke(cli_app, ["keys", "list", "--db", db, "--json"]).stdout)
    assert [k["user"] for k in listed] == ["dana"] and made["key"] not in json.dumps(listed)
    assert runner.invoke(cli_app, ["keys", "revoke", listed[0]["key_id"], "--db", db]).exit_code == 0
    assert runner.invoke(cli_app, ["keys", "revoke", listed[0]["key_id"], "--db", db]).exit_code == 2
    r = runner.invoke(cli_app, ["serve", "--mode", "fast", "--db", db])
    assert r.exit_code == 2 and "--mode must be one of" in r.output
    (tmp_path / "not-a-db.db").write_text("hello, I am a text file")
    r = runner.invoke(cli_app, ["serve", "--db", str(tmp_path / "not-a-db.db")])
    assert r.exit_code == 2 and "error" in r.output and "Traceback" not in r.output
    import socket

    with socket.create_server(("127.0.0.1", 0)) as busy:
        r = runner.invoke(cli_app, ["serve", "--db", db, "--port", str(busy.getsockname()[1])])
    assert r.exit_code == 2 and "another --port" in r.output


def test_docs_and_schema_are_served(api):
    c, _ = api
    assert c.get("/docs").status_code == 200
    paths = c.get("/openapi.json").json()["paths"]
    assert {"/v1/chat/completions", "/v1/models", "/api/turns", "/api/search", "/api/memory"} <= set(paths)
    assert "ErrorBody" in paths["/api/turns"]["post"]["responses"]["401"]["content"]["application/json"]["schema"]["$ref"]


def test_extra_mounts_come_before_the_static_timeline(tmp_path, embedder):
    from starlette.responses import JSONResponse

    from bara.serve.app import extend, user_for_key

    async def echo(scope, receive, send):
        token = dict(scope["headers"]).get(b"authorization", b"").decode().removeprefix("Bearer ")
        key = user_for_key(outer, token)
        await JSONResponse({"path": scope["path"], "user": key.user_id if key else None})(scope, receive, send)

    runtime = sqlite_runtime(tmp_path / "m.db", embedder)
    key = runtime.keys.create("mcp-user").key
    outer = make_app(runtime, mounts={"/mcp": echo}, warm=False)
    extend(outer, "/late", echo)
    try:
        with TestClient(outer) as c:
            assert c.get("/mcp/tools", headers=bearer(key)).json() == {"path": "/mcp/tools", "user": "mcp-user"}
            assert c.get("/late/x").json()["user"] is None
            assert "<html" in c.get("/").text.lower()
    finally:
        runtime.close()


def test_a_key_over_its_concurrency_limit_gets_429(tmp_path, embedder):
    """Two requests at once on a key allowed one: the second is refused while the first (held by a
    slow model provider) is in flight; another key is unaffected."""
    import concurrent.futures

    handler = type("Slow", (_Provider,), {"delay": 1.5})
    provider = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=provider.serve_forever, daemon=True).start()
    runtime = sqlite_runtime(tmp_path / "c.db", embedder, model="openai:m", serve_max_concurrent_per_key=1,
                             llm_base_url=f"http://127.0.0.1:{provider.server_address[1]}/v1",
                             llm_max_retries=0, llm_timeout_s=5)
    key, other = runtime.keys.create("alice").key, runtime.keys.create("bob").key
    body = {"message": "What is HSTS?"}
    try:
        with live_server(make_app(runtime)) as url, concurrent.futures.ThreadPoolExecutor(2) as pool:
            slow = pool.submit(httpx.post, f"{url}/api/turns", json=body, headers=bearer(key), timeout=30)
            time.sleep(0.7)
            second = httpx.post(f"{url}/api/turns", json=body, headers=bearer(key), timeout=30)
            unrelated = httpx.get(f"{url}/api/conversations", headers=bearer(other), timeout=30)
            assert second.status_code == 429 and "wait" in second.json()["error"]["message"]
            assert unrelated.status_code == 200
            assert slow.result().status_code == 502
            assert httpx.get(f"{url}/api/conversations", headers=bearer(key), timeout=30).status_code == 200
    finally:
        provider.shutdown()
        runtime.close()


def test_startup_fills_the_knowledge_bases_search_caches(rfc_kb, embedder):
    """The first request finds the vector matrix read and the full-text worker running (a cold first
    search read 8,243 vectors inside that request: 60-200 ms against 35-50 ms on the 56-RFC store)."""
    def workers() -> int:
        return sum(t.name.startswith("bara-lexical") for t in threading.enumerate())

    runtime = sqlite_runtime(rfc_kb("serve_warm"), embedder)
    try:
        before = workers()
        runtime.warm()
        assert workers() == before + 1  # this store's full-text worker, started
        store = runtime.store
        assert isinstance(store, SQLiteStore)
        reads = store.scope_reads
        assert reads >= 1  # the warm-up read the knowledge base's vectors ...
        assert runtime.bara.retriever.search("What does the includeSubDomains directive do?").hits
        assert store.scope_reads == reads  # ... so the first search read none again
    finally:
        runtime.close()


def test_an_unexpected_exception_is_a_json_500_with_a_reason_code_and_no_stack(tmp_path, embedder, monkeypatch):
    """A bug in a handler: the generic handler answers in the API's error shape with a stable reason code,
    and the body carries no stack, exception text or type (they may name files, SQL or data)."""
    runtime = sqlite_runtime(tmp_path / "s.db", embedder)
    try:
        key = runtime.keys.create("alice").key

        def broken(*args, **kwargs):
            raise RuntimeError("secret detail at /srv/bara/store.py line 12: SELECT * FROM serve_keys")

        monkeypatch.setattr(runtime.conversations, "list", broken)
        with TestClient(make_app(runtime, warm=False), raise_server_exceptions=False) as c:
            r = c.get("/api/conversations", headers=bearer(key))
            assert r.status_code == 500 and r.headers["content-type"].startswith("application/json")
            error = r.json()["error"]
            assert (error["type"], error["code"], error["param"]) == ("internal_error", "internal_error", None)
            assert "retry" in error["message"]
            assert not any(s in r.text for s in ("Traceback", "RuntimeError", "secret detail", "serve_keys", ".py"))
            assert c.get("/api/health").status_code == 200  # the server goes on serving
    finally:
        runtime.close()


def test_a_key_revoked_while_the_server_runs_is_refused_on_its_next_request(tmp_path, embedder):
    """`bara keys revoke` from another process while `bara serve` runs: the next request with that key is
    401, with no restart; the user's other key still works."""
    db = tmp_path / "s.db"
    runtime = sqlite_runtime(db, embedder)
    try:
        revoked, kept = runtime.keys.create("alice"), runtime.keys.create("alice")
        with live_server(make_app(runtime, warm=False)) as url:
            assert httpx.get(f"{url}/api/conversations", headers=bearer(revoked.key), timeout=30).status_code == 200
            done = CliRunner().invoke(cli_app, ["keys", "revoke", revoked.info.key_id, "--db", str(db)],
                                      env={"BARA_CACHE_DIR": str(tmp_path / "cache")})
            assert done.exit_code == 0, done.output
            refused = httpx.get(f"{url}/api/conversations", headers=bearer(revoked.key), timeout=30)
            assert refused.status_code == 401 and refused.json()["error"]["type"] == "invalid_api_key"
            assert httpx.get(f"{url}/api/conversations", headers=bearer(kept.key), timeout=30).status_code == 200
    finally:
        runtime.close()
