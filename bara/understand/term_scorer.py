"""Which earlier terms a follow-up needs: a logistic scorer over named features (term classification).

Query resolution as term classification (Voskarides et al., SIGIR 2020, "QuReTeC"): each content
word of the earlier turns is a candidate, and it is added to the query when

    p(w) = 1 / (1 + exp(-(b + sum_i a_i x_i(w))))  >=  threshold

where ``x_i`` are the named features below and ``a_i``, ``b`` the weights in ``Settings``
(``rewrite_term_weights``, ``rewrite_term_threshold``), fitted by L2-regularised logistic regression
on the dev halves of TREC CAsT 2019/2020/2022 and CANARD only (``scripts/train_rewrite_scorer.py``).
No model call: a dot product per candidate. Every added term, its probability and its non-zero
features go into the rewrite's reason codes, and the weights into one more, so a query can be
explained from the trace alone.

Features of a candidate ``w`` for message ``m`` (user turns counted since the topic began):

- ``carried``      w was added to the previous user turn's own query (the topic a follow-up chain keeps)
- ``first_user``   w is in the first user turn (the conversation's topic anchor)
- ``prev_user``    w is in the previous user turn
- ``user_share``   share of earlier user turns that contain w (salience across the conversation)
- ``user_recency`` ``0.5 ** (user turns since w was last said by the user)``; 0 if never
- ``prev_reply``   w is in the previous reply (scaffolding stripped)
- ``reply_lead``   w is in the first sentence of the previous reply (what the answer is about)
- ``reply_share``  share of earlier replies that contain w
- ``name``         w is part of a name (capitalised run, acronym, version) in an earlier user turn
- ``reply_name``   w is part of a name in an earlier reply only (answers name many things nobody asked about)
- ``phrase``       w is in a noun-phrase-like run of an earlier user turn (content words after a
                   determiner, possessive, preposition or copula: "your *garage door opener*")
- ``anchor``       ``first_user`` and ``phrase``: the topic the conversation opened with
- ``long``         w has 7 or more letters (rarer words carry the topic: an IDF-like prior)
- ``focus``        w is a subject word (name or noun-phrase word) that the latest subject-introducing
                   user turn said first: conversations drift ("the cost of a Lamborghini" -> "what about
                   a food truck?" -> "what licences are needed?" asks about the food truck)
- ``stale``        the user last said w before that turn: a subject the conversation has moved on from
- ``ref``          m has a referring word ("it", "they", "this service"...)
- ``short``        m has at most two content words of its own
- ``own_name``     m names something itself (a name of its own: likely standalone)
- ``overlap``      the latest user turn holding w shares a content word with m
- ``first_ref``    ``first_user`` and ``ref``;  ``reply_ref``: ``prev_reply`` and ``ref``
- ``first_short``  ``first_user`` and ``short``
- ``person_ref``   m refers to a person ("he", "she", "his", "her") and w is part of a name
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Mapping, Sequence

from bara.text.stopwords import ASSISTANT_SCAFFOLDING, RETRIEVAL_STOPWORDS, REWRITE_FILLER
from bara.understand.names import content_tuple, entity_tuple, references, terms

__all__ = ["FEATURES", "Candidate", "HistoryCandidates", "candidate_features", "for_message", "history_candidates",
           "score_candidates"]

FEATURES = ("carried", "first_user", "prev_user", "user_share", "user_recency", "prev_reply", "reply_lead", "reply_share",
            "name", "phrase", "anchor", "long", "focus", "stale", "reply_name", "ref", "short", "own_name", "overlap", "first_ref", "reply_ref", "first_short", "person_ref")
_PERSON = re.compile(r"\b(?:he|she|him|her|his|hers|himself|herself)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


@dataclass(frozen=True)
class Candidate:
    """One earlier word, its analysed key, its features and (once scored) its probability."""

    word: str
    key: str
    features: tuple[float, ...]  # the values of FEATURES, in that order
    order: int  # first seen in the history, oldest first: the query's phrase order
    p: float = 0.0

    def explain(self) -> str:
        """``word=p[feature=value,...]`` with the non-zero features, for the trace."""
        shown = ",".join(f"{n}={v:g}" for n, v in zip(FEATURES, self.features, strict=True) if v)
        return f"{self.word}={self.p:.2f}[{shown}]"


@lru_cache(maxsize=8192)
def _words(text: str, user: bool) -> tuple[tuple[str, str], ...]:
    """(surface word, analysed key) of a turn's candidate words, each key once, in order."""
    out, seen = [], set()
    surface = {}
    for token in _TOKEN.findall(text):
        surface.setdefault(token.lower(), token)
    for word in content_tuple(text):
        if word in REWRITE_FILLER or (not user and word in ASSISTANT_SCAFFOLDING):
            continue
        key = "".join(sorted(terms(word)))
        if key and key not in seen:
            seen.add(key)
            out.append((surface.get(word, word), key))
    return tuple(out)


