"""The stores ``bench_scale.py`` measures, built once from real texts and real embeddings (issue 34).

See ``bench_scale.py``'s docstring for what is real and what is recombined: texts from SciFact (the
knowledge base) and MTRAG-UN (users' memory), vectors from the real embeddings of the pool texts plus
small Gaussian noise, nothing encoded while building.
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


@dataclass
class Pool:
    """Texts with their real MiniLM embeddings (L2-normalised float32), and each text's sentences."""

    texts: list[str]
    vectors: np.ndarray
    sentences: list[list[str]]


def data_dir(settings: Settings) -> Path:
    import os

    return Path(os.environ.get("BARA_DATA") or settings.data_dir).resolve()


def load_pool(settings: Settings, pool: str) -> Pool:
    """The pool's texts and vectors from a bara store (default: SciFact's cached evaluation index)."""
    path = Path(pool) if pool else scifact_index(settings)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        rows = conn.execute("SELECT title, text, embedding FROM chunks ORDER BY id").fetchall()
    if len(rows) < 100:
        raise SystemExit(f"error: the pool {path} holds {len(rows)} texts: run `bara eval retrieval` on SciFact "
                         "first (README), or pass --pool a bara store of real embeddings")
    texts = [f"{t}\n{x}" if t else x for t, x, _ in rows]
    vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32).reshape(len(rows), -1)
    return Pool(texts, vectors, [SENTENCE.split(x) or [x] for _, x, _ in rows])


def scifact_index(settings: Settings) -> Path:
    from bara.eval.retrieval import index_path
    from bara.retrieval.embedders import build_embedder

    return index_path(data_dir(settings) / "scifact" / "corpus.jsonl.gz", build_embedder(settings), settings)


def noisy(rng: np.random.Generator, base: np.ndarray, sigma: float) -> np.ndarray:
    v = base + rng.normal(0, sigma, base.shape).astype(np.float32)
    return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)


def kb_texts(pool: Pool, rng: np.random.Generator, n: int, chars: int) -> tuple[list[str], np.ndarray]:
    """``n`` recombined chunk texts and the pool rows whose vectors they take."""
    a = rng.integers(0, len(pool.texts), n)
    b = rng.integers(0, len(pool.texts), n)
    texts = []
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        other = pool.sentences[j]
        texts.append(f"{pool.texts[i][:chars]} {other[int(rng.integers(0, len(other)))]}")
    return texts, a


def build_kb(location: str, settings: Settings, pool: Pool, n: int, sigma: float, chars: int) -> dict[str, Any]:
    """Fill the knowledge base up to ``n`` chunks (documents of ``DOC_CHUNKS``), resuming where it stopped."""
    from bara.store import open_store

    store = open_store(location, settings=settings.override(store_ann_min_chunks=0))
    try:
        have = store.count_chunks(SHARED, "kb")
        if have >= n:
            return {"kb_built_s": 0.0}
        t0 = time.perf_counter()
        for start in range(have - have % DOC_CHUNKS, n, 20_000):
            rng = np.random.default_rng(start)
            count = min(20_000, n - start)
            texts, rows = kb_texts(pool, rng, count, chars)
            vectors = noisy(rng, pool.vectors[rows], sigma)
            with store.transaction():
                for d in range(0, count, DOC_CHUNKS):
                    write_doc(store, start + d, texts[d:d + DOC_CHUNKS], vectors[d:d + DOC_CHUNKS])
            print(f"  kb {start + count:,}/{n:,} chunks ({time.perf_counter() - t0:.0f} s)", flush=True)
        return {"kb_built_s": round(time.perf_counter() - t0, 1)}
    finally:
        store.close()


def write_doc(store: Any, first: int, texts: Sequence[str], vectors: np.ndarray) -> None:
    source = f"kb/{first // DOC_CHUNKS:07d}.txt"
    chunks, pos = [], 0
    for k, text in enumerate(texts):
        chunks.append(Chunk(text=text, source=source, ordinal=k, start=pos, end=pos + len(text),
                            section=str(k + 1), title=text.split("\n", 1)[0][:80]))
        pos += len(text)
    store.write_document(Document(source=source, content_hash=text_hash("".join(texts)), chunks=tuple(chunks),
                                  title=f"Document {first // DOC_CHUNKS}"), vectors)


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
