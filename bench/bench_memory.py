"""Episodic memory search latency on a 700-turn history (issue 14 target: p50 <= 20 ms).

One user's episodic memory holds the first 700 turns of LoCoMo conv-26 then conv-30 (replayed as
in ``bara eval memory``: one batch per session, resolved dates, neighbour-leaning vectors). Every
question of those conversations is then searched with ``EpisodicMemory.search`` exactly as the
gated pipeline calls it (round 1, the multi-hop round when the question joins facts, the reply
windows). Query vectors are precomputed, as in bench_retrieval.py; encoding is reported apart.

Usage:  python bench/bench_memory.py [--data ../shared/data] [--turns 700] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from bara.eval.locomo_data import load_locomo
from bara.memory.episodic import EpisodicMemory, Turn, context_vectors, episode_text, joins_facts
from bara.retrieval.embedders import build_embedder
from bara.settings import load_settings
from bara.store.sqlite import SQLiteStore


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", default=os.environ.get("BARA_DATA", "../shared/data"))
    ap.add_argument("--turns", type=int, default=700)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    settings = load_settings()
    embedder = build_embedder(settings)
    convs = [load_locomo(Path(args.data) / "locomo" / f) for f in ("conv-26.json", "conv-30.json")]
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.db")
        mem = EpisodicMemory(store, embedder, settings)
        stored, ingest_s = 0, 0.0
        for conv in convs:
            for s in conv.sessions:
                turns = [Turn(t.speaker, t.text, t.dia_id) for t in s.turns][: args.turns - stored]
                if not turns:
                    break
                t0 = time.perf_counter()
                texts = [episode_text(t.speaker, t.text, s.when) for t in turns]
                mem.add_session("bench", conv.sample_id, f"s{s.n}", turns, s.when,
                                context_vectors(embedder.embed(texts), settings.memory_episodic_context_weight))
                ingest_s += time.perf_counter() - t0
                stored += len(turns)
        questions = [q.question for c in convs for q in c.questions]
        t0 = time.perf_counter()
        vectors = embedder.embed(questions)
        encode_ms = (time.perf_counter() - t0) * 1e3 / len(questions)
        for q, v in zip(questions[:20], vectors, strict=False):  # warm-up
            mem.search("bench", q, vector=v)
        times, hops = [], 0
        for _ in range(args.repeat):
            for q, v in zip(questions, vectors, strict=False):
                t0 = time.perf_counter()
                result = mem.search("bench", q, vector=v)
                times.append((time.perf_counter() - t0) * 1e3)
                hops += bool(result.hop_queries)
        t = np.array(times)
        print(f"episodes stored: {store.count_chunks('bench', 'episodic')} turns "
              f"(ingest {ingest_s:.1f} s incl. embedding, cache warm or cold as found)")
        print(f"questions: {len(questions)} x {args.repeat}; multi-hop round ran on {hops / args.repeat:.0f}")
        print(f"memory search: p50 {np.percentile(t, 50):.2f} ms  p95 {np.percentile(t, 95):.2f} ms  "
              f"max {t.max():.2f} ms")
        one = [x for x, q in zip(times, questions * args.repeat, strict=False) if not joins_facts(q)]
        print(f"  one-round questions: p50 {np.percentile(one, 50):.2f} ms")
        print(f"query encoding (batched, per question): {encode_ms:.2f} ms")
        print(f"load average: {os.getloadavg()[0]:.1f}")
        store.close()


if __name__ == "__main__":
    main()
