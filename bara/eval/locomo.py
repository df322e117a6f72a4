"""`bara eval memory --locomo`: does memory put the evidence in front of the model, and at what cost?

Replay (the same for every mode): each LoCoMo conversation is one bara user
(``speaker_a``); its sessions, in date order, are that user's conversations.
``speaker_a``'s turns are stored as the user's messages and ``speaker_b``'s as the
assistant's, and every turn (both speakers, with its session date) is written to
the episodic tier directly, one batch per session (one embedding call; the
cache makes reruns cheap). The chat pipeline is not run per replayed turn.

Then every question is asked as the user's next message, opening a new
conversation (the user comes back later and asks), and the modes differ only in
what they put into the prompt:

- ``turns``: hybrid search (BM25 + MiniLM, RRF) over every past turn, k items,
  the default search floor: the plain RAG baseline.
- ``gated``: bara's real gated pipeline (``GatedAssistant.turn``): the gate decides
  which tiers to open; the items that reached the prompt are read from the
  assembled prompt, in frame order (episodes best first, each with the turn
  that follows it), at most k. The question's own turn is not stored
  (a ``before_persist`` veto), so questions never see each other.
- ``full``: the whole history in the prompt (tokens only; recall is not scored).

Metrics per mode: evidence recall@5/@10 (category 5 excluded), context tokens
(the estimate of :func:`bara.prompts.frames.estimate_tokens`), latency p50/p95,
and the abstention figures of :mod:`bara.eval.locomo_abstain`: ``abstain_adversarial`` (the
share of category-5 questions flagged: no memory item reached the prompt, or in ``gated`` mode the
episodic tier's attribution check found the event another person's), ``false_abstain_answerable``,
``abstain_precision`` and ``abstain_adversarial_split``.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from bara.app import Bara
from bara.errors import InputError
from bara.eval.locomo_abstain import abstention, adversarial_kind
from bara.eval.locomo_data import (ADVERSARIAL, CATEGORIES, LocomoConversation, LocomoQuestion,
                                   evidence_recall, load_locomo_all)
from bara.memory.episodic_attribution import FIRED as ATTRIBUTED
from bara.memory.episodic import Turn, context_vectors, episode_text
from bara.prompts.frames import estimate_tokens
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.types import Chunk, Document, text_hash

MODES = ("turns", "gated", "full")
BASELINE = "locomo_turns"  # collection of the plain baseline index (eval stores only)
Progress = Callable[[str], None]


@dataclass
class QuestionRow:
    """One question in one mode: what reached the prompt and what it cost."""

    conversation: str
    question: str
    category: int
    evidence: tuple[str, ...]
    returned: list[str]  # dia ids per prompt item ("D1:3", or "D1:3|D1:4" for a multi-turn item)
    context_tokens: int
    latency_ms: float
    abstained: bool
    texts: list[str] = field(default_factory=list)  # the item texts (for the judge)
    reasons: tuple[str, ...] = ()
    adversarial_kind: str = ""  # category 5: speaker_swapped | same_speaker | "" (bara.eval.locomo_abstain)


@dataclass(frozen=True)
class Replayed:
    """One conversation replayed into a store: ids to ask in and how to map text back to turns."""

    conv: LocomoConversation
    user_id: str
    last_conversation_id: str
    by_text: dict[str, list[str]]  # raw turn text -> dia ids
    by_episode: dict[str, str]  # stored episode text -> dia id
    full_text: str


def parse_modes(text: str) -> tuple[str, ...]:
    modes = tuple(m.strip() for m in text.split(",") if m.strip())
    bad = [m for m in modes if m not in MODES]
    if not modes or bad:
        raise InputError(f"unknown mode(s) {', '.join(bad) or '(none)'}: pass --modes as a comma-separated "
                         f"subset of {','.join(MODES)}")
    return modes


def role_of(conv: LocomoConversation, speaker: str) -> str:
    """The documented mapping: ``speaker_a`` is bara's user, ``speaker_b`` the assistant."""
    return "user" if speaker == conv.speaker_a else "assistant"


