"""CPU time of one follow-up rewrite (issue 31: p50 <= 1 ms), cold and as the gated pipeline runs it.

``cold``: ``rewrite_query(message, history)`` with nothing cached for that history (the first turn
after a restart; the view of the history, and of its shorter prefixes that the ``carried`` feature
reads, are built in the call; the per-text caches of issue 16 stay warm, as in a running process). ``prepared``: the history's view built first with
``prepare_history``, as the gated pipeline does after each answer in the idle time before the next
message (issue 16, ``bara.turn.persist.next_turn_preparation``), so the call does only the
message's own part. Thread CPU time, so other processes on the shared machine do not inflate it.

Sets: every MTRAG-UN dev task (full history), and every turn of the shared CAsT / CANARD files with
their replies.

Usage:  python bench/bench_rewrite_cpu.py [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from bara.types import Utterance
from bara.understand.rewrite import history_view, prepare_history, rewrite_query
from bara.understand.term_scorer import history_candidates


def mtrag(root: Path) -> list[tuple[str, tuple[Utterance, ...]]]:
    out = []
    for line in (root / "mtrag" / "tasks.dev.jsonl").read_text(encoding="utf-8").splitlines():
        task = json.loads(line)
        history = tuple(Utterance("user" if m["speaker"] == "user" else "assistant", m["text"])
                        for m in task["input"][:-1])
        out.append((task["input"][-1]["text"], history))
    return out


def rewrite_sets(root: Path) -> list[tuple[str, tuple[Utterance, ...]]]:
    out = []
    for name in ("cast2019", "cast2020", "cast2022", "canard_dev"):
        for line in (root / "rewrite" / f"{name}.jsonl").read_text(encoding="utf-8").splitlines():
            history: list[Utterance] = []
            for turn in json.loads(line)["turns"]:
                if history:
                    out.append((turn["user"], tuple(history)))
                history += [Utterance("user", turn["user"]), Utterance("assistant", turn.get("assistant") or "")]
    return out


def timed(cases: list[tuple[str, tuple[Utterance, ...]]], prepared: bool) -> dict[str, float]:
    times = []
    for message, history in cases:
        history_view.cache_clear()
        history_candidates.cache_clear()
        if prepared:
            prepare_history(history)
        t0 = time.thread_time_ns()
        rewrite_query(message, history)
        times.append((time.thread_time_ns() - t0) / 1e6)
    return {p: round(float(np.percentile(times, q)), 3) for p, q in (("p50", 50), ("p90", 90), ("p99", 99))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=None)
    args = ap.parse_args()
    root = Path(args.data or os.environ.get("BARA_DATA") or "../shared/data")
    report = {}
    for name, cases in (("mtrag_dev", mtrag(root)), ("cast_canard", rewrite_sets(root))):
        report[name] = {"n": len(cases), "cold_ms": timed(cases, False), "prepared_ms": timed(cases, True)}
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
