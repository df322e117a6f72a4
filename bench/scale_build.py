"""The stores ``bench_scale.py`` measures, built once from real texts and real embeddings (issue 34).

**The pool**: every text of bara's cached evaluation indexes that hold real MiniLM embeddings of this
embedder (SciFact's 5,183 abstracts, required; MTRAG-UN's 1,152 passages when its index is cached), or
the bara stores given as ``--pool``. Nothing is encoded while building.

**A knowledge-base chunk** is a recombination of 2 or 3 pool texts: a primary text drawn at random and 1-2
partners drawn from the primary's ``NEIGHBOURS`` nearest pool texts (as a real corpus's chunks sit near
related chunks), with weights drawn from a flat Dirichlet. The chunk's text is consecutive sentences of
each part, from a random sentence on, each part taking its weight's share of ``chars``; its vector is the
renormalised weighted mixture of the parts' real embeddings plus Gaussian noise (``sigma`` a dimension),
renormalised. The vectors so form a continuum between related texts, like a real corpus's, instead of
tight clusters of near-duplicates: the earlier construction (one pool vector plus noise, each of the
5,183 repeated ~20x at 10^5) made clusters that HNSW linked mostly within themselves, so a query far from
every chunk could miss its whole top 10 (graph-vs-exact recall@10 0.935 at 10^5). A mixture is not the
embedding of the recombined text itself; it is near it (MiniLM's mean pooling is close to additive over
a text's parts), which is what the dense arm's cost and the graph's recall depend on.

**Writing**: documents of ``DOC_CHUNKS`` chunks through the store's own write path
(``SQLiteStore.write_documents``: the same rows, FTS5 rows and generations as ``write_document``, one
transaction a batch; a store without it, PostgreSQL, writes ``write_document`` in one transaction a batch).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sqlite3
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bara.settings import Settings
from bara.types import SHARED, Chunk, Document, text_hash

SENTENCE = re.compile(r"(?<=[.!?])\s+")
DOC_CHUNKS = 10  # chunks per knowledge-base document
NEIGHBOURS = 16  # a chunk's partner texts are drawn from its primary's nearest pool texts
BATCH = 20_000  # chunks a transaction
PG_DEFER_HNSW = 50_000  # a PostgreSQL build adding this many chunks drops the HNSW index and builds it after
PG_HNSW_BUILD_MEM = "4GB"  # maintenance_work_mem of that build: 10^6 x 384-d graph in memory (pgvector's advice)


@dataclass
class Pool:
    """Texts with their real MiniLM embeddings (L2-normalised float32), each text's sentences, and each
    text's ``NEIGHBOURS`` nearest other texts (rows of ``vectors``, nearest first)."""

    texts: list[str]
    vectors: np.ndarray
    sentences: list[list[str]]
    neighbours: np.ndarray


def rss_mb(pid: int | str = "self") -> tuple[float, float]:
    """(resident MiB now, peak MiB) of a process."""
    now = peak = 0.0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                now = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return round(now, 1), round(peak, 1)


def data_dir(settings: Settings) -> Path:
    import os

    return Path(os.environ.get("BARA_DATA") or settings.data_dir).resolve()


def pool_paths(settings: Settings, pool: str) -> list[Path]:
    """``--pool``'s comma-separated stores, or the cached SciFact index and, when cached, MTRAG-UN's."""
    if pool:
        return [Path(p) for p in pool.split(",") if p]
    from bara.eval.retrieval import index_path
    from bara.retrieval.embedders import build_embedder

    embedder, root = build_embedder(settings), data_dir(settings)
    scifact = index_path(root / "scifact" / "corpus.jsonl.gz", embedder, settings)
    mtrag = root / "mtrag" / "corpus.jsonl"
    extra = [index_path(mtrag, embedder, settings)] if mtrag.exists() else []
    return [scifact, *(p for p in extra if p.exists())]


def load_pool(settings: Settings, pool: str) -> Pool:
    """The pool's texts, vectors, sentences and neighbours from bara stores of real embeddings."""
    rows: list[tuple[str, str, bytes]] = []
    for path in pool_paths(settings, pool):
        if not path.exists():
            raise SystemExit(f"error: no pool at {path}: run `bara eval retrieval` on SciFact first (README), "
                             "or pass --pool bara stores of real embeddings")
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
            rows += conn.execute("SELECT title, text, embedding FROM chunks ORDER BY id").fetchall()
    if len(rows) < 100:
        raise SystemExit(f"error: the pool holds {len(rows)} texts, too few: pass --pool bara stores of real embeddings")
    texts = [f"{t}\n{x}" if t else x for t, x, _ in rows]
    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return Pool(texts, vectors, [SENTENCE.split(x) or [x] for _, x, _ in rows], nearest(vectors, NEIGHBOURS))


