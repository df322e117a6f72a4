"""Exact vector search: numpy over a cached float32 matrix vs sqlite-vec (vec0, via apsw).

Measures query latency (p50/p95, top-12 = 3 x k) at 6k and 100k random 384-d unit
vectors, plus sqlite-vec's load+insert time. Run: python bench/bench_vectors.py
"""

from __future__ import annotations

import json
import platform
import sys
import time

import numpy as np

DIM, TOP, QUERIES = 384, 12, 200


def unit_rows(n: int, rng: np.random.Generator) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def pct(xs: list[float]) -> dict:
    return {"p50": round(float(np.percentile(xs, 50)), 3), "p95": round(float(np.percentile(xs, 95)), 3)}


def numpy_search(matrix: np.ndarray, queries: np.ndarray) -> tuple[dict, list[np.ndarray]]:
    times, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        sims = matrix @ q
        top = np.argpartition(-sims, TOP - 1)[:TOP]
        top = top[np.argsort(-sims[top])]
        times.append((time.perf_counter() - t0) * 1e3)
        results.append(top)
    return pct(times), results


def sqlite_vec_search(matrix: np.ndarray, queries: np.ndarray) -> tuple[dict, float, list[np.ndarray]]:
    import apsw
    import sqlite_vec

    conn = apsw.Connection(":memory:")
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    t0 = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine)")
    with conn:
        conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                         ((i, row.tobytes()) for i, row in enumerate(matrix)))
    build = time.perf_counter() - t0
    times, results = [], []
    for q in queries:
        t0 = time.perf_counter()
        rows = conn.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ? ORDER BY distance",
                            (q.tobytes(), TOP)).fetchall()
        times.append((time.perf_counter() - t0) * 1e3)
        results.append(np.array([r[0] for r in rows]))
    return pct(times), build, results


def main() -> None:
    rng = np.random.default_rng(0)
    report = {"machine": f"{platform.processor() or platform.machine()}, {platform.python_version()}",
              "top": TOP, "dim": DIM, "sizes": {}}
    for n in (6_000, 100_000):
        matrix, queries = unit_rows(n, rng), unit_rows(QUERIES, rng)
        np_lat, np_res = numpy_search(matrix, queries)
        try:
            sv_lat, build, sv_res = sqlite_vec_search(matrix, queries)
            agree = float(np.mean([len(set(a) & set(b)) / TOP for a, b in zip(np_res, sv_res, strict=False)]))
            sv = {"query_ms": sv_lat, "build_s": round(build, 2), "agreement_with_numpy": round(agree, 4)}
        except Exception as exc:  # sqlite-vec/apsw are optional here: report why
            sv = {"skipped": f"{type(exc).__name__}: {exc}"}
        report["sizes"][str(n)] = {"numpy_query_ms": np_lat, "numpy_matrix_mb": round(matrix.nbytes / 1e6, 1),
                                   "sqlite_vec": sv}
    json.dump(report, sys.stdout, indent=2)
    print()


if __name__ == "__main__":
    main()
