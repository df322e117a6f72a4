"""Deterministic follow-up rewriting: a standalone retrieval query from the conversation.

Why rules and not a model: the rewrite runs on every retrieving follow-up, so it
must cost well under a millisecond, never fail, and be explainable. A follow-up
such as "is it secure?" retrieves badly on its own words; what it lacks is the
topic, which earlier turns name. So the query is, in order:

1. the user's own words (first, so a length cap never drops them);
2. the latest earlier user turn that says something ("thanks!" is skipped);
3. the referent of any "it" / "they" / "this service" / "the other one";
4. names that stay salient across recent turns and are not yet in the query.

Salience is a recency-weighted count: a name earns, for every turn it appears
in, that turn's weight (role weight x ``decay`` per user turn back, x
``entity_bonus``), so a topic the conversation keeps returning to outranks a
name the agent dropped once. Agent turns supply names only, never loose words,
and refusals ("Sorry, I do not have...") are ignored. The defaults of
:class:`RewriteRules` were tuned on MTRAG-UN dev Recall@5 (docs/rewrite.md).
"""

from __future__ import annotations

import re
from functools import cached_property, lru_cache
from dataclasses import dataclass
from typing import Sequence

from bara.settings import Settings
from bara.types import Utterance
from bara.understand.names import cap as _cap, clean as _clean, content_tuple as _content_tuple
from bara.understand.names import entities, entity_tuple as _entities, has_content, references, terms as _terms

__all__ = ["HistoryView", "RewriteResult", "RewriteRules", "entities", "has_content", "history_view", "prepare_history",
           "references", "rewrite_query"]


@dataclass(frozen=True)
class RewriteResult:
    """The query to search with, whether it differs from the message, and why."""

    query: str
    changed: bool
    reasons: tuple[str, ...]  # e.g. ("resolved:it", "previous_turn", "carried")
    carried: tuple[str, ...]  # names brought in from earlier turns, referents first


def _default(name: str):
    """The built-in default of the ``rewrite_<name>`` setting (Settings is the one source of values)."""
    return Settings.model_fields[f"rewrite_{name}"].default


@dataclass(frozen=True)
class RewriteRules:
    """The tunable knobs (``rewrite_*`` settings); the defaults are the values tuned on MTRAG-UN dev."""

    user_weight: float = _default("user_weight")  # the user's own words define the topic
    agent_weight: float = _default("agent_weight")  # answers name entities but also wander
    decay: float = _default("decay")  # weight kept per user turn further back
    entity_bonus: float = _default("entity_bonus")  # names retrieve better than loose words
    lookback: int = _default("lookback")  # utterances scanned, most recent first
    scan_chars: int = _default("scan_chars")  # of each utterance: a long answer names its subject early
    previous_turns: int = _default("previous_turns")  # content-bearing earlier user turns quoted verbatim
    min_content_words: int = _default("min_content_words")  # fewer is chit-chat ("thanks!")
    resolve_references: bool = _default("resolve_references")  # append the referent of "it", "they"...
    max_carried: int = _default("max_carried")  # salient names appended after the quoted turn
    min_salience: float = _default("min_salience")  # ...only if the user just said them or they recur

    @classmethod
    def from_settings(cls, settings: Settings) -> "RewriteRules":
        """The rules a :class:`~bara.settings.Settings` configures (its ``rewrite_*`` fields)."""
        s = settings
        return cls(user_weight=s.rewrite_user_weight, agent_weight=s.rewrite_agent_weight, decay=s.rewrite_decay,
                   entity_bonus=s.rewrite_entity_bonus, lookback=s.rewrite_lookback, scan_chars=s.rewrite_scan_chars,
                   previous_turns=s.rewrite_previous_turns, min_content_words=s.rewrite_min_content_words,
                   resolve_references=s.rewrite_resolve_references, max_carried=s.rewrite_max_carried,
                   min_salience=s.rewrite_min_salience)


@dataclass(frozen=True)
class _Turn:
    """One earlier utterance as the rules see it."""

    text: str
    user: bool
    weight: float

    @property
    def names(self) -> tuple[str, ...]:
        """The utterance's names, found only when a rule reads them (cached per text)."""
        return _entities(self.text)


@dataclass(frozen=True)
class _Phrase:
    """A candidate carried phrase with its salience and analysed terms."""

    text: str
    score: float
    entity: bool
    terms: frozenset[str]
    order: int  # first seen, most recent first: the deterministic tie-break


