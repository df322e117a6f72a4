"""MiniLM variants side by side, in one run: ingest throughput, query latency, agreement.

Why: indexing time is dominated by embedding, and chunk_size_chars=1000 was chosen to fill the
256-token window; this measures exactly that workload, uncached. Every variant embeds the same RFC
chunks in length-sorted batches (its own batch size: 32, or 1 for ``q8``, whose vectors must not
depend on batch neighbours), rounds alternate between variants so they share the machine's load,
and ratios are taken against today's model (round 1's ``int8`` file) within the run.

    python bench/bench_embedder.py --rfc-dir ../shared/data/rfc --chunks 400 --variants int8,q8,fp32

Figures: chunks per wall second and per CPU second (process CPU time, all threads: the steadier
figure on a loaded machine), query encoding p50 (wall, one short question per call), cosine to the
fp32 variant and to the sentence-transformers reference fixture.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

import numpy as np

from bara.retrieval.embedders import OnnxMiniLMEmbedder, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "minilm_reference.json"
QUERIES = [
    "How does TCP detect a lost segment?", "What port does HTTPS use?", "how are cookies scoped to a domain",
    "What does HSTS protect against?", "which status code means the resource moved permanently",
    "How long may a DNS resolver cache an answer?", "what is the maximum size of a UDP datagram",
    "How does TLS negotiate the protocol version?", "what are MUST and SHOULD in RFCs",
    "how is the TCP retransmission timeout computed", "What is a URI fragment?", "explain chunked transfer coding",
]


def rfc_chunks(rfc_dir: Path, count: int, size: int) -> list[str]:
    """Consecutive ``size``-character windows of RFC text, whitespace-collapsed, blank pages skipped."""
    chunks: list[str] = []
    for path in sorted(rfc_dir.glob("rfc*.txt")):
        text = " ".join(path.read_text(encoding="utf-8", errors="replace").split())
        chunks.extend(text[i:i + size] for i in range(0, len(text) - size, size))
        if len(chunks) >= count:
            break
    if len(chunks) < count:
        raise SystemExit(f"only {len(chunks)} chunks under {rfc_dir}; pass a directory with more RFC text")
    return chunks[:count]


def ingest_pass(embedder: OnnxMiniLMEmbedder, texts: list[str]) -> tuple[float, float, np.ndarray]:
    """(chunks per wall second, chunks per CPU second, vectors) of one pass over ``texts``."""
    wall, cpu = time.perf_counter(), time.process_time()
    vectors = embedder.embed(texts)
    return (len(texts) / (time.perf_counter() - wall), len(texts) / max(time.process_time() - cpu, 1e-9), vectors)


def query_ms(embedder: OnnxMiniLMEmbedder, rounds: int) -> tuple[list[float], list[float]]:
    """Wall and process-CPU milliseconds of encoding one short question, per call."""
    wall, cpu = [], []
    for _ in range(rounds):
        for q in QUERIES:
            w, c = time.perf_counter(), time.process_time()
            embedder.embed([q])
            wall.append((time.perf_counter() - w) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
    return wall, cpu


def reference_cosines(embedder: OnnxMiniLMEmbedder) -> np.ndarray:
    """Cosine of each fixture text's embedding with its float32 reference vector."""
    items = json.loads(FIXTURE.read_text(encoding="utf-8"))["items"]
    ref = np.array([i["vector"] for i in items], dtype=np.float32)
    got = embedder.embed([i["text"] for i in items])
    return (got * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)


