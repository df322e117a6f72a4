"""How a gated follow-up searches when the earlier answers are themselves passages of the knowledge base:
the dense vector leans on the last reply, the lexical arm of a rewrite weighs less, and a passage an
earlier reply already holds gives its slot to one that says something new."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from bara.app import Bara
from bara.hooks import HookContext, PersistPlan
from bara.memory.conversations import StoredMessage
from bara.turn.gated import Assistant
from bara.turn.steps import ANSWER_IN_KB, answer_was_hit, answers_are_passages, drop_said, last_reply, said_terms
from bara.settings import Settings
from bara.types import SHARED, ArmScore, Hit, RetrievalOutcome, Status, StoredChunk
from bara.understand.topic import compose_topic, search_vector

# --- the search vector ---------------------------------------------------------------------------


def _unit(*xs: float) -> np.ndarray:
    v = np.array(xs, dtype=np.float32)
    return v / np.linalg.norm(v)


def test_a_dependent_message_leans_towards_the_last_reply():
    message, topic, reply = _unit(1, 0, 0), _unit(0, 1, 0), _unit(0, 0, 1)
    without = search_vector(message, topic, True, 0.8)
    with_reply = search_vector(message, topic, True, 0.8, reply, 0.5)
    assert np.allclose(without, compose_topic(message, topic, True, 0.8))
    assert float(with_reply @ reply) > float(without @ reply) + 0.2
    assert np.isclose(np.linalg.norm(with_reply), 1.0, atol=1e-6)
    # by hand: (1, 0.8, 0.5) normalised
    assert np.allclose(with_reply, _unit(1, 0.8, 0.5), atol=1e-6)


@pytest.mark.parametrize("depends, reply, weight", [
    (False, _unit(0, 0, 1), 0.5),        # a standalone message keeps its own vector
    (True, None, 0.5),                   # no reply to lean on
    (True, _unit(0, 0, 1), 0.0),         # the weight turned off
    (True, np.zeros(3, np.float32), 0.5),  # an empty reply vector says nothing
    (True, _unit(0, 1), 0.5),            # another embedder's shape
])
def test_the_reply_is_ignored_where_it_cannot_help(depends, reply, weight):
    message, topic = _unit(1, 0, 0), _unit(0, 1, 0)
    assert np.allclose(search_vector(message, topic, depends, 0.8, reply, weight),
                       compose_topic(message, topic, depends, 0.8))


# --- what the conversation already said ------------------------------------------------------------

def _hit(source: str, text: str) -> Hit:
    chunk = StoredChunk(id=len(source), text=text, source=source, section="", title="", collection="kb", owner=SHARED,
                        ordinal=0, start=0, end=len(text))
    return Hit(chunk=chunk, score=0.03, similarity=0.5, lexical=ArmScore(), dense=ArmScore(1, 0.5), fused=0.03)


def _message(role: str, text: str, meta: dict | None = None) -> StoredMessage:
    return StoredMessage("c", "u", 0, role, text, 0.0, meta or {})


WALL = ("The Great Wall of China was built over many centuries by successive dynasties to protect the "
        "northern borders against raids.")


def test_a_hit_an_earlier_reply_was_gives_its_slot_to_the_next_one():
    kb = RetrievalOutcome(Status.OK, "q", hits=(
        _hit("wall-1", WALL), _hit("wall-2", "Crews repair eroded sections of the wall every spring."),
        _hit("taj", "The Taj Mahal is a mausoleum in Agra."), _hit("colosseum", "The Colosseum is in Rome.")))
    said = said_terms([_message("user", "Which wonder was built as a defence?"),
                       _message("assistant", f"Sure. {WALL} It is very long.")])
    out = drop_said(kb, said, 0.8, 2)
    assert out is not None
    assert [h.chunk.source for h in out.hits] == ["wall-2", "taj"]
    assert "said_before:1" in out.reasons
    # a reply sharing only some of a passage's words drops nothing, and the hits are cut to k
    partial = said_terms([_message("assistant", "The Great Wall protects the borders.")])
    out = drop_said(kb, partial, 0.8, 3)
    assert out is not None and [h.chunk.source for h in out.hits] == ["wall-1", "wall-2", "taj"]
    assert not any(r.startswith("said_before") for r in out.reasons)
    # a reply that quotes the passage among much else is not that passage: it stays a hit
    longer = said_terms([_message("assistant", f"{WALL} Its watchtowers signalled with smoke by day and fire "
                                               "by night; garrisons farmed nearby land, and merchants on the "
                                               "Silk Road paid tolls at fortified passes such as Jiayuguan.")])
    out = drop_said(kb, longer, 0.8, 2)
    assert out is not None and [h.chunk.source for h in out.hits] == ["wall-1", "wall-2"]


def test_an_answer_that_is_one_of_its_hits_marks_the_conversation():
    kb = RetrievalOutcome(Status.OK, "q", hits=(_hit("wall-1", WALL), _hit("taj", "The Taj Mahal is in Agra.")))
    assert answer_was_hit(f"Sure. {WALL}", kb, 0.8)
    assert not answer_was_hit(f"{WALL} Its watchtowers signalled with smoke by day and fire by night, and "
                              "merchants on the Silk Road paid tolls at fortified passes.", kb, 0.8)  # written
    assert not answer_was_hit(WALL, RetrievalOutcome(Status.EMPTY, "q"), 0.8) and not answer_was_hit("", kb, 0.8)
    marked = [_message("user", "Which wonder?", {ANSWER_IN_KB: True}), _message("assistant", WALL)]
    assert answers_are_passages(marked)
    assert not answers_are_passages([_message("user", "Which wonder?"), _message("assistant", WALL)])
    # small talk since is not the turn that counts
    assert answers_are_passages([*marked, _message("user", "thanks!", {"searched": False}),
                                 _message("assistant", "You're welcome!")])


def test_the_last_reply_skips_small_talk_and_scaffolding():
    messages = [_message("user", "Which wonder was built as a defence?"),
                _message("assistant", f"{WALL} [1]\nSources: wonders.pdf"),
                _message("user", "thanks!", {"searched": False}), _message("assistant", "You're welcome!")]
    reply = last_reply(messages)
    assert reply.startswith("The Great Wall of China") and "Sources" not in reply and "[1]" not in reply
    assert last_reply([_message("user", "Which wonder was built as a defence?")]) == ""


# --- through the gated pipeline, the previous answer being a passage of the knowledge base ------------

PASSAGES = {
    "wall-1.txt": WALL + " It stretches more than 21,000 kilometres across the mountains and deserts of "
                         "northern China.",
    "wall-2.txt": "Today the Great Wall is looked after by China's heritage administration: crews repair eroded "
                  "sections, volunteers clear litter, and some stretches are closed to visitors so that they "
                  "can recover from damage.",
    "taj.txt": "The Taj Mahal is an ivory-white marble mausoleum in Agra, commissioned in 1631 by the Mughal "
               "emperor Shah Jahan to house the tomb of his wife.",
    "colosseum.txt": "The Colosseum is an elliptical amphitheatre in the centre of Rome, built of travertine "
                     "limestone and concrete under the Flavian emperors.",
    "petra.txt": "Petra is a historic city in southern Jordan, famous for its rock-cut architecture and its "
                 "water conduit system.",
    "machu.txt": "Machu Picchu is a 15th-century Inca citadel on a mountain ridge in Peru, above the Sacred "
                 "Valley.",
}
TURNS = (("I love the wonders of the world. Which one was built to keep invaders out?", PASSAGES["wall-1.txt"]),
         ("How is it maintained nowadays?", ""))


class _Reply:
    """``before_persist``: the conversation stores the given reply, as the CAsT replays do."""

    def __init__(self) -> None:
        self.next = ""

    def __call__(self, plan: PersistPlan, ctx: HookContext) -> PersistPlan:
        return replace(plan, assistant_text=self.next)


def _store(tmp_path_factory, embedder, name: str, passages: dict[str, str], k: int = 2):
    """A knowledge base of ``passages`` in a fresh folder, with the floors off (what the tests compare is ranking)."""
    folder = tmp_path_factory.mktemp(name)
    docs = folder / "docs"
    docs.mkdir()
    for file, text in passages.items():
        (docs / file).write_text(text)
    settings = Settings(db=str(folder / "kb.db"), cache_dir=folder / "cache", k=k, floor_kb=0.0,
                        floor_continuation=0.0, floor_general=0.0, gate_kb_relative_gap=2.0)
    with Bara(settings, embedder=embedder) as bara:
        bara.knowledge.ingest([docs])
        yield bara


@pytest.fixture(scope="module")
def wonders(tmp_path_factory, embedder):
    yield from _store(tmp_path_factory, embedder, "wonders", PASSAGES)


def _follow_up(bara: Bara, user: str, turns: tuple[tuple[str, str], ...] = TURNS,
               **overrides) -> tuple[list[str], tuple[str, ...]]:
    saved = bara.settings
    bara.settings = saved.override(**overrides) if overrides else saved
    try:
        assistant = Assistant(bara, model=None, mode="gated")
        reply = _Reply()
        assistant.hooks.add("before_persist", reply)
        cid = None
        for message, answer in turns:
            reply.next = answer
            result = assistant.turn(user, message, conversation_id=cid)
            cid = result.conversation_id
        trace = result.trace
        return [h.source for h in trace.hits if h.tier == "kb"], trace.reasons
    finally:
        bara.settings = saved


def test_a_follow_up_retrieves_the_new_passage_not_the_one_it_was_just_told(wonders, user):
    hits, reasons = _follow_up(wonders, user)
    assert "wall-2.txt" in hits and "wall-1.txt" not in hits, hits
    assert "topic:answers_are_passages" in reasons and "topic:with_reply" in reasons
    assert any(r.startswith("kb:said_before:") for r in reasons)


def test_without_the_follow_up_rules_the_answer_already_given_takes_a_slot(wonders, user):
    hits, reasons = _follow_up(wonders, user, gate_kb_said_spare=0, gate_followup_reply_weight=0.0,
                               gate_followup_weight_lexical=1.0)
    assert "wall-1.txt" in hits, hits
    assert "topic:with_reply" not in reasons and not any(r.startswith("kb:said_before:") for r in reasons)


def test_the_reply_is_encoded_after_the_answer_for_the_next_turn():
    from bara.errors import EmbedderError
    from bara.turn.persist import reply_preparation

    seen: list[list[str]] = []
    plan = PersistPlan("Which wonder was built as a defence?", f"{WALL} [1]\nSources: wonders.pdf")
    quoted = {ANSWER_IN_KB: True}
    tasks = reply_preparation(Settings(), plan, quoted, seen.append)
    assert len(tasks) == 1 and not seen
    tasks[0]()
    assert seen == [[WALL]]  # the text the next turn's last_reply reads, scaffolding stripped
    assert reply_preparation(Settings(), plan, {}, seen.append) == ()  # a written answer: not searched with
    assert reply_preparation(Settings(gate_followup_reply_weight=0.0), plan, quoted, seen.append) == ()
    assert reply_preparation(Settings(), replace(plan, assistant_text="Sources: a.pdf"), quoted, seen.append) == ()

    def broken(texts: list[str]) -> None:
        raise EmbedderError("model file missing")
    reply_preparation(Settings(), plan, quoted, broken)[0]()  # left for the next turn to report


def test_a_written_answer_keeps_the_plain_follow_up_search(wonders, user):
    """An answer that is not one of its turn's hits (a model wrote it) leaves the dense vector and the
    fusion as they were; only a hit that the answer is would be dropped."""
    written = "It is the Great Wall of China: it took centuries to build, and parts of it can be visited from Beijing."
    hits, reasons = _follow_up(wonders, user, ((TURNS[0][0], written), TURNS[1]))
    assert "topic:answers_are_passages" not in reasons and "topic:with_reply" not in reasons
    assert hits


def test_an_earlier_answer_that_was_a_hit_marks_the_whole_conversation():
    """A turn whose search missed the passage its answer was cannot show it; the conversation's answers still are
    passages, and its follow-up is the one that most needs the passage it was just told."""
    marked = [_message("user", "Which wonder?", {ANSWER_IN_KB: True}), _message("assistant", WALL)]
    missed = [_message("user", "How is it maintained?", {"searched": True}), _message("assistant", "Crews repair it.")]
    assert answers_are_passages([*marked, *missed])
    assert not answers_are_passages(missed)
    # small talk the gate skipped says nothing about the answers, even if something marked it
    assert not answers_are_passages([_message("user", "thanks!", {"searched": False, ANSWER_IN_KB: True}),
                                     _message("assistant", "You're welcome!")])


# --- the passage just read leads, not where the conversation started -----------------------------------

BUILT = {
    "wall-1.txt": PASSAGES["wall-1.txt"],
    "wall-built.txt": "Soldiers, peasants and convicts built the Great Wall from rammed earth, wood and stone, and "
                      "many of the workers died during its construction along the northern frontier.",
    "taj-1.txt": PASSAGES["taj.txt"] + " Its white domes stand on the bank of the Yamuna river.",
    "taj-built.txt": "About twenty thousand artisans worked on it for twenty-two years, and a thousand elephants "
                     "carried its white marble from Rajasthan to Agra for the Mughal emperor.",
    "colosseum.txt": PASSAGES["colosseum.txt"],
    "petra.txt": PASSAGES["petra.txt"],
    "machu.txt": PASSAGES["machu.txt"],
}
BUILT_TURNS = (("Which wonder of the world protects the northern borders against raids?", BUILT["wall-1.txt"]),
               ("How long is the wall, and where does it run?", BUILT["wall-1.txt"]),
               ("Which other wonder should I visit?", BUILT["taj-1.txt"]),
               ("How was it built?", ""))


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder):
    yield from _store(tmp_path_factory, embedder, "built", BUILT, k=1)


def test_a_follow_up_searches_what_the_last_passage_was_about(built, user):
    """Two questions about the wall (the first answered with its own hit: the conversation's answers are
    passages), then the Taj Mahal as the answer, then "How was it built?": the dense arm
    (the full-text arm out of the fusion, to see it alone) leans on the passage just read, not on the user
    turns' topic, which is still the wall."""
    hits, reasons = _follow_up(built, user, BUILT_TURNS, gate_followup_weight_lexical=0.0)
    assert hits[0] == "taj-built.txt", hits
    assert "topic:answers_are_passages" in reasons and "topic:with_reply" in reasons


