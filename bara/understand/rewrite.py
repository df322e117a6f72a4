"""Deterministic follow-up rewriting: a standalone retrieval query from the conversation.

Why rules and not a model: the rewrite runs on every retrieving follow-up, so it must cost well
under a millisecond, never fail, and be explainable. A follow-up such as "is it treatable?"
retrieves badly on its own words; what it lacks is a few terms the earlier turns hold (the topic
the first turns set, the referent of "it", the subject of the last answer). So the query is the
user's own words followed by the earlier terms a human rewrite would add, chosen one by one:

1. an explicit topic change ("Switching topics: ...", "New question: ...") starts a new topic: the
   message without its cue is the query, and later turns read the history from there on
   (:mod:`bara.understand.scaffold`);
2. the assistant's scaffolding (citation markers, "Sources", "See", "Note", headings, hedges,
   "Repeated") is stripped from every reply before it is read, and refusals are ignored;
3. every content word of the earlier user turns (since the topic began) and of the recent replies
   is a candidate, scored by a logistic model over named features (recency, role, position,
   salience, names, the message's own cues: :mod:`bara.understand.term_scorer`); candidates at or
   above ``rewrite_term_threshold`` are appended, at most ``rewrite_max_terms``, in the order
   the conversation first said them (so "throat cancer" stays a phrase).

4. "he" / "she" whose referent the previous reply introduced ("Who wrote it?" -> "Michael Ende
   wrote it..." -> "Where was he born?") takes that name first (``resolved:he``).

Reason codes: ``topic_switch``, ``no_history``, ``nothing_to_carry``, ``resolved:<pronoun>``, ``scored_terms``, one
``term:<word>=<p>[<features>]`` per added word and ``weights:<name>=<weight>,...`` (the model),
and ``truncated``. The weights were fitted on the dev halves of TREC CAsT 2019/2020/2022 and
CANARD (docs/rewrite.md; ``scripts/train_rewrite_scorer.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Sequence

from bara.settings import Settings
from bara.types import Utterance
from bara.understand.names import cap as _cap, clean as _clean, content_tuple as _content_tuple
from bara.understand.names import entities, entity_tuple as _entities, has_content, references
from bara.understand.scaffold import strip_scaffolding, topic_switch
from bara.understand.term_scorer import Candidate, candidate_features, score_candidates

__all__ = ["HistoryView", "RewriteResult", "RewriteRules", "entities", "has_content", "history_view", "prepare_history",
           "references", "rewrite_query"]


@dataclass(frozen=True)
class RewriteResult:
    """The query to search with, whether it differs from the message, and why."""

    query: str
    changed: bool
    reasons: tuple[str, ...]  # e.g. ("scored_terms", "term:cancer=0.91[first_user=1,...]", "weights:...")
    carried: tuple[str, ...]  # words brought in from earlier turns, in query order


def _default(name: str):
    """The built-in default of the ``rewrite_<name>`` setting (Settings is the one source of values)."""
    return Settings.model_fields[f"rewrite_{name}"].default


def _default_weights() -> tuple[tuple[str, float], ...]:
    return tuple(sorted(Settings.model_fields["rewrite_term_weights"].default_factory().items()))  # type: ignore[misc]


@dataclass(frozen=True)
class RewriteRules:
    """The tunable knobs (``rewrite_*`` settings); hashable, so a history view is cached per rules."""

    lookback: int = _default("lookback")  # recent replies read, and user turns beyond the topic's first
    scan_chars: int = _default("scan_chars")  # of each utterance: a long answer names its subject early
    min_content_words: int = _default("min_content_words")  # fewer is chit-chat ("thanks!")
    term_threshold: float = _default("term_threshold")  # probability a candidate needs to be added
    max_terms: int = _default("max_terms")  # words added at most
    term_weights: tuple[tuple[str, float], ...] = _default_weights()  # the scorer's (feature, weight)

    @classmethod
    def from_settings(cls, settings: Settings) -> "RewriteRules":
        """The rules a :class:`~bara.settings.Settings` configures (its ``rewrite_*`` fields)."""
        s = settings
        return cls(lookback=s.rewrite_lookback, scan_chars=s.rewrite_scan_chars,
                   min_content_words=s.rewrite_min_content_words, term_threshold=s.rewrite_term_threshold,
                   max_terms=s.rewrite_max_terms, term_weights=tuple(sorted(s.rewrite_term_weights.items())))

    @cached_property
    def weights(self) -> dict[str, float]:
        return dict(self.term_weights)

    @cached_property
    def weights_reason(self) -> str:
        return "weights:" + ",".join(f"{n}={w:g}" for n, w in self.term_weights)


_REFUSAL = re.compile(
    r"\W*(sorry|i apologi[sz]e|i (do not|don't|cannot|can't) (have|find|answer|provide)|"
    r"i am (unable|not able)|i'm (unable|not able)|unfortunately|the (provided )?documents? do(es)? not|"
    r"(your|the) question (is|seems) (a bit )?(unclear|not clear)|could you (please )?(clarify|specify))",
    re.IGNORECASE)


@lru_cache(maxsize=4096)
def _scanned(raw: str, scan_chars: int, user: bool) -> str:
    """An utterance as the rules read it: its first ``scan_chars``, a reply without scaffolding, a
    refusal as nothing; a user turn after an explicit topic change without its cue (cached per text)."""
    if user:
        switched = topic_switch(raw)
        return _clean(raw if not switched else switched)[:scan_chars]
    text = strip_scaffolding(raw[:scan_chars])
    return "" if not text or _REFUSAL.match(text) else text


# --- the history's side, prepared once ----------------------------------------------

class HistoryView:
    """What the rewrite reads from the history alone: the user turns since the topic began (the
    first of them and the most recent ones) and the recent replies, scaffolding stripped.

    The same history and rules give the same view, so it is cached (:func:`history_view`) and can be
    prepared after an answer, in the idle time before the next message (:func:`prepare_history`),
    so that the next turn is left only the work its new message needs."""

    def __init__(self, history: tuple[Utterance, ...], rules: RewriteRules):
        self.rules = rules
        start = 0
        for i, utt in enumerate(history):  # the topic begins at the latest explicit topic change
            if utt.role == "user" and topic_switch(utt.text) is not None:
                start = i
        users: list[str] = []
        replies: list[str] = []
        self.said = False  # any utterance with text ("hi!" counts: then there is history, but nothing to carry)
        last_user = max((i for i in range(start, len(history)) if history[i].role == "user"), default=None)
        # What the previous user turn's own rewrite added: a follow-up chain keeps its topic. Its view is
        # the cached view of the shorter history (built by the previous turn), so this costs one look-up.
        self.carried = () if last_user is None else rewrite_query(
            history[last_user].text, history[start:last_user], rules=rules).carried
        for utt in history[start:]:
            text = _scanned(utt.text, rules.scan_chars, utt.role == "user")
            self.said = self.said or bool(text)
            if utt.role != "user":
                replies.append(text)
            elif _entities(text) or len(_content_tuple(text)) >= max(rules.min_content_words, 1):
                users.append(text)
        keep = max(rules.lookback, 1)
        self.users = tuple(users[:1] + users[1:][-keep:])
        self.replies = tuple(replies[-keep:])

    @property
    def empty(self) -> bool:
        return not self.said


@lru_cache(maxsize=256)
def history_view(history: tuple[Utterance, ...], rules: RewriteRules) -> HistoryView:
    """The view of ``history`` under ``rules``, built once per distinct history."""
    return HistoryView(history, rules)


def prepare_history(history: Sequence[Utterance], rules: RewriteRules | None = None) -> None:
    """Build and cache the view a next turn's rewrite of ``history`` will read."""
    history_view(tuple(history), rules or RewriteRules())


