"""Scheme names in a message, found by fuzzy matching over the scheme catalogue (held schemes first).

People write scheme names in lower case, with typos, without "Fund" or the
plan words, and wrapped in verbs ("Put DSP Flexi Cap Fund and ..."). Slicing
capitalised runs out of the text breaks on all of these; matching windows of
the message against the known names does not.

* **Names.** Each scheme with NAV history is reduced to its short form (plan
  and option words, "(Formerly ...)" dropped; lower case). Plans of one scheme
  share a short form and are one entry, represented by the user's own code if
  they hold one, else the Direct Growth plan.
* **Catalogue matches** are anchored on the fund house: a window of the message
  must start with a word that matches the scheme's first word, and the window
  must match the whole short name with ``fuzz.ratio`` (normalised Indel
  similarity, 0-100) at least ``router_scheme_min_score``.
* **Held schemes** also match without the fund house ("my flexi cap fund"): every
  distinctive word of the name (not a fund-house, plan or generic word) must
  appear in the message, each within ``router_scheme_token_score``.

Overlapping matches keep the best score (then the longer name); the result is in
message order. Reference for the similarity: rapidfuzz ``fuzz.ratio`` =
100 * (1 - Indel(a, b) / (len(a) + len(b))).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from rapidfuzz import fuzz, process

from bara.store.base import SqlRunner
from bara.domains.funds.repo import FundsRepo

_WORD = re.compile(r"[a-z0-9]+")
_FORMERLY = re.compile(r"\((?:formerly|erstwhile)[^)]*\)?|\bformerly\b.*$", re.I)
PLAN_WORDS = frozenset("direct regular plan growth option idcw dividend payout reinvestment bonus "
                       "monthly quarterly annual weekly daily half yearly".split())
GENERIC = frozenset("fund funds scheme mf mutual the of and india".split()) | PLAN_WORDS


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("&", " and "))


def short_words(name: str) -> tuple[str, ...]:
    """"DSP Flexi Cap Fund - Direct Plan - Growth" -> ("dsp", "flexi", "cap", "fund")."""
    return tuple(w for w in words(_FORMERLY.sub(" ", name)) if w not in PLAN_WORDS)


@dataclass(frozen=True)
class Entry:
    """One scheme (all its plans) as people name it."""

    code: str
    name: str  # full AMFI name of the representative plan
    short: tuple[str, ...]
    distinctive: frozenset[str]  # words that are not fund-house, plan or generic words
    codes: frozenset[str]

    @property
    def label(self) -> str:
        return " ".join(self.short)


@dataclass(frozen=True)
class Mention:
    code: str
    name: str
    start: int  # word offsets in the message
    end: int
    score: float
    held: bool


def _representative(plans: Sequence[tuple[str, str]]) -> tuple[str, str]:
    def rank(plan: tuple[str, str]) -> tuple[bool, bool, str]:
        low = plan[1].lower()
        return "direct" not in low, "growth" not in low, plan[0]
    return min(plans, key=rank)


class SchemeCatalogue:
    """Scheme names to match against; ``held(user)`` gives the user's own codes (first in line)."""

    def __init__(self, rows: Iterable[tuple[str, str, str]], held: Any = None,
                 min_score: float = 85.0, token_score: float = 85.0) -> None:
        groups: dict[tuple[str, ...], list[tuple[str, str, str]]] = {}
        for code, name, house in rows:
            short = short_words(name)
            if len(short) >= 2:
                groups.setdefault(short, []).append((str(code), name, house))
        self.entries: list[Entry] = []
        for short, plans in groups.items():
            code, name = _representative([(c, n) for c, n, _ in plans])
            house = set(words(plans[0][2]))
            self.entries.append(Entry(code, name, short, frozenset(w for w in short if w not in house | GENERIC),
                                      frozenset(c for c, _, _ in plans)))
        self.by_first: dict[str, list[Entry]] = {}
        for entry in self.entries:
            self.by_first.setdefault(entry.short[0], []).append(entry)
        self.firsts = list(self.by_first)
        self.entries_by_code = {c: e for e in self.entries for c in e.codes}
        self._held = held
        self.min_score, self.token_score = min_score, token_score

    @classmethod
    def from_store(cls, store: SqlRunner, min_score: float = 85.0, token_score: float = 85.0) -> "SchemeCatalogue":
        """Schemes with NAV history in ``store``; held codes read per user from the transactions table."""
        repo = FundsRepo(store)
        return cls(repo.schemes_with_navs(), repo.user_scheme_codes, min_score, token_score)

    def label(self, code: str) -> str:
        """The scheme's AMFI name for a code it knows, else the code itself."""
        entry = self.entries_by_code.get(code)
        return entry.name if entry else code

    def held_codes(self, user: str) -> set[str]:
        return set(self._held(user)) if self._held and user else set()

    # ------------------------------------------------------------------ matching
    def find(self, text: str, user: str = "") -> list[Mention]:
        """Schemes named in ``text``, in message order, one mention per scheme."""
        tokens = words(text)
        held = self.held_codes(user)
        found = self._held_mentions(tokens, held) + self._catalogue_mentions(tokens, held)
        chosen: list[Mention] = []
        for m in sorted(found, key=lambda m: (-m.score, -(m.end - m.start), m.start)):
            if all(m.end <= c.start or m.start >= c.end for c in chosen) and m.code not in {c.code for c in chosen}:
                chosen.append(m)
        return sorted(chosen, key=lambda m: m.start)

    def _catalogue_mentions(self, tokens: list[str], held: set[str]) -> list[Mention]:
        out = []
        for i, token in enumerate(tokens):
            if token in GENERIC:
                continue
            for first, _, _ in process.extract(token, self.firsts, scorer=fuzz.ratio, limit=3,
                                               score_cutoff=self._word_cutoff(token)):
                for entry in self.by_first[first]:
                    best = self._window_score(tokens, i, entry)
                    if best is not None:
                        out.append(self._mention(entry, i, best[0], best[1], held))
        return out

    def _window_score(self, tokens: list[str], i: int, entry: Entry) -> tuple[int, float] | None:
        """Best (end, score) of windows starting at ``i`` against the entry's short name (with and
        without a trailing "fund")."""
        names = {" ".join(entry.short)}
        if entry.short[-1] == "fund":
            names.add(" ".join(entry.short[:-1]))
        n, best = len(entry.short), None
        for end in range(i + max(1, n - 2), min(len(tokens), i + n + 1) + 1):
            window = " ".join(tokens[i:end])
            score = max(fuzz.ratio(window, name) for name in names)
            if score >= self.min_score and (best is None or score > best[1]):
                best = (end, score)
        return best

    def _held_mentions(self, tokens: list[str], held: set[str]) -> list[Mention]:
        out = []
        for entry in (e for e in self.entries if e.codes & held and e.distinctive):
            spots = [self._find_word(tokens, w) for w in entry.distinctive]
            found = [s for s in spots if s is not None]
            if len(found) == len(spots):
                start, end = min(found), max(found) + 1
                out.append(self._mention(entry, start, end, self.token_score - 1 + len(spots), held))
        return out

    def _find_word(self, tokens: list[str], word: str) -> int | None:
        if word.isdigit() or len(word) <= 3:
            return next((i for i, t in enumerate(tokens) if t == word), None)
        hit = process.extractOne(word, tokens, scorer=fuzz.ratio, score_cutoff=self.token_score)
        return None if hit is None else hit[2]

    def _word_cutoff(self, token: str) -> float:
        return 100.0 if len(token) <= 3 else self.token_score

    @staticmethod
    def _mention(entry: Entry, start: int, end: int, score: float, held: set[str]) -> Mention:
        own = sorted(entry.codes & held)
        return Mention(own[0] if own else entry.code, entry.name, start, end, score, bool(own))
