"""Kill -9 `bara serve` during streamed turns N times (default 200) and count stored turns without their
trace or episodic record (issue 33, D5: the bar is 0). Usage:

    python bench/bench_crash_serve.py --kills 200 --db /tmp/crash.db   # the --db must hold a knowledge base
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from crash_serve import create_key, kill_round, untraced_or_unlearned  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True, help="a store with a knowledge base (copied; the copy is killed)")
    ap.add_argument("--kills", type=int, default=200)
    ap.add_argument("--conversations", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bara-crash-"))
    db, cache = work / "kb.db", work / "cache"
    db.write_bytes(Path(args.db).read_bytes())
    key = create_key(db, cache, "crash")
    rng, started, bad_rounds = random.Random(33), time.monotonic(), 0
    for i in range(args.kills):
        kill_round(db, cache, key, [f"c{j}" for j in range(args.conversations)], round(rng.uniform(0.3, 2.5), 2), i)
        total, problems = untraced_or_unlearned(db, "crash")
        bad_rounds += bool(problems)
        print(f"kill {i + 1}/{args.kills}: {total} stored turns, {len(problems)} problems {problems[:3]}", flush=True)
    print(f"done: {args.kills} kills, {total} stored turns, rounds with problems: {bad_rounds}, "
          f"{time.monotonic() - started:.0f} s; work dir {work}")


if __name__ == "__main__":
    main()
