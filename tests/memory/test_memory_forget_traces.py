"""Deleting a conversation (or forgetting a user) takes the HTTP service's records of it along: the turn
traces in ``serve_traces`` (each holds the message, the answer and what was retrieved) and the OpenAI thread
links in ``serve_threads``; another user's, and the user's other conversations', stay. Both backends."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from bara.memory.conversations import Conversations
from bara.memory.service_records import TraceRecords


def _trace(cid: str, words: str) -> dict:
    return {"trace_id": f"t-{cid}", "conversation_id": cid, "turn": 1, "mode": "gated",
            "message": words, "answer": f"about {words}"}


def _seed(store) -> dict[str, list[str]]:
    """Two conversations of alice, one of bob, each with a trace and a thread link."""
    convs, traces, made = Conversations(store), TraceRecords(store), {"alice": [], "bob": []}
    for user, n in (("alice", 2), ("bob", 1)):
        with store.scoped([user]):
            for i in range(n):
                cid = convs.create(user)
                convs.append(user, cid, "user", f"{user} secret {i}")
                traces.save(user, _trace(cid, f"{user} secret {i}"))
                with store.transaction():
                    store.execute("INSERT INTO serve_threads (user_id, thread_hash, conversation_id, created_at)"
                                  " VALUES (?,?,?,0)", (user, f"h-{cid}", cid))
                made[user].append(cid)
    return made


def _left(store, user: str) -> tuple[list, list]:
    with store.scoped([user]):
        return (sorted(r[0] for r in store.query("SELECT conversation_id FROM serve_traces WHERE user_id=?", (user,))),
                sorted(r[0] for r in store.query("SELECT conversation_id FROM serve_threads WHERE user_id=?", (user,))))


def _check(store) -> None:
    made = _seed(store)
    convs = Conversations(store)
    first, second = made["alice"]
    with store.scoped(["alice"]):
        assert convs.delete("alice", first) == 1
    assert _left(store, "alice") == ([second], [second])  # only that conversation's records went
    with store.scoped(["alice"]):
        assert convs.delete("alice") == 1
    assert _left(store, "alice") == ([], [])
    assert _left(store, "bob") == (made["bob"], made["bob"])  # another user's stay


def test_deleting_conversations_deletes_their_traces_and_threads_sqlite(tmp_path):
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    try:
        _check(store)
    finally:
        store.close()


def test_deleting_conversations_deletes_their_traces_and_threads_postgres(pg_store_factory):
    _check(pg_store_factory())


def test_memory_forget_cli_leaves_no_trace_of_the_users_words(tmp_path):
    from bara.cli import app
    from bara.store.sqlite import SQLiteStore

    db = tmp_path / "m.db"
    store = SQLiteStore(db)
    try:
        made = _seed(store)
    finally:
        store.close()
    out = CliRunner().invoke(app, ["memory", "forget", "--db", str(db), "--user", "alice", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["deleted"]["traces"] == 2
    store = SQLiteStore(db)
    try:
        assert _left(store, "alice") == ([], [])
        assert _left(store, "bob") == (made["bob"], made["bob"])
        rows = store.query("SELECT trace FROM serve_traces")
        assert rows and not any("alice" in r[0] for r in rows)
    finally:
        store.close()


def test_the_service_forget_counts_the_traces_it_deleted(rfc_kb, embedder):
    """DELETE /api/memory?conversations=true counts the caller's traces (taken before the conversations)."""
    from fastapi.testclient import TestClient
    from serve_helpers import bearer, make_app, sqlite_runtime

    runtime = sqlite_runtime(rfc_kb("forget_traces"), embedder)
    keys = {u: runtime.keys.create(u).key for u in ("alice", "bob")}
    try:
        with TestClient(make_app(runtime)) as c:
            for user in keys:
                r = c.post("/api/turns", json={"message": f"My name is {user.title()}."}, headers=bearer(keys[user]))
                assert r.status_code == 200, r.text
            deleted = c.delete("/api/memory?conversations=true", headers=bearer(keys["alice"])).json()["deleted"]
            assert deleted["traces"] == 1 and deleted["conversations"] == 1
        assert _left(runtime.store, "alice") == ([], []) and len(_left(runtime.store, "bob")[0]) == 1
    finally:
        runtime.close()