_REFUSAL = re.compile(
    r"\W*(sorry|i apologi[sz]e|i (do not|don't|cannot|can't) (have|find|answer|provide)|"
    r"i am (unable|not able)|i'm (unable|not able)|unfortunately|the (provided )?documents? do(es)? not|"
    r"(your|the) question (is|seems) (a bit )?(unclear|not clear)|could you (please )?(clarify|specify))",
    re.IGNORECASE)
_PLURAL_REFS = frozenset("they them their theirs themselves these those".split())
_OTHER_REFS = frozenset(("the other one", "the other", "the latter", "the former"))


# --- salience ----------------------------------------------------------------------

def _turns(history: Sequence[Utterance], rules: RewriteRules) -> list[_Turn]:
    """Recent utterances, most recent first; an answer shares the age of the question it answers."""
    out, age = [], 0
    for utt in reversed(history[-rules.lookback:]):
        user = utt.role == "user"
        text, refusal = _scanned(utt.text, rules.scan_chars)
        if text and not (not user and refusal):
            role = rules.user_weight if user else rules.agent_weight
            out.append(_Turn(text, user, role * rules.decay ** age))
        age += user
    return out


@lru_cache(maxsize=4096)
def _scanned(raw: str, scan_chars: int) -> tuple[str, bool]:
    """An utterance's scanned text and whether it reads as a refusal: pure, cached per message
    text (issue 16), since every turn re-reads the same recent history."""
    text = _clean(raw[:scan_chars])
    return text, bool(text and _REFUSAL.match(text))


def _candidates(turn: _Turn) -> tuple[tuple[str, bool], ...]:
    """A turn's names, then (user turns only) its content words, each once."""
    return _candidates_of(turn.text, turn.user, turn.names)


