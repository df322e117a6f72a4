"""`bara eval rewrite`: bara's follow-up queries against human standalone rewrites (TREC CAsT, CANARD).

Each conversation (:mod:`bara.eval.rewrite_data`) is replayed turn by turn through the gated
:class:`bara.turn.gated.GatedAssistant` itself (``GatedAssistant.turn``: features, rules, the gate, topic
dependence, the rewrite, the topic vector, the knowledge-base search), one fresh user per
conversation. After each turn a ``before_persist`` hook stores the file's reply to that turn as the
assistant's message (an empty one where the file has none), never bara's own answer, so the next
turn reads the conversation the humans saw. A ``policy_override`` hook sets the knowledge-base
floor to 0 and its k to ``--k`` on turns the gate searches, and the relative gap is off
(``gate_kb_relative_gap`` 2), so nothing is dropped by a floor; whether the gate searches is left
to the gate.

What is read back per turn, from the trace: ``searched`` (the turn ran the knowledge-base search,
the timed ``retrieve_kb`` stage), ``query`` (the lexical query it searched with; "" when it did
not search) and ``hits`` (passage ids, best first).

Systems: ``bara`` (the above), ``raw`` (the message alone), ``last2`` (the previous user turn and
this one), ``first_last`` (the first user turn and this one), ``human`` (the human rewrite) and
``peer`` (the file's ``peer_rewrite``, when every turn has one). With ``--corpus`` the pooled
passages are indexed once (the cached ``eval retrieval`` index) and each reference system is
searched as the pipeline searches a standalone turn: its string as the lexical query and the
encoding of that string as the dense vector, hybrid, floor 0, top ``k``.

Term metrics (:mod:`bara.eval.rewrite_metrics`) skip each conversation's first turn. A turn the
gate did not search predicts no term for ``bara`` (its gold terms still count, so it lowers recall,
never precision). Recall@k counts, on every turn with a ``passage_id``, whether that passage is in
the top k (ir-measures ``R@k`` per turn; a turn that returned nothing scores 0); the first turns
count too, since they are searched like any other.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import ir_measures
from ir_measures import R

from bara.retrieval.protocol import Embedder
from bara.app import Bara
from bara.decide.policy import PolicyDecision
from bara.eval.ab import cached_index, working_copy
from bara.eval.beir import read_corpus
from bara.eval.conversation_replay import forget_user, kb_searched
from bara.eval.rewrite_data import Conversation, read_conversations, select
from bara.eval.rewrite_metrics import TermCounts, term_counts, term_scores
from bara.hooks import HookContext, PersistPlan
from bara.errors import InputError
from bara.turn.gated import GatedAssistant
from bara.settings import Settings

SYSTEMS = ("bara", "raw", "last2", "first_last", "human", "peer")
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class BaraTurn:
    """What the gated pipeline did on one turn."""

    conversation: str
    turn: int
    query: str
    searched: bool
    hits: tuple[str, ...]
    reasons: tuple[str, ...]

    def row(self) -> dict[str, Any]:
        return {"conversation": self.conversation, "turn": self.turn, "query": self.query,
                "searched": self.searched, "hits": list(self.hits),
                "reasons": [r for r in self.reasons if r.startswith(("rewrite:", "topic:"))]}


class _Replies:
    """``before_persist``: the file's reply to the coming turn is what the conversation stores."""

    def __init__(self) -> None:
        self.next = ""

    def __call__(self, plan: PersistPlan, ctx: HookContext) -> PersistPlan:
        return replace(plan, assistant_text=self.next)


def _no_floor(k: int) -> Callable[[PolicyDecision, HookContext], PolicyDecision | None]:
    def hook(policy: PolicyDecision, ctx: HookContext) -> PolicyDecision | None:
        return replace(policy, kb_floor=0.0, kb_k=k) if policy.inject_kb else None
    return hook


def replay_bara(assistant: GatedAssistant, replies: _Replies, conv: Conversation, k: int) -> list[BaraTurn]:
    """Every turn of ``conv`` through the gated pipeline, the file's replies stored as the assistant's."""
    user = f"eval-rewrite-{hashlib.sha256(conv.id.encode()).hexdigest()[:12]}"
    cid = f"{user}-c"
    assistant.open_conversation(user, cid, create=True)
    out: list[BaraTurn] = []
    try:
        for i, turn in enumerate(conv.turns):
            replies.next = turn.assistant or ""
            trace = assistant.turn(user, turn.user, conversation_id=cid).trace
            searched = kb_searched(trace)
            out.append(BaraTurn(conv.id, i, trace.retrieval_query if searched else "", searched,
                                tuple(h.source for h in trace.hits if h.tier == "kb")[:k], trace.reasons))
    finally:
        replies.next = ""
        forget_user(assistant, user)
    return out


def reference_queries(conv: Conversation) -> dict[str, list[str | None]]:
    """Each reference system's query per turn (``peer`` only when every turn has one)."""
    users = [t.user for t in conv.turns]
    out: dict[str, list[str | None]] = {
        "raw": list(users),
        "last2": [" ".join([*users[max(i - 1, 0):i], u]) for i, u in enumerate(users)],
        "first_last": [u if i == 0 else f"{users[0]} {u}" for i, u in enumerate(users)],
        "human": [t.rewrite for t in conv.turns]}
    if all(t.peer_rewrite is not None for t in conv.turns):
        out["peer"] = [t.peer_rewrite for t in conv.turns]
    return out


