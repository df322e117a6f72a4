"""Recall@10 of the SQLite store's graph against its exact dense arm, through the store's own search.

Both arms run on the same file: ``store_ann_min_chunks`` 1 (every scope through its graph, built or loaded
from ``<db>.ann``) against 0 (exact float32 numpy), dense arm only, ``--limit`` candidates (the default 12 is
what a turn asks: k=4 x candidate_multiplier 3), over SciFact queries with their real embeddings (the
embedding cache). The knowledge-base scope of the store is searched.

    python bench/ann_recall.py --store ~/.cache/bara/eval/corpus-<hash>.db [--queries 300] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale_build import scifact_queries  # noqa: E402

from bara.settings import load_settings  # noqa: E402
from bara.store.sqlite import SQLiteStore  # noqa: E402
from bara.store.sqlite_ann import AnnConfig  # noqa: E402
from bara.types import SearchRequest  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = load_settings()  # BARA_STORE_ANN_* from the environment
    queries = scifact_queries(settings, args.queries)
    low = AnnConfig.from_settings(settings.override(store_ann_min_chunks=1))
    off = AnnConfig.from_settings(settings.override(store_ann_min_chunks=0))
    with SQLiteStore(args.store, mode="read", ann=off) as exact, SQLiteStore(args.store, mode="read", ann=low) as ann:
        t0 = time.perf_counter()
        ann.search(SearchRequest(terms=(), vector=queries[0][1], limit=args.limit, use_lexical=False))
        first = time.perf_counter() - t0
        recalls, ms_exact, ms_ann = [], [], []
        for _, vec in queries:
            req = SearchRequest(terms=(), vector=vec, limit=args.limit, use_lexical=False)
            t0 = time.perf_counter()
            want = [c.chunk_id for c in exact.search(req).candidates][:10]
            t1 = time.perf_counter()
            got = [c.chunk_id for c in ann.search(req).candidates][:10]
            t2 = time.perf_counter()
            ms_exact.append((t1 - t0) * 1e3)
            ms_ann.append((t2 - t1) * 1e3)
            recalls.append(len(set(want) & set(got)) / max(len(want), 1))
        n = exact.count_chunks()
    out = {"store": args.store, "chunks": n, "queries": len(queries), "limit": args.limit,
           "recall@10": round(float(np.mean(recalls)), 4), "min_recall@10": round(float(np.min(recalls)), 2),
           "graph_first_search_s": round(first, 2),
           "dense_exact_ms_p50": round(float(np.median(ms_exact)), 3), "dense_graph_ms_p50": round(float(np.median(ms_ann)), 3),
           "load": [round(x, 2) for x in os.getloadavg()]}
    print(json.dumps(out, indent=1) if args.json else out)


if __name__ == "__main__":
    main()
