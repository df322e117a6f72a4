"""The gate's per-turn episodic name lookup against how many turns a user has stored.

A gated turn of a returning user (one with episodes from another conversation) asks which names its
memory knows, so that "When did Caroline ..." opens the episodic tier (issue 14). Every chat turn
stores one session row, so reading the names from ``episodic_sessions`` grows with the user's history.
This bench stores chat turns through ``EpisodicMemory.remember`` (20 turns per conversation, one turn
in five naming one of ten people, vectors given so nothing is encoded) and times, at each size:

* ``known_names``: the gate's lookup now, the name index (``episodic_names``) read for the message's
  capitalised words only;
* ``names()`` now: every name of the index (one row per conversation and name);
* the full read before: ``SELECT DISTINCT speakers, mentions`` over the session rows, decoded (what the
  gate ran until the index);

in the same run; the gate's signals must be the same for every message, and ``names()`` the same set.

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

from bara.decide.policy import capitalised_words, episodic_signals
from bara.memory.episodic import EpisodicMemory
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

PEOPLE = ("Melanie", "Caroline", "Oscar", "Luna", "Max", "Bella", "Jon", "Gina", "Dave", "Tokyo")
FULL_READ = "SELECT DISTINCT speakers, mentions FROM episodic_sessions WHERE user_id=? AND conversation_id<>?"
MESSAGE = "When did Mel and Oscar go hiking near Tokyo?"  # the one timed: a short form and two names
MESSAGES = (MESSAGE, "What did Caroline say about it?", "How does TCP work?", "Did Max or Bel come along?",
            "what did I say about hiking?", "Is Luna there? Ask Gin.")


class NoEncoder:
    """The bench gives every vector: an encoding here would be a bug in it."""

    dim = 384
    model_id = cache_key = "none"

    def embed(self, texts):  # pragma: no cover - never called
        raise AssertionError("bench_episodic_names gives every vector")


def full_read(store: SQLiteStore, user: str, exclude: str) -> frozenset[str]:
    """The lookup before the index: the session rows' lists, folded by the database, decoded."""
    rows = store.query(FULL_READ, (user, exclude))
    return frozenset(n for a, b in rows for n in [*json.loads(a or "[]"), *json.loads(b or "[]")])


def same_answers(memory: EpisodicMemory, store: SQLiteStore) -> None:
    before = full_read(store, "u", "now")
    assert memory.names("u", "now") == before
    for message in MESSAGES:
        known = memory.known_names("u", "now", capitalised_words(message))
        assert episodic_signals(message, known) == episodic_signals(message, before), message


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
        words = capitalised_words(MESSAGE)
        print("stored turns | known_names p50 ms | names() p50 ms | full read before p50 ms | ratio")
        for size in sizes:
            for turn in range(stored, size):
                named = f" and {rng.choice(PEOPLE)} came too" if rng.random() < 0.2 else ""
                memory.remember("u", f"c{turn // 20}", turn, "user", f"we went hiking{named}.", vector)
            stored = size
            same_answers(memory, store)
            known = p50_ms(lambda: memory.known_names("u", "now", words), args.repeat)
            every = p50_ms(lambda: memory.names("u", "now"), args.repeat)
            before = p50_ms(lambda: full_read(store, "u", "now"), args.repeat)
            print(f"{size:>12} | {known:>17.3f} | {every:>14.3f} | {before:>23.3f} | {before / known:.1f}x")
        store.close()


if __name__ == "__main__":
    main()
