"""Raw embedder throughput on RFC-like chunks, and accuracy against the reference fixture.

Why: indexing time is dominated by embedding, and chunk_size_chars=1000 was
chosen to fill the 256-token window; this measures exactly that workload,
uncached, so regressions in tokenising, batching or thread settings show up.

    python bench/bench_embedder.py --rfc-dir ../shared/data/rfc --chunks 500 --batch 32
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np

from bara.retrieval.embedders import OnnxMiniLMEmbedder, load_tokenizer

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "minilm_reference.json"


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


def throughput(embedder: OnnxMiniLMEmbedder, texts: list[str], repeats: int) -> list[float]:
    """texts/s for each repeat of embedding the whole list (model already warm)."""
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        embedder.embed(texts)
        rates.append(len(texts) / (time.perf_counter() - start))
    return rates


def reference_cosines(embedder: OnnxMiniLMEmbedder) -> np.ndarray:
    """Cosine of each fixture text's embedding with its float32 reference vector."""
    items = json.loads(FIXTURE.read_text(encoding="utf-8"))["items"]
    ref = np.array([i["vector"] for i in items], dtype=np.float32)
    got = embedder.embed([i["text"] for i in items])
    return (got * ref).sum(axis=1) / np.linalg.norm(ref, axis=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rfc-dir", type=Path, default=ROOT.parent / "shared" / "data" / "rfc")
    parser.add_argument("--chunks", type=int, default=500)
    parser.add_argument("--chars", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    texts = rfc_chunks(args.rfc_dir, args.chunks, args.chars)
    embedder = OnnxMiniLMEmbedder(batch_size=args.batch, threads=args.threads)
    embedder.embed(texts[:args.batch])  # load + warm up
    tokens = [len(e.ids) for e in load_tokenizer(10_000).encode_batch(texts)]
    rates = throughput(embedder, texts, args.repeats)
    cos = reference_cosines(embedder)
    print(f"{len(texts)} chunks x {args.chars} chars, batch {args.batch}, threads {embedder.threads}")
    print(f"tokens/chunk: median {statistics.median(tokens):.0f}, "
          f"{sum(t > 256 for t in tokens)} of {len(tokens)} truncated at 256")
    print(f"throughput texts/s: median {statistics.median(rates):.1f}, best {max(rates):.1f}")
    print(f"cosine vs float32 reference: min {cos.min():.5f}, mean {cos.mean():.5f}")


if __name__ == "__main__":
    main()
