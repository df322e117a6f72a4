"""Rank fusion: pure functions, no I/O."""

from __future__ import annotations

from typing import Hashable, Sequence, TypeVar

T = TypeVar("T", bound=Hashable)


def weighted_rrf(rankings: Sequence[Sequence[T]], weights: Sequence[float],
                 k: int = 60) -> list[tuple[T, float]]:
    """Weighted reciprocal rank fusion.

    score(d) = sum over lists i that contain d of  w_i / (k + rank_i(d)),
    with ranks starting at 1. A document missing from list i gets nothing from it.

    Reference: G. V. Cormack, C. L. A. Clarke, S. Buettcher, "Reciprocal Rank
    Fusion outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009
    (k = 60). The per-list weight w_i is the common weighted extension.

    Ties are broken by the best (smallest) rank in any list, then by first
    appearance, so the output is deterministic.
    """
    if len(rankings) != len(weights):
        raise ValueError(f"{len(rankings)} rankings but {len(weights)} weights")
    if k <= 0:
        raise ValueError("rrf k must be positive")
    scores: dict[T, float] = {}
    best: dict[T, int] = {}
    for ranking, weight in zip(rankings, weights, strict=False):
        for rank, doc in enumerate(ranking, start=1):
            scores[doc] = scores.get(doc, 0.0) + weight / (k + rank)
            best[doc] = min(best.get(doc, rank), rank)
    order = {doc: i for i, doc in enumerate(scores)}
    return sorted(scores.items(), key=lambda item: (-item[1], best[item[0]], order[item[0]]))
