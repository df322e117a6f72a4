"""The lexical analyser shared by indexing and querying.

Pinned settings (reported in docs/benchmarks.md): lower-casing, tokens are runs
of Unicode letters/digits (``[^\\W_]+``), an English stopword list (:data:`bara.text.stopwords.RETRIEVAL_STOPWORDS`),
Snowball English stemming (PyStemmer). Index and query use the same function,
so the FTS5 tokenizer (unicode61) only ever sees pre-analysed terms and FTS
query syntax in user text is inert: every term is quoted.
"""

from __future__ import annotations

import re
from functools import lru_cache

import Stemmer

from bara.text.stopwords import RETRIEVAL_STOPWORDS

_TOKEN = re.compile(r"[^\W_]+")


_STEMMER = Stemmer.Stemmer("english")


@lru_cache(maxsize=50_000)
def _stem(word: str) -> str:
    return _STEMMER.stemWord(word)


def analyze(text: str) -> list[str]:
    """Lower-case, tokenise, drop stopwords, Snowball-stem. Order preserved."""
    return [_stem(t) for t in _TOKEN.findall(text.lower()) if t not in RETRIEVAL_STOPWORDS]


def index_text(text: str) -> str:
    """The analysed form stored in the full-text index."""
    return " ".join(analyze(text))


def match_expression(terms: tuple[str, ...] | list[str]) -> str:
    """An FTS5 MATCH string OR-ing the distinct terms, each quoted (so inert)."""
    unique = dict.fromkeys(t for t in terms if t)
    return " OR ".join(f'"{t}"' for t in unique)
