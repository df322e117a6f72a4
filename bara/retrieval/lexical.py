"""The lexical analyser shared by indexing and querying.

Pinned settings (reported in docs/benchmarks.md): lower-casing, tokens are runs
of Unicode letters/digits (``[^\\W_]+``), an English stopword list (below),
Snowball English stemming (PyStemmer). Index and query use the same function,
so the FTS5 tokenizer (unicode61) only ever sees pre-analysed terms and FTS
query syntax in user text is inert: every term is quoted.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

_TOKEN = re.compile(r"[^\W_]+")

STOPWORDS = frozenset("""
a about above after again against all am an and any are aren't as at be because been before being
below between both but by can cannot could couldn't did didn't do does doesn't doing don't down during
each few for from further had hadn't has hasn't have haven't having he her here hers herself him himself
his how i if in into is isn't it its itself let's me more most mustn't my myself no nor not of off on
once only or other ought our ours ourselves out over own same shan't she should shouldn't so some such
than that the their theirs them themselves then there these they this those through to too under until
up very was wasn't we were weren't what when where which while who whom why with won't would wouldn't you
your yours yourself yourselves s t d ll m re ve y will just also
""".split())

_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=50_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def analyze(text: str) -> list[str]:
    """Lower-case, tokenise, drop stopwords, Snowball-stem. Order preserved."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in STOPWORDS]


def index_text(text: str) -> str:
    """The analysed form stored in the full-text index."""
    return " ".join(analyze(text))


def match_expression(terms: tuple[str, ...] | list[str]) -> str:
    """An FTS5 MATCH string OR-ing the distinct terms, each quoted (so inert)."""
    unique = dict.fromkeys(t for t in terms if t)
    return " OR ".join(f'"{t}"' for t in unique)
