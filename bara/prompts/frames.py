"""Prompt frames: what one turn shows the generator, in a fixed order, under a token budget.

Order (never changes): system, behaviour, profile, notes, knowledge, Q&A,
history, user message. When the frames exceed ``settings.context_budget_tokens``
the assembler gives way in this order: older history turns are summarised into
one line, then Q&A items, notes, knowledge passages (lowest ranked first) and
profile facts are dropped, and last the user message itself is cut. Every cut
adds a ``budget:*`` reason code.

Token counts are an estimate, not a tokenizer: ``ceil(chars / chars_per_token)``
with 4 characters per token, the usual figure for English BPE vocabularies. It
over-counts slightly for plain prose, which errs on the side of fitting, and
costs nothing per turn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from bara import prompts as P
from bara.messages import AssistantMessage, Message, SystemMessage, UserMessage
from bara.text.compact import compact_passage, drop_repeated_start
from bara.text.locator import locator
from bara.types import Utterance, source_name

CHARS_PER_TOKEN = 4.0
_SUMMARY_WORDS = 8  # words kept per summarised user turn
_CONTEXT_KINDS = ("profile", "notes", "episodes", "knowledge", "qa", "history")
_LENGTH_FROM_PROFILE = {"short": "short", "detailed": "long"}  # profile answer_length -> behaviour length


def estimate_tokens(text: str, chars_per_token: float = CHARS_PER_TOKEN) -> int:
    """Cheap token estimate (see module docstring); 0 for empty text."""
    return math.ceil(len(text) / chars_per_token) if text else 0


@dataclass(frozen=True)
class Source:
    """One knowledge-base passage as the prompt and the citations number it."""

    n: int
    id: int
    source: str
    section: str
    title: str
    text: str
    score: float

    @property
    def label(self) -> str:
        """``rfc5246.txt §7.4.1 Hello Messages``: file name, section, heading."""
        where = locator(self.section, self.title)  # the heading once (bara.text.locator)
        return f"{source_name(self.source)} {where}" if where else source_name(self.source)


@dataclass(frozen=True)
class NoteItem:
    kind: str  # decision | conclusion | hypothesis | open_question | concept
    text: str
    score: float = 0.0


@dataclass(frozen=True)
class EpisodeItem:
    """One remembered turn: "[8 May 2023] Caroline: ..." (the episodic tier's stored text)."""

    text: str
    score: float = 0.0


@dataclass(frozen=True)
class AttributionNote:
    """Issue 38: the question is about ``person``, but the best remembered turns tell ``other``'s event;
    ``text`` is that turn as stored ("[8 May 2023] Gina: I designed ...")."""

    person: str
    other: str
    text: str


@dataclass(frozen=True)
class QAItem:
    question: str
    answer: str
    score: float = 0.0


@dataclass(frozen=True)
class MemorySummary:
    """What is stored about a user (privacy answers)."""

    profile: tuple[tuple[str, str], ...] = ()
    notes: int = 0
    qa: int = 0
    conversations: int = 0


@dataclass(frozen=True)
class PromptInputs:
    """Everything the gate and the tiers produced for one turn, before wording."""

    message: str
    user_id: str = "local"
    intent: str = "general"
    chitchat: str | None = None
    route: str = "llm_only"
    behavior_mode: str = "standard"
    answer_length: str = "normal"
    tone: str = "neutral"
    kb_opened: bool = False
    notes_requested: bool = False
    privacy_mode: bool = False
    greeting_name: str | None = None
    profile: tuple[tuple[str, str], ...] = ()
    notes: tuple[NoteItem, ...] = ()
    knowledge: tuple[Source, ...] = ()
    qa: tuple[QAItem, ...] = ()
    history: tuple[Utterance, ...] = ()
    summarised: tuple[Utterance, ...] = ()  # older turns the budget folded into one summary line
    memory: MemorySummary | None = None
    forgotten: str = ""  # what a privacy request just deleted
    retrieval_query: str = ""
    episodes: tuple[EpisodeItem, ...] = ()
    # What the user's message states, extracted once per turn by the pipeline (the same facts are
    # stored): profile facts as (key, value), and decisions / open questions as notes.
    learned: tuple[tuple[str, str], ...] = ()
    noted: tuple[NoteItem, ...] = ()
    attribution: AttributionNote | None = None  # the episodes tell another person's event
    lean_system: bool = False  # with no context shown, the short system text (P.SYSTEM_NO_CONTEXT)

    @property
    def history_summary(self) -> str:
        return summarise_turns(self.summarised)

    @property
    def lean(self) -> bool:
        """Whether the short system text is the one shown: asked for, and no context to speak of."""
        return self.lean_system and not has_context(self)


@dataclass(frozen=True)
class Frame:
    kind: str
    text: str
    tokens: int


@dataclass(frozen=True)
class Prompt:
    """The assembled frames plus the (possibly trimmed) inputs they were built from."""

    inputs: PromptInputs
    frames: tuple[Frame, ...]
    reasons: tuple[str, ...] = ()

    @property
    def tokens(self) -> int:
        return sum(f.tokens for f in self.frames)

    @property
    def context_tokens(self) -> int:
        """Tokens the memory tiers and history added (system, behaviour and user frames excluded)."""
        return sum(f.tokens for f in self.frames if f.kind in _CONTEXT_KINDS)

    def messages(self) -> tuple[Message, ...]:
        """Typed chat messages: one system message, the history turns, then the user message."""
        head = "\n\n".join(f.text for f in self.frames if f.kind not in ("history", "user"))
        out: list[Message] = [SystemMessage(head)]
        if self.inputs.history_summary:
            out[0] = SystemMessage(f"{head}\n\n{self.inputs.history_summary}")
        for u in self.inputs.history:
            out.append(AssistantMessage(text=u.text) if u.role == "assistant" else UserMessage(u.text))
        out.append(UserMessage(self.inputs.message))
        return tuple(out)


# --- frame texts ----------------------------------------------------------------

def _behavior_text(i: PromptInputs) -> str:
    lines = [P.BEHAVIOR.format(length=P.LENGTH_WORDS.get(i.answer_length, i.answer_length),
                               tone=i.tone, mode=i.behavior_mode)]
    if i.greeting_name:
        lines.append(P.BEHAVIOR_GREETING_NAME.format(name=i.greeting_name))
    if i.privacy_mode:
        lines.append(P.BEHAVIOR_PRIVACY)
    return "\n".join(lines)


def _list_text(header: str, lines: list[str]) -> str:
    return "\n".join([header, *lines]) if lines else ""


def _history_text(i: PromptInputs) -> str:
    turns = [f"{u.role}: {u.text}" for u in i.history]
    return "\n".join(([i.history_summary] if i.history_summary else []) + turns)


def _attribution_lines(i: PromptInputs) -> list[str]:
    """The line under the episodes that says whose event the memory records (only with episodes shown)."""
    a = i.attribution
    if a is None or not i.episodes:
        return []
    return [P.EPISODES_ATTRIBUTION.format(person=a.person, other=a.other, text=a.text)]


def has_context(i: PromptInputs) -> bool:
    """Whether ``i`` shows anything the full system text speaks of (passages, memory, a privacy listing)."""
    return bool(i.knowledge or i.profile or i.notes or i.episodes or i.qa or i.memory or i.privacy_mode
                or i.forgotten or i.attribution)


def frame_texts(i: PromptInputs) -> dict[str, str]:
    """The text of every frame kind for ``i`` (empty string = frame omitted)."""
    return {
        "system": P.SYSTEM_NO_CONTEXT if i.lean else P.SYSTEM,
        "behavior": _behavior_text(i),
        "profile": _list_text(P.PROFILE_HEADER, [P.PROFILE_LINE.format(key=k, value=v) for k, v in i.profile]),
        "notes": _list_text(P.NOTES_HEADER, [P.NOTES_LINE.format(kind=n.kind, text=n.text) for n in i.notes]),
        "episodes": _list_text(P.EPISODES_HEADER, [P.EPISODES_LINE.format(text=e.text) for e in i.episodes]
                               + _attribution_lines(i)),
        "knowledge": _list_text(P.KNOWLEDGE_HEADER, [P.KNOWLEDGE_ITEM.format(n=s.n, label=s.label, text=s.text)
                                                     for s in i.knowledge]),
        "qa": _list_text(P.QA_HEADER, [P.QA_ITEM.format(question=q.question, answer=q.answer) for q in i.qa]),
        "history": _history_text(i),
        "user": i.message,
    }


def build_frames(i: PromptInputs, chars_per_token: float = CHARS_PER_TOKEN) -> tuple[Frame, ...]:
    texts = frame_texts(i)
    return tuple(Frame(kind, texts[kind], estimate_tokens(texts[kind], chars_per_token))
                 for kind in P.FRAME_ORDER if texts[kind])


# --- budget -----------------------------------------------------------------------

def summarise_turns(turns: tuple[Utterance, ...]) -> str:
    """One deterministic line naming what the dropped user turns asked about."""
    topics = ["\u201c" + " ".join(u.text.split()[:_SUMMARY_WORDS]) + "\u201d" for u in turns if u.role == "user"]
    return P.HISTORY_SUMMARY.format(topics="; ".join(topics)) if topics else ""


def _drop_oldest_turn(i: PromptInputs) -> PromptInputs:
    """Fold the oldest history message into the summary line."""
    return replace(i, history=i.history[1:], summarised=i.summarised + i.history[:1])


def _step(i: PromptInputs) -> tuple[PromptInputs, str] | None:
    """One trimming step in give-way order, or None when nothing is left to trim."""
    if i.history:
        return _drop_oldest_turn(i), "budget:history_summarised"
    if i.summarised:
        return replace(i, summarised=()), "budget:history_dropped"
    for field, code in (("qa", "qa"), ("episodes", "episodes"), ("notes", "notes"), ("knowledge", "kb"), ("profile", "profile")):
        items = getattr(i, field)
        if items:
            return replace(i, **{field: items[:-1]}), f"budget:{code}_dropped"
    return None


def _cut_message(i: PromptInputs, over_tokens: int, chars_per_token: float) -> PromptInputs:
    keep = max(0, len(i.message) - math.ceil(over_tokens * chars_per_token))
    return replace(i, message=i.message[:keep])


def assemble(inputs: PromptInputs, budget_tokens: int,
             chars_per_token: float = CHARS_PER_TOKEN) -> Prompt:
    """Frames for ``inputs`` within ``budget_tokens``; see the module docstring for the give-way order."""
    current, reasons = inputs, []
    frames = build_frames(current, chars_per_token)
    while sum(f.tokens for f in frames) > budget_tokens:
        step = _step(current)
        if step is None:
            over = sum(f.tokens for f in frames) - budget_tokens
            current = _cut_message(current, over, chars_per_token)
            reasons.append("budget:user_message_cut")
            frames = build_frames(current, chars_per_token)
            break
        current, code = step
        reasons.append(code)
        frames = build_frames(current, chars_per_token)
    return Prompt(current, frames, tuple(dict.fromkeys(reasons)))


def preferred_length(length: str, mode: str, profile: Mapping[str, str]) -> tuple[str, str]:
    """(answer length, reason code): a stated preference ("keep it short") shapes ordinary answers;
    social and other special modes keep their own length."""
    wanted = _LENGTH_FROM_PROFILE.get(profile.get("answer_length", ""))
    if wanted is None or mode != "standard" or wanted == length:
        return length, ""
    return wanted, f"profile:answer_length_{wanted}"


def profile_items(profile: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Profile facts as sorted (key, value) pairs: a stable frame text turn after turn."""
    return tuple(sorted((str(k), str(v)) for k, v in profile.items()))


# --- from tier results ------------------------------------------------------------

def kb_sources(outcome: Any) -> tuple[Source, ...]:
    """Numbered passages from a :class:`~bara.types.RetrievalOutcome` (None = tier closed)."""
    if outcome is None:
        return ()
    return tuple(Source(n, h.id, h.chunk.source, h.chunk.section, h.chunk.title, h.chunk.text,
                        float(h.similarity)) for n, h in enumerate(outcome.hits, 1))


def compact_sources(sources: Sequence[Source], *, markup: bool,
                    overlap_min_chars: int) -> tuple[tuple[Source, ...], int, int]:
    """``sources`` as a prompt needs them (``bara.text.compact``): with ``markup`` each passage without image
    embeds, link targets and blank-line runs, and without an opening line that repeats its heading; then
    each passage without the edge it shares with a passage shown before it (``overlap_min_chars``, 0 = off).
    Returns the passages, the characters the markup took, the characters the repeats took."""
    out: list[Source] = []
    markup_chars = repeat_chars = 0
    for s in sources:
        text = s.text
        if markup:
            text = compact_passage(text)
            first, _, rest = text.partition("\n")
            if rest and s.title.strip() and first.strip() == s.title.strip():
                text = rest.lstrip()
            markup_chars += len(s.text) - len(text)
        for shown in out:
            kept = drop_repeated_start(shown.text, text, overlap_min_chars)
            repeat_chars += len(text) - len(kept)
            text = kept
        out.append(replace(s, text=text) if text != s.text else s)
    return tuple(out), markup_chars, repeat_chars


def note_items(hits: Sequence[Any]) -> tuple[NoteItem, ...]:
    """From :class:`bara.memory.notes.NoteHit` results."""
    return tuple(NoteItem(h.note.kind, h.note.text, float(h.score)) for h in hits)


def episode_items(hits: Sequence[Any]) -> tuple[EpisodeItem, ...]:
    """From :class:`bara.memory.episodic.EpisodeHit` results."""
    return tuple(EpisodeItem(h.text, float(h.score)) for h in hits)


def qa_items(hits: Sequence[Any]) -> tuple[QAItem, ...]:
    """From :class:`bara.memory.qa.QAHit` results."""
    return tuple(QAItem(h.question, h.answer, float(h.score)) for h in hits)


def attribution_note(found: Any) -> AttributionNote | None:
    """From :class:`bara.memory.episodic_attribution.Attribution` (None, or not fired: no note)."""
    if found is None or not found.fired:
        return None
    return AttributionNote(found.person, found.other, found.text)
