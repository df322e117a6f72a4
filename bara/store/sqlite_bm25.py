"""FTS5's ``bm25()`` computed in memory for one search scope: the same scores, bit for bit, and the same
order as the store's full-text query.

FTS5 scores every row that matches any query term by calling ``bm25()`` on it: ~0.7 µs a row, so a
rewritten multi-term query over a large knowledge base spends most of its ~1 ms there (counting the
same matches takes a tenth of it). The scope's term frequencies change only when the scope is
written, so they are read once (:func:`build_lexicon`) and every query is scored with numpy.

The formula is SQLite's ``fts5Bm25Function`` (ext/fts5/fts5_aux.c), Okapi BM25 (Robertson &
Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) with k1 = 1.2, b = 0.75::

    idf(t)   = log((N - n(t) + 0.5) / (n(t) + 0.5)), or 1e-6 when that is <= 0
    f(t, d)  = the column weights of t's instances in d, added in (column, offset) order
    score(d) = sum over the query's phrases, in query order, of
               idf(t) * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * |d| / avgdl)))

N, n(t) and avgdl are table-wide, |d| counts every column's tokens. The table is ``chunks_fts``, which
holds the shared scopes' rows only (users' memory is in ``memory_fts``, ``bara.store.sqlite_lexical``),
so a knowledge base that is the only shared collection is the whole table and needs no row counts. The
statistics are read fresh for each query, in one statement and so one snapshot (the averages record,
and ``fts5vocab`` row counts unless the scope is the whole table), while the scope's own frequencies
are cached with the scope's write generations. A lexicon built on ``memory_fts`` is ``own``: N, n(t)
and avgdl are its own rows' (a users' memory scope, ``bara.store.sqlite_scope_bm25``), the same
formula over the searched scope instead of the table. A query's phrases are scored in one numpy pass; ``np.bincount`` adds each
row's contributions in phrase order from 0.0, as FTS5's loop does.
Exact agreement needs the same floating-point operations in the same order, and FTS5's own tokens:
a stored term that is not plain ``[a-z0-9]+`` is tokenised by an in-memory FTS5 table with the same
tokenizer, every row's token count is checked against FTS5's ``docsize``, a new lexicon must rank a
probe of three terms as FTS5 does (``sqlite_lexicons.agrees_with_fts5``), and a query with a term that is not plain
is left to FTS5 (None). ``tests/retrieval/test_lexical_memory.py`` compares the two.

A knowledge base of at least ``lexical_topk_min_chunks`` gets a compact lexicon persisted beside the file
(``sqlite_lexicon_file``) with a bound per term, and :meth:`Lexicon.rows` ranks it by MaxScore
(``lexical_topk``): the same rows, scores and order as :func:`ranked_rows`, without scoring every match.
"""

from __future__ import annotations

import math
import re
import sqlite3
from array import array
from collections import defaultdict
from contextlib import closing
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import count
from typing import Sequence

import numpy as np

from bara.store.lexical_topk import frequencies, impact, top_rows
from bara.store.sqlite_lexical import KB_FTS, Run, averages, varints

PLAIN = re.compile(r"[a-z0-9]+")
NOT_PLAIN = re.compile(r"[^a-z0-9\s]")  # a character no plain token or space has
KNOWN_TOKENS: dict[str, tuple[str, ...]] = {}  # fts5_tokens' words so far, up to KNOWN_TOKENS_MAX of them
KNOWN_TOKENS_MAX = 100_000  # ~20 MB at most: a bound on the memo, not a tuning knob
ROW_COUNTS = f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.bara_fts_rows USING fts5vocab(main, '{KB_FTS}', 'row')"


@dataclass
class WholeHint:
    """Whether the scope was the whole table at the last query: then the next one reads only the
    averages record (no row counts: the scope's postings are them), else both in one statement."""

    whole: bool = False


