"""A users' memory search's lexical arm, FTS5's ``bm25()`` (table-wide statistics, before) against the
scope's own statistics (``bara.store.sqlite_scope_bm25``, after), in one process (docs/benchmarks.md).

    python bench/bench_memory_scope.py --db /tmp/ms.db --rows 300 1000 3000 --others 30000

One user's tier of N rows and ``--others`` rows of other users (MTRAG passages cut into chat-sized rows,
20-60 words) are written through ``SQLiteStore.write_document``; the queries are MTRAG questions. It
times, median of every query x ``--repeat``: the lexical arm of the user's search both ways (after
once its lexicon is cached), reading the scope's lexicon (a cold search: first in a process or after a
delete), and one appended row's write with and without a cached lexicon (the extension at commit).
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from pathlib import Path

import numpy as np

from bara.store.sqlite import SQLiteStore, generations
from bara.store.sqlite_bm25 import build_lexicon
from bara.store.sqlite_lexical import MEMORY_FTS, lexical_arm
from bara.text.lexical import analyze
from bara.types import Chunk, Document, SearchRequest

DATA = Path("/work/shared/data/mtrag")


def rows_of_text(limit: int, seed: int) -> list[str]:
    """Chat-sized rows (20-60 words) cut from MTRAG passages, shuffled."""
    words = [w for line in (DATA / "corpus.jsonl").open() for w in json.loads(line)["text"].split()]
    rng, out = random.Random(seed), []
    while len(out) < limit:
        n = rng.randint(20, 60)
        start = rng.randrange(0, len(words) - n)
        out.append(" ".join(words[start:start + n]))
    return out


def questions(limit: int) -> list[tuple[str, ...]]:
    found = []
    for path in sorted((DATA / "rewrites").glob("*_questions.jsonl")):
        for line in path.open():
            text = json.loads(line)["text"].splitlines()[-1].replace("|user|:", "")
            if terms := tuple(analyze(text)):
                found.append(terms)
    return found[:limit]


def write(store: SQLiteStore, owner: str, source: str, text: str) -> None:
    chunk = Chunk(text=text, source=source, ordinal=0, start=0, end=len(text))
    store.write_document(Document(source=source, content_hash=source, chunks=(chunk,), collection="notes",
                                  owner=owner), np.ones((1, 8), dtype=np.float32))


def median_ms(fn, runs: int, items: list | None = None) -> float:
    """The median ms of ``fn(item)`` over every item, ``runs`` times each (``fn()`` when no items)."""
    times = []
    for _ in range(runs):
        for item in items if items is not None else [None]:
            t0 = time.perf_counter()
            fn(item) if items is not None else fn()
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def measure(store: SQLiteStore, size: int, qs: list[tuple[str, ...]], texts: list[str], runs: int) -> str:
    """One table row: a user with ``size`` rows more, timed both ways."""
    user = f"user{size}"
    with store.transaction():
        for n in range(size):
            write(store, user, f"u{n}", texts.pop())
    reqs = [SearchRequest(terms=q, vector=None, limit=12, owners=(user,), collections=("notes",)) for q in qs]
    gens = generations(store.query, (user,), ("notes",))

    def fts5(r: SearchRequest) -> None:
        lexical_arm(store.query, r, None)

    def own(r: SearchRequest) -> None:
        store._scopes.arm(store.query, r, gens, True, lambda shared: [])

    own(reqs[0])  # cache the lexicon
    before, after = median_ms(fts5, runs, reqs), median_ms(own, runs, reqs)
    cold = median_ms(lambda: build_lexicon(store.query, (user,), ("notes",), gens, MEMORY_FTS), runs)
    extra = iter(range(10**6))
    write_cached = median_ms(lambda: write(store, user, f"w{next(extra)}", texts[-1]), 20)
    store._scopes._cache.clear()
    write_plain = median_ms(lambda: write(store, user, f"w{next(extra)}", texts[-1]), 20)
    return f"{size} | {before:.3f} | {after:.3f} | {before / after:.1f}x | {cold:.1f} | {write_plain:.2f} | {write_cached:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", required=True)
    ap.add_argument("--rows", type=int, nargs="+", default=[300, 1000, 3000])
    ap.add_argument("--others", type=int, default=30000)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    Path(args.db).unlink(missing_ok=True)
    store = SQLiteStore(args.db)
    texts = rows_of_text(args.others + sum(args.rows) + 200, seed=7)
    with store.transaction():
        for n in range(args.others):
            write(store, f"other{n % 300}", f"o{n}", texts.pop())
    qs = questions(args.queries)
    print(f"{platform.processor() or platform.machine()}, {args.others} other users' rows, {len(qs)} queries")
    print("rows | FTS5 arm ms | own-stats arm ms | ratio | read scope ms | write ms (no cache) | write ms (cached)")
    for size in args.rows:
        print(measure(store, size, qs, texts, args.repeat))
    store.close()


if __name__ == "__main__":
    main()
