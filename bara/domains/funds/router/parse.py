"""What the rule router reads: keyword rules, argument extraction (quoted names, scheme codes, ISINs,
name runs), the allocation grouping asked for, and the reformulated search query.

Kept apart from :mod:`bara.domains.funds.router` so patterns change without touching routing.
"""

from __future__ import annotations

import re
from typing import Sequence

from bara.domains.funds.router.dates import MONTHS
from bara.text.ordered import Ordered
from bara.text.stopwords import REFORMULATION_FILLER, SCHEME_LEAD_STOPWORDS

# ------------------------------------------------------------------- keyword rules
_R = re.compile
PERSONAL = _R(r"\b(my|mine|i|me|i'm|i've|i'd)\b")
_FIGURE = _R(r"\b(portfolio|holdings?|xirr|worth|value|units?|invested|investments?|transactions?|allocation|"
             r"returns?|gains?|sips?|redemptions?|profits?|loss(es)?)\b")
WHY_FALL = Ordered(pairs=[(r"\b(why|what (caused|made|explains?))\b", r"\b(fall|falls|fell|fallen|drop|dropped|down|"
                           r"declin\w*|lost|losing|loss|underperform\w*|crash\w*|tank\w*|negative|dip|dipped|slump\w*)\b")])

RULES: dict[str, tuple[tuple[float, re.Pattern[str] | Ordered], ...]] = {
    "compute_xirr": (
        (2.0, _R(r"\bx?irr\b")),
        (1.0, _R(r"\b(annuali[sz]ed|overall|total|my|portfolio'?s?)\s+(rate of\s+)?returns?\b")),
        (1.0, Ordered([r"\breturns? (on|of|from) my\b"],
                      [(r"\bhow (is|are|has|have) my\b", r"\b(doing|performing|performed|done)\b")])),
    ),
    "get_holdings": (
        (2.0, _R(r"\bholdings?\b")),
        (1.0, _R(r"\bunits?\b|\b(worth|current value|market value|valued?)\b")),
        (1.0, _R(r"\bwhat (do|did) i (own|hold|have)\b|\bhow much (do i|have i|did i) (own|hold|have|invest\w*)\b")),
        (1.0, _R(r"\b(gains?|profits?|losses)\b")),
    ),
    "get_transactions": (
        (2.0, _R(r"\btransactions?\b")),
        (1.0, _R(r"\b(redemptions?|redeemed|withdr[ae]w\w*|bought|purchased?|purchases|instal?ments?|lump ?sums?)\b")),
        (1.0, _R(r"\bmy sips?\b|\bsips? (history|payments?|dates?)\b|\bwhen did i\b|\bstatement\b")),
        (1.0, _R(r"\bdid i (buy|invest|purchase|redeem|sell|put)\b")),
    ),
    "asset_allocation": (
        (2.0, _R(r"\ballocation\b")),
        (1.0, _R(r"\b(split|spread|break ?down|break-?up|diversifi\w*|exposure|mix|distribution|concentrat\w*)\b")),
        (1.0, _R(r"\bby (fund house|amc|asset class|category|scheme|fund)\b")),
        (1.0, _R(r"\b(percent(age)?|share|proportion|how much) of my (portfolio|money|investments?)\b")),
    ),
    "compare_funds": (
        (2.0, _R(r"\bcompare\b|\bcomparison\b|\bvs\.?(?=\s)|\bversus\b")),
        (1.0, _R(r"\b(volatil\w*|drawdown|trailing returns?|[136][ -]?(m|y|month|months|year)\b|one[ -]year|"
                 r"(three|six)[ -]months?)")),
        (1.0, _R(r"\bwhich (one |fund )?(is|was|has|did|performed) (better|worse)\b")),
    ),
    "search_documents": (
        (0.75, _R(r"^(what|who|how|why|which|explain|define|describe|tell me about)\b|\b(what (is|are|does)|"
                  r"what's|meaning of|difference between|definition)\b")),
        (0.5, _R(r"\b(tax\w*|expense ratios?|fees?|nav|index funds?|etfs?|hedge funds?|mutual funds?|"
                 r"diversif\w*|speculat\w*|fiat|category|fund house|manag(es|ed|er|ers)|401\(?k\)?|ira|roth|"
                 r"bonds?|stocks?|shares?|inflation|advis[eo]rs?)\b")),
    ),
}


def normal(text: str) -> str:
    return " ".join(text.replace("\u2019", "'").lower().split())


