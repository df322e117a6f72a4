"""The SQLite knowledge base's lexical arm at 10^4-10^6 chunks: every match scored vs MaxScore's exact
top-k (``bara.store.lexical_topk``), and the lexicon's memory and build / load time (issue 34).

    python bench/bench_lexical_scale.py --store kb-1e5.db [--store kb-1e6.db ...] [--queries 300] [--json]

Each ``--store`` is a bara SQLite store whose knowledge base (owner "", collection "kb") is measured,
e.g. one ``bench/scale_build.py`` built (recombined SciFact text). Each phase runs in its own process, so
its peak RSS is its own:

- ``memory``: the in-memory lexicon every knowledge base got so far (``sqlite_bm25.build_lexicon``: one
  statement, int32 arrays), its build time and peak RSS (skipped above ``--memory-max`` rows);
- ``build``: the compact lexicon (``sqlite_lexicon_file.build``: page by page into memory-mapped files),
  its build time, peak RSS and size on disk, into ``<store>.lex-bench/`` (kept: ``--rebuild`` builds again;
  the store's own current ``<db>.lex/`` is used instead when there is no bench folder);
- ``query``: its load time and RSS, then per SciFact training query the whole arm as the store runs it
  (``Lexicon.rows``: the statistics statement, then scoring) with every match scored and with MaxScore,
  one after the other; p50 / p95 of single runs, and of each query's best of three (the CPU cost with
  less of the scheduler's noise on a shared machine), and whether the two gave the same rows and scores;
- ``warm`` (``--warm N``): N times, open the store, search the knowledge base once and wait for its index,
  as ``bara serve`` warms: the first may build ``<db>.lex/`` (the store's own), the next ones map it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from scale_build import rss_mb  # noqa: E402  (one reader of /proc for every scale bench)

SCOPE = (("",), ("kb",))
LABEL = (0,)  # the bench's own lexicon folder: not the store's generations


def run_of(store: str):
    from bara.store.sqlite_lexical import runner

    return runner(sqlite3.connect(f"file:{store}?mode=ro", uri=True, check_same_thread=False))


def phase_memory(store: str) -> dict[str, Any]:
    from bara.store.sqlite_bm25 import build_lexicon

    t0 = time.perf_counter()
    lex = build_lexicon(run_of(store), *SCOPE, LABEL)
    took = time.perf_counter() - t0
    assert lex is not None
    heap = lex.ids.nbytes + lex.length.nbytes + lex.start.nbytes + lex.rows_of.nbytes + lex.counts.nbytes
    return {"memory_build_s": round(took, 2), "memory_rss_mb": rss_mb(), "memory_arrays_mb": round(heap / 2**20, 1),
            "postings": int(len(lex.rows_of))}


def phase_build(store: str) -> dict[str, Any]:
    from bara.store import sqlite_lexicon_file

    folder = Path(f"{store}.lex-bench")
    t0 = time.perf_counter()
    lex = sqlite_lexicon_file.build(run_of(store), *SCOPE, LABEL, folder)
    took = time.perf_counter() - t0
    assert lex is not None
    disk = sum(f.stat().st_size for f in folder.iterdir())
    return {"build_s": round(took, 2), "build_rss_mb": rss_mb(), "disk_mb": round(disk / 2**20, 1),
            "postings": int(len(lex.rows_of)), "terms": len(lex.terms)}


def queries(n: int) -> list[tuple[str, ...]]:
    from bara.text.lexical import analyze

    path = Path(os.environ.get("BARA_DATA", "/work/shared/data")) / "scifact" / "queries.train.jsonl"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [tuple(analyze(json.loads(line)["text"])) for line in fh if line.strip()][:n]


def own_index(store: str):
    """The store's own ``<db>.lex/`` index of the knowledge base, if it is current."""
    from bara.store import sqlite_lexicon_file
    from bara.store.sqlite_sql import generations

    run = run_of(store)
    folder = sqlite_lexicon_file.folder_of(str(Path(store).resolve()), *SCOPE)
    return sqlite_lexicon_file.load(folder, generations(run, *SCOPE), sqlite_lexicon_file.fingerprint(run, *SCOPE))