def nearest(vectors: np.ndarray, k: int) -> np.ndarray:
    """Each row's ``k`` most similar other rows (exact inner product), nearest first."""
    out = np.zeros((len(vectors), k), dtype=np.int64)
    for start in range(0, len(vectors), 1024):
        sims = vectors[start:start + 1024] @ vectors.T
        sims[np.arange(len(sims)), np.arange(start, start + len(sims))] = -np.inf  # not itself
        top = np.argpartition(-sims, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(sims, top, axis=1), axis=1)
        out[start:start + len(sims)] = np.take_along_axis(top, order, axis=1)
    return out


def scifact_index(settings: Settings) -> Path:
    return pool_paths(settings, "")[0]


def noisy(rng: np.random.Generator, base: np.ndarray, sigma: float) -> np.ndarray:
    v = base + rng.normal(0, sigma, base.shape).astype(np.float32)
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def passage(sentences: list[str], at: float, chars: int) -> str:
    """Consecutive sentences from the one at fraction ``at`` on, up to about ``chars`` characters (at least one)."""
    k = int(at * len(sentences))
    out, size = [sentences[k]], len(sentences[k])
    while size < chars and k + 1 < len(sentences):
        k += 1
        out.append(sentences[k])
        size += len(sentences[k]) + 1
    return " ".join(out)


def kb_chunks(pool: Pool, rng: np.random.Generator, n: int, chars: int, sigma: float) -> tuple[list[str], np.ndarray]:
    """``n`` recombined chunk texts and their mixture vectors (the module docstring)."""
    k = pool.neighbours.shape[1]
    primary = rng.integers(0, len(pool.texts), n)
    first = rng.integers(0, k, n)
    second = (first + rng.integers(1, k, n)) % k  # a different neighbour
    parts = np.stack([primary, pool.neighbours[primary, first], pool.neighbours[primary, second]], axis=1)
    weights = rng.gamma(1.0, size=(n, 3))  # normalised gammas: a flat Dirichlet over 2 or 3 parts
    weights[rng.random(n) < 0.5, 2] = 0.0
    weights /= weights.sum(axis=1, keepdims=True)
    starts = rng.random((n, 3))
    texts = [" ".join(passage(pool.sentences[p], a, int(w * chars))
                      for p, w, a in zip(row.tolist(), ws.tolist(), at.tolist(), strict=True) if w > 0)
             for row, ws, at in zip(parts, weights, starts, strict=True)]
    mixed = np.einsum("np,npd->nd", weights.astype(np.float32), pool.vectors[parts])
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return texts, noisy(rng, mixed, sigma)


_POOL: Pool | None = None


def _set_pool(pool: Pool) -> None:
    global _POOL
    _POOL = pool


def _batch(start: int, count: int, chars: int, sigma: float) -> tuple[list[str], np.ndarray]:
    assert _POOL is not None
    return kb_chunks(_POOL, np.random.default_rng(start), count, chars, sigma)


def build_kb(location: str, settings: Settings, pool: Pool, n: int, sigma: float, chars: int) -> dict[str, Any]:
    """Fill the knowledge base up to ``n`` chunks (documents of ``DOC_CHUNKS``), resuming where it stopped
    (each batch is one transaction, so a stopped build leaves whole batches). The next batch is drawn in a
    second process while this one is written (batch ``start`` seeds its draw: a resumed build is the same)."""
    from concurrent.futures import ProcessPoolExecutor

    from bara.store import open_store

    store = open_store(location, settings=settings.override(store_ann_min_chunks=0))
    try:
        have = store.count_chunks(SHARED, "kb")
        if have >= n:  # built; a bulk load stopped before its index was re-created gets it now
            missing = location.startswith("postgres") and settings.pg_admin_url and not store.query(
                "SELECT 1 FROM pg_indexes WHERE indexname = 'chunks_embedding'", ())
            return {"kb_built_s": 0.0, **({"kb_hnsw_build_s": pg_build_hnsw(settings)} if missing else {})}
        t0 = time.perf_counter()
        starts = list(range(have - have % BATCH, n, BATCH))
        deferred = pg_drop_hnsw(location, settings) if n - have >= PG_DEFER_HNSW else False
        with ProcessPoolExecutor(1, initializer=_set_pool, initargs=(pool,)) as ahead:
            future = ahead.submit(_batch, starts[0], min(BATCH, n - starts[0]), chars, sigma)
            for i, start in enumerate(starts):
                texts, vectors = future.result()
                if i + 1 < len(starts):
                    future = ahead.submit(_batch, starts[i + 1], min(BATCH, n - starts[i + 1]), chars, sigma)
                write_docs(store, [(start + d, texts[d:d + DOC_CHUNKS], vectors[d:d + DOC_CHUNKS])
                                   for d in range(0, len(texts), DOC_CHUNKS)])
                took = time.perf_counter() - t0
                done = start + len(texts)
                print(f"  kb {done:,}/{n:,} chunks ({took:.0f} s, {(done - have) / took:,.0f} chunks/s)", flush=True)
        rows_s = time.perf_counter() - t0
        index_s = pg_build_hnsw(settings) if deferred else 0.0
        took = time.perf_counter() - t0
        return {"kb_built_s": round(took, 1), "kb_chunks_per_s": round((n - have) / took, 1),
                **({"kb_rows_s": round(rows_s, 1), "kb_hnsw_build_s": index_s} if deferred else {})}
    finally:
        store.close()


