"""Whole-turn latency without generation: gated bara vs the always-retrieve baseline, same run.

Over the first N MTRAG-UN dev tasks (default 100): each task's earlier turns are
replayed through the pipeline (untimed; the generator returns MTRAG's own agent
reply, so history, state and memory are realistic), then the final user turn is
timed. Both modes see the same conversations in the same process, alternating
which mode goes first per task so caches and CPU contention favour neither.

Learning writes (notes, Q&A, episodic record) are stored after the answer (issue 16's write-behind):
the replayed turns' writes are flushed before the timed turn (the idle time before a user's next
message), and the timed turn's own writes are timed apart and reported beside it, never hidden.

"Without generation" means the generator is a stub (its own time is subtracted
too); everything else is timed: sanitise, load, gate, embed, rewrite, retrieval,
assembly and persistence. The pooled corpus is indexed once, one chunk per
passage, into the cached index ``bara.eval.retrieval.index_path`` (shared with
bench_rewrite and ``bara eval``) and copied to a scratch store per run. Query
embeddings are computed live (no embedding cache), as in a real turn.

``--idle-ms N`` pauses N ms after that flush, before the timed turn, in both modes alike: the time a
user takes to read the answer and type the next message. The default, 0, times turns back to back
(the figure the issue's criterion is read on); with a pause both turns start from an idle CPU, as
real turns do, and the work a mode did just before no longer lingers into its next turn.

``--idle-busy`` spends that pause in a busy loop on the main thread instead of asleep: the process's caches
stay as they were, only the other core idles (docs/benchmarks.md, issue 16 round 10).

``--rounds R`` (default 3) runs the tasks R times with new users, so each mode's p50 is over R x N
turns: one pass of 100 left the ratio moving by about +-0.03 from run to run.

Usage:  python bench/bench_turn.py [--data ../shared/data] [--tasks 100] [--rounds 3] [--idle-ms 0] [--idle-busy]
                                   [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

from bara.app import Bara
from bara.eval.beir import read_corpus
from bara.eval.retrieval import build_index, index_path
from bara.turn.gated import Assistant
from bara.prompts.frames import Prompt
from bara.retrieval.embedders import OnnxMiniLMEmbedder, build_embedder
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

MODES = ("gated", "always")


class ReplayGenerator:
    """No model: answers with the queued MTRAG agent replies (or "" for the timed turn)."""

    name = "replay"

    def __init__(self) -> None:
        self.replies: list[str] = []

    def generate(self, prompt: Prompt) -> str:
        return self.replies.pop(0) if self.replies else ""


def load_tasks(root: Path, n: int) -> list[dict]:
    with (root / "mtrag" / "tasks.dev.jsonl").open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()][:n]


def cached_index(root: Path, settings: Settings) -> Path:
    """The pooled-corpus index, built (resumably) on first use."""
    corpus = root / "mtrag" / "corpus.jsonl"
    embedder = build_embedder(settings)
    path = index_path(corpus, embedder, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(path)
    try:
        docs = read_corpus(corpus, Counter())
        if store.count_chunks() < len(docs):
            print(f"indexing {len(docs)} passages into {path} (once) ...", flush=True)
            build_index(store, docs, embedder)
    finally:
        store.close()
    return path


def exchanges(task: dict) -> tuple[list[tuple[str, str]], str]:
    """Earlier (user, agent) pairs and the final user turn."""
    items = task["input"]
    pairs, pending = [], None
    for item in items[:-1]:
        if item["speaker"] == "user":
            if pending is not None:
                pairs.append((pending, ""))
            pending = item["text"]
        elif pending is not None:
            pairs.append((pending, item["text"]))
            pending = None
    if pending is not None:
        pairs.append((pending, ""))
    return pairs, items[-1]["text"]


def run_task(assistant: Assistant, generator: ReplayGenerator, user: str, task: dict, idle_ms: float = 0.0) -> dict:
    pairs, final = exchanges(task)
    cid = assistant.open_conversation(user)
    for question, reply in pairs:
        generator.replies = [reply]
        assistant.turn(user, question, cid)
    generator.replies = []
    flush = getattr(assistant.bara, "flush", lambda: 0)  # None before the write-behind (issue 16)
    flush()  # the replayed turns' learning writes, stored in the idle time before the user's next message
    if idle_ms:
        pause(idle_ms / 1e3)  # the user reading and typing: the same pause for both modes
    start = time.perf_counter()
    trace = assistant.turn(user, final, cid).trace
    wall = (time.perf_counter() - start) * 1e3 - trace.latency_ms.get("generate", 0.0)
    start = time.perf_counter()
    flush()  # this turn's learning writes, after its answer: timed apart, never hidden
    writes = (time.perf_counter() - start) * 1e3
    return {"ms": wall, "writes_ms": writes, "retrieved": trace.retrieved, "route": trace.route,
            "stages": dict(trace.latency_ms), "kb": trace.tiers["kb"], "context_tokens": trace.context_tokens}


def busy(seconds: float) -> None:
    """A pause spent in a loop on this thread (``--idle-busy``): this core stays busy, the other idles."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


