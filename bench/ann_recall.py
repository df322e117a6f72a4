"""Recall@10 of the SQLite store's graph against its exact dense arm, through the store's own search.

Both arms run on the same file: ``store_ann_min_chunks`` 1 (every scope through its graph, built or loaded
from ``<db>.ann``) against 0 (exact float32 numpy), dense arm only, ``--limit`` candidates (the default 12 is
what a turn asks: k=4 x candidate_multiplier 3), over SciFact queries with their real embeddings (the
embedding cache). The knowledge-base scope of the store is searched.

    python bench/ann_recall.py --store ~/.cache/bara/eval/corpus-<hash>.db [--queries 300] [--json]
        [--configs 128:2,256:2]   # expansion_search:oversample pairs, one graph (M, efConstruction from BARA_STORE_ANN_*)
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
    ap.add_argument("--skip", type=int, default=0, help="leave out the first queries (those settings were tuned on)")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--configs", default="", help="search settings to compare on the same graph, as "
                    "expansion_search:oversample pairs, comma-separated (default: the settings' own)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    settings = load_settings()  # BARA_STORE_ANN_* from the environment
    queries = scifact_queries(settings, args.queries, skip=args.skip)
    off = AnnConfig.from_settings(settings.override(store_ann_min_chunks=0))
    with SQLiteStore(args.store, mode="read", ann=off) as exact:
        wanted, ms_exact = [], []
        for _, vec in queries:
            t0 = time.perf_counter()
            wanted.append([c.chunk_id for c in exact.search(request(vec, args.limit)).candidates][:10])
            ms_exact.append((time.perf_counter() - t0) * 1e3)
        n = exact.count_chunks()
    pairs = [tuple(p.split(":")) for p in args.configs.split(",") if p] or [(settings.store_ann_expansion_search,
                                                                             settings.store_ann_oversample)]
    for ef, over in pairs:
        s = settings.override(store_ann_min_chunks=1, store_ann_expansion_search=int(ef), store_ann_oversample=float(over))
        out = {"store": args.store, "chunks": n, "queries": len(queries), "skip": args.skip, "limit": args.limit,
               "connectivity": s.store_ann_connectivity, "expansion_add": s.store_ann_expansion_add,
               "expansion_search": int(ef), "oversample": float(over),
               **graph_recall(args.store, AnnConfig.from_settings(s), queries, wanted, args.limit),
               "dense_exact_ms_p50": round(float(np.median(ms_exact)), 3), "load": [round(x, 2) for x in os.getloadavg()]}
        print(json.dumps(out, indent=1) if args.json else out, flush=True)


def request(vec: np.ndarray, limit: int) -> SearchRequest:
    return SearchRequest(terms=(), vector=vec, limit=limit, use_lexical=False)


def graph_recall(store: str, config: AnnConfig, queries: list, wanted: list[list[int]], limit: int) -> dict:
    """Recall@10 of the graph's dense arm against ``wanted`` (the exact arm's top 10 per query)."""
    with SQLiteStore(store, mode="read", ann=config) as ann:
        t0 = time.perf_counter()
        ann.search(request(queries[0][1], limit))  # loads (or builds) the graph
        first = time.perf_counter() - t0
        recalls, ms = [], []
        for (_, vec), want in zip(queries, wanted, strict=True):
            t0 = time.perf_counter()
            got = [c.chunk_id for c in ann.search(request(vec, limit)).candidates][:10]
            ms.append((time.perf_counter() - t0) * 1e3)
            recalls.append(len(set(want) & set(got)) / max(len(want), 1))
    return {"recall@10": round(float(np.mean(recalls)), 4), "min_recall@10": round(float(np.min(recalls)), 2),
            "graph_first_search_s": round(first, 2), "dense_graph_ms_p50": round(float(np.median(ms)), 3),
            "dense_graph_ms_p95": round(float(np.percentile(ms, 95)), 3)}


if __name__ == "__main__":
    main()
