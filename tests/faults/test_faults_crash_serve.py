"""D5 (issue 33): kill -9 `bara serve` at many points during streamed turns; every stored turn is traced and
learned (its trace and its episodic record committed with it, ``bara.turn.persist.TURN_STORED``).
Before, the turn, its learning writes and its trace were three transactions: a kill between them left
turns with ``trace: null`` or no episodic record. The 200-kill version: ``bench/bench_crash_serve.py``."""

from __future__ import annotations

import os
import random
import shutil

from crash_serve import create_key, kill_round, untraced_or_unlearned

KILLS = int(os.environ.get("BARA_CRASH_KILLS", "20"))  # bounded for make test; the bench runs 200


def test_sigkill_during_streamed_turns_leaves_every_stored_turn_traced_and_learned(rfc_kb, tmp_path):
    db = tmp_path / "kb.db"
    shutil.copy(rfc_kb("crash_serve"), db)
    cache = tmp_path / "cache"
    key = create_key(db, cache, "crash")
    conversations = [f"c{i}" for i in range(3)]
    rng = random.Random(33)
    for i in range(KILLS):
        kill_round(db, cache, key, conversations, delay=round(rng.uniform(0.3, 2.5), 2), seed=i)
        total, problems = untraced_or_unlearned(db, "crash")
        assert not problems, f"after kill {i + 1}: {problems}"
    assert total >= KILLS  # turns were stored between the kills: the kills fell among real turns
