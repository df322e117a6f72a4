"""Small statistics shared by the evaluations (percentiles, bootstrap intervals)."""

from __future__ import annotations

from typing import Sequence

import numpy as np
from numpy.typing import ArrayLike


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 95)) -> dict[str, float | None]:
    """Latency summary {"p50": ..., "p95": ...} in the input's unit (None when empty)."""
    if not len(values):
        return {f"p{p}": None for p in points}
    arr = np.asarray(values, dtype=float)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in points}


def ratio_of_sums(num: ArrayLike, den: ArrayLike) -> float:
    """sum(num) / sum(den): the ratio of totals (e.g. gated tokens over always tokens), NaN if den sums to 0."""
    total = float(np.sum(den))
    return float(np.sum(num)) / total if total else float("nan")


def bootstrap_ratio_ci(num: ArrayLike, den: ArrayLike, resamples: int = 10_000, seed: int = 0,
                       level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of :func:`ratio_of_sums` over paired units (Efron & Tibshirani 1993,
    ch. 13): units i (conversations) are drawn with replacement, num[i] and den[i] together, and the ratio
    of the resampled sums taken; the interval is the (1-level)/2 and (1+level)/2 quantiles."""
    a, b = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if a.shape != b.shape or not a.size:
        raise ValueError("bootstrap_ratio_ci needs two equally long, non-empty series")
    idx = np.random.default_rng(seed).integers(0, a.size, size=(resamples, a.size))
    sums = b[idx].sum(axis=1)
    ratios = np.divide(a[idx].sum(axis=1), sums, out=np.full(resamples, np.nan), where=sums != 0)
    lo, hi = np.nanpercentile(ratios, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)
