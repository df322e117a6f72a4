"""Peak memory and time of `bara ingest` on one large text file (issue 15, defect 10).

Writes a synthetic file of distinct prose paragraphs (default 20 MB, about 20k chunks), ingests it
with the real CLI in a child process (fresh store and embedding cache), and reports the child's peak
resident memory (``ru_maxrss``), seconds, and chunks. ``--interrupt-after S`` also kills a second run
with SIGINT after S seconds and then resumes it, reporting how many vectors the first run had cached.

    python bench/bench_ingest_memory.py [--mb 20] [--batch 256] [--interrupt-after 60 [--resume-after 60]]

Results go to docs/benchmarks.md ("Large-file ingest").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ("segment timer window congestion loss retransmit acknowledgement sender receiver path route "
         "packet header option field checksum length stream session cipher record handshake server client "
         "cache proxy origin request response status token policy header value limit budget backoff").split()


def write_corpus(path: Path, megabytes: float, seed: int = 15) -> int:
    """Distinct paragraphs (so no two chunks share a cache key) until the file reaches the size."""
    rng = random.Random(seed)
    target, size, n = int(megabytes * 1024 * 1024), 0, 0
    with path.open("w", encoding="utf-8") as fh:
        while size < target:
            sentences = [f"Paragraph {n} sentence {s}: the " + " ".join(rng.choices(WORDS, k=14)) + "."
                         for s in range(6)]
            para = " ".join(sentences) + "\n\n"
            fh.write(para)
            size, n = size + len(para.encode()), n + 1
    return n


def run_ingest(path: Path, db: Path, cache: Path, batch: int, interrupt_after: float | None = None) -> dict:
    env = {**os.environ, "BARA_CACHE_DIR": str(cache), "BARA_INGEST_EMBED_BATCH": str(batch),
           "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "bara.cli", "ingest", str(path), "--db", str(db), "--json"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if interrupt_after is not None:
        try:
            proc.wait(timeout=interrupt_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
    out, errs = proc.communicate()
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # max over children so far
    summary = json.loads(out) if out.strip().startswith("{") else {"stderr": errs[-500:]}
    return {"exit": proc.returncode, "seconds": round(seconds, 1), "peak_rss_mb": round(peak_kb / 1024, 1),
            "peak_is_new": peak_kb > before, "summary": summary}


def cached_vectors(cache: Path) -> int:
    files = list(cache.rglob("*.db")) + list(cache.rglob("*.sqlite"))
    total = 0
    for f in files:
        with sqlite3.connect(f) as conn:
            try:
                total += conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
            except sqlite3.DatabaseError:
                pass
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--batch", type=int, default=256, help="ingest_embed_batch for the run")
    ap.add_argument("--interrupt-after", type=float, default=None, help="SIGINT the first run after S seconds")
    ap.add_argument("--resume-after", type=float, default=None, help="SIGINT the resumed run after S seconds too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bara-bench-mem-") as tmp:
        work = Path(tmp)
        big = work / "big.txt"
        paragraphs = write_corpus(big, args.mb)
        report: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}",
                        "file_mb": round(big.stat().st_size / 1024 / 1024, 1), "paragraphs": paragraphs,
                        "batch": args.batch}
        if args.interrupt_after is not None:
            first = run_ingest(big, work / "i.db", work / "icache", args.batch, args.interrupt_after)
            report["interrupted"] = {**first, "cached_vectors": cached_vectors(work / "icache")}
            print(json.dumps(report, indent=1), flush=True)
            report["resumed"] = run_ingest(big, work / "i.db", work / "icache", args.batch, args.resume_after)
            report["resumed"]["cached_vectors"] = cached_vectors(work / "icache")
        else:
            report["clean"] = run_ingest(big, work / "c.db", work / "ccache", args.batch)
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
