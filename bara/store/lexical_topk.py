"""The best ``limit`` rows of FTS5's BM25 over a lexicon's postings without scoring every matching row:
MaxScore (H. Turtle and J. Flood, "Query evaluation: strategies and optimizations", Information
Processing & Management 31(6), 1995), exact.

The exhaustive arm (``sqlite_bm25.ranked_rows``) scores every posting of every query term, so its cost
is the query terms' postings, which grow with the store: a common term's list holds a tenth of a 10^6-row
knowledge base. MaxScore scores only the rows that can still reach the best ``limit``.

The score is FTS5's ``bm25()`` (``sqlite_bm25``): a sum over the query's phrases of
``idf(t) * g(f, |d|)`` with ``g(f, |d|) = (f * (k1 + 1)) / (f + k1 * (1 - b + b * |d| / avgdl))``. Each
term's contribution to any row is bounded::

    U(t) = idf(t) * G0(t) * max(1, w / w0) * max(1, A / A0) * (1 + 1e-9)

where ``G0(t)`` is the largest ``g`` over t's postings, computed when the lexicon is built at a reference
title weight ``w0`` and average length ``A0``; ``w`` and ``A`` are the query's. The factors hold because
``g`` is increasing and concave in ``f`` with ``g(0) = 0`` (so ``g(c f) <= c g(f)`` for ``c >= 1``, and a
heading weight ``w > w0`` scales ``f`` by at most ``w / w0``), and a larger average ``A > A0`` shrinks
the length term ``k1 (1 - b + b |d| / A)`` by at most ``A0 / A``; the margin covers rounding. Then:

1. seed: over the terms of largest ``U`` (about ``seed_rows`` postings), each of their rows' partial
   score (those terms' contributions alone); the ``limit`` rows of best partial score are scored
   exactly, and theta, the least of these, is at most the ``limit``-th best score of all rows;
2. partition: with the terms in ascending ``U``, the longest prefix whose bounds add up to less than
   theta is *non-essential*: a row holding only those terms scores below theta, so it is not among
   the best ``limit``;
3. the rows of the essential terms get their partial score over those terms: theta rises as in 1
   (their ``limit`` best, scored exactly); then the non-essential terms are read one at a time, by
   descending bound, each only for the rows left, and a row whose partial score plus the bounds of the
   terms not yet read is below theta is dropped (MaxScore's per-row test);
4. the rows left are scored exactly, and the best ``limit`` kept by (score descending, id ascending):
   FTS5's order. Every row of the true best ``limit`` scores at least theta, so it passed 2 and 3.

Bit for bit: a candidate's score is the same per-posting expression (:func:`impact`) added from 0.0 in
query order, as ``np.bincount`` adds the exhaustive arm's; a row's postings are found by binary search
(the lists are in row order). The bounds and partial sums of steps 1-3 only choose rows (a relative
margin of 1e-9 either way covers their rounding); no score returned comes from them. When theta is 0 (fewer matching rows
than the limit, or zero scores) or the essential lists are most of the postings, :func:`top_rows`
returns None and the caller scores exhaustively, which is then as cheap.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

K1, B = 1.2, 0.75  # fts5_aux.c's constants
WEIGHTS_BODY, WEIGHT_SCOPE = 1.0, 0.0  # LEXICAL_SQL's column weights besides the heading's
MARGIN = 1e-9  # relative slack on the bounds for floating-point rounding (ulps are ~1e-16)
SEED_ROWS = 4096  # rows scored to set theta: a few binary searches each, small against a common term's list
WORTH = 0.8  # score exhaustively when the essential lists hold more than this share of the query's postings
DENSE = 16  # essential postings above 1/16 of the rows: a row-sized array is cheaper than sorting them

Span = tuple[int, int, float]  # (first posting, end, G0 of the term)


def frequencies(counts: np.ndarray, title_weight: float) -> np.ndarray:
    """FTS5's weighted frequency: each instance's column weight added in (column, offset) order, so a
    weight that is not a small binary fraction rounds as FTS5's running sum does. ``counts`` holds body
    and heading instances, and the scope's when it has a third column (weight 0.0: adding it to a
    frequency >= 0 leaves every bit, so a compact lexicon leaves the column out)."""
    freq = counts[:, 0] * WEIGHTS_BODY
    for column, weight in ((1, title_weight), (2, WEIGHT_SCOPE))[:counts.shape[1] - 1]:
        for n in range(1, int(counts[:, column].max(initial=0)) + 1):
            freq = np.where(counts[:, column] >= n, freq + weight, freq)
    return freq


def impact(idf: float | np.ndarray, freq: np.ndarray, length: np.ndarray, avgdl: float) -> np.ndarray:
    """One phrase's BM25 contribution to each posting's row: the one expression both arms evaluate."""
    return idf * ((freq * (K1 + 1.0)) / (freq + K1 * (1 - B + B * length / avgdl)))


def term_bounds(counts: np.ndarray, row_length: np.ndarray, runs: np.ndarray, weight: float,
                avgdl: float) -> np.ndarray:
    """``G0`` of each run of postings (``runs``: each run's first posting, ascending, the first 0): the
    largest ``g`` (:func:`impact` with idf 1) over it at title weight ``weight`` and average ``avgdl``."""
    g = impact(1.0, frequencies(counts, weight), row_length, avgdl)
    return np.maximum.reduceat(g, runs) if len(g) else np.zeros(0)


def top_rows(rows_of: np.ndarray, counts: np.ndarray, length: np.ndarray, ids: np.ndarray,
             spans: Sequence[Span], idfs: Sequence[float], avgdl: float, title_weight: float, limit: int,
             ref: tuple[float, float], seed_rows: int = SEED_ROWS) -> list[tuple[int, float]] | None:
    """The best ``limit`` rows of the phrases ``spans`` (query order) as (id, score), FTS5's order, or None
    when MaxScore would score most postings anyway (the caller scores them all). ``ref``: the (title
    weight, average length) the bounds were computed at."""
    if limit <= 0 or title_weight < 0 or not spans:
        return None
    scale = max(1.0, title_weight / ref[0]) * max(1.0, avgdl / ref[1]) * (1.0 + MARGIN)
    bound = np.array([idf * g0 for idf, (_, _, g0) in zip(idfs, spans, strict=True)]) * scale
    sizes = np.array([b - a for a, b, _ in spans])
    seeds, held = [], 0
    for i in np.argsort(-bound, kind="stable"):
        if seeds and held + sizes[i] > seed_rows:
            break
        seeds.append(int(i))
        held += int(sizes[i])
    def exact_kth(rows: np.ndarray, partial: np.ndarray) -> float:
        """The ``limit``-th best exact score of the ``limit`` rows of best partial score: a score some
        ``limit`` rows reach, so at most the ``limit``-th best of all."""
        lead = rows[np.sort(np.argpartition(partial, len(partial) - limit)[len(partial) - limit:])]
        return float(np.min(scored(rows_of, counts, length, spans, idfs, avgdl, title_weight, lead)))

    seed = [spans[i] for i in seeds]
    rows, partial = reaching(rows_of, counts, length, seed, [idfs[i] for i in seeds], avgdl, title_weight)
    if len(partial) < limit:
        return None
    theta = exact_kth(rows, partial)
    essential = essential_terms(bound, theta)
    if int(sizes[essential].sum()) > WORTH * int(sizes.sum()):
        return None
    rows, partial = reaching(rows_of, counts, length, [spans[i] for i in essential], [idfs[i] for i in essential],
                             avgdl, title_weight)
    theta = max(theta, exact_kth(rows, partial))
    others = [int(i) for i in np.argsort(-bound, kind="stable") if i not in set(essential.tolist())]
    rows = pruned(rows, partial, rows_of, counts, length, [spans[i] for i in others], [idfs[i] for i in others],
                  [float(bound[i]) for i in others], avgdl, title_weight, theta)
    scores = scored(rows_of, counts, length, spans, idfs, avgdl, title_weight, rows)
    return ranked(ids[rows], scores, limit)


def union(parts: Sequence[np.ndarray]) -> np.ndarray:
    """The distinct rows of ``parts``, ascending (a sort: faster here than ``np.unique``'s hash)."""
    rows = np.concatenate(parts)
    rows.sort()
    return rows[np.concatenate(([True], rows[1:] != rows[:-1]))] if len(rows) else rows


def reaching(rows_of: np.ndarray, counts: np.ndarray, length: np.ndarray, spans: Sequence[Span],
             idfs: Sequence[float], avgdl: float, title_weight: float) -> tuple[np.ndarray, np.ndarray]:
    """The rows holding any of ``spans``' terms (ascending) and each one's partial score over those terms
    alone: a lower bound of its score, and with the other terms' bounds added an upper bound (MaxScore's
    per-row test, before the other lists are searched). Any order of adding, so only a bound (the
    margin); the rows that pass are scored exactly afterwards."""
    if sum(b - a for a, b, _ in spans) * DENSE > len(length):  # many rows: add into one slot per row, no sort
        dense = np.zeros(len(length))
        for (a, b, _), idf in zip(spans, idfs, strict=True):
            postings = rows_of[a:b]
            dense[postings] += impact(idf, frequencies(counts[a:b], title_weight), length[postings], avgdl)
        rows = np.flatnonzero(dense)  # a row whose terms here add 0.0 cannot reach theta: the rest is below it
        return rows, dense[rows]
    rows = union([rows_of[a:b] for a, b, _ in spans])
    partial = np.zeros(len(rows))
    for (a, b, _), idf in zip(spans, idfs, strict=True):
        postings = rows_of[a:b]
        at = np.searchsorted(rows, postings)
        partial[at] += impact(idf, frequencies(counts[a:b], title_weight), length[postings], avgdl)
    return rows, partial


def pruned(rows: np.ndarray, partial: np.ndarray, rows_of: np.ndarray, counts: np.ndarray, length: np.ndarray,
           spans: Sequence[Span], idfs: Sequence[float], bounds: Sequence[float], avgdl: float, title_weight: float,
           theta: float) -> np.ndarray:
    """MaxScore's per-row test: the ``rows`` whose partial score plus the bounds of the terms not yet
    read (``spans``, by descending bound) can reach ``theta``, the terms read one at a time (each row
    searched for in the term's list) and the rows that cannot reach it dropped after each."""
    rest = float(sum(bounds))
    for (a, b, _), idf, bound in zip(spans, idfs, bounds, strict=True):
        keep = (partial + rest) * (1.0 + MARGIN) >= theta
        rows, partial = rows[keep], partial[keep]
        if not len(rows):
            break
        postings = rows_of[a:b]
        at = np.minimum(np.searchsorted(postings, rows), len(postings) - 1)
        mine = np.flatnonzero(postings[at] == rows)
        theirs = a + at[mine]
        partial[mine] += impact(idf, frequencies(counts[theirs], title_weight), length[rows[mine]], avgdl)
        rest -= bound
    return rows[(partial + max(rest, 0.0)) * (1.0 + MARGIN) >= theta]


def ranked(ids: np.ndarray, scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The best ``limit`` of rows ``ids`` by (score descending, id ascending), as the exhaustive arm ranks
    them (FTS5's negated score, then id): only the rows at or above the ``limit``-th score are sorted."""
    if len(scores) > limit:
        kth = np.partition(scores, len(scores) - limit)[len(scores) - limit]
        keep = np.flatnonzero(scores >= kth)
        ids, scores = ids[keep], scores[keep]
    negated = -1.0 * scores
    best = np.lexsort((ids, negated))[:limit]
    return [(int(ids[i]), -float(negated[i])) for i in best]


def essential_terms(bound: np.ndarray, theta: float) -> np.ndarray:
    """The terms a row must hold to reach ``theta``: all but the longest prefix, by ascending bound, whose
    bounds add up to less than ``theta`` (added in float64, then with the margin once more)."""
    order = np.argsort(bound, kind="stable")
    total, skipped = 0.0, 0
    for i in order:
        total += float(bound[i])
        if total * (1.0 + MARGIN) >= theta:
            break
        skipped += 1
    return np.sort(order[skipped:])


def scored(rows_of: np.ndarray, counts: np.ndarray, length: np.ndarray, spans: Sequence[Span],
           idfs: Sequence[float], avgdl: float, title_weight: float, rows: np.ndarray) -> np.ndarray:
    """The exact score of each of ``rows`` (ascending row positions): every phrase's contribution, found
    by binary search in whichever of its list and ``rows`` is the shorter, added from 0.0 in query order."""
    total = np.zeros(len(rows))
    for (a, b, _), idf in zip(spans, idfs, strict=True):
        postings = rows_of[a:b]
        if len(rows) <= len(postings):
            at = np.minimum(np.searchsorted(postings, rows), len(postings) - 1)
            hit = postings[at] == rows
            mine, theirs = np.flatnonzero(hit), a + at[hit]
        else:
            at = np.minimum(np.searchsorted(rows, postings), len(rows) - 1)
            hit = rows[at] == postings
            mine, theirs = at[hit], a + np.flatnonzero(hit)
        freq = frequencies(counts[theirs], title_weight)
        total[mine] = total[mine] + impact(idf, freq, length[rows[mine]], avgdl)
    return total