def replay(bara: Bara, conv: LocomoConversation, user_id: str) -> Replayed:
    """Store every session as a conversation of ``user_id`` and as episodes (see module docstring)."""
    conversations, episodic = bara.conversations, bara.episodic
    by_text: dict[str, list[str]] = {}
    by_episode: dict[str, str] = {}
    full: list[str] = []
    cid = ""
    for session in conv.sessions:
        cid = conversations.create(user_id, f"{conv.sample_id}-s{session.n}")
        with bara.store.transaction():
            for t in session.turns:
                conversations.append(user_id, cid, role_of(conv, t.speaker), t.text, {"dia_id": t.dia_id})
        turns = [Turn(t.speaker, t.text, t.dia_id) for t in session.turns if t.text.strip()]
        texts = [episode_text(t.speaker, t.text, session.when) for t in turns]
        raw = bara.embedder.embed(texts) if texts else np.zeros((0, bara.embedder.dim), dtype=np.float32)
        episodic.add_session(user_id, cid, f"s{session.n}", turns, session.when,
                             context_vectors(raw, bara.settings.memory_episodic_context_weight))
        _baseline_session(bara, user_id, f"{cid}:s{session.n}", session, turns, raw)
        for t in session.turns:
            by_text.setdefault(_norm(t.text), []).append(t.dia_id)
            stored = episode_text(t.speaker, t.text, session.when)
            by_episode[stored] = t.dia_id
            full.append(stored)
    return Replayed(conv, user_id, cid, by_text, by_episode, "\n".join(full))


def _baseline_session(bara: Bara, user_id: str, source: str, session: Any, turns: list[Turn],
                      vectors: np.ndarray) -> None:
    """The ``turns`` baseline's own index, as the issue's reference figures were measured: each turn
    "[session date] Speaker: text" with its own embedding (no resolved dates, no neighbour context)."""
    if not turns:
        return
    stamp = f"[{session.date_text}] " if session.date_text else ""
    chunks = tuple(Chunk(text=f"{stamp}{t.speaker}: {t.text}", source=source, ordinal=i, start=i, end=i + 1,
                         section=t.turn_id, title="") for i, t in enumerate(turns))
    doc = Document(source=source, content_hash=text_hash("\n".join(c.text for c in chunks)), chunks=chunks,
                   collection=BASELINE, owner=user_id)
    bara.store.write_document(doc, vectors)


def _norm(text: str) -> str:
    return " ".join(text.split())


# ------------------------------------------------------------------------ modes
def ask_turns(bara: Bara, r: Replayed, q: LocomoQuestion, k: int) -> QuestionRow:
    """The plain RAG baseline: hybrid search over every past turn, each embedded alone."""
    t0 = time.perf_counter()
    outcome = bara.retriever.search(q.question, k=k, floor=bara.settings.search_floor, owners=(r.user_id,),
                                    collections=(BASELINE,), rerank=False)
    ms = (time.perf_counter() - t0) * 1e3
    texts = [h.chunk.text for h in outcome.hits]
    return _row(r, q, [h.chunk.section for h in outcome.hits], texts, ms, abstained=not outcome.hits)


def ask_full(r: Replayed, q: LocomoQuestion) -> QuestionRow:
    t0 = time.perf_counter()
    tokens = estimate_tokens(r.full_text)
    return QuestionRow(r.conv.sample_id, q.question, q.category, q.evidence, [], tokens,
                       (time.perf_counter() - t0) * 1e3, abstained=False, adversarial_kind=adversarial_kind(r.conv, q))


def ask_gated(assistant: Any, r: Replayed, q: LocomoQuestion, k: int) -> QuestionRow:
    """One real gated turn; the prompt it assembled is captured by a ``before_generation`` hook."""
    captured: list[Any] = []

    def capture(prompt: Any, ctx: Any) -> Any:
        captured.append(prompt)
        return prompt

    def veto(plan: Any, ctx: Any) -> Any:
        return plan.veto("locomo: questions are not remembered")

    assistant.hooks.add("before_generation", capture)
    assistant.hooks.add("before_persist", veto)
    try:
        result = assistant.turn(r.user_id, q.question, None)  # a new conversation of the same user
    finally:
        assistant.hooks.remove("before_generation", capture)
        assistant.hooks.remove("before_persist", veto)
    ids, texts, memory_items = prompt_items(captured[-1].inputs if captured else None, r)
    row = _row(r, q, ids[:k], texts[:k], float(result.trace.latency_ms.get("total", 0.0)),
               abstained=memory_items == 0 or ATTRIBUTED in result.trace.reasons)
    row.context_tokens = int(result.trace.context_tokens)
    row.reasons = tuple(result.trace.reasons)
    return row


