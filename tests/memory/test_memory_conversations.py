"""Conversations tier: scoping, ordering under concurrency, atomic turns, state."""

from __future__ import annotations

import multiprocessing
import sqlite3
import threading

import pytest

from bara.errors import InputError
from bara.memory.conversations import Conversations
from bara.store.sqlite import SQLiteStore


@pytest.fixture
def store(tmp_path):
    s = SQLiteStore(tmp_path / "mem.db")
    yield s
    s.close()


@pytest.fixture
def convs(store):
    return Conversations(store)


def _append_many(path: str, cid: str, tag: str, n: int) -> None:
    """Worker (threads and processes): its own store object, n appends tagged with ``tag``."""
    store = SQLiteStore(path)
    try:
        convs = Conversations(store)
        for i in range(n):
            convs.append("alice", cid, "user", f"{tag}-{i}")
    finally:
        store.close()


def _check_complete(convs: Conversations, cid: str, tags: list[str], n: int) -> None:
    msgs = convs.history("alice", cid)
    assert [m.seq for m in msgs] == list(range(1, len(tags) * n + 1))  # gap-free, no collision
    for tag in tags:
        mine = [int(m.text.split("-")[1]) for m in msgs if m.text.startswith(f"{tag}-")]
        assert mine == list(range(n))  # each writer's messages kept, in its own order


def test_migration_creates_memory_tables(store):
    names = {r[0] for r in store.query("SELECT name FROM sqlite_master WHERE type IN ('table','index')")}
    assert {"conversations", "messages", "profile", "conversations_user", "messages_user"} <= names
    assert ("0002_memory",) in store.query("SELECT name FROM bara_migrations")


def test_create_get_list_are_scoped(convs):
    a = convs.create("alice")
    b = convs.create("bob", "fixed-id")
    assert len(a) == 32 and b == "fixed-id"
    assert convs.create("alice", a) == a  # idempotent for the owner
    with pytest.raises(InputError) as foreign:  # bob's id, seen from alice: exactly an unknown id
        convs.open("alice", "fixed-id")
    with pytest.raises(InputError) as unknown:
        convs.open("alice", "fixed-iX")
    assert str(foreign.value).replace("fixed-id", "fixed-iX") == str(unknown.value)  # reveals nothing
    assert convs.get("alice", a).user_id == "alice"
    assert convs.get("alice", b) is None
    assert convs.create("carol", "fixed-id") == "fixed-id"  # ids are per user: carol's is her own
    convs.append("carol", "fixed-id", "user", "carol's words")
    assert convs.history("bob", "fixed-id") == [] and convs.get("bob", "fixed-id").message_count == 0
    convs.delete("carol", "fixed-id")
    assert convs.get("bob", "fixed-id") is not None
    assert [c.id for c in convs.list("alice")] == [a]
    assert [c.id for c in convs.list("bob")] == [b]


def test_append_history_and_limit(convs):
    cid = convs.create("alice")
    for i, role in enumerate(["user", "assistant", "user", "assistant"]):
        assert convs.append("alice", cid, role, f"m{i}", {"i": i}) == i + 1
    assert [m.text for m in convs.history("alice", cid)] == ["m0", "m1", "m2", "m3"]
    assert [m.text for m in convs.history("alice", cid, limit=2)] == ["m2", "m3"]
    assert convs.history("alice", cid)[1].meta == {"i": 1}
    info = convs.get("alice", cid)
    assert (info.turn_count, info.message_count) == (2, 4)


def test_other_users_conversation_is_invisible_and_unwritable(convs):
    cid = convs.create("alice")
    convs.append("alice", cid, "user", "secret")
    convs.save_state("alice", cid, {"topic": "tls"})
    assert convs.history("bob", cid) == []
    assert convs.load_state("bob", cid) == {}
    for write in (lambda: convs.append("bob", cid, "user", "x"), lambda: convs.save_state("bob", cid, {}),
                  lambda: convs.record_turn("bob", cid, "q", "a", {})):
        with pytest.raises(InputError, match="does not exist for this user"):
            write()
    assert [m.text for m in convs.history("alice", cid)] == ["secret"]
    assert convs.load_state("alice", cid) == {"topic": "tls"}
    assert convs.delete("bob", cid) == 0 and convs.get("alice", cid) is not None


