"""Speed of the document readers and peak memory of ingesting a 500-page PDF (issue 36).

* PDF pages per second: every readable PDF of ``$BARA_DATA/docs/pdf`` read ``--rounds`` times (the
  117-page textbook dominates), reader only (text layer, outline headings, furniture).
* HTML documents per second: the six Debian manuals of ``$BARA_DATA/docs/html``, ``--rounds`` times.
* A 500-page PDF built in a temp folder from the real PDFs' pages (pypdfium2 ``import_pages``; the
  textbook's pages repeat, so many chunks repeat and the embedding cache serves the repeats), ingested
  by the real CLI in a child process with a fresh store and cache: seconds, chunks and the child's
  peak resident memory (``ru_maxrss``); target < 500 MB.

    python bench/bench_readers.py [--rounds 3] [--pages 500] [--skip-ingest]

Results go to docs/benchmarks.md ("Document readers").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pypdfium2 as pdfium

from bara.memory.readers import read
from bara.memory.readers.base import Unreadable

DATA = Path(os.environ.get("BARA_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
LIMIT = 10**9


def readable(folder: Path, suffix: str) -> list[Path]:
    out = []
    for p in sorted(folder.glob(f"*{suffix}")):
        try:
            read(p, LIMIT).content()
            out.append(p)
        except Unreadable:
            pass
    return out


def rate(files: list[Path], rounds: int, unit) -> dict:  # noqa: ANN001 - unit(path) -> units per file
    units = sum(unit(p) for p in files) * rounds
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(rounds):
        for p in files:
            read(p, LIMIT).content()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"files": len(files), "rounds": rounds, "units": units, "seconds": round(wall, 2),
            "per_second": round(units / wall, 1), "per_cpu_second": round(units / cpu, 1)}


def pages(p: Path) -> int:
    pdf = pdfium.PdfDocument(p)
    try:
        return len(pdf)
    finally:
        pdf.close()


def build_pdf(sources: list[Path], n_pages: int, out: Path) -> int:
    """``n_pages`` pages taken in turn from ``sources`` (whole files, then the next)."""
    big = pdfium.PdfDocument.new()
    i = 0
    while len(big) < n_pages:
        src = pdfium.PdfDocument(sources[i % len(sources)])
        take = min(len(src), n_pages - len(big))
        big.import_pages(src, list(range(take)))
        src.close()
        i += 1
    big.save(str(out))
    n = len(big)
    big.close()
    return n


def ingest(path: Path, work: Path) -> dict:
    env = {**os.environ, "BARA_CACHE_DIR": str(work / "cache"), "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "bara.cli", "ingest", str(path), "--db", str(work / "kb.db"), "--json"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    out = proc.stdout or ""
    summary = json.loads(out.strip().splitlines()[-1]) if out.strip() else {"stderr": (proc.stderr or "")[-500:]}
    return {"exit": proc.returncode, "seconds": round(seconds, 1), "peak_rss_mb": round(peak_kb / 1024, 1),
            "chunks": summary.get("chunks_written"), "summary": summary}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pages", type=int, default=500)
    ap.add_argument("--skip-ingest", action="store_true")
    args = ap.parse_args()
    pdfs, htmls = readable(DATA / "docs" / "pdf", ".pdf"), readable(DATA / "docs" / "html", ".html")
    if not pdfs or not htmls:
        sys.exit(f"no readable PDF or HTML under {DATA / 'docs'}: set BARA_DATA")
    report: dict = {"machine": f"{platform.machine()} {platform.processor() or ''}, {os.cpu_count()} cores",
                    "load_before": round(os.getloadavg()[0], 2)}
    report["pdf_pages"] = rate(pdfs, args.rounds, pages)
    report["html_docs"] = rate(htmls, args.rounds, lambda p: 1)
    if not args.skip_ingest:
        with tempfile.TemporaryDirectory(prefix="bara-bench-readers-") as tmp:
            work = Path(tmp)
            big = work / "big.pdf"
            n = build_pdf(pdfs, args.pages, big)
            report["big_pdf"] = {"pages": n, "mb": round(big.stat().st_size / 1e6, 1), **ingest(big, work)}
            again = ingest(big, work)
            report["big_pdf_unchanged_reingest"] = {"wall_s": again["seconds"],
                                                    "ingest_s": again["summary"].get("seconds")}
    report["load_after"] = round(os.getloadavg()[0], 2)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
