"""Whole-conversation figures of `bara eval ab --turns all` rows (the ``turns_all``, ``inserted`` and
``after_inserted`` keys of the JSON report).

A row of a whole-conversation run carries ``turns``: one cost record per user turn
(``inserted``, ``kb`` = searched the knowledge base, ``calls``, ``tokens``, ``ms``).

* ``turns_all``: means over every user turn of every conversation,
  ``sum(x) / sum(turns)``; latency percentiles over the same turns.
* ``inserted``: ``retrieval_rate = |inserted turns that searched the KB| / |inserted turns|``.
* ``after_inserted``: mean Recall@5 (ir-measures R@5, from the caller) of the judged
  final turns that directly follow an inserted turn.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from bara.eval.stats import percentiles


def turn_metrics(row: Mapping[str, Any]) -> dict[str, float]:
    """Per-conversation sums a whole-conversation row contributes (empty for ``--turns last`` rows)."""
    turns = row.get("turns")
    if turns is None:
        return {}
    inserted = [t for t in turns if t.get("inserted")]
    return {"turns_all.retrieval_calls": float(sum(t["calls"] for t in turns)),
            "turns_all.context_tokens": float(sum(t["tokens"] for t in turns)),
            "turns_all.n": float(len(turns)),
            "inserted.searched": float(sum(bool(t["kb"]) for t in inserted)),
            "inserted.n": float(len(inserted))}


def _mean(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None


def conversation_summary(rows: Sequence[Mapping[str, Any]], recall: Mapping[str, float]) -> dict[str, Any]:
    """``turns_all``, ``inserted`` and ``after_inserted`` of one mode's rows; {} for ``--turns last`` rows.

    ``recall`` maps task id -> Recall@5 of its judged final turn (absent when not judged).
    """
    rows = [r for r in rows if r.get("turns") is not None]
    if not rows:
        return {}
    turns = [t for r in rows for t in r["turns"]]
    inserted = [t for t in turns if t.get("inserted")]
    after = [recall[r["task_id"]] for r in rows if r.get("after_inserted") and r["task_id"] in recall]
    return {"turns_all": {"n": len(turns),
                          "retrieval_calls": _mean(sum(t["calls"] for t in turns), len(turns)),
                          "context_tokens": _mean(sum(t["tokens"] for t in turns), len(turns)),
                          "latency_ms": percentiles([t["ms"] for t in turns])},
            "inserted": {"n": len(inserted), "retrieval_rate": _mean(sum(bool(t["kb"]) for t in inserted),
                                                                     len(inserted))},
            "after_inserted": {"n": len(after),
                               "recall@5": round(float(np.mean(after)), 4) if after else None}}
