"""Which ANN library for the SQLite store's large scopes (issue 34): speed, recall@10, memory, persistence.

Vectors: the real MiniLM embeddings of a store's chunks (e.g. the SciFact evaluation index), repeated
with small Gaussian noise (sigma per dimension, then L2-normalised) up to ``--n`` rows; queries are other
stored vectors with noise. Ground truth is exact float32 numpy. Each candidate library builds an index
over the same rows, returns ``--oversample`` x 10 candidates that are rescored exactly (as bara does), and
is timed per query on one thread. Libraries that are not importable are reported as such.

    python bench/bench_ann.py --store ~/.cache/bara/eval/corpus-....db --n 100000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any, Callable

import numpy as np


def real_vectors(store: str) -> np.ndarray:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as conn:
        blobs = [r[0] for r in conn.execute("SELECT embedding FROM chunks ORDER BY id")]
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), -1).copy()


def expanded(base: np.ndarray, n: int, sigma: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    rows = base[rng.integers(0, len(base), n)] + rng.normal(0, sigma, (n, base.shape[1])).astype(np.float32)
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def rss_mb() -> float:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def usearch_arm(dtype: str) -> Callable[[np.ndarray], Any]:
    def build(data: np.ndarray) -> Any:
        from usearch.index import Index

        index = Index(ndim=data.shape[1], metric="ip", dtype=dtype, connectivity=16, expansion_add=128,
                      expansion_search=64)
        index.add(np.arange(len(data), dtype=np.uint64), data, threads=2)
        return index

    return build


def usearch_search(index: Any, q: np.ndarray, count: int) -> np.ndarray:
    index.expansion_search = max(64, count)
    return np.asarray(index.search(q, count).keys, dtype=np.int64)


def usearch_persist(index: Any, folder: str) -> tuple[float, float]:
    from usearch.index import Index

    path = os.path.join(folder, "g.usearch")
    index.save(path)
    t0 = time.perf_counter()
    Index.restore(path)
    return os.path.getsize(path) / 2**20, time.perf_counter() - t0


def faiss_arm(kind: str) -> Callable[[np.ndarray], Any]:
    def build(data: np.ndarray) -> Any:
        import faiss

        faiss.omp_set_num_threads(2)
        index = (faiss.IndexHNSWSQ(data.shape[1], faiss.ScalarQuantizer.QT_8bit, 16, faiss.METRIC_INNER_PRODUCT)
                 if kind == "sq8" else faiss.IndexHNSWFlat(data.shape[1], 16, faiss.METRIC_INNER_PRODUCT))
        index.hnsw.efConstruction = 128
        if kind == "sq8":
            index.train(data)
        index.add(data)
        return index

    return build


def faiss_search(index: Any, q: np.ndarray, count: int) -> np.ndarray:
    import faiss

    faiss.omp_set_num_threads(1)
    index.hnsw.efSearch = max(64, count)
    return index.search(q[None, :], count)[1][0].astype(np.int64)


def faiss_persist(index: Any, folder: str) -> tuple[float, float]:
    import faiss

    path = os.path.join(folder, "g.faiss")
    faiss.write_index(index, path)
    t0 = time.perf_counter()
    faiss.read_index(path)
    return os.path.getsize(path) / 2**20, time.perf_counter() - t0


def measure(name: str, build: Callable, search: Callable, persist: Callable, data: np.ndarray,
            queries: np.ndarray, truth: np.ndarray, oversample: float) -> dict[str, Any]:
    try:
        before = rss_mb()
        t0 = time.perf_counter()
        index = build(data)
        built = time.perf_counter() - t0
        mem = rss_mb() - before
    except ImportError as exc:
        return {"library": name, "error": f"not importable: {exc}"}
    count = int(10 * oversample)
    times, recalls = [], []
    for q, want in zip(queries, truth, strict=True):
        t0 = time.perf_counter()
        cand = search(index, q, count)
        cand = cand[cand >= 0]
        sims = data[cand] @ q
        top = cand[np.lexsort((cand, -sims))[:10]]
        times.append((time.perf_counter() - t0) * 1e3)
        recalls.append(len(set(top.tolist()) & set(want.tolist())) / 10)
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        file_mb, load_s = persist(index, tmp)
    return {"library": name, "build_s": round(built, 1), "rss_added_mb": round(mem, 1),
            "query_ms_p50": round(float(np.percentile(times, 50)), 3),
            "query_ms_p95": round(float(np.percentile(times, 95)), 3),
            "recall@10": round(float(np.mean(recalls)), 4), "file_mb": round(file_mb, 1),
            "load_s": round(load_s, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--store", required=True, help="a bara SQLite store whose chunk vectors seed the rows")
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--sigma", type=float, default=0.02, help="noise per dimension before normalising")
    ap.add_argument("--oversample", type=float, default=2.0)
    ap.add_argument("--only", default="", help="comma-separated library names to run")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = real_vectors(str(Path(args.store).expanduser()))
    data = expanded(base, args.n, args.sigma, 1)
    queries = expanded(base, args.queries, args.sigma * 2, 2)
    t0 = time.perf_counter()
    exact_times, truth = [], []
    for q in queries:
        t = time.perf_counter()
        sims = data @ q
        top = np.argpartition(-sims, 9)[:10]
        truth.append(top)
        exact_times.append((time.perf_counter() - t) * 1e3)
    rows: list[dict[str, Any]] = [{"library": "numpy exact float32", "query_ms_p50": round(float(np.median(exact_times)), 3),
                                   "query_ms_p95": round(float(np.percentile(exact_times, 95)), 3),
                                   "recall@10": 1.0, "rss_added_mb": round(data.nbytes / 2**20, 1)}]
    del t0
    arms = {"usearch-i8": (usearch_arm("i8"), usearch_search, usearch_persist),
            "usearch-f16": (usearch_arm("f16"), usearch_search, usearch_persist),
            "faiss-hnsw-sq8": (faiss_arm("sq8"), faiss_search, faiss_persist),
            "faiss-hnsw-flat": (faiss_arm("flat"), faiss_search, faiss_persist)}
    only = set(filter(None, args.only.split(",")))
    tracemalloc.stop()
    for name, (build, search, persist) in arms.items():
        if not only or name in only:
            rows.append(measure(name, build, search, persist, data, queries, np.asarray(truth), args.oversample))
    load = os.getloadavg()
    report = {"n": args.n, "dim": int(data.shape[1]), "sigma": args.sigma, "oversample": args.oversample,
              "load": [round(x, 2) for x in load], "rows": rows}
    if args.json:
        print(json.dumps(report, indent=1))
    else:
        for row in rows:
            print(row)


if __name__ == "__main__":
    main()
