"""Retrieval quality of the PostgreSQL store per lexical rank function, on a BEIR dataset (SciFact).

`bara eval retrieval` indexes into SQLite only; this loads the same one-chunk-per-document index (text
and stored vectors, from the SQLite index `bara eval retrieval` built and cached) into a fresh
PostgreSQL schema and runs the same arms through `HybridRetriever` over `PostgresStore`, once per
``pg_lexical_rank`` value. Queries are split in two halves by a hash of their id: choose on ``dev``,
report ``test``. Results go to docs/postgres.md and docs/benchmarks.md.

    python bench/bench_pg_quality.py --index ~/.cache/bara/eval/corpus-<hash>.db \\
        --corpus data/scifact/corpus.jsonl.gz --queries data/scifact/queries.train.jsonl \\
        --qrels data/scifact/qrels/train.tsv [--ranks ts_rank_cd,ts_rank] [--arms bm25,hybrid] [--caps 100,250]

``--caps``: also each rank with the bounded full-text arm (``pg_lexical_bounded_min_rows`` 1, so it runs on
this small corpus, ``pg_lexical_candidates`` each value; bara/store/pg_lexical.py), reported as ``RANK@capN``.

Starts its own embedded PostgreSQL in a fresh /tmp directory (or uses --pg-dir) and stops it at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

import numpy as np

from bara.eval.beir import load_beir
from bara.eval.retrieval import ARMS, run_arm, score
from bara.retrieval.embedders import build_embedder
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import load_settings
from bara.store import pg_server
from bara.store.postgres import PostgresStore
from bara.types import Chunk, Document


def half(qid: str) -> str:
    return "dev" if hashlib.sha256(qid.encode()).digest()[0] % 2 == 0 else "test"


def read_index(path: str) -> list[tuple[Document, np.ndarray]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = conn.execute("SELECT d.source, d.content_hash, c.text, c.title, c.start_char, c.end_char, c.embedding"
                        " FROM chunks c JOIN documents d ON d.id = c.doc_id ORDER BY d.id, c.ordinal").fetchall()
    conn.close()
    out = []
    for source, digest, text, title, start, end, blob in rows:
        chunk = Chunk(text=text, source=source, ordinal=0, start=start, end=end, title=title)
        out.append((Document(source=source, content_hash=digest, chunks=(chunk,), title=""),
                    np.frombuffer(blob, dtype=np.float32)[None, :]))
    return out


def random_vectors(corpus) -> list[tuple[Document, np.ndarray]]:
    from bara.eval.retrieval import _document

    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(len(corpus), 384)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return [(_document(d), v[None, :]) for d, v in zip(corpus, vecs, strict=True)]


def load(store: PostgresStore, docs: list[tuple[Document, np.ndarray]], batch: int = 256) -> float:
    t0 = time.perf_counter()
    for start in range(0, len(docs), batch):
        with store.transaction():
            for doc, vec in docs[start:start + batch]:
                store.write_document(doc, vec)
    return time.perf_counter() - t0


def query_vectors(queries: dict[str, str], cache: Path) -> dict[str, np.ndarray]:
    if cache.exists():
        data = np.load(cache)
        if set(data.files) >= set(queries):
            return {q: data[q] for q in queries}
    embedder = build_embedder(load_settings())
    vectors = {q: embedder.embed([t])[0] for q, t in queries.items()}
    np.savez(cache, **vectors)
    return vectors


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", default="", help="the SQLite index `bara eval retrieval` cached (its vectors); "
                    "empty = the corpus with random vectors, for the bm25 arm only")
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--queries", required=True)
    ap.add_argument("--qrels", required=True)
    ap.add_argument("--ranks", default="ts_rank_cd,ts_rank")
    ap.add_argument("--arms", default="bm25,hybrid")
    ap.add_argument("--caps", default="", help="comma-separated candidate budgets of the bounded arm, also run")
    ap.add_argument("--pg-dir", default="", help="reuse this local server (default: a fresh one, removed after)")
    ap.add_argument("--vectors", default="/tmp/bara-pg-quality-queries.npz", help="query vector cache")
    args = ap.parse_args()
    data = load_beir(Path(args.corpus), Path(args.queries), Path(args.qrels))
    judged = {q: t for q, t in data.queries.items() if q in data.qrels}
    docs = read_index(args.index) if args.index else random_vectors(data.corpus)
    if len(docs) != len(data.corpus):
        sys.exit(f"{args.index} holds {len(docs)} documents, the corpus {len(data.corpus)}: finish the index first")
    vectors = (query_vectors(judged, Path(args.vectors)) if args.index
               else {q: v for q, (_, v) in zip(judged, random_vectors(data.corpus[:len(judged)]), strict=True)})
    pg_dir = args.pg_dir or tempfile.mkdtemp(prefix="bara-pg-quality-", dir="/tmp")
    local = pg_server.start(pg_dir)
    report: dict = {"dataset": Path(args.corpus).name, "queries": len(judged), "docs": len(docs)}
    try:
        report["ranks"] = run_ranks(local, docs, judged, vectors, data.qrels, args)
    finally:
        if not args.pg_dir:
            pg_server.stop(pg_dir)
            shutil.rmtree(pg_dir, ignore_errors=True)
    print(json.dumps(report, indent=2))


def run_ranks(local, docs, judged, vectors, qrels, args) -> dict:
    import psycopg
    from psycopg import sql

    schema = f"quality_{int(time.time())}"
    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(schema),
                                                                       sql.Identifier(pg_server.OWNER_ROLE)))
    settings = load_settings()
    out: dict = {}
    runs = [(rank, rank, {}) for rank in args.ranks.split(",")]
    runs += [(f"{rank}@cap{cap}", rank, {"lexical_bounded_min_rows": 1, "lexical_candidates": int(cap)})
             for rank in args.ranks.split(",") for cap in filter(None, args.caps.split(","))]
    for name, rank, bounded in runs:
        store = PostgresStore(local.app_url, schema=schema, admin_url=local.owner_url, app_role=pg_server.APP_ROLE,
                              lexical_rank=rank, **bounded)
        if not store.count_chunks():
            out["load_s"] = round(load(store, docs), 1)
            with psycopg.connect(local.owner_url, autocommit=True) as conn:
                conn.execute(sql.SQL("ANALYZE {}.chunks").format(sql.Identifier(schema)))
        retriever = HybridRetriever(store, cast(Any, None), settings)  # query vectors are given: no encoder
        out[name] = {}
        for arm in args.arms.split(","):
            run, stages = run_arm(retriever, ARMS[arm], judged, vectors, depth=100)
            by_half = {h: score({q: qrels[q] for q in run if half(q) == h}, {q: r for q, r in run.items()
                                                                             if half(q) == h})
                       for h in ("dev", "test")}
            out[name][arm] = {"all": score(qrels, run), **by_half,
                              "search_ms_p50": round(float(np.percentile(stages["search"], 50)), 2)}
        store.close()
    return out


if __name__ == "__main__":
    main()
