"""Generators the pipeline calls with an assembled prompt: a chat Model, or the offline one.

The offline generator answers without any model, from what the tiers put in the prompt. It
extracts nothing itself: the profile facts and notes the user's message states arrive in the
inputs record (``PromptInputs.learned`` / ``noted``), extracted once per turn by the pipeline.

Knowledge answers are extractive: the sentences of the retrieved passages that
share the most query terms, each followed by its passage number ([1], [2]...)
and a sources list (file name, section, heading). When a knowledge route found
nothing above its floor the answer says so plainly. Chit-chat, profile, notes
and privacy turns get short templated replies (text in :mod:`bara.prompts`).
Deterministic: the same prompt always gives the same answer.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Protocol, Sequence

from bara import prompts as P
from bara.llm.base import Model
from bara.prompts.frames import NoteItem, Prompt, PromptInputs, Source
from bara.text.lexical import analyze

#: Sentences per answer length: two for a quick fact, a paragraph, or a fuller survey.
SENTENCES = {"short": 2, "normal": 4, "long": 7}
_MIN_SENTENCE, _MAX_SENTENCE = 30, 400  # shorter is debris (headers), longer is a table or run-on
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_DEBRIS_LINE = re.compile(r"(\[Page \d+\]\s*$|^RFC \d+\b.*\b(19|20)\d\d\s*$|\.{4,})")
_PARAGRAPH = re.compile(r"\n\s*\n")
_ENDS_SENTENCE = re.compile(r"[.!?:]['\")\]]?$")
_VOWEL_START = re.compile(r"^[aeiou]", re.IGNORECASE)
_CARRIED_WEIGHT = 0.5


@dataclass(frozen=True)
class _Candidate:
    text: str
    source: int  # Source.n
    position: int
    score: float


class Generator(Protocol):
    name: str

    def generate(self, prompt: Prompt) -> str: ...


class ModelGenerator:
    """Shows a chat Model the prompt's typed messages; provider errors propagate (``LLMError``).

    ``deadline_s`` (``Settings.gated_deadline_s``) is the wall-clock budget of one
    generation, passed to the model as a deadline; None leaves only the model's
    own per-call budget (``llm_deadline_s``).
    """

    def __init__(self, model: Model, deadline_s: float | None = None):
        self.model, self.name, self.deadline_s = model, f"model:{model.name}", deadline_s

    def generate(self, prompt: Prompt) -> str:
        deadline = None if self.deadline_s is None else time.monotonic() + self.deadline_s
        return self.model.complete(prompt.messages(), deadline=deadline).message.text


#: The reason code a turn records when its model failed and the offline generator answered instead.
FALLBACK_REASON = "generate:model_failed_offline_used:"


def answered_by(generator: str, offline: str, reasons: Sequence[str]) -> str:
    """The trace's ``generator``: the one that wrote the answer. After a model failure that is the offline
    generator, named with the model that failed and why (``offline-extractive (model:x failed: LLMTimeout)``)."""
    failed = next((r.removeprefix(FALLBACK_REASON) for r in reasons if r.startswith(FALLBACK_REASON)), None)
    return generator if failed is None else f"{offline} ({generator} failed: {failed})"


class OfflineGenerator:
    """Needs no model; ``generate`` reads the structured inputs behind the frames."""

    name = "offline-extractive"

    def generate(self, prompt: Prompt) -> str:
        return answer(prompt.inputs)


def answer(i: PromptInputs) -> str:
    """Route the turn to the reply that fits it (first match wins)."""
    if i.privacy_mode:
        return privacy_answer(i)
    if i.intent == "chitchat" or i.behavior_mode in ("greeting", "testing_aware", "meta_aware"):
        return P.chitchat_text(_chitchat_kind(i), i.greeting_name)
    learned = list(i.learned)  # extracted by the pipeline: this generator extracts nothing
    if i.route in ("profile_update", "profile") and (learned or i.route == "profile_update"):
        return profile_update_answer(learned)
    if i.route == "profile":
        return profile_answer(i.profile)
    if i.notes_requested and i.notes:
        return notes_answer(i.notes)
    return _with_noted(i.noted, _prefixed(i, knowledge_or_memory_answer(i)))


def _with_noted(noted: Sequence[NoteItem], text: str) -> str:
    """Acknowledge a decision or open question the user just stated, before the rest of the answer."""
    if not noted:
        return text
    lines = [P.NOTED_LINE.format(verb=P.NOTES_VERBS.get(n.kind, n.kind), text=n.text) for n in noted]
    return "\n".join([P.NOTED_HEADER, *lines, "", text])


def _chitchat_kind(i: PromptInputs) -> str:
    if i.chitchat:
        return i.chitchat
    return {"testing_aware": "low_entropy", "meta_aware": "meta"}.get(i.behavior_mode, "greeting")


def _prefixed(i: PromptInputs, text: str) -> str:
    prefix = P.TONE_PREFIX.get(i.tone)
    return f"{prefix}\n{text}" if prefix and i.knowledge else text


def knowledge_or_memory_answer(i: PromptInputs) -> str:
    if i.attribution is not None and i.episodes:  # the memory records this of someone else
        a = i.attribution
        return P.ATTRIBUTION_ANSWER.format(person=a.person, other=a.other, text=a.text)
    if i.knowledge:
        return extractive_answer(i.retrieval_query or i.message, i.knowledge, SENTENCES.get(i.answer_length, 4),
                                 focus=i.message)
    if i.qa:
        best = i.qa[0]
        return P.QA_ECHO.format(question=best.question, answer=best.answer)
    if i.notes_requested:
        return P.NOTES_EMPTY
    return P.NOT_FOUND if i.kb_opened else P.NOTHING_RELEVANT


# --- extractive knowledge answers ------------------------------------------------

def split_sentences(text: str) -> list[str]:
    """Sentences of plausible length, per paragraph; page headers/footers, headings and ToC lines dropped."""
    kept = "\n".join(line for line in text.splitlines() if not _DEBRIS_LINE.search(line))
    out = []
    for paragraph in _PARAGRAPH.split(kept):
        for sentence in _SPLIT.split(" ".join(paragraph.split())):
            s = sentence.strip()
            if _MIN_SENTENCE <= len(s) <= _MAX_SENTENCE and _ENDS_SENTENCE.search(s):
                out.append(s)
    return out


def _score(sentence: str, weights: dict[str, float], rank: int) -> float:
    """Weighted distinct query terms matched, damped by sentence length; earlier passages win ties."""
    terms = set(analyze(sentence))
    overlap = sum(w for t, w in weights.items() if t in terms)
    return overlap / math.sqrt(1 + len(terms) / 10) + 0.01 / rank


def term_weights(query: str, focus: str = "") -> dict[str, float]:
    """The user's own words count fully; words a rewrite carried in from context count half."""
    own = set(analyze(focus or query))
    return {t: (1.0 if t in own else _CARRIED_WEIGHT) for t in analyze(query) + list(own)}


