"""A fund the message names that the scheme catalogue could not resolve, as the user wrote it (the rule
router passes it to the tool, whose error then says the fund is not the user's: never the whole portfolio's
figure in its place). Every look around a hit is a bounded window, so reading is linear in the message.
"""

from __future__ import annotations

import re

from bara.domains.funds.router.parse import name_runs
from bara.text.stopwords import RETRIEVAL_STOPWORDS

#: A number shaped like an AMFI scheme code (5-7 digits on its own), unless money or units mark it.
_CODE_LIKE = re.compile(r"(?<![\w.,/-])\d{5,7}(?![\w,/-]|\.\d)")
_MONEY_BEFORE = re.compile(r"(?:rs\.?|inr|\u20b9|\$|usd|invest\w*|amount|worth|value|paid|put|sip of)\s*$")
_MONEY_AFTER = re.compile(r"^\s*(?:rupees|rs\b|inr|units?\b|%|k\b|lakhs?|lacs?|crores?|/-)")
_FUND_NOUN = re.compile(r"\b(fund|scheme)\b(?!s)(?!-)")
#: Words that say which fund without naming one ("my mutual fund", "my SIP fund"): the whole portfolio.
_UNNAMED = frozenset("mutual mf sip sips all whole entire total overall own investment investments fund plan scheme "
                     "direct regular growth option idcw".split())  # "index", "etf", "cap" do say which fund
_AFTER_PREP = re.compile(r"\b(?:of|for|in|on)\s+$")
_LOOK = 64  # characters around a hit that the patterns above read (their longest match is ~20)


def named_fund(text: str) -> str | None:
    """A fund the message names that the catalogue could not resolve, as the user wrote it: a
    code-shaped number ("xirr of 999999"), a phrase ending in "fund"/"scheme" ("my ELSS fund", "the tax
    saver scheme"), or a capitalised name after of/for/in ("xirr for Axis Bluechip"); None when the
    message names no particular fund (then the whole portfolio is meant)."""
    for m in _CODE_LIKE.finditer(text):  # each look is a bounded window: linear in the text, however many hits
        before, after = text[max(0, m.start() - _LOOK):m.start()].lower(), text[m.end():m.end() + _LOOK].lower()
        if not _MONEY_BEFORE.search(before) and not _MONEY_AFTER.match(after):
            return m.group(0)
    for m in _FUND_NOUN.finditer(text.lower()):
        words = re.findall(r"[\w&'.-]+", text[max(0, m.start() - 8 * _LOOK):m.start()])[-4:]
        kept: list[str] = []
        for word in reversed(words):
            if word.lower().strip(".'") in RETRIEVAL_STOPWORDS or word.lower() in _NAME_STOP:
                break
            kept.insert(0, word)
        if any(w.lower() not in _UNNAMED for w in kept):
            return " ".join([*kept, text[m.start():m.end()]])
    at = 0
    for run in name_runs(text):  # runs in text order: each is found after the one before it
        at = text.find(run, at)
        if _AFTER_PREP.search(text[max(0, at - _LOOK):at].lower()):
            return run
        at += len(run)
    return None


#: Words that end a fund phrase read backwards from "fund" besides stopwords: figures and verbs of the ask.
_NAME_STOP = frozenset("xirr irr returns return transactions transaction holdings performance show list give "
                       "tell compute calculate mera mere meri apna apne apni hamara hamare humara ka ke ki".split())