def pg_drop_hnsw(location: str, settings: Settings) -> bool:
    """A bulk load into PostgreSQL: drop the chunks' HNSW index (as the owner, ``pg_admin_url``) so the rows
    go in without a graph insert each, as pgvector advises; whether it was dropped (not on SQLite, nor
    without an owner URL: the index stays and every insert updates it)."""
    if not location.startswith("postgres") or not settings.pg_admin_url:
        return False
    import psycopg

    from bara.store.pg_flat import FLAT_TRIGGER
    from bara.store.pg_lexical import INSERT_TRIGGER

    with psycopg.connect(settings.pg_admin_url, autocommit=True) as conn:
        _pg_schema(conn, settings)
        conn.execute("DROP INDEX IF EXISTS chunks_embedding")
        conn.execute(f"ALTER TABLE chunks DISABLE TRIGGER {INSERT_TRIGGER}")  # frequencies recounted after
        conn.execute(f"ALTER TABLE chunks DISABLE TRIGGER {FLAT_TRIGGER}")  # every vector into the one index build
    print("  PostgreSQL bulk load: HNSW index dropped and term counting paused, both redone after the rows", flush=True)
    return True


def pg_build_hnsw(settings: Settings) -> float:
    """Re-create the index exactly as the schema defines it (``pg_sql``), in memory, one process, recount
    the term frequencies (``pg_lexical.rebuild_statements``, the insert trigger enabled again), then VACUUM ANALYZE
    the tables (fresh statistics and visibility map for the measurements); seconds the index took."""
    import psycopg

    from bara.store import pg_flat, pg_lexical, pg_sql

    create = next(s for s in pg_sql.core_statements(settings.pg_embedding_dim) if "USING hnsw" in s)
    t0 = time.perf_counter()
    with psycopg.connect(settings.pg_admin_url, autocommit=True) as conn:
        _pg_schema(conn, settings)
        conn.execute(f"SET maintenance_work_mem = '{PG_HNSW_BUILD_MEM}'")
        conn.execute("SET max_parallel_maintenance_workers = 0")  # one core: the machine is shared
        conn.execute(create)
        took = time.perf_counter() - t0
        print(f"  PostgreSQL HNSW index built in {took:.0f} s", flush=True)
        t1 = time.perf_counter()
        with conn.transaction():
            for statement in pg_lexical.rebuild_statements():
                conn.execute(statement)
            conn.execute(f"ALTER TABLE chunks ENABLE TRIGGER {pg_lexical.INSERT_TRIGGER}")
            conn.execute(f"ALTER TABLE chunks ENABLE TRIGGER {pg_flat.FLAT_TRIGGER}")
        print(f"  PostgreSQL term frequencies counted in {time.perf_counter() - t1:.0f} s", flush=True)
        conn.execute("VACUUM (ANALYZE) chunks")
        conn.execute("VACUUM (ANALYZE) documents")
        conn.execute("VACUUM (ANALYZE) chunk_terms")
    return round(took, 1)


def _pg_schema(conn: Any, settings: Settings) -> None:
    if settings.pg_schema:
        conn.execute(f'SET search_path TO "{settings.pg_schema}", public')


def write_docs(store: Any, parts: Sequence[tuple[int, Sequence[str], np.ndarray]]) -> None:
    """Each (first chunk number, texts, vectors) as one document, all in one transaction."""
    items = [(kb_document(first, texts), vectors) for first, texts, vectors in parts]
    bulk = getattr(store, "write_documents", None)
    if callable(bulk):
        bulk(items)
        return
    with store.transaction():
        for doc, vectors in items:
            store.write_document(doc, vectors)


