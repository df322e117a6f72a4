"""Issue 38: the episodic tier's attribution check, through the real tier, store and embedder.

Small hand-made conversations between two speakers; each question names one of them. When the memory
records the event of the *other* speaker, the tier says so (``attribution``, reason
``episodic:attributed_to_other``) and keeps its items; the named person's own event, a form of address
("Thanks, Maria!") and second-person questions between the speakers must not fire it.
"""

from __future__ import annotations

from datetime import datetime

import pytest

from bara.memory.episodic import EpisodicMemory, Turn
from bara.memory.episodic_attribution import CHECKED, FIRED, addressee, without_name
from bara.settings import Settings
from bara.understand.attribution import (attributed_elsewhere, body_of, mentions, named_person, question_names,
                                         turn_owner, Ownership)

WHEN = datetime(2023, 6, 8, 10, 0)
MARIA_JOHN = [Turn("Maria", "How was your trip to Alaska, John? Did you see the glaciers?", "D1:1"),
              Turn("John", "Thanks, Maria! It was cold but beautiful, the glaciers were huge.", "D1:2"),
              Turn("Maria", "I volunteered at the homeless shelter on Saturday and cooked soup for forty people.", "D1:3"),
              Turn("John", "That's so kind. My kids and I baked cookies for the neighbours.", "D1:4"),
              Turn("Maria", "I'm going to run a half marathon next month.", "D1:5"),
              Turn("John", "Good luck, Maria! You trained hard for it.", "D1:6")]


@pytest.fixture()
def memory(tmp_path, embedder):
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "m.db")
    mem = EpisodicMemory(store, embedder, Settings())
    mem.add_session("u", "c1", "s1", MARIA_JOHN, WHEN)
    yield mem
    store.close()


# --- the pure reading (bara/understand/attribution.py) -------------------------------

def test_owner_reading_follows_mention_then_first_then_second_person():
    assert turn_owner("I went hiking with Maria last week.", "John", "Maria", "Maria") == Ownership("Maria", "mention")
    assert turn_owner("Thanks, Maria! I ran a half marathon.", "John", "Maria", "Maria") == Ownership("John",
                                                                                                   "first_person")
    assert turn_owner("How was your race?", "John", "Maria", "Maria") == Ownership("Maria", "second_person")
    assert turn_owner("How was your race?", "John", "", "Maria") == Ownership("", "unknown")
    assert turn_owner("The glaciers were huge.", "John", "Maria", "Maria") == Ownership("John", "default")
    assert turn_owner("Mel's pottery class was fun!", "Caroline", "Melanie", "Melanie", ("Mel",)).cue == "mention"


@pytest.mark.parametrize("text", ["Thanks, Maria!", "Hey Maria, how are you?", "That's great, Maria.",
                                  "Maria, look at this!", "Congrats Maria!", "Good luck, Maria! You did it."])
def test_a_form_of_address_is_not_a_mention(text):
    assert not mentions(text, ["Maria"])


@pytest.mark.parametrize("text", ["I went with Maria to the lake.", "Maria and I baked bread.",
                                  "Maria's dog is cute.", "Did Maria call you?"])
def test_a_mention_names_the_person(text):
    assert mentions(text, ["Maria"])


def test_named_person_question_names_and_helpers():
    speakers = ["Caroline", "Melanie"]
    assert named_person(question_names("What did Mel paint?"), speakers) == ("Melanie", ("Mel",))
    assert named_person(question_names("What is Caroline's favourite book?"), speakers) == ("Caroline", ())
    assert named_person(question_names("What do Caroline and Melanie share?"), speakers) == ("", ())
    assert named_person(question_names("What did Oscar eat?"), speakers) == ("", ())
    assert without_name("What did Jon design for Jon's store?", ["Jon"]) == "What did design for store?"
    assert body_of("[8 May 2023] Gina: I designed it.\n[8 May 2023] Jon: Nice!", "Gina") == "I designed it."
    assert addressee(["Gina", "Jon"], "Gina") == "Jon" and addressee(["Gina"], "Gina") == ""
    assert not attributed_elsewhere([], "Jon")
    assert not attributed_elsewhere(["Gina", ""], "Jon") and not attributed_elsewhere(["Gina", "Jon"], "Jon")
    assert attributed_elsewhere(["Gina", "Gina"], "Jon")


