"""PostgreSQL next to SQLite, in one run (results go to docs/postgres.md and docs/benchmarks.md).

1. RFC knowledge base (copied, vectors included, from an ingested SQLite store, so both backends hold
   identical rows): store write throughput, hybrid search p50/p95 with the retriever's request shape.
2. Synthetic store (default 100k chunks, 384-d clustered vectors): bulk write throughput, HNSW build
   time, hybrid search p50/p95, filtered dense recall vs exact at 1% and 0.1% selectivity (shared KB,
   HNSW + iterative scan) and on the per-user exact path.

    python bench/bench_postgres.py --kb .bara/demo.db [--synthetic 100000]

Starts its own embedded PostgreSQL in a fresh /tmp directory and stops it at the end.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sqlite3
import tempfile
import time

import numpy as np

from bara.store import pg_server
from bara.store.postgres import PostgresStore
from bara.store.sqlite import SQLiteStore
from bara.text.lexical import analyze
from bara.types import SHARED, Chunk, Document, SearchRequest

QUERIES = ["How does TCP detect a lost segment?", "What is the TCP three-way handshake?",
           "slow start threshold after a retransmission timeout", "How does DNS resolve a name?",
           "HTTP persistent connections and pipelining", "Which HTTP methods are idempotent?",
           "How is the TLS 1.2 handshake authenticated?", "SIP INVITE transaction timers",
           "OAuth 2.0 authorization code grant", "percent-encoding in URIs", "BGP route selection",
           "path MTU discovery ICMP", "MUST SHOULD MAY key words", "cookie SameSite attribute"]
WORDS = ("packet segment window timer header route address cache token session key server client "
         "stream frame retry ack delay loss queue path name record lease cookie digest nonce").split()


def pct(ms: list[float]) -> dict:
    return {"p50": round(float(np.percentile(ms, 50)), 2), "p95": round(float(np.percentile(ms, 95)), 2)}


def read_kb(path: str) -> list[tuple[Document, np.ndarray]]:
    """Shared-KB documents and their stored vectors from an ingested SQLite store."""
    conn = sqlite3.connect(path)
    docs = conn.execute("SELECT id, source, title, content_hash FROM documents WHERE owner='' AND collection='kb'"
                        " ORDER BY id").fetchall()
    out = []
    for doc_id, source, title, digest in docs:
        rows = conn.execute("SELECT ordinal, text, section, title, start_char, end_char, embedding FROM chunks"
                            " WHERE doc_id=? ORDER BY ordinal", (doc_id,)).fetchall()
        chunks = tuple(Chunk(r[1], source, r[0], r[4], r[5], r[2], r[3]) for r in rows)
        vecs = np.stack([np.frombuffer(r[6], dtype=np.float32) for r in rows])
        out.append((Document(source, digest, chunks, title=title), vecs))
    conn.close()
    return out


def write_all(store, docs) -> dict:
    t0 = time.perf_counter()
    for d, v in docs:
        store.write_document(d, v)
    s = time.perf_counter() - t0
    n = sum(len(d.chunks) for d, _ in docs)
    return {"chunks": n, "seconds": round(s, 2), "chunks_per_s": round(n / s, 1)}


def latency(store, requests: list[SearchRequest], rounds: int = 5) -> dict:
    store.search(requests[0])
    ms = []
    for _ in range(rounds):
        for req in requests:
            t0 = time.perf_counter()
            store.search(req)
            ms.append((time.perf_counter() - t0) * 1e3)
    return pct(ms)


def kb_requests(store, texts: list[str], rng) -> list[SearchRequest]:
    """Real query terms; query vectors = stored chunk vectors nudged by noise (no embedder needed)."""
    ids = [r[0] for r in store.query("SELECT id FROM chunks ORDER BY id")]
    picks = rng.choice(len(ids), size=len(texts), replace=False)
    vecs = [store.query("SELECT embedding FROM chunks WHERE id=?", (ids[i],))[0][0] for i in picks]
    out = []
    for text, blob in zip(texts, vecs, strict=False):
        v = np.frombuffer(blob, dtype=np.float32) + rng.normal(0, 0.02, 384).astype(np.float32)
        out.append(SearchRequest(tuple(analyze(text)), v / np.linalg.norm(v), limit=12))
    return out


def synthetic(n: int, dim: int, rng) -> list[tuple[Document, np.ndarray]]:
    """Clustered unit vectors; 1% of chunks in collection 'sel1', 0.1% in 'sel01', 100 owned by 'u1'."""
    centers = rng.normal(size=(200, dim)).astype(np.float32)
    vecs = centers[rng.integers(0, 200, n)] + rng.normal(0, 0.6, (n, dim)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    kinds = np.array(["kb"] * n, dtype=object)
    kinds[rng.choice(n, n // 100, replace=False)] = "sel1"
    kinds[np.flatnonzero(kinds == "kb")[rng.choice(int((kinds == "kb").sum()), n // 1000, replace=False)]] = "sel01"
    docs = []
    for coll in ("kb", "sel1", "sel01"):
        idx = np.flatnonzero(kinds == coll)
        for start in range(0, len(idx), 100):
            part = idx[start:start + 100]
            docs.append(_doc(f"{coll}-{start}", part, coll, SHARED, rng, vecs))
    docs.append(_doc("u1-notes", np.arange(100), "notes", "u1", rng, vecs))
    return docs


def _doc(source, idx, coll, owner, rng, vecs) -> tuple[Document, np.ndarray]:
    texts = [" ".join(rng.choice(WORDS, 30)) + f" item{i}" for i in idx]
    chunks = tuple(Chunk(t, source, k, 0, len(t)) for k, t in enumerate(texts))
    return Document(source, source, chunks, collection=coll, owner=owner), vecs[idx].copy()


def recall(store, docs, coll: str, owner: str, rng, k: int = 12, queries: int = 50) -> float:
    rows = [(d, v) for d, v in docs if d.collection == coll and d.owner == owner]
    ids = np.array([i for i in _ids(store, owner, coll)])
    matrix = np.concatenate([v for _, v in rows])
    hits = 0
    for _ in range(queries):
        q = rng.normal(size=matrix.shape[1]).astype(np.float32)
        q = matrix[rng.integers(len(matrix))] + 0.3 * q / np.linalg.norm(q)
        q /= np.linalg.norm(q)
        exact = set(ids[np.argsort(-(matrix @ q), kind="stable")[:k]].tolist())
        res = store.search(SearchRequest((), q, limit=k, owners=(owner,), collections=(coll,), use_lexical=False))
        hits += len(exact & {c.chunk_id for c in res.candidates})
    return round(hits / (queries * min(k, len(ids))), 4)


def _ids(store, owner, coll):
    """Chunk ids in document-then-ordinal order (the order the vectors were written)."""
    return [r[0] for r in store.query("SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.owner=?"
                                      " AND c.collection=? ORDER BY d.id, c.ordinal", (owner, coll))]


def analyze_tables(local, schema: str) -> None:
    """What autovacuum does after a bulk load; without statistics the planner skips GIN and HNSW."""
    import psycopg

    with psycopg.connect(_owner_url(local, schema), autocommit=True) as conn:
        conn.execute("ANALYZE chunks")
        conn.execute("ANALYZE documents")


def _owner_url(local, schema: str) -> str:
    return local.owner_url.replace("?", f"?options=-csearch_path%3D{schema},public&")


def hnsw_build(url: str) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        t0 = time.perf_counter()
        conn.execute("REINDEX INDEX chunks_embedding")
        return round(time.perf_counter() - t0, 2)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", default=".bara/demo.db", help="an ingested SQLite store (make demo)")
    ap.add_argument("--synthetic", type=int, default=100_000)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    data, tmp = tempfile.mkdtemp(prefix="bara-pg-bench-", dir="/tmp"), tempfile.mkdtemp(prefix="bara-bench-")
    local = pg_server.start(data)
    report = {"machine": f"{platform.processor() or platform.machine()}, {__import__('os').cpu_count()} cpus"}
    try:
        report["rfc"] = run_kb(args.kb, local, tmp, rng)
        report["synthetic"] = run_synthetic(args.synthetic, local, tmp, rng)
    finally:
        pg_server.stop(data)
        shutil.rmtree(data, ignore_errors=True)
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(report, indent=2))


def _stores(local, tmp, name, schema_dim=384):
    import psycopg
    from psycopg import sql

    with psycopg.connect(local.superuser_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(sql.Identifier(name),
                                                                       sql.Identifier(pg_server.OWNER_ROLE)))
    pg = PostgresStore(local.app_url, dim=schema_dim, schema=name, admin_url=local.owner_url, app_role=pg_server.APP_ROLE)
    return pg, SQLiteStore(f"{tmp}/{name}.db")


def run_kb(path, local, tmp, rng) -> dict:
    docs = read_kb(path)
    pg, lite = _stores(local, tmp, "rfc")
    out = {"pg_write": write_all(pg, docs), "sqlite_write": write_all(lite, docs)}
    analyze_tables(local, "rfc")
    reqs = kb_requests(lite, QUERIES, rng)
    out.update(pg_search=latency(pg, reqs), sqlite_search=latency(lite, reqs))
    pg.close(), lite.close()
    return out


def run_synthetic(n, local, tmp, rng) -> dict:
    docs = synthetic(n, 384, rng)
    pg, lite = _stores(local, tmp, "synth")
    out = {"pg_write": write_all(pg, docs), "sqlite_write": write_all(lite, docs)}
    out["hnsw_build_s"] = hnsw_build(_owner_url(local, "synth"))
    analyze_tables(local, "synth")
    reqs = [SearchRequest(tuple(analyze(" ".join(rng.choice(WORDS, 4)))), docs[i][1][0], limit=12)
            for i in rng.choice(len(docs) - 1, 30, replace=False)]
    out.update(pg_search=latency(pg, reqs), sqlite_search=latency(lite, reqs))
    out["recall_pg"] = {"sel1": recall(pg, docs, "sel1", SHARED, rng), "sel01": recall(pg, docs, "sel01", SHARED, rng),
                        "per_user": recall(pg, docs, "notes", "u1", rng)}
    pg.close(), lite.close()
    return out


if __name__ == "__main__":
    main()