pause = time.sleep  # ``--idle-busy`` sets it to ``busy``


def percentile(values: list[float], q: float) -> float:
    return float(np.percentile(np.array(values), q))


def summarise(rows: list[dict]) -> dict:
    ms = [r["ms"] for r in rows]
    stages = {k: round(float(np.mean([r["stages"].get(k, 0.0) for r in rows])), 3)
              for k in rows[0]["stages"] if k != "total"}
    with_writes = [r["ms"] + r["writes_ms"] for r in rows]
    retrieving = [r["ms"] for r in rows if r["retrieved"]]
    return {"n": len(rows), "p50_ms": round(percentile(ms, 50), 3), "p95_ms": round(percentile(ms, 95), 3),
            "p50_retrieving_ms": round(percentile(retrieving, 50), 3) if retrieving else None,
            "p50_deferred_writes_ms": round(percentile([r["writes_ms"] for r in rows], 50), 3),
            "p50_with_writes_ms": round(percentile(with_writes, 50), 3),
            "mean_ms": round(float(np.mean(ms)), 3), "retrieving_turns": sum(r["retrieved"] for r in rows),
            "mean_kb_chunks": round(float(np.mean([r["kb"] for r in rows])), 2),
            "mean_context_tokens": round(float(np.mean([r["context_tokens"] for r in rows])), 1),
            "mean_stage_ms": {k: v for k, v in stages.items() if v},
            "p50_stage_ms": {k: round(percentile([r["stages"].get(k, 0.0) for r in rows], 50), 3)
                             for k, v in stages.items() if v},
            "routes": dict(Counter(r["route"] for r in rows))}


def build_assistants(db: Path, settings: Settings) -> dict[str, tuple[Assistant, ReplayGenerator]]:
    embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)  # live, uncached
    bara = Bara(settings.override(db=str(db)), embedder=embedder)
    out = {}
    for mode in MODES:
        assistant, generator = Assistant(bara, mode=mode), ReplayGenerator()
        assistant.generator = generator
        out[mode] = (assistant, generator)
    return out


