"""QA regressions on what `bara serve` stores from a request: text no store can hold (NUL characters,
lone surrogates) in ids, chat histories and uploads is a 4xx or cleaned, never a 500 on PostgreSQL
while SQLite accepts it; uploads get the checks `bara ingest` makes of a file."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, make_app, pg_runtime, sqlite_runtime

NUL, SURROGATE = "\x00", "\ud800"


@pytest.fixture(params=["sqlite", "postgres"])
def client(request, rfc_kb, embedder, tmp_path):
    if request.param == "sqlite":
        runtime = sqlite_runtime(rfc_kb("qa_serve_input"), embedder)
    else:
        runtime = pg_runtime(request.getfixturevalue("pg_store_factory")(dim=384), tmp_path, embedder)
    key = runtime.keys.create("sam", admin=True).key
    with TestClient(make_app(runtime, warm=False), raise_server_exceptions=False) as c:
        c.headers.update(bearer(key))
        yield c
    runtime.close()


def _error(r, status):
    assert r.status_code == status, r.text
    assert r.json()["error"]["message"]
    return r.json()["error"]


@pytest.mark.parametrize("odd", [NUL, f"a{NUL}b"])
def test_ids_no_store_can_hold_are_unknown_ids(client, odd):
    for path in (f"/api/conversations/{quote(odd)}/turns", f"/api/traces/{quote(odd)}",
                 f"/api/memory/profile/{quote(odd)}"):
        assert _error(client.request("DELETE" if "profile" in path else "GET", path), 404)["type"] == "not_found"
    for cid in (odd, f"x{SURROGATE}"):
        r = client.post("/api/turns", content=f'{{"message": "hi", "conversation_id": "{_escape(cid)}"}}',
                        headers={"content-type": "application/json"})
        assert _error(r, 404)["type"] == "not_found"
    assert client.get("/api/health").status_code == 200


def _escape(text: str) -> str:
    return "".join(f"\\u{ord(c):04x}" if ord(c) < 32 or 0xD800 <= ord(c) <= 0xDFFF else c for c in text)


def _chat(client, messages):
    body = '{"model": "bara-gated", "messages": [%s]}' % ", ".join(
        f'{{"role": "{m["role"]}", "content": "{_escape(m["content"])}"}}' for m in messages)
    r = client.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 200, r.text
    return r.json()


def test_chat_history_with_nul_and_surrogates_is_stored_cleaned(client):
    history = [{"role": "user", "content": f"my name is Bo{NUL}b"}, {"role": "assistant", "content": f"Hi{NUL} Bob"},
               {"role": "user", "content": f"and {SURROGATE}I work at Acme{NUL}"}]
    done = _chat(client, history)
    cid = done["bara"]["conversation_id"]
    turns = client.get(f"/api/conversations/{cid}/turns").json()["turns"]
    assert [(t["user"], t["assistant"]) for t in turns][0] == ("my name is Bob", "Hi Bob")
    answer = {"role": "assistant", "content": done["choices"][0]["message"]["content"]}
    follow = _chat(client, [*history, answer, {"role": "user", "content": "what is my name?"}])
    assert follow["bara"]["conversation_id"] == cid  # the history as sent continues the conversation


def test_upload_gets_the_file_checks_of_bara_ingest(client):
    binary = client.post("/api/ingest", files={"file": ("tool.txt", b"ELF" + b"text " * 3000 + b"\x00\x01")})
    assert _error(binary, 415)["type"] == "not_utf8" and "binary" in binary.json()["error"]["message"]
    bom = client.post("/api/ingest", files={"file": ("bom.txt", "\ufeffQuokka Routing\n\nQuokkas hop the backbone "
                                                     "every seventeen seconds.\n".encode())})
    assert bom.status_code == 200 and bom.json()["status"] == "written", bom.text
    hits = client.get("/api/search", params={"q": "quokka routing backbone"}).json()["hits"]
    assert any(h["title"] == "Quokka Routing" for h in hits), [h["title"] for h in hits]
    assert client.post("/api/ingest", files={"file": ("empty.txt", b" \n")}).json()["status"] == "skipped"