def _recall(relevant: dict[str, str], runs: dict[str, Sequence[str]], k: int) -> float | None:
    """Mean ir-measures R@k over the turns with a passage (a turn with no hits scores 0)."""
    if not relevant:
        return None
    qrels = [ir_measures.Qrel(q, doc, 1) for q, doc in relevant.items()]
    run = [ir_measures.ScoredDoc(q, doc, float(len(hits) - rank))
           for q, hits in runs.items() if q in relevant for rank, doc in enumerate(hits[:k])]
    per = {m.query_id: float(m.value) for m in ir_measures.iter_calc([R @ k], qrels, run)}
    return round(sum(per.get(q, 0.0) for q in relevant) / len(relevant), 4)


@dataclass
class _Tally:
    """Counts and runs of one system over one set of turns."""

    counts: list[TermCounts]
    runs: dict[str, Sequence[str]]

    def figures(self, relevant: dict[str, str], k: int) -> dict[str, Any]:
        out: dict[str, Any] = term_scores(self.counts)
        recall = _recall(relevant, self.runs, k)
        if recall is not None:
            out[f"recall@{k}"] = recall
        return out


def _search(bara: Bara, query: str, k: int) -> tuple[str, ...]:
    vector = bara.embedder.embed([query])[0]
    outcome = bara.retriever.search(query, k=k, floor=0.0, vector=vector)
    return tuple(h.chunk.source for h in outcome.hits)


class _Run:
    """One evaluation: the assistant, its store, and what each conversation gave."""

    def __init__(self, bara: Bara, k: int, with_corpus: bool):
        self.bara, self.k, self.with_corpus = bara, k, with_corpus
        self.assistant = GatedAssistant(bara, model=None)
        self.replies = _Replies()
        self.assistant.hooks.add("before_persist", self.replies)
        self.assistant.hooks.add("policy_override", _no_floor(k))
        self.turns: list[BaraTurn] = []
        self.tallies: dict[str, dict[str, _Tally]] = {}  # half -> system -> tally
        self.relevant: dict[str, dict[str, str]] = {}  # half -> turn id -> passage
        self.searched: dict[str, list[bool]] = {}

    def add(self, conv: Conversation) -> None:
        done = replay_bara(self.assistant, self.replies, conv, self.k)
        self.turns.extend(done)
        queries: dict[str, list[str | None]] = {"bara": [t.query if t.searched else None for t in done],
                                                **reference_queries(conv)}
        hits = {"bara": [t.hits for t in done]}
        for half in (conv.half, "all"):
            self.searched.setdefault(half, []).extend(t.searched for t in done)
            for name, per_turn in queries.items():
                tally = self.tallies.setdefault(half, {}).setdefault(name, _Tally([], {}))
                self._score(tally, conv, per_turn, hits.get(name))
            for i, turn in enumerate(conv.turns):
                if turn.passage_id:
                    self.relevant.setdefault(half, {})[f"{conv.id}#{i}"] = turn.passage_id

    def _score(self, tally: _Tally, conv: Conversation, queries: list[str | None],
               hits: list[tuple[str, ...]] | None) -> None:
        for i, (turn, query) in enumerate(zip(conv.turns, queries, strict=True)):
            if i:
                tally.counts.append(term_counts(turn.user, turn.rewrite, query))
            if self.with_corpus and turn.passage_id:
                found = hits[i] if hits is not None else (_search(self.bara, query, self.k) if query else ())
                tally.runs[f"{conv.id}#{i}"] = found

    def summary(self, half: str) -> dict[str, Any]:
        systems = {name: tally.figures(self.relevant.get(half, {}), self.k)
                   for name, tally in self.tallies.get(half, {}).items()}
        searched = self.searched.get(half, [])
        if "bara" in systems:
            systems["bara"]["searched"] = round(sum(searched) / len(searched), 4) if searched else 0.0
        n = len(next(iter(self.tallies[half].values())).counts) if half in self.tallies else 0
        return {"n_turns": n, "n_searched_turns": len(searched), "systems": systems}


def evaluate_rewrite(path: Path, corpus: Path | None, k: int, split: str, settings: Settings, embedder: Embedder,
                     progress: Progress | None = None) -> dict[str, Any]:
    """The JSON report of `bara eval rewrite` (see the module docstring)."""
    conversations = select(read_conversations(path), split)
    if not conversations:
        raise InputError(f"{path} has no conversation in the {split} half: pass --split all or another file")
    settings = settings.override(k=k, gate_kb_relative_gap=2.0)
    with tempfile.TemporaryDirectory(prefix="bara-rewrite-") as tmp:
        db = Path(tmp) / "rewrite.db"
        if corpus is not None:
            docs = read_corpus(corpus, Counter())
            if not docs:
                raise InputError(f"{corpus} holds no usable passage: pass a BEIR corpus {{_id,title,text}}")
            db = working_copy(cached_index(corpus, docs, settings, embedder), Path(tmp))
        with Bara(settings.override(db=str(db)), embedder=embedder) as bara:
            run = _Run(bara, k, corpus is not None)
            for conv in conversations:
                run.add(conv)
                if progress:
                    progress("conversations", 1, len(conversations))
    halves = {h: run.summary(h) for h in ("dev", "test") if h in run.tallies}
    return {"set": conversations[0].source, "file": path.name, "split": split, "k": k,
            **run.summary("all"), "halves": halves, "turns": [t.row() for t in run.turns]}