# --- composition -------------------------------------------------------------------

def _unchanged(message: str, max_chars: int, reason: str) -> RewriteResult:
    """The message as given (only capped): nothing in the history can improve it."""
    query = message if len(message) <= max_chars else _cap(_clean(message), max_chars)
    return RewriteResult(query, query != message, (reason, "truncated") if query != message else (reason,), ())


def _chosen(message: str, view: HistoryView, rules: RewriteRules) -> list[Candidate]:
    """The candidates to add: at or above the threshold, the most probable first, at most max_terms."""
    scored = score_candidates(candidate_features(message, view.users, view.replies, view.carried), rules.weights)
    return [c for c in scored if c.p >= rules.term_threshold][:rules.max_terms]


_PERSON_REFS = frozenset("he she him her his hers himself herself".split())


def _answer_referent(message: str, view: HistoryView) -> tuple[str, ...]:
    """For "he" / "she": the first name the previous reply's opening sentence introduced (one no user
    turn said), e.g. "Who wrote it?" -> "Michael Ende wrote it..." -> "Where was he born?"."""
    if not _PERSON_REFS & set(references(message)) or not view.replies or not view.replies[-1]:
        return ()
    said = {w.lower() for turn in view.users for w in _content_tuple(turn)} | {w.lower() for w in message.split()}
    lead = re.split(r"(?<=[.!?])\s+", view.replies[-1], maxsplit=1)[0]
    for name in _entities(lead):
        words = name.split()
        if len(words) >= 2 and not {w.lower() for w in words} & said:
            return tuple(words)
    return ()


def rewrite_query(message: str, history: Sequence[Utterance], max_chars: int = 1000,
                  *, rules: RewriteRules | None = None) -> RewriteResult:
    """A standalone search query for ``message`` given the prior turns (oldest first).

    Pure and deterministic: the same inputs always give the same query. Without usable history the
    message comes back unchanged (only capped to ``max_chars``)."""
    rules = rules or RewriteRules()
    switched = topic_switch(message)
    if switched:
        query = _cap(_clean(switched), max_chars)
        return RewriteResult(query, query != message, ("topic_switch",), ())
    view = history_view(tuple(history), rules)
    if view.empty:
        return _unchanged(message, max_chars, "no_history")
    text = _clean(message)
    referent = _answer_referent(text, view)
    chosen = sorted(_chosen(text, view, rules), key=lambda c: c.order)
    if not chosen and not referent:
        return _unchanged(message, max_chars, "nothing_to_carry")
    words = list(dict.fromkeys([*referent, *(c.word for c in chosen if c.word.lower() not in {r.lower() for r in referent})]))
    full = " ".join([text, *words])
    query = _cap(full, max_chars)
    reasons = ((f"resolved:{next(r for r in references(text) if r in _PERSON_REFS)}",) if referent else ()) + (
        ("scored_terms", *(f"term:{c.explain()}" for c in chosen), rules.weights_reason) if chosen else ())
    return RewriteResult(query, query != message, reasons + (("truncated",) if query != full else ()), tuple(words))