def prompt_items(inputs: Any, r: Replayed) -> tuple[list[str], list[str], int]:
    """(dia ids, texts) of every prompt item in frame order, and how many came from memory tiers.

    Episodes keep their rank; history follows, newest first; knowledge, notes and Q&A items
    (none hold LoCoMo turns) count as items that name no turn.
    """
    if inputs is None:
        return [], [], 0
    ids: list[str] = []
    texts: list[str] = []
    memory = 0
    for text in [e.text for e in getattr(inputs, "episodes", ())]:
        ids.append("|".join(r.by_episode.get(line, "") for line in text.split("\n")))
        texts.append(text)
        memory += 1
    for item in [*(s.text for s in inputs.knowledge), *(n.text for n in inputs.notes),
                 *(f"{a.question} {a.answer}" for a in inputs.qa)]:
        ids.append("")
        texts.append(item)
        memory += 1
    for u in reversed(inputs.history):
        ids.append("|".join(r.by_text.get(_norm(u.text), [])))
        texts.append(u.text)
    return ids, texts, memory


def _row(r: Replayed, q: LocomoQuestion, ids: list[str], texts: list[str], ms: float,
         abstained: bool) -> QuestionRow:
    return QuestionRow(r.conv.sample_id, q.question, q.category, q.evidence, ids,
                       sum(estimate_tokens(t) for t in texts), ms, abstained, texts,
                       adversarial_kind=adversarial_kind(r.conv, q))


# ------------------------------------------------------------------------ run
@dataclass(frozen=True)
class MemoryEvalConfig:
    files: tuple[Path, ...]
    modes: tuple[str, ...] = MODES
    k: int = 10
    limit: int | None = None  # questions per conversation (a quick slice)
    sessions: int | None = None  # replay only the first N sessions (a quick slice)
    conversations: tuple[str, ...] = ()  # only these sample ids (e.g. a tuning split); () = all


def run_memory_eval(config: MemoryEvalConfig, settings: Settings, embedder: Embedder,
                    progress: Progress | None = None) -> tuple[dict[str, list[QuestionRow]], int]:
    """Every mode over every file; returns the per-question rows per mode and the question count."""
    rows: dict[str, list[QuestionRow]] = {m: [] for m in config.modes}
    n_questions = 0
    for conv in (_slice(c, config) for c in selected(config)):
        with tempfile.TemporaryDirectory(prefix="bara-locomo-") as tmp:
            store = SQLiteStore(Path(tmp) / "memory.db")
            bara = Bara(settings.override(k=min(config.k, 100)), store=store, embedder=embedder)
            try:
                _say(progress, f"replaying {conv.sample_id} ({len(conv.turns)} turns)")
                r = replay(bara, conv, f"locomo-{conv.sample_id}")
                assistant = _assistant(bara) if "gated" in config.modes else None
                for q in conv.questions:
                    n_questions += 1
                    for mode in config.modes:
                        rows[mode].append(_ask(mode, bara, assistant, r, q, config.k))
                _say(progress, f"asked {len(conv.questions)} questions of {conv.sample_id}")
            finally:
                bara.close()
    return rows, n_questions


def selected(config: MemoryEvalConfig) -> list[LocomoConversation]:
    """The files' conversations, only those ``config.conversations`` names when it names any; a name
    that matches none is an InputError listing the ones there are."""
    convs = [c for path in config.files for c in load_locomo_all(path)]
    if not config.conversations:
        return convs
    known = [c.sample_id for c in convs]
    unknown = [name for name in config.conversations if name not in known]
    if unknown:
        raise InputError(f"--conversations names {', '.join(unknown)}, not in the files given: pass sample ids "
                         f"among {', '.join(known)}")
    return [c for c in convs if c.sample_id in config.conversations]


def _assistant(bara: Bara) -> Any:
    from bara.turn.gated import GatedAssistant

    return GatedAssistant(bara)


def _ask(mode: str, bara: Bara, assistant: Any, r: Replayed, q: LocomoQuestion, k: int) -> QuestionRow:
    if mode == "turns":
        return ask_turns(bara, r, q, k)
    if mode == "full":
        return ask_full(r, q)
    return ask_gated(assistant, r, q, k)


