"""The lexical arm started before the query is encoded (issue 16): turn latency with it on and off, paired.

Four assistants in one process: gated and always, each over a Bara with
``retrieval_prefetch_lexical`` on and one with it off (two copies of the cached
MTRAG-UN index, one shared embedder). Every task is run by all four, the order
rotating per task so that caches and CPU contention favour none, for R rounds
(new users each round). Each run replays the task's earlier turns untimed, then
times the final turn without generation, as ``bench_turn.py`` does. Reported:
p50 per assistant, the gated/always ratio with the prefetch on and off, and the
paired median difference (on minus off, same task and round) per mode.

Usage:  python bench/bench_prefetch.py [--data ../shared/data] [--tasks 100] [--rounds 2] [--json out.json]
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
from pathlib import Path

from bench_turn import ReplayGenerator, cached_index, run_task, task_parser, tasks_of

from bara.app import Bara
from bara.turn.gated import Assistant
from bara.retrieval.embedders import OnnxMiniLMEmbedder
from bara.settings import Settings


def build(scratch: Path, index: Path, settings: Settings) -> dict[str, tuple[Assistant, ReplayGenerator]]:
    embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)  # live, uncached
    out = {}
    for on in (True, False):
        db = scratch / f"prefetch-{'on' if on else 'off'}.db"
        shutil.copy(index, db)
        bara = Bara(settings.override(db=str(db), retrieval_prefetch_lexical=on), embedder=embedder)
        for mode in ("gated", "always"):
            assistant, generator = Assistant(bara, mode=mode), ReplayGenerator()
            assistant.generator = generator
            out[f"{mode}-{'on' if on else 'off'}"] = (assistant, generator)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = task_parser((__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2, help="passes over the tasks (new users each)")
    args = ap.parse_args(argv)
    settings, root, tasks = tasks_of(args)
    with tempfile.TemporaryDirectory(prefix="bara-bench-prefetch-") as scratch:
        runs = build(Path(scratch), cached_index(root, settings), settings)
        names = list(runs)
        for name in names:  # warm-up: model load, regex and matrix caches
            run_task(*runs[name], f"warm-{name}", tasks[0])
        ms: dict[str, list[float]] = {name: [] for name in names}
        turn = 0
        for r in range(args.rounds):
            for i, task in enumerate(tasks):
                order = names[turn % 4:] + names[:turn % 4]
                turn += 1
                for name in order:
                    ms[name].append(run_task(*runs[name], f"{name}-{r}-{i}", task)["ms"])
        for assistant, _ in runs.values():
            assistant.bara.close()
    p50 = {name: round(statistics.median(v), 3) for name, v in ms.items()}
    report = {"tasks": len(tasks), "rounds": args.rounds, "load_average": round(os.getloadavg()[0], 2),
              "p50_ms": p50,
              "ratio_p50_on": round(p50["gated-on"] / p50["always-on"], 3),
              "ratio_p50_off": round(p50["gated-off"] / p50["always-off"], 3),
              "paired_median_on_minus_off_ms": {
                  mode: round(statistics.median(a - b for a, b in zip(ms[f"{mode}-on"], ms[f"{mode}-off"], strict=True)),
                              3)
                  for mode in ("gated", "always")}}
    print(json.dumps(report, indent=2))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