def phase_query(store: str, n: int, limit: int) -> dict[str, Any]:
    from bara.store import sqlite_lexicon_file

    before = rss_mb()[0]
    t0 = time.perf_counter()
    top = sqlite_lexicon_file.load(Path(f"{store}.lex-bench"), LABEL) or own_index(store)
    load_s = time.perf_counter() - t0
    assert top is not None
    loaded = rss_mb()[0]
    every = replace(top, bound=None)  # the same arrays, every match scored
    run = run_of(store)
    single: dict[str, list[float]] = {"every": [], "topk": []}
    best: dict[str, list[float]] = {"every": [], "topk": []}
    same = answered = 0
    for terms in queries(n):
        times: dict[str, list[float]] = {"every": [], "topk": []}
        got: dict[str, Any] = {}
        for _ in range(3):
            for name, lex in (("every", every), ("topk", top)):
                t = time.perf_counter()
                got[name] = lex.rows(run, terms, 2.0, limit)
                times[name].append((time.perf_counter() - t) * 1e3)
        if got["every"] is None:  # a term FTS5 must tokenise: the store asks FTS5
            continue
        answered += 1
        same += got["every"] == got["topk"]
        for name in times:
            single[name].append(times[name][0])
            best[name].append(min(times[name]))
    out: dict[str, Any] = {"load_s": round(load_s, 3), "rss_load_mb": round(loaded - before, 1),
                           "rss_after_queries_mb": rss_mb(), "queries": answered, "same_rows_and_scores": same}
    for name in single:
        for kind, values in (("single", single[name]), ("best3", best[name])):
            out[f"{name}_{kind}_p50_ms"] = round(float(np.percentile(values, 50)), 2)
            out[f"{name}_{kind}_p95_ms"] = round(float(np.percentile(values, 95)), 2)
    return out


def phase_warm(store: str) -> dict[str, Any]:
    """What a server's warm-up spends on the lexical arm: open the store, search the knowledge base once
    (lexical arm only), wait for the index: a build the first time (into ``<db>.lex/``), a map after."""
    from bara.settings import Settings
    from bara.store import open_store
    from bara.text.lexical import analyze
    from bara.types import SearchRequest

    existed = Path(f"{store}.lex").is_dir()
    t0 = time.perf_counter()
    s = open_store(store, mode="read", settings=Settings())
    try:
        req = SearchRequest(terms=tuple(analyze("vitamin d deficiency and cancer risk")), vector=None, limit=12,
                            owners=SCOPE[0], collections=SCOPE[1], use_dense=False, in_memory_after=1)
        s.search(req)
        wait = s.wait_for_indexes  # type: ignore[attr-defined]  # SQLite's: the index builds on another thread
        wait()
        took = time.perf_counter() - t0
    finally:
        s.close()
    return {"warm_s": round(took, 2), "warm_rss_mb": rss_mb(), "warm_found_index": existed}


def measure(store: str, args: argparse.Namespace) -> dict[str, Any]:
    """Every phase of one store, each in a child process."""
    rows = sqlite3.connect(f"file:{store}?mode=ro", uri=True).execute(
        "SELECT count(*) FROM chunks WHERE owner = '' AND collection = 'kb'").fetchone()[0]
    out: dict[str, Any] = {"store": store, "chunks": rows}
    phases = []
    if rows <= args.memory_max:
        phases.append("memory")
    if args.rebuild or not (Path(f"{store}.lex-bench") / "meta.json").is_file() and not Path(f"{store}.lex").is_dir():
        phases.append("build")
    phases.append("query")
    phases += ["warm"] * args.warm
    for phase in phases:
        cmd = [sys.executable, __file__, "--phase", phase, "--store", store, "--queries", str(args.queries),
               "--limit", str(args.limit)]
        done = subprocess.run(cmd, capture_output=True, text=True, check=True)
        found = json.loads(done.stdout.strip().splitlines()[-1])
        if phase == "warm":
            out.setdefault("warm", []).append(found)
        else:
            out.update(found)
    out["load_average"] = os.getloadavg()[0]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--store", action="append", required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--limit", type=int, default=12, help="the arm's limit (a turn's: 3 x k = 12)")
    ap.add_argument("--memory-max", type=int, default=200_000, help="skip the in-memory lexicon above this")
    ap.add_argument("--rebuild", action="store_true")
    ap.add_argument("--warm", type=int, default=0, help="this many store warm-ups (the first may build <db>.lex/)")
    ap.add_argument("--phase", choices=("memory", "build", "query", "warm"), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.phase:
        store = args.store[0]
        found = {"memory": lambda: phase_memory(store), "build": lambda: phase_build(store),
                 "query": lambda: phase_query(store, args.queries, args.limit),
                 "warm": lambda: phase_warm(store)}[args.phase]()
        print(json.dumps(found))
        return
    for store in args.store:
        found = measure(store, args)
        print(json.dumps(found) if args.json else "\n".join(f"{k}: {v}" for k, v in found.items()), flush=True)


if __name__ == "__main__":
    main()