def model_sha256(embedder: OnnxMiniLMEmbedder) -> str:
    if embedder.variant == "int8":
        from bara.retrieval.embedders import minilm_model_file
        from bara.retrieval.minilm_build import file_sha256

        return file_sha256(minilm_model_file())
    from bara.retrieval.minilm_build import built_model_file

    sidecar = built_model_file(embedder.variant, embedder.model_dir).with_suffix(".json")
    return json.loads(sidecar.read_text(encoding="utf-8"))["file_sha256"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rfc-dir", type=Path, default=Path(os.environ.get("BARA_DATA", ROOT.parent / "shared" / "data")) / "rfc")
    parser.add_argument("--chunks", type=int, default=400)
    parser.add_argument("--chars", type=int, default=1000)
    parser.add_argument("--variants", default="int8,q8,fp32", help="first one is the baseline of the ratios")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=3, help="alternating ingest rounds per variant")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    texts = rfc_chunks(args.rfc_dir, args.chunks, args.chars)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    models = {v: OnnxMiniLMEmbedder(batch_size=args.batch, threads=args.threads, variant=v) for v in variants}
    for m in models.values():
        m.embed(texts[:4] + QUERIES[:2])  # build if needed, load, warm up
    wall: dict[str, list[float]] = {v: [] for v in variants}
    cpu: dict[str, list[float]] = {v: [] for v in variants}
    vectors: dict[str, np.ndarray] = {}
    queries: dict[str, list[float]] = {v: [] for v in variants}
    queries_cpu: dict[str, list[float]] = {v: [] for v in variants}
    load_before = os.getloadavg()
    for _ in range(args.rounds):  # alternate, so every variant sees the same load
        for v, m in models.items():
            w, c, vectors[v] = ingest_pass(m, texts)
            wall[v].append(w)
            cpu[v].append(c)
            q_wall, q_cpu = query_ms(m, 2)
            queries[v] += q_wall
            queries_cpu[v] += q_cpu
    load_after = os.getloadavg()
    ref = vectors.get("fp32", vectors[variants[0]])
    tokens = [len(e.ids) for e in load_tokenizer(10_000).encode_batch(texts)]
    rows = []
    for v, m in models.items():
        cos = (vectors[v] * ref).sum(axis=1)
        fixture = reference_cosines(m)
        rows.append({"variant": v, "batch": m.batch_size, "chunks_per_s": statistics.median(wall[v]),
                     "chunks_per_cpu_s": statistics.median(cpu[v]), "query_p50_ms": statistics.median(queries[v]),
                     "query_p50_cpu_ms": statistics.median(queries_cpu[v]),
                     "cos_fp32_mean": float(cos.mean()), "cos_fp32_min": float(cos.min()),
                     "cos_reference_min": float(fixture.min()), "model_id": m.model_id, "file_sha256": model_sha256(m)})
    base = rows[0]
    for r in rows:
        r["ingest_ratio_wall"] = r["chunks_per_s"] / base["chunks_per_s"]
        r["ingest_ratio_cpu"] = r["chunks_per_cpu_s"] / base["chunks_per_cpu_s"]
    meta = {"chunks": len(texts), "chars": args.chars, "tokens_median": statistics.median(tokens),
            "truncated": sum(t > 256 for t in tokens), "threads": models[variants[0]].threads, "rounds": args.rounds,
            "load_before": [round(x, 2) for x in load_before], "load_after": [round(x, 2) for x in load_after]}
    if args.json:
        print(json.dumps({"meta": meta, "rows": rows}, indent=1))
        return
    print(f"{meta['chunks']} chunks x {args.chars} chars (median {meta['tokens_median']:.0f} tokens, "
          f"{meta['truncated']} truncated at 256), threads {meta['threads']}, {args.rounds} alternating rounds, "
          f"load {meta['load_before']} -> {meta['load_after']}")
    print("| variant | batch | chunks/s | chunks/CPU-s | x baseline (wall / CPU) | query p50 ms (wall / CPU) | "
          "cos to fp32 mean / min | min cos to reference |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['variant']} | {r['batch']} | {r['chunks_per_s']:.1f} | {r['chunks_per_cpu_s']:.1f} | "
              f"{r['ingest_ratio_wall']:.2f} / {r['ingest_ratio_cpu']:.2f} | {r['query_p50_ms']:.2f} / {r['query_p50_cpu_ms']:.2f} | "
              f"{r['cos_fp32_mean']:.4f} / {r['cos_fp32_min']:.4f} | {r['cos_reference_min']:.4f} |")
    for r in rows:
        print(f"{r['variant']}: {r['model_id']} sha256 {r['file_sha256']}")


if __name__ == "__main__":
    main()
