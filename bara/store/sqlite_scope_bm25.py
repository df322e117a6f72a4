"""BM25 of a users' memory search over the searched scope's own statistics (SQLite).

Users' memory rows (Q&A pairs, notes, episodic turns) share one FTS5 table, ``memory_fts``, and FTS5's
``bm25()`` takes N, each term's document frequency n(t) and the average length from its whole table.
So one user's stored text changed the scores, and with them the ranking, of another user's memory
search: noise in that user's results and a side channel between users. Here a memory search is
scored over the rows it searches and nothing else.

The statistics are the searched scope's: every (owner, collection) pair the request covers, i.e. the
rows it could return. Per user alone would let the user's Q&A pairs move the ranking of the user's
notes, and a table of one collection (all users' notes) is the side channel again; the searched
scope is the corpus the ranking is over, as the knowledge base is the whole of its own table. It is
Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009)
exactly as FTS5's ``fts5Bm25Function`` (ext/fts5/fts5_aux.c) computes it, k1 = 1.2, b = 0.75::

    idf(t)   = log((N - n(t) + 0.5) / (n(t) + 0.5)), or 1e-6 when that is <= 0
    f(t, d)  = the column weights of t's instances in d (body 1, heading ``title_weight``, scope 0)
    score(d) = sum over the query's phrases of
               idf(t) * ((f * (k1 + 1)) / (f + k1 * (1 - b + b * |d| / avgdl)))

with N the scope's rows, n(t) the scope's rows holding t and avgdl the scope's tokens (every column)
over N. The scores are, bit for bit, those FTS5 would give if the scope's rows were alone in their
table (``tests/memory/test_memory_scope_bm25.py`` compares them with such a table): the scoring is
``sqlite_bm25.Lexicon``'s, with ``own`` statistics.

A scope's lexicon is cached with its write generations, at most ``lexical_memory_cache_scopes`` of
them (least recently searched dropped first). Memory scopes are written on most turns, so this
connection's appends extend a cached lexicon when they commit, as they extend the dense arm's matrix
(``sqlite_matrix``): only the new rows are read, into a small second lexicon beside the scope's
(:class:`ScopeLexicon`: a search scores both parts under their joint statistics, bit for bit one
lexicon of them all), merged into it once it outgrows an eighth of it (:func:`merged`: the postings
spliced in at the end of their terms' runs, one copy, no sort). So an append costs its own rows, not
the scope's (splicing into the scope at every append cost 1.2 ms at 20,000 rows). Any other change (a
delete, a replaced document, another connection's write) reads the scope again on its next search.
Measured (docs/benchmarks.md, 30,000 other users' rows): a search's lexical arm 0.03-0.08 ms against
FTS5's 0.26-1.2 ms, an append ~0.2 ms more at commit, a scope's read ~9-13 µs a row. Weighed against it:
reading each query's matching rows (FTS5 finds them, Python counts their terms) pays for the scope's
matched tokens on every query and still needs every row's size for N and avgdl; rebuilding at each
write pays a scope's read on every turn. FTS5's own query never answers a memory search any more, except for a term FTS5 splits into several tokens (a phrase the lexicon,
which keeps no positions, cannot match) or a row whose tokens do not add up to FTS5's count: those
fall back to FTS5's table-wide statistics. This holds whatever ``lexical_in_memory`` says: that
setting is a speed-up of the knowledge base's arm, while this is what a memory search's ranking means.
A delete drops the owner's cached lexicons at once (:meth:`ScopeLexicons.forget`).

PostgreSQL needs none of this: it ranks with the function ``pg_lexical_rank`` names (a ``ts_rank`` variant by
default), which reads the row's own tsvector and no corpus statistics, so other users' rows never entered a user's scores there.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Callable, Sequence

import numpy as np

from bara.settings import Settings
from bara.store.sqlite_bm25 import Lexicon, build_lexicon, own_rows
from bara.store.sqlite_lexical import MEMORY_FTS, Rows, Run
from bara.store.sqlite_matrix import Appended
from bara.types import SHARED, SearchRequest

Key = tuple[tuple[str, ...], tuple[str, ...]]
#: ``Settings.lexical_memory_cache_scopes``: a bare ``SQLiteStore`` gets the same bound.
DEFAULT_LEXICON_SCOPES: int = Settings.model_fields["lexical_memory_cache_scopes"].default
#: When a scope's recent rows are merged into its lexicon: once they are more than this share of it (or
#: ``FOLD_MIN`` rows). Appends then cost their own rows' size, and a merge, which copies the scope's
#: postings, comes once per eighth of the scope's growth (amortised O(1) a row, as ``sqlite_matrix``'s
#: buffer grows); a search scores the two parts in two passes.
FOLD_SHARE, FOLD_MIN = 8, 64


@dataclass(frozen=True)
class ScopeLexicon:
    """A memory scope's rows as two own-statistics lexicons of disjoint rows: ``base``, and the rows
    appended since (``recent``, ids after base's, merged into base once large), scored together bit for
    bit as one lexicon of them all (:func:`bara.store.sqlite_bm25.own_rows`), as of ``gens``."""

    gens: tuple[int, ...]
    base: Lexicon
    recent: Lexicon | None = None

    @property
    def parts(self) -> tuple[Lexicon, ...]:
        return (self.base,) if self.recent is None else (self.base, self.recent)

    @property
    def last_id(self) -> int:
        ids = (self.recent if self.recent is not None and len(self.recent.ids) else self.base).ids
        return int(ids[-1]) if len(ids) else -1

    def rows(self, terms: Sequence[str], title_weight: float, limit: int) -> Rows | None:
        return own_rows(self.parts, terms, title_weight, limit)

    def appended(self, new: Lexicon, gens: tuple[int, ...]) -> "ScopeLexicon":
        """With ``new``'s rows (ids after every one here) added: to ``recent``, merged into ``base`` once
        ``recent`` outgrows ``FOLD_SHARE``."""
        recent = new if self.recent is None else merged(self.recent, new, gens)
        if len(recent.ids) > max(FOLD_MIN, len(self.base.ids) // FOLD_SHARE):
            return ScopeLexicon(gens, merged(self.base, recent, gens))
        return ScopeLexicon(gens, self.base, recent)


class ScopeLexicons:
    """Users' memory scopes' lexicons by ``(owners, collections)``, at most ``capacity`` of them. Searches
    on several threads (the prefetch worker's connection too) read and build them under this lock;
    a lexicon is never changed in place, so a search holds a consistent one."""

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"capacity={capacity}: at least one memory scope's lexicon is kept")
        self.capacity = capacity
        self._cache: OrderedDict[Key, ScopeLexicon] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._cache)

    def arm(self, run: Run, req: SearchRequest, gens: tuple[int, ...], keep: bool,
            shared: Callable[[SearchRequest], Rows]) -> Rows | None:
        """``req``'s lexical rows when it searches users' memory (``gens``: each of its scopes' write
        generation), else None. A search that mixes the shared owner in (only the library API asks for
        one) gets the shared part from ``shared`` (FTS5 on the knowledge base's table) and keeps the best
        ``limit`` rows of both by score, then id: approximate, as ``sqlite_lexical.lexical_arm`` says,
        since the two parts' statistics differ, but no user's rows move another's scores."""
        users = tuple(o for o in req.owners if o != SHARED)
        if not users:
            return None
        n = len(req.collections)
        own = tuple(g for i, o in enumerate(req.owners) if o != SHARED for g in gens[i * n:(i + 1) * n])
        mine = self.rows(run, replace(req, owners=users), own, keep)
        if mine is None or len(users) == len(req.owners):
            return mine
        rest = shared(replace(req, owners=tuple(o for o in req.owners if o == SHARED)))
        return sorted(rest + mine, key=lambda row: (-row[1], row[0]))[:req.limit]

    def rows(self, run: Run, req: SearchRequest, gens: tuple[int, ...], keep: bool = True) -> Rows | None:
        """``req``'s lexical rows (its owners all users) scored over its scope's own statistics, as of
        ``gens``; None when FTS5 must answer (see the module). ``keep``: cache a lexicon read now (not
        inside a write transaction, whose rows may yet be rolled back)."""
        lexicon = self.lexicon(run, (req.owners, req.collections), gens, keep)
        return None if lexicon is None else lexicon.rows(req.terms, req.title_weight, req.limit)

    def lexicon(self, run: Run, key: Key, gens: tuple[int, ...], keep: bool = True) -> ScopeLexicon | None:
        """The scope's lexicon as of ``gens``: the cached one, else read now (and cached when ``keep``)."""
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and cached.gens == gens:
                self._cache.move_to_end(key)
                return cached
        read = build_lexicon(run, key[0], key[1], gens, MEMORY_FTS)
        lexicon = None if read is None else ScopeLexicon(gens, read)
        if lexicon is not None and keep:
            with self._lock:
                self._cache[key] = lexicon
                self._cache.move_to_end(key)
                while len(self._cache) > self.capacity:
                    self._cache.popitem(last=False)
        return lexicon

    def forget(self, owner: str) -> None:
        """Drop every cached lexicon of ``owner``'s scopes (a delete: its terms leave this process too)."""
        with self._lock:
            for key in [k for k in self._cache if owner in k[0]]:
                del self._cache[key]

    def committed(self, run: Run, appends: Sequence[Appended]) -> None:
        """This connection's committed appends, in order: each cached lexicon of the scope whose
        generation was the one just before takes the new rows (read through ``run``), the others are
        left to be read again. Called under the store's lock, after its commit."""
        for append in appends:
            with self._lock:
                keys = [k for k in self._cache if append.owner in k[0] and append.collection in k[1]]
            for key in keys:
                self._extend(run, key, append)

    def _extend(self, run: Run, key: Key, append: Appended) -> None:
        owners, colls = key
        position = owners.index(append.owner) * len(colls) + colls.index(append.collection)
        with self._lock:
            old = self._cache.get(key)
        if old is None or old.gens[position] != append.gen - 1:
            return
        gens = old.gens[:position] + (append.gen,) + old.gens[position + 1:]
        ids = [int(i) for i in append.ids]
        new = build_lexicon(run, (append.owner,), (append.collection,), gens, MEMORY_FTS, ids)
        with self._lock:
            if self._cache.get(key) is not old:
                return  # another thread replaced it meanwhile: leave that one
            if new is None or len(new.ids) != len(ids) or (len(ids) and ids[0] <= old.last_id):
                del self._cache[key]  # not a clean append after all: read again on the next search
            else:
                self._cache[key] = old.appended(new, gens)


def merged(a: Lexicon, b: Lexicon, gens: tuple[int, ...]) -> Lexicon:
    """One own-statistics lexicon of ``a``'s rows and then ``b``'s (every id of ``b`` after ``a``'s), as
    a read of both at once builds it: term ids in order of first occurrence, each term's postings in
    row order. ``b``'s few postings go in at the end of their term's run (:func:`spliced`: one copy of
    ``a``'s postings, no sort), a new term's at the end."""
    terms = dict(a.terms)
    for t in b.terms:
        terms.setdefault(t, len(terms))
    remap = np.fromiter((terms[t] for t in b.terms), dtype=np.int64, count=len(b.terms))
    term = remap[np.repeat(np.arange(len(b.terms), dtype=np.int64), np.diff(b.start))]
    rows = b.rows_of.astype(np.int64) + len(a.ids)
    order = np.lexsort((rows, term))  # b's postings by merged term, then row
    term, rows, counts = term[order], rows[order], b.counts[order]
    old = len(a.terms)
    at = np.where(term < old, a.start[np.minimum(term, old - 1) + 1] if old else 0, len(a.rows_of))
    per_term = np.bincount(term, minlength=len(terms))
    per_term[:old] += np.diff(a.start)
    start = np.concatenate([[0], np.cumsum(per_term)]).astype(np.int64)
    return Lexicon(gens, np.concatenate([a.ids, b.ids]), np.concatenate([a.length, b.length]), terms, start,
                   spliced(a.rows_of, at, rows.astype(np.int32)), spliced(a.counts, at, counts), True,
                   a.tokens + b.tokens)


def spliced(base: np.ndarray, at: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``base`` with ``values[i]`` put before ``base[at[i]]`` (``at`` ascending; equal ones keep their
    order), in one copy: ``np.insert`` does the same through a mask of the whole result, ~4x slower."""
    cuts = [0, *(int(i) for i in at), len(base)]
    parts = [part for i in range(len(at)) for part in (base[cuts[i]:cuts[i + 1]], values[i:i + 1])]
    return np.concatenate([*parts, base[cuts[-2]:]])
