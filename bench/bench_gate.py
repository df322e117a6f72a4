"""Latency and decision mix of the gate (``bara.decide.decide``) on MTRAG-UN dev turns.

Each task's ``input`` is the conversation so far; its last item is the user turn
to decide. Earlier user turns are replayed (untimed) so the conversation state
is realistic, then the last turn is timed on the rules-only path (no vectors).
The gate should cost far less than the retrieval it gates: target p50 <= 1 ms,
p99 <= 5 ms.

Usage:  python bench/bench_gate.py [--data ../shared/data] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bara.decide import GateResult, decide
from bara.settings import Settings
from bara.types import Utterance
from bara.understand import ConversationState


def load_tasks(root: Path) -> list[dict]:
    with (root / "mtrag" / "tasks.dev.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def to_history(items: list[dict]) -> tuple[Utterance, ...]:
    return tuple(Utterance("user" if m["speaker"] == "user" else "assistant", m["text"]) for m in items)


def replay_state(history: tuple[Utterance, ...], settings: Settings) -> ConversationState:
    """State after the earlier user turns, as the pipeline would have persisted it."""
    state = ConversationState()
    for i, utt in enumerate(history):
        if utt.role == "user":
            state = decide(utt.text, history[:i], state, {}, settings).new_state
    return state


def time_turn(message: str, history: tuple[Utterance, ...], state: ConversationState,
              settings: Settings) -> tuple[float, float, GateResult]:
    """Wall-clock and thread-CPU milliseconds; CPU time excludes preemption by other processes."""
    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
    result = decide(message, history, state, {}, settings)
    return (time.perf_counter_ns() - wall) / 1e6, (time.thread_time_ns() - cpu) / 1e6, result


def percentiles(label: str, values: list[float]) -> str:
    t = np.array(values)
    return (f"{label}: p50 {np.percentile(t, 50):.3f}  p90 {np.percentile(t, 90):.3f}  "
            f"p99 {np.percentile(t, 99):.3f}  max {t.max():.3f}")


def share(counter: Counter, total: int) -> str:
    return ", ".join(f"{k} {v} ({100 * v / total:.0f}%)" for k, v in counter.most_common())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="shared data root (default $BARA_DATA or Settings.data_dir)")
    ap.add_argument("--repeat", type=int, default=5, help="timed passes over all turns")
    args = ap.parse_args(argv)
    settings = Settings()
    root = Path(args.data or os.environ.get("BARA_DATA") or settings.data_dir)
    turns = []
    for task in load_tasks(root):
        history = to_history(task["input"][:-1])
        turns.append((task["input"][-1]["text"], history, replay_state(history, settings), task))
    for message, history, state, _ in turns[:50]:  # warm regex and import caches
        decide(message, history, state, {}, settings)
    wall, cpu = [], []
    for _ in range(args.repeat):
        for message, history, state, _ in turns:
            ms, cpu_ms, _result = time_turn(message, history, state, settings)
            wall.append(ms)
            cpu.append(cpu_ms)
    results = [decide(m, h, s, {}, settings) for m, h, s, _ in turns]
    print(f"MTRAG-UN dev: {len(turns)} turns x {args.repeat} passes, rules path (no vectors), "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(percentiles("decide() wall ms", wall))
    print(percentiles("decide() cpu  ms", cpu))
    report_mix(results, [task for *_, task in turns])
    return 0


def report_mix(results: list[GateResult], tasks: list[dict]) -> None:
    """Routes, modes and intents chosen, and how rewrites line up with MTRAG's turn labels."""
    n = len(results)
    print("routes:  " + share(Counter(r.policy.route for r in results), n))
    print("modes:   " + share(Counter(r.behavior.mode for r in results), n))
    print("intents: " + share(Counter(f"{r.intent.intent}/{r.intent.source}" for r in results), n))
    retrieving = sum(r.policy.retrieves for r in results)
    print(f"retrieving turns: {retrieving} ({100 * retrieving / n:.0f}%), "
          f"needs_rewrite: {sum(r.policy.needs_rewrite for r in results)}")
    labels = [str(task.get("Multi-Turn")) for task in tasks]
    flagged = Counter(lab for lab, r in zip(labels, results, strict=False) if r.policy.needs_rewrite)
    print("needs_rewrite by MTRAG Multi-Turn label: " + ", ".join(
        f"{k} {flagged[k]}/{c}" for k, c in Counter(labels).most_common()))


if __name__ == "__main__":
    raise SystemExit(main())