def test_bad_role_and_unknown_conversation(convs):
    cid = convs.create("alice")
    with pytest.raises(InputError, match="role"):
        convs.append("alice", cid, "robot", "x")
    with pytest.raises(InputError, match="create it first"):
        convs.append("alice", "nope", "user", "x")
    assert convs.history("alice", cid) == []


def test_state_round_trip_and_non_json_rejected(convs):
    cid = convs.create("alice")
    assert convs.load_state("alice", cid) == {}
    convs.save_state("alice", cid, {"streak": 2, "topics": ["tcp"]})
    assert convs.load_state("alice", cid) == {"streak": 2, "topics": ["tcp"]}
    with pytest.raises(InputError, match="JSON"):
        convs.save_state("alice", cid, {"bad": object()})
    assert convs.load_state("alice", cid) == {"streak": 2, "topics": ["tcp"]}


def test_record_turn_writes_both_messages_and_state(convs):
    cid = convs.create("alice")
    assert convs.record_turn("alice", cid, "what is TCP?", "A transport protocol.", {"n": 1},
                             {"route": "rag"}) == (1, 2)
    msgs = convs.history("alice", cid)
    assert [(m.role, m.text) for m in msgs] == [("user", "what is TCP?"), ("assistant", "A transport protocol.")]
    assert msgs[1].meta == {"route": "rag"} and msgs[0].meta == {}
    assert convs.load_state("alice", cid) == {"n": 1}
    assert convs.get("alice", cid).turn_count == 1


@pytest.mark.parametrize("assistant_text, meta, error", [
    (None, None, sqlite3.IntegrityError),  # fails on the second insert, after the first succeeded
    ("fine", {"bad": object()}, InputError),  # fails while encoding the assistant's meta
])
def test_record_turn_is_atomic(convs, assistant_text, meta, error):
    cid = convs.create("alice")
    convs.record_turn("alice", cid, "first", "answer", {"n": 1})
    with pytest.raises(error):
        convs.record_turn("alice", cid, "second", assistant_text, {"n": 2}, meta)
    assert [m.text for m in convs.history("alice", cid)] == ["first", "answer"]
    assert convs.load_state("alice", cid) == {"n": 1}
    assert convs.get("alice", cid).turn_count == 1


def test_concurrent_appends_threads_one_store(store, convs):
    cid = convs.create("alice")
    tags = [f"t{i}" for i in range(4)]

    def work(tag: str) -> None:
        for i in range(25):
            convs.append("alice", cid, "user", f"{tag}-{i}")

    threads = [threading.Thread(target=work, args=(t,)) for t in tags]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_complete(convs, cid, tags, 25)


def test_concurrent_appends_two_store_objects_one_file(store, convs):
    cid = convs.create("alice")
    tags = [f"s{i}" for i in range(4)]
    threads = [threading.Thread(target=_append_many, args=(store.location, cid, t, 20)) for t in tags]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    _check_complete(convs, cid, tags, 20)


def test_concurrent_appends_two_processes(store, convs):
    cid = convs.create("alice")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_append_many, args=(store.location, cid, tag, 30)) for tag in ("p0", "p1")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=120)
    assert [p.exitcode for p in procs] == [0, 0]
    _check_complete(convs, cid, ["p0", "p1"], 30)


def test_turn_lock_serialises_one_conversation(convs):
    inside, overlaps = [], []
    guard = threading.Lock()

    def turn() -> None:
        with convs.turn_lock("c1"):
            with guard:
                inside.append(1)
                overlaps.append(len(inside))
            threading.Event().wait(0.01)
            with guard:
                inside.pop()

    threads = [threading.Thread(target=turn) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1] * 6


def test_turn_lock_does_not_block_other_conversations(convs):
    done = threading.Event()

    def other() -> None:
        with convs.turn_lock("c2"):
            done.set()

    with convs.turn_lock("c1"):
        t = threading.Thread(target=other)
        t.start()
        assert done.wait(2.0)
    t.join()


def test_delete_one_and_all(convs):
    a1, a2 = convs.create("alice"), convs.create("alice")
    b1 = convs.create("bob")
    for cid, user in ((a1, "alice"), (a2, "alice"), (b1, "bob")):
        convs.record_turn(user, cid, "q", "a", {})
    assert convs.delete("alice", a1) == 1
    assert convs.history("alice", a1) == [] and convs.get("alice", a2) is not None
    assert convs.delete("alice") == 1
    assert convs.list("alice") == [] and len(convs.history("bob", b1)) == 2