@dataclass(frozen=True)
class Lexicon:
    """One scope's full-text rows: ids (ascending), tokens per row and, per term, its postings in
    compressed-column form (term ``t``'s rows are ``rows[start[t]:start[t + 1]]``, ascending)."""

    gens: tuple[int, ...]
    ids: np.ndarray  # int64 chunk ids
    length: np.ndarray  # float64 tokens per row, every column (FTS5's docsize)
    terms: dict[str, int]
    start: np.ndarray  # int64, len(terms) + 1
    rows_of: np.ndarray  # int32 row positions (uint32 in a persisted lexicon, sqlite_lexicon_file)
    counts: np.ndarray  # int32 (postings, 3): instances in body, heading, scope (uint16, no scope, persisted)
    own: bool = False  # statistics from these rows alone (a user's memory scope, sqlite_scope_bm25)
    tokens: int = 0  # every row's tokens, added (the scope's own average length when ``own``)
    hint: WholeHint = field(default_factory=WholeHint, compare=False)  # the one mutable part
    bound: np.ndarray | None = field(default=None, compare=False)  # per term G0: MaxScore (lexical_topk) when set
    ref: tuple[float, float] = (1.0, 1.0)  # the (title weight, average length) ``bound`` was computed at

    def rows(self, run: Run, terms: Sequence[str], title_weight: float, limit: int) -> list[tuple[int, float]] | None:
        """The scope's best ``limit`` rows for ``terms`` as (id, score), FTS5's order (score, then id);
        None when a term is not plain (FTS5 tokenises it; the caller runs the SQL query). An ``own``
        lexicon is scored by :func:`own_rows`, over its own statistics."""
        if self.own:
            return own_rows((self,), terms, title_weight, limit)
        phrases = query_phrases(terms, False)
        if not phrases:
            return None
        if len(self.ids) == 0:
            return []  # an empty scope matches nothing
        spans = self.spans(phrases)
        if not spans:
            return []  # no phrase occurs in the scope: nothing matches, no statistics needed
        held = [t for t, _, _ in spans]  # a phrase the scope lacks scores nothing: its count is not read
        n_row, n_token, hits = self._stats(run, held)
        if self.bound is not None:  # a large scope: MaxScore's exact top-k, unless it would score most rows
            found = top_rows(self.rows_of, self.counts, self.length, self.ids,
                             [(a, b, float(self.bound[self.terms[t]])) for t, a, b in spans],
                             [idf_of(n_row, hits.get(t, 0)) for t, _, _ in spans], float(n_token) / float(n_row),
                             title_weight, limit, self.ref)
            if found is not None:
                return found
        return ranked_rows([(self, spans)], n_row, n_token, hits, title_weight, limit)

    def spans(self, phrases: Sequence[str]) -> list[tuple[str, int, int]]:
        """(phrase, first, end) of each phrase's postings, in query order; a phrase the rows lack is left out."""
        return [(t, int(self.start[i]), int(self.start[i + 1])) for t in phrases if (i := self.terms.get(t)) is not None]

    def _stats(self, run: Run, held: list[str]) -> tuple[int, int, dict[str, int]]:
        """(N, tokens, n(t) of ``held``): the table's (one statement), or the rows' own when they are it."""
        asked = () if self.hint.whole else held
        n_row, n_token, hits = table_stats(run, asked)
        self.hint.whole = n_row == len(self.ids)
        if self.hint.whole:  # the scope is the whole table: its postings are the counts
            hits = self.holding(held)
        elif not asked:  # the table has grown since the last query: the counts in a second statement
            hits = table_stats(run, held)[2]
        return n_row, n_token, hits

    def holding(self, phrases: list[str]) -> dict[str, int]:
        """Rows of this lexicon holding each term (its postings; no query): n(t) of a whole table or own."""
        return {t: int(self.start[i + 1] - self.start[i]) for t in phrases if (i := self.terms.get(t)) is not None}