def rule_score(tool: str, low: str, spans: Sequence[str]) -> float:
    """Sum of the weights of ``tool``'s patterns that match the lower-cased message."""
    score = sum(w for w, rx in RULES.get(tool, ()) if rx.search(low))
    if tool == "compare_funds" and len(spans) >= 2 and "expense ratio" in low:
        score += 2.0  # "expense ratios of A and B": compare_funds says AMFI has none
    return score


def personal_figure(low: str) -> bool:
    """The user asks about their own numbers: computation tools, never document search."""
    return bool(PERSONAL.search(low) and _FIGURE.search(low))


# -------------------------------------------------------------- argument extraction
QUOTED = _R(r"[\"\u201c]([^\"\u201d]{3,120})[\"\u201d]")
CODE = _R(r"\b1\d{5}\b")
ISIN = _R(r"\bIN[FE][A-Z0-9]{9}\b")
_TOKEN = _R(r"[A-Za-z0-9][\w&.'/+()-]*|&|-")
_FUND_WORDS = frozenset("fund plan direct growth option regular cap index etf fof scheme idcw".split())
_NOT_SCHEMES = frozenset("xirr nav navs amfi sip sips elss etf etfs inr rs amc sebi usd ok ira roth".split())


def name_runs(text: str) -> list[str]:
    """Runs of capitalised words (plus fund words, '&', '-') that look like scheme names."""
    runs: list[list[str]] = [[]]
    end = 0
    for m in _TOKEN.finditer(text.replace("\u2019", "'")):
        word = m.group(0).rstrip(".,'")
        if text[end:m.start()].strip() or not _name_word(word):
            runs.append([])
        if _name_word(word):
            runs[-1].append(re.sub(r"'s$", "", word))
        end = m.end()
    return [" ".join(r) for r in (_trim(run) for run in runs) if _scheme_like(r)]


def _name_word(word: str) -> bool:
    if word.lower() in MONTHS or re.fullmatch(r"(19|20)\d\d", word):
        return False
    return word[:1].isupper() or word[:1].isdigit() or word in ("&", "-") or word.lower() in _FUND_WORDS


def _trim(run: list[str]) -> list[str]:
    while run and (run[0].lower() in SCHEME_LEAD_STOPWORDS or run[0] in ("&", "-")):
        run = run[1:]
    while run and run[-1] in ("&", "-"):
        run = run[:-1]
    return run


def _scheme_like(run: list[str]) -> bool:
    words = [w.lower() for w in run]
    return len(run) >= 2 and any(w not in _FUND_WORDS and w not in _NOT_SCHEMES for w in words)


_BY_HOUSE = Ordered([r"\b(fund houses?|amcs?|asset management|fund compan(y|ies))\b"],
                    [(r"\b(with|from|at)\b", r"\b(mutual fund|mf)\b")])
_BY_SCHEME = Ordered([r"\b(by|per|each) (scheme|fund)\b"], [(r"\bschemes?\b", r"\bsplit\b")])


def allocation_by(low: str) -> str:
    if _BY_HOUSE.search(low):
        return "fund_house"
    if _BY_SCHEME.search(low):
        return "scheme"
    return "category_group"


# ------------------------------------------------------------------- reformulation
#: The user's words mapped to the words the finance passages and fact sheets use.
CORPUS_WORDS = {
    **dict.fromkeys("fee fees charge charges cost costs".split(), "expense ratio fees"),
    **dict.fromkeys("fall fell drop dropped crash tanked dip down".split(), "decline loss"),
    **dict.fromkeys("sip sips".split(), "systematic investment plan"),
    **dict.fromkeys("etf etfs".split(), "exchange traded fund etf"),
    **dict.fromkeys("tracker trackers passive".split(), "index funds"),
    **dict.fromkeys("adviser planner".split(), "financial advisor"),
    **dict.fromkeys("cheap cheaper".split(), "low fees"),
    "mf": "mutual fund", "elss": "tax saving equity fund", "risky": "risk volatility", "safe": "risk savings account",
    "401k": "401k retirement account", "shares": "stocks shares", "nav": "nav net asset value",
}


def reformulate(query: str) -> str | None:
    """A second query in corpus vocabulary (content words kept, user words mapped); None if nothing is left."""
    words = [w.strip(".,;:!?\"'()") for w in query.lower().split()]
    kept = [CORPUS_WORDS.get(w, w) for w in words if w and w not in REFORMULATION_FILLER]
    again = " ".join(dict.fromkeys(" ".join(kept).split()))
    return again if len(again) >= 3 else None
