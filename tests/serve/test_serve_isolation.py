"""Isolation over the HTTP API: many users, each with marker facts, notes and Q&A; adversarial ids,
headers and bodies; no response ever carries another user's marker (SQLite and PostgreSQL).

Each user's markers contain ``Zqmark<i>q``. A request may itself quote another user's marker (a
probe: searching for it, asking about it); what a user once sent is theirs (it may come back in their
own memory or answers), so a leak is a marker of user j in a response to user i who never sent it.
"""

from __future__ import annotations

import json
from urllib.parse import quote

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from serve_helpers import bearer, make_app, pg_runtime, sqlite_runtime

USERS = ("alice", "Alice", "bob", "*", "u-ünï", "carol'--")
ADVERSARIAL_IDS = ("*", "%", "' OR '1'='1", "../alice", "x" * 200, "shared", "null", "0", "%2e%2e")
ZEBRA = ("Zebra routing protocol\n\nThe zebra routing protocol floods quokka advertisements every seventeen "
         "seconds across the marsupial backbone; each advertisement carries a wombat sequence number.\n")


def marker(i: int) -> str:
    return f"Zqmark{i}q"


def seed_messages(i: int) -> list[str]:
    m = marker(i)
    return [f"My name is {m}name. I work at {m}corp.",
            f"We decided to use {m}plan for the rollout.",
            f"What does the zebra routing protocol flood, for {m}qa?"]


class World:
    """The server under test, the users' keys, and what each user has been given back."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.client = TestClient(make_app(runtime, warm=False))
        self.keys = [runtime.keys.create(u).key for u in USERS]
        self.cids: list[list[str]] = [[] for _ in USERS]
        self.traces: list[list[str]] = [[] for _ in USERS]
        self.requests = 0
        self.mentioned: list[set[int]] = [{i} for i in range(len(USERS))]  # markers each user has sent
        runtime.bara.knowledge.add_text("zebra.txt", ZEBRA)

    def call(self, i: int, method: str, path: str, sent: list[str], **kw) -> dict | None:
        kw.setdefault("headers", {}).update(bearer(self.keys[i]))
        self.mentioned[i] |= {j for j in range(len(USERS)) for s in sent if marker(j) in s}
        r = self.client.request(method, path, **kw)
        self.requests += 1
        assert r.status_code < 500, r.text
        leaked_check(i, r.text, self.mentioned[i])
        if r.headers.get("content-type", "").startswith("application/json"):
            body = r.json()
            if r.status_code == 200 and isinstance(body, dict):
                self._learn(i, body)
            return body
        return None

    def _learn(self, i: int, body: dict) -> None:
        cid = body.get("conversation_id") or (body.get("bara") or {}).get("conversation_id")
        trace = body.get("trace") or (body.get("bara") or {}).get("trace")
        if cid and cid not in self.cids[i]:
            self.cids[i].append(cid)
        if trace and trace.get("trace_id"):
            self.traces[i].append(trace["trace_id"])


def leaked_check(i: int, text: str, mentioned: set[int]) -> None:
    for j in range(len(USERS)):
        if j not in mentioned:
            assert marker(j) not in text, f"user {USERS[i]!r} saw user {USERS[j]!r}'s marker: {text[:400]}"


def pick(items, k):
    return items[k % len(items)] if items else None


def step(world: World, op: tuple[int, int, int, int]) -> None:
    i, action, other, choice = op
    j = (i + 1 + other % (len(USERS) - 1)) % len(USERS)  # always someone else
    probe = f"what about {marker(j)}plan and {marker(j)}name?"
    ids = [*world.cids[j], *ADVERSARIAL_IDS, *world.cids[i]]
    target = pick(ids, choice)
    if action == 0:  # a native turn: own words or a probe, in a new / own / foreign / adversarial conversation
        message = (seed_messages(i)[choice % 3], probe, "what is my name?", "what did we decide?")[choice % 4]
        body = {"message": message, "mode": ("gated", "always", None)[choice % 3]}
        if choice % 5:
            body["conversation_id"] = target
        world.call(i, "POST", "/api/turns", [message, target or ""], json=body)
    elif action == 1:  # OpenAI endpoint: foreign header, foreign `user`, spoofed identity headers
        headers = {"X-User": quote(USERS[j]), "X-Bara-User": quote(USERS[j])}
        if choice % 2 and target and target.isascii():
            headers["X-Bara-Conversation"] = target
        message = ("what is my name?", probe, "what did we decide about the rollout?")[choice % 3]
        body = {"model": ("bara-gated", "bara-always")[choice % 2], "user": USERS[j],
                "messages": [{"role": "user", "content": message}]}
        world.call(i, "POST", "/v1/chat/completions", [message, target or "", USERS[j]], json=body, headers=headers)
    elif action == 2:
        world.call(i, "GET", f"/api/conversations/{quote(target or 'x', safe='')}/turns", [target or ""])
    elif action == 3:
        world.call(i, "GET", "/api/memory", [])
    elif action == 4:
        world.call(i, "GET", "/api/search", [probe], params={"q": probe, "k": 10})
    elif action == 5:
        trace = pick([*world.traces[j], "0" * 32], choice)
        world.call(i, "GET", f"/api/traces/{trace}", [])
    else:
        world.call(i, "GET", "/api/conversations", [])


# Turns are the slow requests: one op in five is a turn (native or OpenAI), the rest read.
ACTIONS = st.sampled_from((0, 1, 2, 2, 3, 3, 4, 4, 5, 6))
OPS = st.tuples(st.integers(0, len(USERS) - 1), ACTIONS, st.integers(0, 20), st.integers(0, 50))


def exercise(world: World) -> None:
    for i in range(len(USERS)):
        cid = None
        for message in seed_messages(i):
            body = {"message": message, **({"conversation_id": cid} if cid else {})}
            out = world.call(i, "POST", "/api/turns", [message], json=body)
            cid = out["conversation_id"]
    for i in range(len(USERS)):  # every marker really is stored, so a leak would have something to leak
        memory = world.call(i, "GET", "/api/memory", [])
        assert marker(i) in json.dumps(memory["profile"]) and marker(i) in json.dumps(memory["notes"])
        assert marker(i) in json.dumps(memory["qa"]) and marker(i) in json.dumps(memory["episodic"])

    @given(ops=st.lists(OPS, min_size=20, max_size=40))
    @settings(max_examples=40, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(ops):
        for op in ops:
            step(world, op)

    run()
    assert world.requests >= 1000


def test_isolation_over_the_api_sqlite(tmp_path, embedder):
    runtime = sqlite_runtime(tmp_path / "iso.db", embedder)
    try:
        exercise(World(runtime))
    finally:
        runtime.close()


def test_isolation_over_the_api_postgres(pg_store_factory, tmp_path, embedder):
    runtime = pg_runtime(pg_store_factory(dim=384), tmp_path, embedder)
    exercise(World(runtime))
