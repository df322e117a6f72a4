"""Term precision, recall and F1 of a query rewrite against a human rewrite (the QuReTeC measure).

Query resolution as term classification (Voskarides, Li, Ren, Kanoulas and de Rijke, "Query
Resolution for Conversational Search with Limited Supervision", SIGIR 2020): the *gold* terms of a
turn are the content terms its human standalone rewrite adds to the user's own words; a system's
*predicted* terms are the content terms its query adds to the same words. For turns ``t``:

    G_t = T(human_t) - T(user_t)        P_t = T(query_t) - T(user_t)
    precision = sum_t |P_t & G_t| / sum_t |P_t|
    recall    = sum_t |P_t & G_t| / sum_t |G_t|
    F1        = 2 precision recall / (precision + recall)

micro-averaged over the turns (a turn with nothing to add and nothing added contributes nothing,
instead of an undefined 0/0). ``T(text)`` is the set of content terms: lower-cased word tokens,
stop words out (:data:`bara.text.stopwords.RETRIEVAL_STOPWORDS`), numbers kept, each reduced by
Harman's "S" stemmer (Harman, "How effective is suffixing?", JASIS 1991): *-ies* -> *-y* (not
*-eies*, *-aies*), *-es* -> *-e* (not *-aes*, *-ees*, *-oes*), *-s* -> "" (not *-us*, *-ss*),
plus a trailing possessive ('s) removed. A deliberately light stemmer, independent of the
pipeline's own analyser, so the measure does not flatter bara's own tokenisation.

Pure functions; no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable

from bara.text.stopwords import RETRIEVAL_STOPWORDS

__all__ = ["TermCounts", "added_terms", "content_terms", "s_stem", "term_counts", "term_scores"]

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")


def s_stem(word: str) -> str:
    """Harman's S stemmer (1991): plural endings only, first rule that applies."""
    if len(word) > 3 and word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if len(word) > 2 and word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def content_terms(text: str) -> frozenset[str]:
    """Lower-cased, stop words out, possessives dropped, S-stemmed word terms of ``text``."""
    out = set()
    for token in _WORD.findall(text.lower()):
        token = re.sub(r"['\u2019]s$", "", token).replace("\u2019", "'")
        if token and token not in RETRIEVAL_STOPWORDS:
            out.add(s_stem(token))
    return frozenset(out)


def added_terms(query: str, user: str) -> frozenset[str]:
    """The content terms ``query`` adds to the user's own words."""
    return content_terms(query) - content_terms(user)


@dataclass(frozen=True)
class TermCounts:
    """Summed counts over turns: predicted terms, gold terms, and terms in both."""

    predicted: int = 0
    gold: int = 0
    correct: int = 0

    def __add__(self, other: "TermCounts") -> "TermCounts":
        return TermCounts(self.predicted + other.predicted, self.gold + other.gold, self.correct + other.correct)


def term_counts(user: str, human: str, query: str | None) -> TermCounts:
    """One turn's counts; ``query`` None (the turn was not searched) predicts no term."""
    gold = added_terms(human, user)
    predicted = added_terms(query, user) if query is not None else frozenset()
    return TermCounts(len(predicted), len(gold), len(predicted & gold))


def term_scores(counts: Iterable[TermCounts]) -> dict[str, float]:
    """Micro-averaged precision, recall and F1 (0.0 where a denominator is 0)."""
    total = sum(counts, TermCounts())
    p = total.correct / total.predicted if total.predicted else 0.0
    r = total.correct / total.gold if total.gold else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"term_precision": round(p, 4), "term_recall": round(r, 4), "term_f1": round(f, 4)}