def ranked_rows(parts: Sequence[tuple[Lexicon, list[tuple[str, int, int]]]], n_row: int, n_token: int,
                hits: dict[str, int], title_weight: float, limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` rows of ``parts`` (lexicons of disjoint rows, each with its phrases' spans) as
    (id, score), FTS5's order, under one set of statistics (N, every row's tokens, n(t)).

    Every phrase's postings in query order, scored in one pass per part: each element gets the operations
    the per-phrase loop gave it, and bincount adds each row's contributions in this order, from 0.0."""
    avgdl = float(n_token) / float(n_row)
    found_ids, found_scores = [], []
    for lexicon, spans in parts:
        if not spans:
            continue
        at = np.concatenate([lexicon.rows_of[a:b] for _, a, b in spans])
        freq = frequencies(np.concatenate([lexicon.counts[a:b] for _, a, b in spans]), title_weight)
        idf = np.repeat([idf_of(n_row, hits.get(t, 0)) for t, _, _ in spans], [b - a for _, a, b in spans])
        part = impact(idf, freq, lexicon.length[at], avgdl)
        score = np.bincount(at, weights=part, minlength=len(lexicon.ids))
        matched = np.zeros(len(lexicon.ids), dtype=bool)
        matched[at] = True
        found = np.flatnonzero(matched)
        found_ids.append(lexicon.ids[found])
        found_scores.append(score[found])
    if not found_ids:
        return []
    ids = found_ids[0] if len(found_ids) == 1 else np.concatenate(found_ids)
    score = found_scores[0] if len(found_scores) == 1 else np.concatenate(found_scores)
    ranked = -1.0 * score  # what FTS5 returns; ORDER BY s, rowid
    best = np.lexsort((ids, ranked))[:limit]
    return [(int(ids[i]), -float(-1.0 * score[i])) for i in best]


def own_rows(parts: Sequence[Lexicon], terms: Sequence[str], title_weight: float,
             limit: int) -> list[tuple[int, float]] | None:
    """The best rows of ``own`` lexicons of disjoint rows (one, or a scope's and the rows appended since,
    ``sqlite_scope_bm25.ScopeLexicon``) over their statistics together, bit for bit one lexicon of them
    all; None when a term is several FTS5 tokens (a phrase, which a lexicon without positions cannot match)."""
    phrases = query_phrases(terms, True)
    if not phrases:
        return None
    n_row = sum(len(p.ids) for p in parts)
    if n_row == 0:
        return []
    spans = [p.spans(phrases) for p in parts]
    if not any(spans):
        return []
    hits: dict[str, int] = {}
    for lexicon, found in zip(parts, spans, strict=True):
        for t, n in lexicon.holding([t for t, _, _ in found]).items():
            hits[t] = hits.get(t, 0) + n
    return ranked_rows(list(zip(parts, spans, strict=True)), n_row, sum(p.tokens for p in parts), hits,
                       title_weight, limit)


def idf_of(n_row: int, n_hit: int) -> float:
    """FTS5's IDF of a phrase that ``n_hit`` of the table's ``n_row`` rows hold (1e-6 when not positive)."""
    idf = math.log(((n_row - n_hit) + 0.5) / (n_hit + 0.5))
    return idf if idf > 0.0 else 1e-6


def table_stats(run: Run, terms: Sequence[str]) -> tuple[int, int, dict[str, int]]:
    """(rows, tokens of every column, rows holding each of ``terms``) of the whole knowledge-base
    full-text table, in one statement, so one snapshot: FTS5's averages record and ``fts5vocab``'s row
    counts (its table is created on a connection's first ask)."""
    sql = f"SELECT NULL, block FROM {KB_FTS}_data WHERE id = 1"
    if terms:
        sql += f" UNION ALL SELECT term, doc FROM temp.bara_fts_rows WHERE term IN ({','.join('?' * len(terms))})"
    try:
        found = run(sql, tuple(terms))
    except sqlite3.OperationalError:  # no such table yet on this connection
        run(ROW_COUNTS, ())
        found = run(sql, tuple(terms))
    n_row, n_token = next((averages(b) for t, b in found if t is None), (0, 0))
    return n_row, n_token, {str(t): int(n) for t, n in found if t is not None}


def scope_sql(table: str, owners: int, colls: int, only: int | None = None, after: bool = False) -> str:
    """The scope's full-text rows with FTS5's sizes, by id: of ``only`` ids when given, or a page of those
    after an id (``after``: the last two parameters are that id and the page's size)."""
    some = f" AND c.id IN ({','.join('?' * only)})" if only is not None else ""
    some += " AND c.id > ?" if after else ""
    return (f"SELECT c.id, f.body, f.heading, f.scope, d.sz FROM chunks c JOIN {table} f ON f.rowid = c.id"
            f" JOIN {table}_docsize d ON d.id = c.id WHERE c.owner IN ({','.join('?' * owners)})"
            f" AND c.collection IN ({','.join('?' * colls)}){some} ORDER BY c.id" + (" LIMIT ?" if after else ""))


def build_lexicon(run: Run, owners: Sequence[str], colls: Sequence[str], gens: tuple[int, ...], table: str = KB_FTS,
                  only: Sequence[int] | None = None) -> Lexicon | None:
    """Read the scope's full-text rows from ``table`` (only those of the ids ``only`` when given); None when a row's tokens
    do not add up to FTS5's own count. A users' table's lexicon is ``own``: its statistics are its rows'."""
    rows = run(scope_sql(table, len(owners), len(colls), None if only is None else len(only)),
               (*owners, *colls, *(only or ())))
    found = postings(rows)
    if found is None:
        return None
    terms, ids, length, start, rows_of, counts = found
    own = table != KB_FTS
    return Lexicon(gens, ids, length, terms, start, rows_of, counts, own, int(length.sum()),
                   WholeHint(not own and table_stats(run, ())[0] == len(rows)))


def postings(rows: list[tuple]) -> tuple[dict[str, int], np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                         np.ndarray] | None:
    """(terms, ids, lengths, start, rows_of, counts) of :class:`Lexicon` for ``rows`` (id, body, heading,
    scope, docsize; by id); None when a row's tokens do not add up to FTS5's own count."""
    tokens = token_ids(rows)
    if tokens is None:
        return None
    terms, found, sizes = tokens
    width = 3 * len(rows)
    keys = found * width + np.repeat(np.arange(width, dtype=np.int64), sizes.ravel())  # (term, row, column)
    length = sizes.sum(axis=1).astype(np.float64)
    unique, instances = np.unique(keys, return_counts=True)  # sorted: term, row, column
    term_row, column = unique // 3, unique % 3
    first = np.ones(len(term_row), dtype=bool)  # ``unique`` is sorted: each (term, row) is one run of columns
    first[1:] = term_row[1:] != term_row[:-1]  # (np.unique again would take ~120 ms at 500k postings, this ~1)
    pairs = term_row[first]  # one posting per (term, row)
    counts = np.zeros((len(pairs), 3), dtype=np.int32)
    counts[np.cumsum(first) - 1, column] = instances
    term_of = pairs // len(rows) if len(rows) else pairs
    start = np.searchsorted(term_of, np.arange(len(terms) + 1))
    ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    return (terms, ids, length, start.astype(np.int64), (pairs % max(len(rows), 1)).astype(np.int32), counts)


def token_ids(rows: list[tuple]) -> tuple[dict[str, int], np.ndarray, np.ndarray] | None:
    """Each row's (body, heading, scope) as FTS5's tokens: (term ids by first occurrence, every token's
    term id in row and column order, tokens per row and column); None when a row's tokens do not add
    up to FTS5's own count (``docsize``). A column with nothing but plain tokens and spaces (nearly
    all) is split as it is; the words of another are looked up in FTS5's tokens."""
    odd = fts5_tokens({t for r in rows for col in r[1:4] if col and NOT_PLAIN.search(col) for t in col.split()
                       if not PLAIN.fullmatch(t)})
    terms: defaultdict[str, int] = defaultdict(count().__next__)  # a new term gets the next id
    found = array("q")  # 8 bytes a token, not a list's 36
    sizes = []
    for _, *columns, size in rows:
        for text in columns:
            tokens = (text or "").split()
            if odd and NOT_PLAIN.search(text or ""):
                tokens = [t for w in tokens for t in odd.get(w, (w,))]
            found.extend(map(terms.__getitem__, tokens))
            sizes.append(len(tokens))
        if sum(sizes[-3:]) != sum(varints(size)):
            return None
    return dict(terms), np.frombuffer(found, dtype=np.int64), np.array(sizes, dtype=np.int64).reshape(len(rows), 3)


def fts5_tokens(words: set[str]) -> dict[str, tuple[str, ...]]:
    """FTS5's unicode61 tokens of each word (diacritics folded, some characters separators), read
    back from a private in-memory FTS5 table with the store's tokenizer (~0.4 ms a table, so the words
    already read are remembered: a memory scope's append reads its odd words every turn)."""
    unseen = {w for w in words if w not in KNOWN_TOKENS}  # lookups only: other threads may add words
    read = read_fts5_tokens(unseen)
    if len(KNOWN_TOKENS) + len(read) <= KNOWN_TOKENS_MAX:
        KNOWN_TOKENS.update(read)
    return {w: read[w] if w in read else KNOWN_TOKENS[w] for w in words}


def read_fts5_tokens(words: set[str]) -> dict[str, tuple[str, ...]]:
    """:func:`fts5_tokens` of words it has not seen, from a new in-memory FTS5 table."""
    if not words:
        return {}
    ordered = sorted(words)
    with closing(sqlite3.connect(":memory:")) as conn:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5 (x, tokenize = 'unicode61')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, instance)")
        conn.executemany("INSERT INTO t (rowid, x) VALUES (?, ?)", enumerate(ordered, start=1))
        found: dict[int, list[str]] = {}
        for doc, term in conn.execute("SELECT doc, term FROM v ORDER BY doc, offset"):
            found.setdefault(int(doc), []).append(str(term))
    return {w: tuple(found.get(n, ())) for n, w in enumerate(ordered, start=1)}


def query_phrases(terms: Sequence[str], own: bool) -> list[str] | None:
    """The query's distinct phrases in order, as the lexicon's terms: plain ones as they are, and for an
    ``own`` lexicon FTS5's one token of any other; None when a phrase cannot be looked up (the caller
    asks FTS5), or there is none."""
    phrases = list(dict.fromkeys(t for t in terms if t))
    found = [t if PLAIN.fullmatch(t) else one_token(t) if own else None for t in phrases]
    return [t for t in found if t is not None] if phrases and None not in found else None


@lru_cache(maxsize=4096)
def one_token(term: str) -> str | None:
    """FTS5's one token for a query term that is not plain ("café": "cafe"); None when FTS5 makes it
    several tokens (a phrase, which a lexicon without positions cannot match) or none."""
    tokens = fts5_tokens({term})[term]
    return tokens[0] if len(tokens) == 1 else None
