"""A memory tier's search on the turn after a write, against how much the tier holds.

A gated turn stores its Q&A pair (and notes, and an episode) after the answer, and the next turn of
the same user searches that tier again. The SQLite store keeps each scope's vectors in memory
between searches; before round 9 any write re-read the whole scope on the next search. This bench
fills one user's Q&A tier (``QAMemory.add``, vectors given, nothing encoded), then at each size
times, in the same run:

- the search right after one more pair is stored (the cached matrix takes the new row at commit),
- the same search after the cache is dropped (every vector read again: the path before);

and, before each search, the turn's check that the tier holds anything at all (``Store.has_chunks``,
one index probe) against counting its rows (``count_chunks``, the check before round 10); and the
write itself, one pair stored while the tier's matrix is cached (so the commit extends it: round 11
made that cost the row's own size, where it copied the tier's every vector before).

Usage:  python bench/bench_tier_growth.py [--sizes 100,1000,5000] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from bara.app import Bara
from bara.settings import Settings
from bara.store.sqlite_matrix import Matrices


class RandomEncoder:
    """Unit vectors from a seeded generator: the bench measures the store, not the model."""

    dim = 384
    model_id = cache_key = "random-unit-vectors"

    def __init__(self) -> None:
        self.rng = np.random.default_rng(16)

    def embed(self, texts):
        v = self.rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--sizes", default="100,1000,5000", help="stored Q&A pairs at which to measure")
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        encoder = RandomEncoder()
        with Bara(Settings().override(db=str(Path(tmp) / "tiers.db")), embedder=encoder) as bara:
            store, qa, query = bara.store, bara.qa, encoder.embed(["a question"])[0]
            stored, checks = 0, []
            print("stored pairs | search after a write p50 ms | after a full re-read p50 ms | ratio")
            for size in sorted(int(s) for s in args.sizes.split(",")):
                with store.transaction():
                    for n in range(stored, size):
                        qa.add("u", f"c{n // 20}", f"question {n} about the topic", f"answer {n}")
                stored = size
                qa.search("u", "question", vector=query)
                writes = []
                for n in range(args.repeat):  # the cached matrix takes each new row at commit
                    start = time.perf_counter()
                    qa.add("u", "now", f"stored question {n}", "stored answer")
                    writes.append((time.perf_counter() - start) * 1e3)
                stored += args.repeat
                kept, reread = [], []
                probe, count = [], []
                for n in range(args.repeat):
                    start = time.perf_counter()
                    held = store.has_chunks("u", "qa")
                    probe.append((time.perf_counter() - start) * 1e3)
                    start = time.perf_counter()
                    counted = store.count_chunks(owner="u", collection="qa")
                    count.append((time.perf_counter() - start) * 1e3)
                    assert held and counted >= size
                    qa.add("u", "now", f"new question {n}", "new answer")
                    start = time.perf_counter()
                    first = qa.search("u", "question", vector=query)
                    kept.append((time.perf_counter() - start) * 1e3)
                    store._matrices = Matrices()  # type: ignore[attr-defined]  # the path before: read it all
                    start = time.perf_counter()
                    again = qa.search("u", "question", vector=query)
                    reread.append((time.perf_counter() - start) * 1e3)
                    assert [h.source for h in first] == [h.source for h in again]
                stored += args.repeat
                a, b = statistics.median(kept), statistics.median(reread)
                print(f"{size:>12} | {a:>27.3f} | {b:>27.3f} | {b / a:.1f}x")
                checks.append((size, statistics.median(probe), statistics.median(count), statistics.median(writes)))
            print("\nstored pairs | has_chunks p50 ms | count_chunks p50 ms | ratio")
            for size, a, b, _ in checks:
                print(f"{size:>12} | {a:>17.4f} | {b:>19.4f} | {b / a:.1f}x")
            print("\nstored pairs | store one pair, its tier's matrix cached, p50 ms")
            for size, _, _, w in checks:
                print(f"{size:>12} | {w:.3f}")


if __name__ == "__main__":
    main()
