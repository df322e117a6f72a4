"""Foundation benchmarks on the RFC knowledge base (results go to docs/benchmarks.md).

1. Search latency, warm, split into query embedding, lexical arm, dense arm, fusion.
2. Unchanged re-ingest of the whole RFC folder.
3. Ingest throughput against the raw embedder on the same chunk texts, same run.

    python bench/bench_retrieval.py --db .bara/demo.db [--rfc ../shared/data/rfc] [--files 6]

The store at --db must already hold the RFC folder (``make demo`` builds it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from bara.memory.knowledge import KnowledgeBase, _embed_text, read_text
from bara.retrieval.chunking import chunk_document
from bara.retrieval.embedders import OnnxMiniLMEmbedder, build_embedder
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import load_settings
from bara.store.sqlite import SQLiteStore

QUERIES = [
    "How does TCP detect a lost segment?", "What is the TCP three-way handshake?",
    "slow start threshold after a retransmission timeout", "How does DNS resolve a name?",
    "What does the TTL field of a resource record mean?", "DHCP address lease renewal",
    "HTTP persistent connections and pipelining", "Which HTTP methods are idempotent?",
    "What does status code 304 Not Modified mean?", "cache-control max-age directive",
    "How is the TLS 1.2 handshake authenticated?", "X.509 certificate path validation",
    "What is the SMTP envelope?", "SIP INVITE transaction timers", "RTP sequence number and timestamp",
    "NTP clock filter algorithm", "OAuth 2.0 authorization code grant", "JWT signature validation",
    "WebSocket opening handshake Sec-WebSocket-Key", "cookie SameSite and Secure attributes",
    "HSTS includeSubDomains", "JSON number representation", "percent-encoding in URIs",
    "UUID version 4 random generation", "base64 padding characters", "SSH key exchange",
    "BGP route selection", "SCTP multi-homing", "IPv6 extension headers", "path MTU discovery ICMP",
    "MUST SHOULD MAY key words", "private address space 10.0.0.0/8",
]


def pct(values: list[float]) -> dict:
    return {"p50": round(float(np.percentile(values, 50)), 3), "p95": round(float(np.percentile(values, 95)), 3)}


def search_latency(store: SQLiteStore, settings, rounds: int = 5) -> dict:
    embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens)  # real query encoding, no cache
    retriever = HybridRetriever(store, embedder, settings)
    retriever.search("warm up the matrix cache", floor=0.0)
    stages: dict[str, list[float]] = {}
    for _ in range(rounds):
        for q in QUERIES:
            t0 = time.perf_counter()
            out = retriever.search(q, floor=0.0)
            total = (time.perf_counter() - t0) * 1e3
            for name, ms in {**out.timings_ms, "total": total}.items():
                stages.setdefault(name, []).append(ms)
    return {name: pct(v) for name, v in stages.items()} | {"n": len(QUERIES) * rounds}


def unchanged_reingest(store: SQLiteStore, settings, rfc: Path) -> dict:
    kb = KnowledgeBase(store, build_embedder(settings), settings)
    report = kb.ingest([rfc])
    return {"seconds": round(report.seconds, 3), "written": report.written, "unchanged": report.unchanged}


def ingest_throughput(settings, rfc: Path, files: int, rounds: int = 2) -> dict:
    """Raw embedder vs full ingest on the same chunk texts, alternated so machine noise hits both."""
    paths = sorted(p for p in rfc.glob("rfc*.txt"))[:files]
    texts = []
    for p in paths:
        title, chunks = chunk_document(read_text(p)[0], str(p), settings)
        texts.extend(_embed_text(title, c) for c in chunks)
    raw = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)
    raw.embed(["warm"])
    raw_times, ingest_times = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        raw.embed(texts)
        raw_times.append(time.perf_counter() - t0)
        ingest_times.append(_one_ingest(settings, paths))
    raw_s, ingest_s = float(np.median(raw_times)), float(np.median(ingest_times))
    return {"files": len(paths), "chunks": len(texts), "rounds": rounds, "raw_embed_s": round(raw_s, 2),
            "raw_chunks_per_s": round(len(texts) / raw_s, 1), "ingest_s": round(ingest_s, 2),
            "ingest_chunks_per_s": round(len(texts) / ingest_s, 1), "ratio": round(raw_s / ingest_s, 3)}


def _one_ingest(settings, paths: list[Path]) -> float:
    """Ingest into a fresh store with an empty embedding cache; returns seconds."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = settings.override(cache_dir=Path(tmp) / "cache", db=str(Path(tmp) / "x.db"))
        store = SQLiteStore(fresh.db)
        kb = KnowledgeBase(store, build_embedder(fresh), fresh)
        kb.embedder.embed(["warm"])
        report = kb.ingest(paths)
        store.close()
    return report.seconds


def scifact_latency(settings, data: Path, k: int = 10) -> dict:
    """Warm search latency at k=10 on the cached SciFact eval index (built by `bara eval retrieval`)."""
    from bara.eval.beir import load_beir
    from bara.eval.retrieval import index_path

    sf = data / "scifact"
    embedder = build_embedder(settings)
    path = index_path(sf / "corpus.jsonl.gz", embedder, settings)
    if not path.exists():
        return {"skipped": f"no eval index at {path}: run `bara eval retrieval` on SciFact first"}
    beir = load_beir(sf / "corpus.jsonl.gz", sf / "queries.train.jsonl", sf / "qrels" / "train.tsv")
    queries = [t for q, t in beir.queries.items() if q in beir.qrels]
    store = SQLiteStore(path)
    raw = OnnxMiniLMEmbedder(settings.embed_max_tokens)
    vectors = raw.embed(queries)
    retriever = HybridRetriever(store, raw, settings)
    retriever.search(queries[0], k=k, floor=-1.0, vector=vectors[0])
    stages: dict[str, list[float]] = {}
    for q, v in zip(queries, vectors, strict=False):
        t0 = time.perf_counter()
        out = retriever.search(q, k=k, floor=-1.0, vector=v)
        for name, ms in {**out.timings_ms, "search": (time.perf_counter() - t0) * 1e3}.items():
            stages.setdefault(name, []).append(ms)
    store.close()
    return {name: pct(v) for name, v in stages.items()} | {"n": len(queries), "k": k}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--db", default=".bara/demo.db")
    ap.add_argument("--rfc", default=str(Path(os.environ.get("BARA_DATA", "../shared/data")) / "rfc"))
    ap.add_argument("--files", type=int, default=6)
    args = ap.parse_args()
    settings = load_settings(db=args.db)
    store = SQLiteStore(args.db)
    report = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}",
              "chunks_in_store": store.count_chunks(),
              "search_ms": search_latency(store, settings),
              "unchanged_reingest": unchanged_reingest(store, settings, Path(args.rfc)),
              "scifact_search_ms_k10": scifact_latency(settings, Path(args.rfc).parent),
              "ingest_vs_raw_embedder": ingest_throughput(settings, Path(args.rfc), args.files)}
    store.close()
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