_PHRASE_LEAD = frozenset("the a an your my our their his her its this that these those of about for on in "
                         "with is are was were between and some any called named".split())
_TOKEN = re.compile(r"[^\W_](?:[\w'\u2019+#&.-]*[^\W_])?")


@lru_cache(maxsize=4096)
def _phrase_words(text: str) -> frozenset[str]:
    """Lower-cased words of the runs of non-stop words that follow a determiner, possessive,
    preposition or copula (a noun phrase, roughly, without a tagger); "-ing" words after a copula
    are verbs ("is *going* bad")."""
    out: set[str] = set()
    lead, in_run = "", False
    for token in _TOKEN.findall(text.lower()):
        if token in RETRIEVAL_STOPWORDS or token in _PHRASE_LEAD:
            lead, in_run = token, False
            continue
        if not in_run and lead in _PHRASE_LEAD and not (lead in ("is", "are", "was", "were") and token.endswith("ing")):
            in_run = True
        if in_run:
            out.add(token)
        lead = ""
    return frozenset(out)


@lru_cache(maxsize=4096)
def _name_words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for name in entity_tuple(text) for w in name.split())


@lru_cache(maxsize=8192)
def _keys(text: str, user: bool) -> frozenset[str]:
    return frozenset(k for _, k in _words(text, user))


def _lead(text: str) -> str:
    return _SENTENCE.split(text, maxsplit=1)[0] if text else ""


def _focus(users: Sequence[str], user_keys: Sequence[frozenset[str]]) -> tuple[int, frozenset[str]]:
    """The latest user turn that introduced a subject of its own (a name or noun-phrase word no earlier
    user turn said) and the keys of those new subject words; (0, the first turn's subject keys) when no
    later turn introduced one, (-1, empty) without user turns."""
    said: set[str] = set()
    focus: tuple[int, frozenset[str]] = (-1, frozenset())
    for j, (text, keys) in enumerate(zip(users, user_keys, strict=True)):
        subject = _name_words(text) | _phrase_words(text)
        new = frozenset(k for w, k in _words(text, True) if w.lower() in subject and k not in said)
        if new:
            focus = (j, new)
        said |= keys
    return focus


@dataclass(frozen=True)
class HistoryCandidates:
    """The history's side of the candidates, the same for every message: each word with the features
    that do not depend on the message (the first 15 of FEATURES) and the latest user turn holding it."""

    rows: tuple[tuple[str, str, tuple[float, ...], int | None], ...]  # word, key, features, user turn
    user_keys: tuple[frozenset[str], ...]


