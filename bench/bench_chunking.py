"""Chunking speed over the 56 RFCs of the demo knowledge base (wall and CPU seconds, median of rounds).

    python bench/bench_chunking.py [--rounds 5] [--json]

Round 2 kept this as a timed test (CPU < 2.0 s); a slower CPU failed it (3.1 s on an AVX2-only
machine), so the figure lives here and in docs/benchmarks.md, with the machine noted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from bara.retrieval.chunking import chunk_document
from bara.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    folder = Path(os.environ.get("BARA_DATA", "../shared/data")) / "rfc"
    texts = [f.read_bytes().decode("utf-8", errors="replace") for f in sorted(folder.glob("rfc*.txt"))]
    if not texts:
        raise SystemExit(f"error: no RFCs under {folder}: set BARA_DATA")
    settings = Settings()
    walls, cpus, chunks = [], [], 0
    for _ in range(args.rounds):
        wall, cpu = time.perf_counter(), time.process_time()
        chunks = sum(len(chunk_document(t, "x", settings)[1]) for t in texts)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    out = {"files": len(texts), "mchars": round(sum(map(len, texts)) / 1e6, 2), "chunks": chunks,
           "rounds": args.rounds, "wall_s_p50": round(statistics.median(walls), 3),
           "cpu_s_p50": round(statistics.median(cpus), 3), "load": os.getloadavg()[0]}
    print(json.dumps(out) if args.json else "\n".join(f"{k}: {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