def test_with_the_user_turns_topic_at_full_weight_the_follow_up_drifts_back(built, user):
    hits, _ = _follow_up(built, user, BUILT_TURNS, gate_followup_weight_lexical=0.0, gate_followup_topic_weight=0.8)
    assert hits[0] == "wall-built.txt", hits


# --- a follow-up that names an identifier keeps the full-text arm ---------------------------------

PERMITS = {  # the reply's vector leans to the first; only the second says the code the follow-up asks about
    "permit-a.txt": "Hiking permit QX-7741 covers the Great Wall of China: the restored northern sections, the "
                    "watchtowers and the mountain stretches the dynasties built against raids.",
    "permit-b.txt": "Permit QX-4177 is a ferry ticket for the harbour of Valletta, valid on weekdays.",
}


@pytest.mark.parametrize("text, named", [
    ("What does RFC 7231 say about it?", True), ("And error E1234?", True), ("Does it support IPv6?", True),
    ("What about QX-7741?", True), ("How is it maintained nowadays?", False), ("Is it long?", False),
])
def test_names_identifier(text, named):
    from bara.turn.steps import names_identifier
    assert names_identifier(text) is named


@pytest.fixture(scope="module")
def wonders_permit(tmp_path_factory, embedder):
    yield from _store(tmp_path_factory, embedder, "wonders_permit", {**PASSAGES, **PERMITS})


