"""Property: whatever several users write, no read API ever returns another user's rows."""

from __future__ import annotations

from contextlib import suppress

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from bara.errors import InputError
from bara.memory.conversations import Conversations
from bara.memory.notes import NotesMemory, extract_notes
from bara.memory.profile import ProfileMemory, extract_profile_facts
from bara.memory.qa import QAMemory
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

USERS = ("alice", "bob", "carol")
TEXTS = (
    "We decided to use PostgreSQL for the event store.",
    "I think the TCP retransmission timer is too aggressive. Call me Sam.",
    "Open question: how do we rotate TLS certificates? I'm a network engineer.",
    "So the conclusion is that HSTS preload is safe. Keep it short.",
    "Let's go with QUIC for the mobile clients. I live in Berlin.",
)
OPS = ("create", "turn", "append_other", "state", "profile", "note", "qa", "forget")


class _MemoEmbedder:
    """The real embedder behind a dict: examples reuse the same few texts."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dim = inner, inner.model_id, inner.dim
        self.memo: dict[str, np.ndarray] = {}

    def embed(self, texts):
        missing = [t for t in texts if t not in self.memo]
        if missing:
            self.memo.update(zip(missing, self.inner.embed(missing), strict=False))
        return np.stack([self.memo[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


@pytest.fixture(scope="module")
def memo_embedder(embedder):
    return _MemoEmbedder(embedder)


class World:
    """The memory tiers over one fresh in-memory store, plus what each user wrote."""

    def __init__(self, embedder):
        self.store = SQLiteStore(":memory:")
        settings = Settings(db=":memory:")
        self.convs, self.profile = Conversations(self.store), ProfileMemory(self.store)
        self.notes = NotesMemory(self.store, embedder, settings)
        self.qa = QAMemory(self.store, embedder, settings)
        self.owned: dict[str, list[str]] = {u: [] for u in USERS}
        self.all_ids: list[str] = []

    def apply(self, op: str, user: str, text: str) -> None:
        if op == "create" or not self.owned[user]:
            cid = self.convs.create(user)
            self.owned[user].append(cid)
            self.all_ids.append(cid)
        cid = self.owned[user][-1]
        getattr(self, f"_{op}")(user, cid, text)

    def _create(self, user: str, cid: str, text: str) -> None:
        pass

    def _turn(self, user: str, cid: str, text: str) -> None:
        self.convs.record_turn(user, cid, text, f"answer to {text}", {"last": text}, {"route": "rag"})

    def _append_other(self, user: str, cid: str, text: str) -> None:
        foreign = [c for c in self.all_ids if c not in self.owned[user]]
        if foreign:
            with pytest.raises(InputError):
                self.convs.append(user, foreign[0], "user", text)

    def _state(self, user: str, cid: str, text: str) -> None:
        self.convs.save_state(user, cid, {"topic": text})

    def _profile(self, user: str, cid: str, text: str) -> None:
        self.profile.learn_from_user_turn(user, text)

    def _note(self, user: str, cid: str, text: str) -> None:
        self.notes.add(user, cid, extract_notes(text, ""))

    def _qa(self, user: str, cid: str, text: str) -> None:
        self.qa.add(user, cid, text, f"answer for {user}")

    def _forget(self, user: str, cid: str, text: str) -> None:
        self.profile.forget(user, "name")


def check_user(world: World, user: str) -> None:
    mine = set(world.owned.get(user, []))
    assert {c.id for c in world.convs.list(user)} == mine
    assert all(c.user_id == user for c in world.convs.list(user))
    for cid in world.all_ids:
        info = world.convs.get(user, cid)
        assert (info is not None) == (cid in mine) and (info is None or info.user_id == user)
        msgs = world.convs.history(user, cid)
        assert all(m.user_id == user for m in msgs) and (msgs == [] or cid in mine)
        assert world.convs.load_state(user, cid) == {} or cid in mine
    assert all(n.user_id == user for n in world.notes.list(user))
    assert all(q.user_id == user and q.answer == f"answer for {user}" for q in world.qa.list(user))
    for query in TEXTS[:2] + ("recap",):
        assert all(h.note.user_id == user for h in world.notes.search(user, query, floor=-1.0, k=10))
        assert all(h.user_id == user for h in world.qa.search(user, query, None, floor=-1.0, k=10))


def expected_profile(ops: list[tuple[str, str, str]], user: str) -> dict[str, str]:
    """A model of the profile: only this user's own profile/forget operations count."""
    model: dict[str, str] = {}
    for op, who, text in ops:
        if who != user:
            continue
        if op == "profile":
            model.update({f.key: f.value for f in extract_profile_facts(text)})
        elif op == "forget":
            model.pop("name", None)
    return model


@hsettings(max_examples=50, deadline=None,
           suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(OPS), st.sampled_from(USERS), st.sampled_from(TEXTS)),
                min_size=1, max_size=14))
def test_no_read_api_returns_another_users_rows(memo_embedder, ops):
    world = World(memo_embedder)
    try:
        for op, user, text in ops:
            world.apply(op, user, text)
        for user in USERS + ("mallory",):
            check_user(world, user)
            assert world.profile.get(user) == expected_profile(ops, user)
    finally:
        with suppress(Exception):
            world.store.close()


def test_the_property_is_not_vacuous(memo_embedder):
    """With every user writing everything, each user's reads are non-empty yet only theirs."""
    world = World(memo_embedder)
    ops = [(op, user, text) for user in USERS for text in TEXTS for op in ("turn", "profile", "note", "qa")]
    for op, user, text in ops:
        world.apply(op, user, text)
    total = world.store.query("SELECT COUNT(*) FROM messages")[0][0]
    for user in USERS:
        check_user(world, user)
        assert 0 < len(world.convs.history(user, world.owned[user][0])) < total
        assert world.notes.search(user, "What did we decide about PostgreSQL?")
        assert world.qa.search(user, TEXTS[0], None)
        assert world.profile.get(user) == expected_profile(ops, user) != {}
    world.store.close()