@lru_cache(maxsize=4096)
def _candidates_of(text: str, user: bool, names: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    loose = _content_tuple(text) if user else ()
    seen: set[str] = set()
    out = []
    for phrase, entity in [(n, True) for n in names] + [(w, False) for w in loose]:
        if phrase.lower() not in seen:
            seen.add(phrase.lower())
            out.append((phrase, entity))
    return tuple(out)


def _salient_phrases(turns: Sequence[_Turn], rules: RewriteRules) -> list[_Phrase]:
    """Every candidate phrase of the turns, most salient first (ties: most recent first)."""
    scores: dict[str, list] = {}
    for turn in turns:
        for phrase, entity in _candidates(turn):
            slot = scores.setdefault(phrase.lower(), [phrase, 0.0, entity, len(scores)])
            slot[1] += turn.weight * (rules.entity_bonus if entity else 1.0)
    phrases = (_Phrase(p, round(s, 6), e, _terms(p), o) for p, s, e, o in scores.values())
    return sorted((p for p in phrases if p.terms), key=lambda p: (-p.score, p.order))


# --- the history's side, prepared once ----------------------------------------------

class HistoryView:
    """What the rewrite reads from the history alone: its weighted turns, the earlier user turns
    it may quote and (on first use) the ranked salient phrases.

    The same history and rules give the same view, so it is cached (:func:`history_view`) and can be
    prepared after an answer, in the idle time before the next message (:func:`prepare_history`,
    issue 16): the next turn is then left only the work its new message needs."""

    def __init__(self, history: tuple[Utterance, ...], rules: RewriteRules):
        self.rules = rules
        self.turns = tuple(_turns(history, rules))
        self.previous = tuple(_previous_turns(self.turns, rules))

    @cached_property
    def ranked(self) -> tuple[_Phrase, ...]:
        return tuple(_salient_phrases(self.turns, self.rules))


@lru_cache(maxsize=256)
def history_view(history: tuple[Utterance, ...], rules: RewriteRules) -> HistoryView:
    """The view of ``history`` under ``rules``, built once per distinct history."""
    return HistoryView(history, rules)


def prepare_history(history: Sequence[Utterance], rules: RewriteRules | None = None) -> None:
    """Build and cache, salience included, the view a next turn's rewrite of ``history`` will read."""
    history_view(tuple(history), rules or RewriteRules()).ranked  # noqa: B018 (computed for the cache)


# --- reference resolution ----------------------------------------------------------

def _other_of_pair(message: str, turns: Sequence[_Turn]) -> str | None:
    """For "the other one": the member of the latest compared pair not talked about since.

    The pair is the first two names of the latest user turn naming two or more;
    a member named in the message or in a later user turn is "this one".
    """
    said = set(_terms(message))
    for turn in turns:
        names = list(dict.fromkeys(turn.names)) if turn.user else []
        if len(names) >= 2:
            left = [n for n in names[:2] if not _terms(n) <= said]
            return left[-1] if left else None
        said |= _terms(turn.text) if turn.user else set()
    return None


def _resolve(refs: Sequence[str], message: str, turns: Sequence[_Turn],
            ranked: Sequence[_Phrase]) -> tuple[str, ...]:
    """The phrase(s) the message's references most likely point to; () when there are none.

    "the other one" is the unmentioned member of the last compared pair; plural
    references take the two most salient names; anything else takes the top one.
    """
    if not refs:
        return ()
    other = _other_of_pair(message, turns) if any(r in _OTHER_REFS for r in refs) else None
    if other:
        return (other,)
    said = _terms(message)
    count = 2 if any(r in _PLURAL_REFS for r in refs) else 1
    names = tuple(p.text for p in ranked if p.entity and not p.terms <= said)
    return names[:count] or tuple(p.text for p in ranked if not p.terms <= said)[:1]


# --- composition -------------------------------------------------------------------

def _previous_turns(turns: Sequence[_Turn], rules: RewriteRules) -> list[str]:
    """The latest earlier user turns that say something; chit-chat like "thanks!" is skipped."""
    said = [t.text for t in turns
            if t.user and (t.names or len(_content_tuple(t.text)) >= rules.min_content_words)]
    return said[:rules.previous_turns]


def _carry(ranked: Sequence[_Phrase], have: frozenset[str], rules: RewriteRules) -> list[str]:
    """Top salient names that add a term the query lacks.

    Loose words are not carried: on MTRAG-UN dev they drifted the query more
    often than they helped, while names the user just said or that recur did help.
    """
    out: list[str] = []
    for phrase in ranked:
        if len(out) >= rules.max_carried:
            break
        if phrase.entity and phrase.score >= rules.min_salience and not phrase.terms <= have:
            out.append(phrase.text)
            have = have | phrase.terms
    return out


def _unchanged(message: str, max_chars: int, reason: str) -> RewriteResult:
    """The message as given (only capped): nothing in the history can improve it."""
    query = message if len(message) <= max_chars else _cap(_clean(message), max_chars)
    return RewriteResult(query, query != message, (reason, "truncated") if query != message else (reason,), ())


def rewrite_query(message: str, history: Sequence[Utterance], max_chars: int = 1000,
                  *, rules: RewriteRules | None = None) -> RewriteResult:
    """A standalone search query for ``message`` given the prior turns (oldest first).

    Pure and deterministic: the same inputs always give the same query. Without
    usable history the message comes back unchanged (only capped to ``max_chars``).
    """
    rules = rules or RewriteRules()
    view = history_view(tuple(history), rules)
    turns = view.turns
    if not turns:
        return _unchanged(message, max_chars, "no_history")
    text = _clean(message)
    refs = references(text) if rules.resolve_references else []
    own = _entities(text)
    # Salience is read only to resolve a reference or to carry names (issue 16: skip it otherwise).
    ranked = view.ranked if refs or not own else ()
    resolved = _resolve(refs, text, turns, ranked)
    quoted = [t for t in view.previous if t.lower() != text.lower()]
    # A message that names its own subject is standalone or a topic switch: carrying
    # old names into it hurt on MTRAG-UN dev ("Virtualization" after "Red Hat OpenShift").
    extra = [] if own else _carry(ranked, _terms(" ".join([text, *quoted, *resolved])), rules)
    if not (resolved or quoted or extra):
        return _unchanged(message, max_chars, "nothing_to_carry")
    full = " ".join([text, *quoted, *resolved, *extra])
    query = _cap(full, max_chars)
    reasons = _reasons(refs, resolved, quoted, extra) + (("truncated",) if query != full else ())
    return RewriteResult(query, query != message, reasons, tuple(dict.fromkeys([*resolved, *extra])))


def _reasons(refs: Sequence[str], resolved: Sequence[str], quoted: Sequence[str],
             extra: Sequence[str]) -> tuple[str, ...]:
    """Reason codes in query order, so a query can be traced to the rule that built it."""
    return ((("previous_turn",) if quoted else ())
            + ((f"resolved:{refs[0]}",) if resolved else ())
            + (("carried",) if extra else ()))