def kb_document(first: int, texts: Sequence[str]) -> Document:
    source = f"kb/{first // DOC_CHUNKS:07d}.txt"
    chunks, pos = [], 0
    for k, text in enumerate(texts):
        chunks.append(Chunk(text=text, source=source, ordinal=k, start=pos, end=pos + len(text),
                            section=str(k + 1), title=text.split(".", 1)[0][:80]))
        pos += len(text)
    return Document(source=source, content_hash=text_hash("".join(texts)), chunks=tuple(chunks),
                    title=f"Document {first // DOC_CHUNKS}")


class PoolEmbedder:
    """A text's vector: the pool vector its hash picks, plus noise (seeded by the text): nothing is encoded."""

    dim, model_id, cache_key = 384, "pool-vectors", "pool-vectors"

    def __init__(self, pool: Pool, sigma: float):
        self.pool, self.sigma = pool, sigma

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = []
        for text in texts:
            seed = int.from_bytes(hashlib.sha1(text.encode()).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            out.append(noisy(rng, self.pool.vectors[seed % len(self.pool.vectors)], self.sigma))
        return np.stack(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def mtrag_conversations(settings: Settings) -> list[list[tuple[str, str]]]:
    """Each MTRAG-UN dev task's (speaker, text) turns."""
    out = []
    with (data_dir(settings) / "mtrag" / "tasks.dev.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                task = json.loads(line)
                out.append([(i["speaker"], i["text"]) for i in task["input"] if i.get("text")])
    return out


def build_users(location: str, settings: Settings, pool: Pool, n: int, qa: int, notes: int, turns: int,
                sigma: float) -> list[str]:
    """``n`` users (``u00000``...) with Q&A pairs, notes and one episodic session each, through the tiers."""
    from bara.app import Bara
    from bara.memory.episodic import Turn
    from bara.memory.notes import Note

    users = [f"u{i:05d}" for i in range(n)]
    if not users:
        return users
    conversations = mtrag_conversations(settings)
    when = datetime(2026, 11, 1, tzinfo=timezone.utc)
    with Bara(settings.override(db=location, store_ann_min_chunks=0), embedder=PoolEmbedder(pool, sigma)) as bara:
        done = {r[0] for r in bara.store.query("SELECT DISTINCT owner FROM documents WHERE collection=?", ("qa",))}
        todo = [u for u in users if u not in done]
        t0 = time.perf_counter()
        for k, user in enumerate(todo):
            conv = conversations[hash_index(user, len(conversations))]
            asked = [t for s, t in conv if s == "user"] or ["hello"]
            said = [t for s, t in conv if s != "user"] or ["hi"]
            cid = f"c-{user}"
            with bara.store.transaction():
                for q in range(qa):
                    bara.qa.add(user, cid, asked[q % len(asked)], said[q % len(said)][:600], now=when.timestamp())
                bara.notes.add(user, cid, [Note("decision", f"We decided: {asked[(q + 1) % len(asked)][:200]}")
                                           for q in range(notes)], now=when.timestamp())
                bara.episodic.add_session(user, cid, "1", [Turn(s, t[:500]) for s, t in conv[:turns]], when=when)
            if (k + 1) % 1000 == 0:
                print(f"  users {k + 1:,}/{len(todo):,} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return users


def hash_index(text: str, n: int) -> int:
    return int.from_bytes(hashlib.sha1(text.encode()).digest()[:4], "little") % n


def scifact_queries(settings: Settings, n: int, skip: int = 0) -> list[tuple[str, np.ndarray]]:
    """``n`` SciFact queries and their real embeddings (the embedding cache: encoded once per machine)."""
    from bara.retrieval.embedders import build_embedder

    path = data_dir(settings) / "scifact" / "queries.train.jsonl"
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh if line.strip()][skip:skip + n]
    vectors = build_embedder(settings).embed(texts)
    return list(zip(texts, vectors, strict=True))


def build_heavy(location: str, settings: Settings, pool: Pool, rows: int, sigma: float, user: str = "u_heavy") -> str:
    """One user whose Q&A tier holds ``rows`` pairs (MTRAG questions and answers), for the large-scope figures."""
    from bara.app import Bara

    pairs = [(s, t) for conv in mtrag_conversations(settings) for s, t in conv]
    asked = [t for s, t in pairs if s == "user"]
    said = [t for s, t in pairs if s != "user"]
    with Bara(settings.override(db=location, store_ann_min_chunks=0, store_ann_min_user_chunks=0),
              embedder=PoolEmbedder(pool, sigma)) as bara:
        have = bara.store.count_chunks(user, "qa")
        with bara.store.transaction():
            for k in range(have, rows):
                bara.qa.add(user, f"c-heavy-{k // 50}", f"{asked[k % len(asked)]} ({k})", said[k % len(said)][:600])
    return user
