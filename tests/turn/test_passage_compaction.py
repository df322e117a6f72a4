"""The gated mode shows knowledge passages without markup the model does not read (bara.text.compact),
and a turn with no context gets the short system text; the always baseline's prompt is left verbatim."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import pytest

from bara import prompts as P
from bara.app import Bara
from bara.llm.base import ModelResponse
from bara.memory.knowledge import KnowledgeBase
from bara.messages import AssistantMessage, Message, SystemMessage, ToolSpec, Usage
from bara.prompts.frames import PromptInputs, Source, compact_sources, frame_texts
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.text.compact import compact_passage, drop_repeated_start
from bara.turn.gated import Assistant

IMAGE = "![Diagram of the flow](https://cloud.example.com/docs-content/v1/content/ba89e173287b28d1/flow.png)"
LINK_URL = "https://cloud.example.com/docs/account?topic=account-groups"
PASSAGE = (f"To reset your password, open the [account settings]({LINK_URL}) page.\n\n\n\n\n"
           f"   Choose Reset password and follow the emailed link.\n{IMAGE}\n\n\n")
OVERLAP = ("The reset link expires after one hour, and a new one can be requested from the same page at any "
           "time without contacting support.")


def test_markup_goes_and_every_word_of_the_prose_stays():
    out = compact_passage(PASSAGE)
    assert LINK_URL not in out and "cloud.example.com" not in out
    assert "open the account settings page." in out  # the link's visible text, in place
    assert "Diagram of the flow" in out  # an image's alt text stays
    assert "\n\n\n" not in out and " \n" not in out
    assert "\n   Choose" in out  # indentation is kept (code and YAML samples need it)
    assert out.split() == "To reset your password, open the account settings page. Choose Reset password and " \
                          "follow the emailed link. Diagram of the flow".split()


def test_plain_prose_and_brackets_that_are_not_links_are_left_alone():
    text = "Cite it as [1] (see below). Arrays use a[i] (zero-based).\n\nA second paragraph."
    assert compact_passage(text) == text


def test_an_overlapping_chunks_repeat_is_shown_once_in_either_order():
    first, second = f"Passwords are managed per account. {OVERLAP}", f"{OVERLAP} Support answers within a day."
    assert drop_repeated_start(first, second, 80) == "Support answers within a day."
    assert drop_repeated_start(second, first, 80) == "Passwords are managed per account."
    assert drop_repeated_start(first, second, 0) == second  # off
    assert drop_repeated_start(first, "Support answers within a day.", 80) == "Support answers within a day."
    assert drop_repeated_start(OVERLAP, OVERLAP, 80) == OVERLAP  # nothing of its own would be left


def test_sources_lose_a_heading_repeated_as_their_first_line_and_count_what_went():
    a = Source(1, 1, "a.md", "", "Reset", f"Reset\n{PASSAGE}", 0.9)
    b = Source(2, 2, "a.md", "", "", f"{OVERLAP} Support answers within a day.", 0.8)
    c = Source(3, 3, "a.md", "", "", f"Passwords are managed per account. {OVERLAP}", 0.7)
    out, markup, repeats = compact_sources([a, b, c], markup=True, overlap_min_chars=80)
    assert out[0].text.startswith("To reset your password") and markup == len(a.text) - len(out[0].text)
    assert out[1] == b and out[2].text == "Passwords are managed per account."
    assert repeats == len(c.text) - len(out[2].text)
    assert compact_sources([a, b, c], markup=False, overlap_min_chars=0) == ((a, b, c), 0, 0)


def test_the_short_system_text_only_without_context_and_only_when_asked():
    chat = PromptInputs(message="thanks!", lean_system=True)
    assert frame_texts(chat)["system"] == P.SYSTEM_NO_CONTEXT
    assert frame_texts(PromptInputs(message="thanks!"))["system"] == P.SYSTEM
    with_kb = PromptInputs(message="how?", lean_system=True, knowledge=(Source(1, 1, "a", "", "", "x", 1.0),))
    assert frame_texts(with_kb)["system"] == P.SYSTEM
    assert frame_texts(PromptInputs(message="what do you store?", lean_system=True, privacy_mode=True))["system"] \
        == P.SYSTEM


@dataclass
class Recording:
    """A stand-in for the provider (an external service): keeps the system text of every call."""

    systems: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "recording"

    def complete(self, messages: Sequence[Message], tools: Sequence[ToolSpec] = (), *,
                 deadline: float | None = None) -> ModelResponse:
        self.systems.append(next(m.text for m in messages if isinstance(m, SystemMessage)))
        return ModelResponse(AssistantMessage(text="Open the settings page [1]."), Usage(10, 5))


def _systems(tmp_path, embedder, mode, messages, **overrides) -> tuple[list[str], list[tuple[str, ...]]]:
    settings = Settings(db=str(tmp_path / f"{mode}.db"), cache_dir=tmp_path / "c", **overrides)
    store = SQLiteStore(settings.db)
    KnowledgeBase(store, embedder, settings).add_text("reset.md", PASSAGE)
    model = Recording()
    with Bara(settings, store=store, embedder=embedder) as bara:
        assistant = Assistant(bara, model, mode=mode, fallback_offline=False)
        reasons, cid = [], None
        for m in messages:
            result = assistant.turn("alice", m, conversation_id=cid)
            reasons.append(result.trace.reasons)
            cid = result.conversation_id
    return model.systems, reasons


@pytest.mark.parametrize("on", [True, False])
def test_a_gated_turn_shows_the_compact_passage_and_says_so(tmp_path, embedder, on):
    systems, reasons = _systems(tmp_path, embedder, "gated", ["how do I reset my password?"],
                                gate_kb_compact_markup=on)
    assert "To reset your password" in systems[0]
    assert (LINK_URL in systems[0]) is not on and ("ba89e173287b28d1" in systems[0]) is not on
    assert any(r.startswith("kb:markup_dropped:") for r in reasons[0]) is on


def test_a_gated_small_talk_turn_gets_the_short_system_text(tmp_path, embedder):
    systems, reasons = _systems(tmp_path, embedder, "gated", ["how do I reset my password?", "thanks a lot!"])
    assert systems[0].startswith(P.SYSTEM) and systems[1].startswith(P.SYSTEM_NO_CONTEXT)
    assert not systems[1].startswith(P.SYSTEM) and "prompt:system_without_context" in reasons[1]
    off, _ = _systems(tmp_path / "off", embedder, "gated", ["how do I reset my password?", "thanks a lot!"],
                      gate_lean_system_without_context=False)
    assert off[1].startswith(P.SYSTEM)


def test_the_always_baseline_shows_passages_verbatim(tmp_path, embedder):
    systems, reasons = _systems(tmp_path, embedder, "always", ["how do I reset my password?", "thanks a lot!"])
    assert all(LINK_URL in s and "ba89e173287b28d1" in s and s.startswith(P.SYSTEM) for s in systems)
    assert not any(r.startswith(("kb:markup_dropped", "kb:overlap_dropped", "prompt:system_without"))
                   for rs in reasons for r in rs)
