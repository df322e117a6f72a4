"""How long step ``0202_sqlite_memory_fts`` takes on a store that already holds users' memory (issue 16).

The step moves every user's full-text row from ``chunks_fts`` into ``memory_fts`` (rowids kept) in one
transaction, the first time a newer bara writes to an older store. Its time grows with the stored
memory, so this bench builds stores in the layout before the step (one FTS5 table for every owner: the
knowledge base plus N memory rows of ``--users`` users, MTRAG-UN passages as their text, random unit
vectors), copies each, and times opening the copy with every step (the migration) and the first search
of a user's memory after it. One run per size; the copy is fresh each time, so the page cache is warm
for both (the figure is CPU and write time, not a cold disk).

Usage:  python bench/bench_migrate_memfts.py [--data ../shared/data] [--rows 5000 20000 60000] [--users 300]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from bara.store import sqlite_lexical
from bara.store.migrations import sqlite_migrations
from bara.store.sqlite import SQLiteStore
from bara.text.lexical import analyze
from bara.types import SHARED, Chunk, Document, SearchRequest

STEP = "0202_sqlite_memory_fts"
DIM = 384
PER_DOC = 10  # memory rows per written document (a user's notes of one turn are a handful)


def passages(root: Path, n: int) -> list[str]:
    out: list[str] = []
    with (root / "mtrag" / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            out.append(json.loads(line)["text"][:1200])
            if len(out) == n:
                break
    return out


def document(source: str, texts: list[str], owner: str, collection: str) -> Document:
    chunks = tuple(Chunk(text=t, source=source, ordinal=i, start=0, end=len(t), section="", title="")
                   for i, t in enumerate(texts))
    return Document(source=source, content_hash=source, chunks=chunks, collection=collection, owner=owner,
                    title=source)


def unit_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def old_store(path: Path, texts: list[str], rows: int, users: int) -> None:
    """A store as bara wrote it before the step: every owner's rows in ``chunks_fts``."""
    rng = np.random.default_rng(7)
    real = sqlite_lexical.fts_table
    sqlite_lexical.fts_table = lambda owner: sqlite_lexical.KB_FTS  # type: ignore[assignment]
    try:
        store = SQLiteStore(path, [s for s in sqlite_migrations() if s.name != STEP])
        for d in range(0, 2000, PER_DOC):  # a 2,000-chunk knowledge base
            batch = [texts[(d + i) % len(texts)] for i in range(PER_DOC)]
            store.write_document(document(f"kb{d}", batch, SHARED, "kb"), unit_rows(rng, PER_DOC))
        for n, d in enumerate(range(0, rows, PER_DOC)):
            batch = [texts[(2000 + d + i) % len(texts)] for i in range(PER_DOC)]
            store.write_document(document(f"note{n}", batch, f"user{n % users}", "notes"), unit_rows(rng, PER_DOC))
        store.close()
    finally:
        sqlite_lexical.fts_table = real  # type: ignore[assignment]


def timed_open(old: Path, scratch: Path) -> tuple[float, float, int]:
    """Seconds to open a copy (the step runs), ms of the first memory search after, memory rows moved."""
    copy = scratch / "copy.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copy(old, copy)
    start = time.perf_counter()
    store = SQLiteStore(copy)
    opened = time.perf_counter() - start
    try:
        req = SearchRequest(terms=tuple(analyze("how do I renew my passport")), vector=None, limit=10,
                            owners=("user1",), collections=("notes",), use_dense=False)
        start = time.perf_counter()
        store.search(req)
        first = (time.perf_counter() - start) * 1e3
        moved = store.query("SELECT COUNT(*) FROM memory_fts", ())[0][0]
    finally:
        store.close()
    return opened, first, int(moved)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--data", help="shared data root (default $BARA_DATA or ../shared/data)")
    ap.add_argument("--rows", type=int, nargs="+", default=[5000, 20000, 60000])
    ap.add_argument("--users", type=int, default=300)
    args = ap.parse_args(argv)
    root = Path(args.data or os.environ.get("BARA_DATA") or "../shared/data")
    texts = passages(root, 2000 + max(args.rows))  # the pooled corpus has fewer: rows reuse passages
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}; knowledge base 2,000 chunks, {args.users} users")
    print("| memory rows | store MB | step 0202 + open (s) | rows moved / s | first memory search after (ms) |")
    print("|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory(prefix="bara-bench-0202-") as tmp:
        scratch = Path(tmp)
        for rows in args.rows:
            old = scratch / f"old-{rows}.db"
            old_store(old, texts, rows, args.users)
            seconds, first, moved = timed_open(old, scratch)
            mb = old.stat().st_size / 2**20
            print(f"| {rows:,} | {mb:.0f} | {seconds:.2f} | {moved / seconds:,.0f} | {first:.1f} |", flush=True)
            assert moved == rows, f"{moved} rows moved, {rows} expected"
            old.unlink()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
