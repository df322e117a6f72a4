"""The one turn skeleton (``bara.turn``) and the memory tiers ``Bara`` owns (issue 9)."""

from __future__ import annotations

from bara.app import Bara
from bara.settings import Settings
from bara.store import open_store
from bara.trace import TurnRecorder
from bara.turn import TurnStart, empty_trace, load_conversation, run_turn


def _bara(tmp_path) -> Bara:
    return Bara(Settings().override(db=str(tmp_path / "t.db")), store=open_store(str(tmp_path / "t.db")))


def test_bara_owns_one_instance_of_each_memory_tier(tmp_path):
    with _bara(tmp_path) as bara:
        assert bara.conversations is bara.conversations and bara.profile is bara.profile
        assert bara.conversations.store is bara.store and bara.profile.store is bara.store


def test_an_empty_message_never_opens_a_conversation(tmp_path):
    with _bara(tmp_path) as bara:
        seen: list[str] = []
        out = run_turn(bara.settings, bara.store, bara.conversations, "u1", "  \x00 ", None,
                       body=lambda s, rec: seen.append("body"),
                       empty=lambda cid, rec: empty_trace("u1", cid, "gated", rec))
        assert seen == [] and out.intent == "empty" and "persist:nothing_stored" in out.reasons
        assert bara.conversations.list("u1") == []


def test_the_body_gets_the_loaded_conversation_under_its_lock(tmp_path):
    with _bara(tmp_path) as bara:
        cid = bara.conversations.open("u1")
        bara.conversations.record_turn("u1", cid, "hello", "hi", {}, {})
        got: list[TurnStart] = []

        def body(start: TurnStart, rec: TurnRecorder) -> str:
            lock = bara.conversations._locks[start.loaded.conversation_id].lock
            assert lock.locked()  # the turn lock is held while the body runs
            got.append(start)
            return "ok"

        assert run_turn(bara.settings, bara.store, bara.conversations, "u1", "next?", cid,
                        body=body, empty=lambda cid, rec: "empty") == "ok"
        start = got[0]
        assert start.clean.text == "next?" and start.loaded.turn == 2
        assert [m.text for m in start.loaded.messages] == ["hello", "hi"]


def test_load_without_a_conversation_is_a_first_turn(tmp_path):
    with _bara(tmp_path) as bara:
        loaded = load_conversation(bara.conversations, bara.settings, "u1", "")
        assert (loaded.turn, loaded.messages, loaded.state) == (1, (), None)
