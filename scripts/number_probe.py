"""Probe only (issue 31, round 3 session 10): pronoun number agreement features for the term scorer.

``install(names)`` appends the named features to ``bara.understand.term_scorer.FEATURES`` and wraps the
rewrite's ``candidate_features`` so every candidate carries their values, for one run of
``scripts/train_rewrite_scorer.py --number ...`` (nothing in bara changes; criterion and figures:
bench/criteria/issue31_s10.md, docs/rewrite.md "Round 3 session 10"):

- ``plural_ref``   the message has a plural pronoun (they, them, their, theirs, themselves, these, those)
                   and the candidate is in a *plural run* of an earlier turn
- ``plural_clash`` the message's pronouns are only singular (it, its, itself) and the candidate is in a plural run

A plural run is a run of content words (no stop word or phrase lead inside) whose last word is plural:
more than 3 letters, ending in "s" but not "ss / us / is / ics" or a possessive ("mako sharks" marks both
words; no lexicon, so "Paris" or "series" can be misread).
"""

from __future__ import annotations

import re
from functools import lru_cache

import bara.understand.rewrite as rewrite_module
import bara.understand.term_scorer as term_scorer
from bara.text.stopwords import RETRIEVAL_STOPWORDS

NAMES = ("plural_ref", "plural_clash")
_PLURAL_REFS = frozenset("they them their theirs themselves these those".split())
_SINGULAR_REFS = frozenset("it its itself".split())


def plural(word: str) -> bool:
    low = word.lower()
    return len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "is", "ics", "'s", "\u2019s"))


@lru_cache(maxsize=4096)
def plural_runs(text: str) -> frozenset[str]:
    """Lower-cased words of the runs of content words whose last word is plural."""
    out: set[str] = set()
    run: list[str] = []
    for token in [*term_scorer._TOKEN.findall(text.lower()), "."]:
        if token in RETRIEVAL_STOPWORDS or token in term_scorer._PHRASE_LEAD or token == ".":
            if run and plural(run[-1]):
                out.update(run)
            run = []
        else:
            run.append(token)
    return frozenset(out)


def number(message: str) -> tuple[float, float]:
    """(the message has a plural pronoun, its pronouns are only singular it / its / itself)."""
    tokens = set(re.findall(r"[a-z]+", message.lower()))
    many = bool(tokens & _PLURAL_REFS)
    return float(many), float(not many and bool(tokens & _SINGULAR_REFS))


def install(names: list[str]) -> None:
    unknown = [n for n in names if n not in NAMES]
    if unknown:
        raise SystemExit(f"unknown --number features {unknown}: choose from {NAMES}")
    base = rewrite_module.candidate_features
    term_scorer.FEATURES = (*term_scorer.FEATURES, *names)

    def wrapped(message, users, replies, carried=()):
        candidates = base(message, users, replies, carried)
        runs = frozenset().union(*(plural_runs(t) for t in (*users, *replies)))
        many, single = number(message)
        values = {"plural_ref": many, "plural_clash": single}
        return [term_scorer.Candidate(c.word, c.key, (*c.features, *(values[n] * (c.word.lower() in runs) for n in names)),
                                      c.order) for c in candidates]

    rewrite_module.candidate_features = wrapped
