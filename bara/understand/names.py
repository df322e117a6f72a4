"""Pure text functions the rewrite and the gate share: clean and cap a query, analysed terms,
content words, the names in a text (capitalised runs, acronyms, versioned ids) and referring words.

Each is a function of its text alone; the ones read every turn for the same history are cached
per text. Split from ``bara.understand.rewrite`` so the rewrite module keeps to the
rules that compose a query.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterator

from bara.text.lexical import analyze
from bara.text.stopwords import RETRIEVAL_STOPWORDS

__all__ = ["cap", "clean", "content_tuple", "entities", "entity_tuple", "has_content", "references", "terms"]

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_TOKEN = re.compile(r"[^\W_](?:[\w'\u2019+#&.-]*[^\W_])?")
_SENTENCES = re.compile(r"[.!?;:]+\s+|\n")
_DIGIT = re.compile(r"\d")
_POSSESSIVE = re.compile(r"['\u2019]s?$")
_CONNECTORS = frozenset("of to for the de la du on in von van".split())
_NOT_NAMES = frozenset("""
what how why when where which who whom whose is are was were do does did can could should would will
shall may might must i i'm i've i'd you your we our my it its they them their this that these those
there here hi hello hey thanks thank please ok okay yes no sure so and but or also then well tell give
explain describe list show let if in on for about any some all what's how's compare define find
summarize summarise provide help according besides regarding as now yeah great
""".split())
_GENERIC = frozenset("""
tell know explain mean means meant please thanks thank like want need get use used make made
thing things way ways something anything also really much many lot lots kind sort type types
one ones two good great okay ok sure yes hi hello hey say said sound sounds seem seems think
question questions answer information info detail details example examples help able
difference differences different same other another more less else still just even
helps helped helpful glad cool nice awesome perfect fine welcome appreciate appreciated bye goodbye
""".split())
_REFERENCE = re.compile(
    r"\b(the other one|the other|the former|the latter|the same|this one|that one|"
    r"(?:this|that|these|those|the) (?:service|product|tool|feature|option|plan|program|method|"
    r"approach|one|ones|thing|things|place|city|country|person|team|book|song|law|policy|"
    r"company|organization|agency|instance|account|platform|model|version|api|event|war|"
    r"disease|species|state|process)|"
    r"it|its|it's|itself|they|them|their|theirs|themselves|these|those|this|that|"
    r"he|she|him|her|his|hers|"
    r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )there(?!\s+(?:is|are|was|were|be|been|any|a|an|some|no)\b))\b",
    re.IGNORECASE)


# --- text basics -------------------------------------------------------------------

def clean(text: str) -> str:
    """Control characters out, whitespace collapsed: the query must be one clean line."""
    return " ".join(_CONTROL.sub(" ", text).split())


def cap(text: str, max_chars: int) -> str:
    """Cut at the last word boundary within ``max_chars`` (a hard cut if one word is longer)."""
    if len(text) <= max_chars:
        return text
    cut = text[:max(max_chars, 0)]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip()


@lru_cache(maxsize=8192)
def terms(text: str) -> frozenset[str]:
    """The analysed terms the lexical arm would see: the unit of "already in the query".
    A pure function of the text, cached: the same history phrases are analysed every turn."""
    return frozenset(analyze(text))


@lru_cache(maxsize=4096)
def content_tuple(text: str) -> tuple[str, ...]:
    """Lower-cased words that can carry a topic (not stopwords, not conversational filler, not
    numbers), in order; cached per text, like ``entity_tuple``."""
    return tuple(w for w in (t.lower() for t in _TOKEN.findall(text))
                 if len(w) > 2 and w not in RETRIEVAL_STOPWORDS and w not in _GENERIC and not w.isdigit())


# --- names -------------------------------------------------------------------------

def _tokens(text: str) -> Iterator[tuple[str, bool]]:
    """Tokens with a flag saying whether each one starts a sentence."""
    for sentence in _SENTENCES.split(text):
        for i, token in enumerate(_TOKEN.findall(sentence)):
            yield token, i == 0


def _namey(token: str) -> bool:
    """Capitalised, all-caps or versioned ("ER-2", "v2"): how names look in English text."""
    return token[0].isupper() or (not token.isdigit() and _DIGIT.search(token) is not None)


def _runs(tokens: Iterator[tuple[str, bool]]) -> Iterator[list[tuple[str, bool]]]:
    """Maximal runs of name-like tokens, allowing lower-case connectors inside ("Speech to Text")."""
    run: list[tuple[str, bool]] = []
    for token, at_start in tokens:
        if run and not at_start and (_namey(token) or token.lower() in _CONNECTORS):
            run.append((token, at_start))
            continue
        if run:
            yield run
        run = [(token, at_start)] if _namey(token) else []
    if run:
        yield run


def _filler(word: str, at_start: bool) -> bool:
    """Question words anywhere; common words and adverbs only when capitalised by position."""
    low = word.lower()
    return low in _NOT_NAMES or low in _CONNECTORS or (
        at_start and (low in RETRIEVAL_STOPWORDS or low in _GENERIC or low.endswith("ly")))


def _trim(run: list[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """Drop fillers from the front of a run and connectors from its end."""
    while run and _filler(*run[0]):
        run = run[1:]
    while run and run[-1][0].lower() in _CONNECTORS:
        run = run[:-1]
    return run


def _is_name(run: list[tuple[str, bool]]) -> bool:
    """A lone sentence-initial capitalised word is grammar ("Regional differences"), not a name."""
    if len(run) > 1:
        return True
    word, at_start = run[0]
    shaped = (word.isupper() and len(word) > 1) or _DIGIT.search(word) is not None \
        or any(c.isupper() for c in word[1:])
    return shaped or not at_start


def entities(text: str) -> list[str]:
    """Names in ``text`` in order: capitalised runs, acronyms, versioned ids (no possessive 's)."""
    return list(entity_tuple(text))


@lru_cache(maxsize=4096)
def entity_tuple(text: str) -> tuple[str, ...]:
    """A pure function of the text, cached: every turn re-reads the same recent history."""
    found = []
    for run in _runs(_tokens(text)):
        run = _trim(run)
        if run and _is_name(run):
            found.append(_POSSESSIVE.sub("", " ".join(t for t, _ in run)))
    return tuple(found)


def has_content(text: str, min_content_words: int = 1) -> bool:
    """True when a user turn names something or says a topic word: "thanks!" and "ok" do not."""
    return bool(entity_tuple(text)) or len(content_tuple(text)) >= min_content_words


def references(message: str) -> list[str]:
    """Referring expressions in the message, lower-cased, in order of appearance."""
    return [m.group(1).lower() for m in _REFERENCE.finditer(message)]
