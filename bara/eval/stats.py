"""Small statistics shared by the evaluations (percentiles, bootstrap intervals)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


def percentiles(values: Sequence[float], points: Sequence[int] = (50, 95)) -> dict[str, float | None]:
    """Latency summary {"p50": ..., "p95": ...} in the input's unit (None when empty)."""
    if not len(values):
        return {f"p{p}": None for p in points}
    arr = np.asarray(values, dtype=float)
    return {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in points}
