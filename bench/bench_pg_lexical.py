"""The bounded PostgreSQL full-text arm against the exact one on a built scale store (issue 34).

    python bench/bench_pg_lexical.py --store postgresql://... [--caps 500,1000,2000,5000] [--queries 100]
        [--set pg_admin_url=...]

For ``--queries`` SciFact queries (real embeddings, the embedding cache), the request ``HybridRetriever``
sends is captured once, then sent to the store with the exact arm (``pg_lexical_bounded_min_rows=0``) and
with the bounded arm at each candidate budget (``pg_lexical_bounded_min_rows=1``), one after the other per
query: the lexical arm alone (``use_dense=False``) and both arms. Reported per budget: p50/p95 of each,
and against the exact arm, the mean overlap of the top 10 (lexical alone, and the fused list) and the
share of queries whose fused top 10 is the same set. Timing is around the store's call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import Given, pct  # noqa: E402
from scale_build import scifact_queries  # noqa: E402

from bara.settings import Settings  # noqa: E402


def capture(store: Any, settings: Settings, queries: list[tuple[str, np.ndarray]]) -> list[Any]:
    from bara.retrieval.hybrid import HybridRetriever

    sent: list[Any] = []
    search = store.search
    store.search = lambda request: sent.append(request) or search(request)
    try:
        retriever = HybridRetriever(store, Given(), settings)
        for text, vec in queries:
            retriever.search(text, vector=vec)
    finally:
        store.search = search
    return sent


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--caps", default="500,1000,2000,5000")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--skip", type=int, default=0, help="queries skipped first (another sample)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    from bara.store import open_store

    base = Settings(db=args.store, **dict(kv.split("=", 1) for kv in args.set))
    caps = [int(c) for c in args.caps.split(",") if c]
    configs = {"exact": base.override(pg_lexical_bounded_min_rows=0),
               **{f"cap {c}": base.override(pg_lexical_bounded_min_rows=1, pg_lexical_candidates=c) for c in caps}}
    stores = {name: open_store(args.store, settings=s) for name, s in configs.items()}
    try:
        queries = scifact_queries(base, args.queries, args.skip)
        sent = capture(stores["exact"], configs["exact"], queries)
        for req in sent[:5]:  # warm every store's connection and plan cache
            for store in stores.values():
                store.search(req)
        ms: dict[str, dict[str, list[float]]] = {n: {"lexical": [], "both": []} for n in stores}
        top: dict[str, dict[str, list[list[int]]]] = {n: {"lexical": [], "both": []} for n in stores}
        for req in sent:
            for name, store in stores.items():
                for arm, r in (("lexical", replace(req, use_dense=False)), ("both", req)):
                    t0 = time.perf_counter()
                    res = store.search(r)
                    ms[name][arm].append((time.perf_counter() - t0) * 1e3)
                    top[name][arm].append([c.chunk_id for c in res.candidates][:10])
        out: dict[str, Any] = {"store": args.store.split("@")[-1], "queries": len(sent), "configs": {}}
        for name in stores:
            row: dict[str, Any] = {a: pct(v) for a, v in ms[name].items()}
            for arm in ("lexical", "both"):
                pairs = list(zip(top[name][arm], top["exact"][arm], strict=True))
                row[f"{arm}_overlap10"] = round(float(np.mean([len(set(a) & set(b)) / max(1, len(b))
                                                               for a, b in pairs])), 4)
            row["both_same_set"] = round(float(np.mean([set(a) == set(b) for a, b in zip(
                top[name]["both"], top["exact"]["both"], strict=True)])), 3)
            out["configs"][name] = row
        out["load"] = [round(x, 2) for x in os.getloadavg()]
        print(json.dumps(out, indent=1))
    finally:
        for store in stores.values():
            store.close()


if __name__ == "__main__":
    main()