# --- through the episodic tier ------------------------------------------------------

def test_a_swapped_speaker_question_is_attributed_to_the_other_and_keeps_its_items(memory):
    result = memory.search("u", "What race is John going to run?")
    a = result.attribution
    assert a is not None and a.fired and FIRED in result.reasons
    assert (a.person, a.other, a.turn_id) == ("John", "Maria", "D1:5") and "half marathon" in a.text
    assert result.hits and any("D1:5" in h.turn_id.split("|") for h in result.hits)  # the items stay
    baked = memory.search("u", "What did Maria bake for the neighbours?").attribution
    assert baked is not None and baked.fired and baked.other == "John" and "cookies" in baked.text


def test_the_named_persons_own_event_does_not_fire(memory):
    for question in ("What race is Maria going to run?", "What did John bake for the neighbours?"):
        result = memory.search("u", question)
        assert result.attribution is not None and not result.attribution.fired, question
        assert CHECKED in result.reasons and FIRED not in result.reasons


def test_a_form_of_address_is_not_the_named_persons_event(memory):
    """John's "Thanks, Maria! It was cold ..." only speaks to Maria: the trip is John's."""
    a = memory.search("u", "How was Maria's trip to Alaska?").attribution
    assert a is not None and a.fired and a.other == "John"
    assert any(c.turn_id == "D1:2" and c.owner == "John" for c in a.checked)


def test_second_person_questions_between_the_speakers_tell_the_addressees_event(memory):
    """Maria's "How was your trip to Alaska, John?" is John's event although Maria said it."""
    a = memory.search("u", "How was John's trip to Alaska?").attribution
    assert a is not None and not a.fired
    assert any(c.turn_id == "D1:1" and c.speaker == "Maria" and (c.owner, c.cue) == ("John", "second_person")
               for c in a.checked)


def test_settings_turn_the_check_off_or_read_the_tiers_own_items(memory):
    off = EpisodicMemory(memory.store, memory.embedder, Settings(memory_episodic_attribution=False))
    quiet = off.search("u", "What race is John going to run?")
    assert quiet.attribution is None and FIRED not in quiet.reasons and quiet.hits
    same = EpisodicMemory(memory.store, memory.embedder, Settings(memory_episodic_attribution_search=False))
    boosted = same.search("u", "What race is John going to run?")  # the boost puts John's turns first
    assert boosted.attribution is not None and boosted.attribution.checked[0].speaker == "John"
    assert memory.search("u", "What do Maria and John share?").attribution is None  # two speakers named


def test_the_gated_turn_says_the_conversation_does_not_say_it(tmp_path, embedder):
    from bara.app import Bara
    from bara.turn.gated import Assistant

    captured = []
    with Bara(Settings(db=str(tmp_path / "p.db"), cache_dir=tmp_path), embedder=embedder) as bara:
        assistant = Assistant(bara)
        assistant.episodic.add_session("sam", "old", "s1", MARIA_JOHN, WHEN)
        assistant.hooks.add("before_generation", lambda prompt, ctx: captured.append(prompt) or prompt)
        swapped = assistant.turn("sam", "What race is John going to run?")
        assert FIRED in swapped.trace.reasons
        assert swapped.answer.startswith("The conversation does not say that John")
        assert "Maria: I'm going to run a half marathon" in swapped.answer
        episodes = next(f.text for f in captured[-1].frames if f.kind == "episodes")
        assert "the memory records this of Maria, not of John" in episodes
        assert captured[-1].inputs.episodes  # the items stay in the prompt
        own = assistant.turn("sam", "What race is Maria going to run?")
        assert FIRED not in own.trace.reasons and not own.answer.startswith("The conversation does not say")
