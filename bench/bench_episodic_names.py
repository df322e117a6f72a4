"""The gate's per-turn episodic name lookup against how many turns a user has stored.

A gated turn of a returning user (one with episodes from another conversation) asks
``EpisodicMemory.names`` which names its memory knows, so that "When did Caroline ..." opens the
episodic tier (issue 14). Every chat turn stores one session row, so that read grows with the
user's history. This bench stores chat turns through ``EpisodicMemory.remember`` (20 turns per
conversation, one turn in five naming one of ten people, vectors given so nothing is encoded) and
times, at each size, the lookup as built against the query it replaced (every row decoded), in the
same run; both must give the same names.

Usage:  python bench/bench_episodic_names.py [--sizes 100,1000,5000] [--repeat 30]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bara.memory.episodic import EpisodicMemory
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

PEOPLE = ("Melanie", "Caroline", "Oscar", "Luna", "Max", "Bella", "Jon", "Gina", "Dave", "Tokyo")
EVERY_ROW = "SELECT speakers, mentions FROM episodic_sessions WHERE user_id=? AND conversation_id<>?"


class NoEncoder:
    """The bench gives every vector: an encoding here would be a bug in it."""

    dim = 384
    model_id = cache_key = "none"

    def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError("bench_episodic_names gives every vector")


def every_row(store: SQLiteStore, user: str, exclude: str) -> frozenset[str]:
    """The lookup before: each stored row decoded."""
    rows = store.query(EVERY_ROW, (user, exclude))
    return frozenset(n for a, b in rows for n in [*json.loads(a or "[]"), *json.loads(b or "[]")])


def p50_ms(call, repeat: int) -> float:
    call()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000", help="stored chat turns at which to measure")
    ap.add_argument("--repeat", type=int, default=30)
    args = ap.parse_args()
    sizes = sorted(int(s) for s in args.sizes.split(","))
    rng, vector = random.Random(14), np.full((1, 384), 1 / np.sqrt(384), dtype=np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "names.db")
        memory = EpisodicMemory(store, NoEncoder(), Settings())  # type: ignore[arg-type]
        stored = 0
        print("stored turns | names() p50 ms | every row decoded p50 ms | ratio")
        for size in sizes:
            for turn in range(stored, size):
                named = f" and {rng.choice(PEOPLE)} came too" if rng.random() < 0.2 else ""
                memory.remember("u", f"c{turn // 20}", turn, "user", f"we went hiking{named}.", vector)
            stored = size
            assert memory.names("u", "now") == every_row(store, "u", "now")
            built = p50_ms(lambda: memory.names("u", "now"), args.repeat)
            before = p50_ms(lambda: every_row(store, "u", "now"), args.repeat)
            print(f"{size:>12} | {built:>14.3f} | {before:>24.3f} | {before / built:.1f}x")
        store.close()


if __name__ == "__main__":
    main()