#: A first question whose own top hit, in both arms and by a wide margin (cosine 0.48 against 0.11 next), is the
#: passage given as its answer, so the conversation's answers are passages whatever the CPU. TURNS[0]'s question
#: is a near tie in this store: int8 kernels differ by CPU (AVX-512 VNNI vs AVX2), and on an AVX2-only CPU its
#: top two were permit-a and the Colosseum, not wall-1, so the premise failed.
PERMIT_FIRST = ("Which wonder of the world was meant to protect borders for centuries?", PASSAGES["wall-1.txt"])


def test_a_follow_up_naming_an_identifier_keeps_the_full_text_weight(wonders_permit, user):
    turns = (PERMIT_FIRST, ("And what about QX-4177 there?", ""))
    hits, reasons = _follow_up(wonders_permit, user, turns)
    assert "topic:answers_are_passages" in reasons and "topic:names_identifier" in reasons
    assert hits and hits[0] == "permit-b.txt", hits
    # the same turn with the identifier rule off: the reply's vector and a tie-breaking full-text arm
    off_hits, off_reasons = _follow_up(wonders_permit, user, turns, gate_followup_identifier_lexical=False)
    assert "topic:names_identifier" not in off_reasons
    assert not off_hits or off_hits[0] != "permit-b.txt", off_hits