def task_parser(description: str) -> argparse.ArgumentParser:
    """The options every MTRAG-UN turn bench takes: the data root, how many dev tasks, a JSON copy."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--data", help="shared data root (default $BARA_DATA or Settings.data_dir)")
    ap.add_argument("--tasks", type=int, default=100, help="first N dev tasks")
    ap.add_argument("--json", dest="json_out", help="also write the summary to this file")
    return ap


def tasks_of(args: argparse.Namespace) -> tuple[Settings, Path, list[dict]]:
    """Settings, the data root and the first ``--tasks`` dev tasks."""
    settings = Settings()
    root = Path(args.data or os.environ.get("BARA_DATA") or settings.data_dir)
    return settings, root, load_tasks(root, args.tasks)


def main(argv: list[str] | None = None) -> int:
    ap = task_parser((__doc__ or "").splitlines()[0])
    ap.add_argument("--idle-ms", type=float, default=0.0, help="pause before each timed turn (both modes)")
    ap.add_argument("--idle-busy", action="store_true", help="spend --idle-ms in a busy loop on the main thread "
                                                               "instead of asleep")
    ap.add_argument("--rounds", type=int, default=3, help="passes over the tasks, new users each (more turns, "
                                                          "a steadier p50)")
    args = ap.parse_args(argv)
    settings, root, tasks = tasks_of(args)
    global pause
    pause = busy if args.idle_busy else time.sleep
    with tempfile.TemporaryDirectory(prefix="bara-bench-turn-") as scratch:
        db = Path(scratch) / "turn.db"
        shutil.copy(cached_index(root, settings), db)
        assistants = build_assistants(db, settings)
        assistants["gated"][0].bara.warm()  # one Bara for both modes: model, matrix, in-memory full-text index
        for mode in MODES:  # warm-up: model load, regex and matrix caches
            run_task(*assistants[mode][:1], assistants[mode][1], f"warm-{mode}", tasks[0])
        rows: dict[str, list[dict]] = {m: [] for m in MODES}
        for n, (r, i) in enumerate((r, i) for r in range(args.rounds) for i in range(len(tasks))):
            for mode in (MODES if n % 2 == 0 else MODES[::-1]):
                assistant, generator = assistants[mode]
                rows[mode].append(run_task(assistant, generator, f"{mode}-{r}-{i}", tasks[i], args.idle_ms))
        report = {m: summarise(rows[m]) for m in MODES}
    report["ratio_p50_gated_over_always"] = round(report["gated"]["p50_ms"] / report["always"]["p50_ms"], 3)
    retrieving = report["gated"]["p50_retrieving_ms"], report["always"]["p50_retrieving_ms"]
    report["ratio_p50_retrieving"] = round(retrieving[0] / retrieving[1], 3) if all(retrieving) else None
    report["ratio_p95_gated_over_always"] = round(report["gated"]["p95_ms"] / report["always"]["p95_ms"], 3)
    report["ratio_p50_with_writes"] = round(report["gated"]["p50_with_writes_ms"] / report["always"]["p50_with_writes_ms"], 3)
    report["idle_ms"], report["idle_busy"] = args.idle_ms, args.idle_busy
    report["rounds"] = args.rounds
    print_report(report, len(tasks))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))
    return 0


def print_report(report: dict, n: int) -> None:
    print(f"MTRAG-UN dev, first {n} tasks x {report['rounds']} rounds, final turn timed without generation; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; idle before each timed turn "
          f"{report['idle_ms']:g} ms{' (busy)' if report.get('idle_busy') else ''}")
    for mode in MODES:
        r = report[mode]
        print(f"{mode:>7}: p50 {r['p50_ms']:.2f} ms  p95 {r['p95_ms']:.2f} ms  mean {r['mean_ms']:.2f} ms  "
              f"retrieving {r['retrieving_turns']}/{r['n']}  kb chunks {r['mean_kb_chunks']}  "
              f"context tokens {r['mean_context_tokens']}")
        print(f"         retrieving turns p50 {r['p50_retrieving_ms']} ms; learning writes after the answer p50 "
              f"{r['p50_deferred_writes_ms']} ms (turn + writes p50 {r['p50_with_writes_ms']} ms)")
        print(f"         stages (mean ms): {r['mean_stage_ms']}")
        print(f"         stages (p50 ms): {r['p50_stage_ms']}")
        print(f"         routes: {r['routes']}")
    print(f"gated / always: p50 {report['ratio_p50_gated_over_always']:.2f}x "
          f"(retrieving turns only {report['ratio_p50_retrieving'] or float('nan'):.2f}x), "
          f"p95 {report['ratio_p95_gated_over_always']:.2f}x; counting the learning writes "
          f"p50 {report['ratio_p50_with_writes']:.2f}x")


if __name__ == "__main__":
    raise SystemExit(main())
