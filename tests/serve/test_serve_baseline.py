"""POST /api/turns with ``baseline: true`` (the web page's "Compare gated vs always"): the other mode's
answer, in a conversation of its own that is gone once answered, so comparing adds no conversation."""

from __future__ import annotations

import httpx

from serve_helpers import bearer, keyed_server

QUESTION = "What does HSTS do when a certificate error occurs?"


def _conversations(url: str, key: str) -> list[str]:
    got = httpx.get(f"{url}/api/conversations", headers=bearer(key), timeout=30)
    assert got.status_code == 200
    return sorted(c["id"] for c in got.json()["conversations"])


def test_a_baseline_turn_answers_and_leaves_no_conversation(rfc_kb, embedder):
    with keyed_server(rfc_kb("baseline"), embedder, users=("alice",)) as (url, keys):
        key = keys["alice"]
        own = httpx.post(f"{url}/api/turns", headers=bearer(key), json={"message": QUESTION}, timeout=60)
        assert own.status_code == 200
        before = _conversations(url, key)
        assert before == [own.json()["conversation_id"]]
        for mode in ("always", "gated"):
            other = httpx.post(f"{url}/api/turns", headers=bearer(key), timeout=60,
                               json={"message": QUESTION, "mode": mode, "baseline": True})
            assert other.status_code == 200, other.text
            body = other.json()
            assert body["trace"]["mode"] == mode and body["trace"]["hits"] and body["answer"]
            assert _conversations(url, key) == before
            gone = httpx.get(f"{url}/api/conversations/{body['conversation_id']}/turns", headers=bearer(key), timeout=30)
            assert gone.status_code == 404


def test_a_baseline_turn_cannot_continue_a_conversation(rfc_kb, embedder):
    with keyed_server(rfc_kb("baseline_cid"), embedder, users=("alice",)) as (url, keys):
        key = keys["alice"]
        cid = httpx.post(f"{url}/api/turns", headers=bearer(key), json={"message": QUESTION},
                         timeout=60).json()["conversation_id"]
        refused = httpx.post(f"{url}/api/turns", headers=bearer(key), timeout=60,
                             json={"message": QUESTION, "baseline": True, "conversation_id": cid})
        assert refused.status_code == 422 and "omit conversation_id" in refused.text
        assert _conversations(url, key) == [cid]