def candidates(query: str, sources: Sequence[Source], focus: str = "") -> list[_Candidate]:
    weights = term_weights(query, focus)
    return [_Candidate(s, src.n, pos, _score(s, weights, src.n))
            for src in sources for pos, s in enumerate(split_sentences(src.text))]


def pick(cands: list[_Candidate], n: int) -> list[_Candidate]:
    """The ``n`` best distinct sentences, shown in passage order so the answer reads in sequence."""
    best: list[_Candidate] = []
    seen: set[str] = set()
    for c in sorted(cands, key=lambda c: (-c.score, c.source, c.position)):
        if c.text.lower() not in seen:
            best.append(c)
            seen.add(c.text.lower())
        if len(best) == n:
            break
    return sorted(best, key=lambda c: (c.source, c.position))


def extractive_answer(query: str, sources: Sequence[Source], n_sentences: int, focus: str = "") -> str:
    """Top sentences with [n] citations, then the list of the sources cited."""
    chosen = pick(candidates(query, sources, focus), n_sentences)
    if not chosen:
        chosen = [_Candidate(" ".join(src.text.split())[:_MAX_SENTENCE], src.n, 0, 0.0) for src in sources[:1]]
    body = " ".join(f"{c.text} [{c.source}]" for c in chosen)
    cited = sorted({c.source for c in chosen})
    by_n = {s.n: s for s in sources}
    lines = [P.SOURCE_LINE.format(n=n, label=by_n[n].label) for n in cited]
    return "\n".join([body, P.SOURCES_HEADER, *lines])


# --- profile, notes, privacy ------------------------------------------------------

def describe_fact(key: str, value: str) -> str:
    template = P.PROFILE_FACT.get(key, P.PROFILE_FACT_DEFAULT)
    article = "" if _has_article(value) else ("an " if _VOWEL_START.match(value) else "a ")
    return template.format(key=key.replace("_", " "), value=value, article=article)


def _has_article(value: str) -> bool:
    return value.lower().startswith(("a ", "an ", "the ")) or value[:1].isupper()


def join_facts(facts: Sequence[tuple[str, str]]) -> str:
    parts = [describe_fact(k, v) for k, v in facts]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def profile_answer(profile: Sequence[tuple[str, str]]) -> str:
    return P.PROFILE_ECHO.format(facts=join_facts(profile)) if profile else P.PROFILE_EMPTY


def profile_update_answer(learned: Sequence[tuple[str, str]]) -> str:
    if not learned:
        return P.PROFILE_NOTHING_LEARNED
    return P.PROFILE_LEARNED.format(facts=_capitalised(join_facts(learned)))


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def notes_answer(notes: Sequence[NoteItem]) -> str:
    lines = [P.NOTES_LINE_OUT.format(verb=P.NOTES_RECAP_VERBS.get(n.kind, f"{n.kind}:"), text=n.text)
             for n in notes]
    return "\n".join([P.NOTES_ECHO, *lines])


def privacy_answer(i: PromptInputs) -> str:
    lines = [P.PRIVACY_FORGOTTEN.format(what=i.forgotten)] if i.forgotten else []
    memory = i.memory
    if memory is not None:
        facts = ", ".join(f"{k} = {v}" for k, v in memory.profile)
        lines.append(P.PRIVACY_HEADER)
        lines.append(P.PRIVACY_PROFILE.format(facts=facts) if facts else P.PRIVACY_NO_PROFILE)
        lines.append(P.PRIVACY_COUNTS.format(notes=P.counted(memory.notes, "notes"), qa=P.counted(memory.qa, "qa"),
                                            conversations=P.counted(memory.conversations, "conversations")))
    lines.append(P.PRIVACY_DELETE.format(user=i.user_id))
    return "\n".join(lines)