def _slice(conv: LocomoConversation, config: MemoryEvalConfig) -> LocomoConversation:
    from dataclasses import replace

    if config.sessions:
        conv = replace(conv, sessions=conv.sessions[:config.sessions])
        kept = {t.dia_id for t in conv.turns}
        conv = replace(conv, questions=tuple(q for q in conv.questions if q.evidence and set(q.evidence) <= kept))
    if config.limit:
        conv = replace(conv, questions=conv.questions[:config.limit])
    return conv


def _say(progress: Progress | None, text: str) -> None:
    if progress is not None:
        progress(text)


# --------------------------------------------------------------------- summary
@dataclass(frozen=True)
class ModeMetrics:
    """One mode's figures over a set of questions (None where the mode does not score them)."""

    recall5: float | None
    recall10: float | None
    context_tokens: float | None
    latency_p50: float | None
    latency_p95: float | None
    abstain_adversarial: float | None
    n: int
    abstention: dict[str, Any] = field(default_factory=dict)  # bara.eval.locomo_abstain.abstention

    def as_dict(self) -> dict[str, Any]:
        return {"evidence_recall@5": self.recall5, "evidence_recall@10": self.recall10,
                "context_tokens": self.context_tokens,
                "latency_ms": {"p50": self.latency_p50, "p95": self.latency_p95},
                "abstain_adversarial": self.abstain_adversarial, "n": self.n, **self.abstention}


@dataclass(frozen=True)
class MemorySummary:
    """What `bara eval memory` reports (before the judge); ``as_dict`` is its ``--json`` object."""

    n_questions: int
    modes: dict[str, ModeMetrics]
    by_category: dict[str, dict[str, ModeMetrics]]

    def as_dict(self) -> dict[str, Any]:
        return {"n_questions": self.n_questions, "modes": {m: v.as_dict() for m, v in self.modes.items()},
                "by_category": {m: {c: v.as_dict() for c, v in cats.items()} for m, cats in self.by_category.items()}}


def summarise(rows: dict[str, list[QuestionRow]], n_questions: int) -> MemorySummary:
    """The ``--json`` object: overall metrics per mode, then per category 1-4."""
    modes = {mode: metrics(mode_rows, scored=mode != "full") for mode, mode_rows in rows.items()}
    by_category = {mode: {c: metrics([r for r in mode_rows if str(r.category) == c], scored=mode != "full",
                                     per_category=True)
                          for c in CATEGORIES} for mode, mode_rows in rows.items()}
    return MemorySummary(n_questions, modes, by_category)


def metrics(rows: Sequence[QuestionRow], scored: bool = True, per_category: bool = False) -> ModeMetrics:
    """Mean evidence recall@5/@10 over answerable questions, mean context tokens, latency p50/p95, and
    the abstention figures (None where a mode does not score them; of one category's rows,
    ``per_category``, only ``false_abstain_answerable`` means anything)."""
    answerable = [r for r in rows if r.category != ADVERSARIAL and r.evidence]
    adversarial = [r for r in rows if r.category == ADVERSARIAL]
    lat = np.array([r.latency_ms for r in rows], dtype=float)
    return ModeMetrics(
        _mean([evidence_recall(r.evidence, r.returned, 5) for r in answerable]) if scored else None,
        _mean([evidence_recall(r.evidence, r.returned, 10) for r in answerable]) if scored else None,
        round(float(np.mean([r.context_tokens for r in rows])), 1) if rows else None,
        round(float(np.percentile(lat, 50)), 2) if len(lat) else None,
        round(float(np.percentile(lat, 95)), 2) if len(lat) else None,
        (round(sum(r.abstained for r in adversarial) / len(adversarial), 4) if adversarial and scored else None),
        len(answerable), _abstention(rows, scored, per_category))


def _abstention(rows: Sequence[QuestionRow], scored: bool, per_category: bool) -> dict[str, Any]:
    found = abstention(rows)
    if not scored:
        found = {key: None for key in found}
    return {"false_abstain_answerable": found["false_abstain_answerable"]} if per_category else found


def _mean(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return round(float(np.mean(kept)), 4) if kept else None