@lru_cache(maxsize=256)
def history_candidates(users: tuple[str, ...], replies: tuple[str, ...],
                       carried: tuple[str, ...] = ()) -> HistoryCandidates:
    """Every candidate word of the earlier user turns ``users`` and replies ``replies`` (oldest first,
    replies already without scaffolding) and of ``carried`` (the words the previous user turn's
    rewrite added), with its message-independent features; cached per history."""
    user_keys = tuple(_keys(u, True) for u in users)
    reply_keys = [_keys(r, False) for r in replies]
    names = frozenset().union(*(_name_words(t) for t in users))
    reply_names = frozenset().union(*(_name_words(t) for t in replies)) - names
    phrases = frozenset().union(*(_phrase_words(u) for u in users))
    first_phrase = _phrase_words(users[0]) if users else frozenset()
    first = user_keys[0] if user_keys else frozenset()
    prev = user_keys[-1] if user_keys else frozenset()
    last_reply = next((r for r in reversed(replies) if r), "")
    prev_reply = _keys(last_reply, False)
    lead = _keys(_lead(last_reply), False)
    carried_keys = _keys(" ".join(carried), True)
    n_users, n_replies = len(user_keys), len(reply_keys)
    focus_turn, focus_keys = _focus(users, user_keys)
    last_said: dict[str, int] = {}  # key -> index of the latest user turn holding it
    user_count: dict[str, int] = {}
    for j, keys in enumerate(user_keys):
        for key in keys:
            last_said[key] = j
            user_count[key] = user_count.get(key, 0) + 1
    reply_count: dict[str, int] = {}
    for keys in reply_keys:
        for key in keys:
            reply_count[key] = reply_count.get(key, 0) + 1
    rows, seen = [], set()
    sources = [(u, True) for u in users] + [(" ".join(carried), True)] + [(r, False) for r in replies]
    for text, user in sources:
        for word, key in _words(text, user):
            if key in seen:
                continue
            seen.add(key)
            low, j = word.lower(), last_said.get(key)
            x = (float(key in carried_keys), float(key in first), float(key in prev),
                 round(user_count.get(key, 0) / n_users, 4) if n_users else 0.0,
                 round(0.5 ** (n_users - 1 - j), 4) if j is not None else 0.0,
                 float(key in prev_reply), float(key in lead),
                 round(reply_count.get(key, 0) / n_replies, 4) if n_replies else 0.0,
                 float(low in names), float(low in phrases), float(low in first_phrase and key in first),
                 float(len(low) >= 7), float(key in focus_keys),
                 float(j is not None and j < focus_turn and key not in focus_keys), float(low in reply_names))
            rows.append((word, key, x, j))
    return HistoryCandidates(tuple(rows), user_keys)


def for_message(message: str, history: HistoryCandidates) -> list[Candidate]:
    """The history's candidates that ``message`` lacks, with the message's own features added."""
    have = _keys(message, True)
    ref = 1.0 if references(message) else 0.0
    short = 1.0 if len(have) <= 2 else 0.0
    own = 1.0 if entity_tuple(message) else 0.0
    person = 1.0 if _PERSON.search(message) else 0.0
    overlaps = [bool(keys & have) for keys in history.user_keys]
    out = []
    for word, key, x, j in history.rows:
        if key in have:
            continue
        overlap = 1.0 if j is not None and overlaps[j] else 0.0
        out.append(Candidate(word, key, (*x, ref, short, own, overlap, x[1] * ref, x[5] * ref, x[1] * short,
                                         max(x[8], x[14]) * person), len(out)))
    return out


def candidate_features(message: str, users: Sequence[str], replies: Sequence[str],
                       carried: Sequence[str] = ()) -> list[Candidate]:
    """Every candidate word of the history that ``message`` lacks, with all its features."""
    return for_message(message, history_candidates(tuple(users), tuple(replies), tuple(carried)))


def score_candidates(candidates: Sequence[Candidate], weights: Mapping[str, float]) -> list[Candidate]:
    """Each candidate with ``p = sigmoid(bias + sum weights[f] * x_f)``, most probable first."""
    bias = weights.get("bias", 0.0)
    vector = [weights.get(n, 0.0) for n in FEATURES]
    out = []
    for c in candidates:
        z = bias + sum(map(operator.mul, vector, c.features))
        out.append(Candidate(c.word, c.key, c.features, c.order, 1.0 / (1.0 + math.exp(-max(min(z, 50.0), -50.0)))))
    return sorted(out, key=lambda c: (-c.p, c.order))
