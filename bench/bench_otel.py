"""What OpenTelemetry export costs a turn (issue 39): the gated turn with export off vs on, same run.

The MTRAG-UN dev tasks of ``bench_turn.py`` (earlier turns replayed, the final turn timed without
generation), in gated mode, twice per task with new users: once with export off (no observer: what
every turn costs today, plus the interval the recorder now keeps per stage), once with the OTLP/HTTP
exporter on (``bara.observe``: spans planned from the trace and handed to the SDK's batch processor,
metrics recorded; the timed figure includes ``observer.turn``). The order alternates per task so
caches and CPU contention favour neither. The exporter posts to a loopback sink in its own process
that answers 200 to every POST (a collector's own cost is not bara's); replayed turns export too, so
the batch processor's worker thread competes for the cores as it would in a service.

Usage:  python bench/bench_otel.py [--data ../shared/data] [--tasks 100] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_turn import ReplayGenerator, cached_index, run_task, summarise, task_parser, tasks_of  # noqa: E402

from bara.app import Bara  # noqa: E402
from bara.observe import build_observer  # noqa: E402
from bara.turn.gated import Assistant  # noqa: E402
from bara.retrieval.embedders import OnnxMiniLMEmbedder  # noqa: E402

VARIANTS = ("off", "otlp")
SINK = """
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers()
    def log_message(self, *a): pass
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


class Observed:
    """An assistant whose every turn is also exported (what ``bara serve --otlp`` does per request)."""

    def __init__(self, assistant: Assistant, observer: Any) -> None:
        self.assistant, self.observer, self.bara = assistant, observer, assistant.bara

    def open_conversation(self, user: str) -> str:
        return self.assistant.open_conversation(user)

    def turn(self, user: str, message: str, cid: str | None = None) -> Any:
        result = self.assistant.turn(user, message, cid)
        self.observer.turn(result.trace, message)
        return result


def main(argv: list[str] | None = None) -> int:
    ap = task_parser((__doc__ or "").splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="passes over the tasks, new users each")
    args = ap.parse_args(argv)
    settings, root, tasks = tasks_of(args)
    sink = subprocess.Popen([sys.executable, "-c", SINK], stdout=subprocess.PIPE, text=True)
    try:
        port = int((sink.stdout.readline() if sink.stdout else "").strip())
        report = _run(settings, root, tasks, args.rounds, f"http://127.0.0.1:{port}")
    finally:
        sink.terminate()
        sink.wait(10)
    print_report(report, len(tasks))
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2))
    return 0


def _run(settings: Any, root: Path, tasks: list[dict], rounds: int, url: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bara-bench-otel-") as scratch:
        db = Path(scratch) / "turn.db"
        shutil.copy(cached_index(root, settings), db)
        embedder = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size)  # live, uncached
        bara = Bara(settings.override(db=str(db)), embedder=embedder)
        observer = build_observer(bara.settings, url, embedder=embedder, environ={})
        assert observer is not None
        generators = {v: ReplayGenerator() for v in VARIANTS}
        plain = {v: Assistant(bara) for v in VARIANTS}
        for v in VARIANTS:
            plain[v].generator = generators[v]
        assistants: dict[str, Any] = {"off": plain["off"], "otlp": Observed(plain["otlp"], observer)}
        bara.warm()
        for v in VARIANTS:  # warm-up: model load, regex and matrix caches, the SDK's first export
            run_task(assistants[v], generators[v], f"warm-{v}", tasks[0])
        rows: dict[str, list[dict]] = {v: [] for v in VARIANTS}
        for n, (r, i) in enumerate((r, i) for r in range(rounds) for i in range(len(tasks))):
            for v in (VARIANTS if n % 2 == 0 else VARIANTS[::-1]):
                rows[v].append(run_task(assistants[v], generators[v], f"{v}-{r}-{i}", tasks[i]))
        start = time.perf_counter()
        observer.shutdown()
        flush_ms = (time.perf_counter() - start) * 1e3
        bara.close()
    report: dict[str, Any] = {v: summarise(rows[v]) for v in VARIANTS}
    report["ratio_p50_otlp_over_off"] = round(report["otlp"]["p50_ms"] / report["off"]["p50_ms"], 3)
    report["ratio_p95_otlp_over_off"] = round(report["otlp"]["p95_ms"] / report["off"]["p95_ms"], 3)
    # Paired: the same task's two timed turns ran one after the other, so their ratio cancels most of the
    # machine's drift (the two p50s above move by +-5% from run to run on a loaded machine).
    pairs = [o["ms"] / f["ms"] for o, f in zip(rows["otlp"], rows["off"], strict=True)]
    report["paired_median_ratio"] = round(float(np.median(pairs)), 3)
    low, high = np.percentile([float(np.median(np.random.default_rng(s).choice(pairs, len(pairs))))
                               for s in range(1000)], [2.5, 97.5])
    report["paired_median_ratio_ci95"] = [round(float(low), 3), round(float(high), 3)]
    report["rounds"], report["shutdown_flush_ms"] = rounds, round(flush_ms, 1)
    return report


def print_report(report: dict, n: int) -> None:
    print(f"MTRAG-UN dev, first {n} tasks x {report['rounds']} rounds, gated, final turn timed without generation")
    for v in VARIANTS:
        r = report[v]
        print(f"  export {v:5s} p50 {r['p50_ms']:7.2f} ms  p95 {r['p95_ms']:7.2f} ms  mean {r['mean_ms']:7.2f} ms  "
              f"(n={r['n']}, retrieving {r['retrieving_turns']})")
    print(f"  p50 ratio otlp/off {report['ratio_p50_otlp_over_off']}  p95 ratio {report['ratio_p95_otlp_over_off']}  "
          f"(final flush at shutdown {report['shutdown_flush_ms']} ms)")
    print(f"  paired median ratio {report['paired_median_ratio']}  95% CI {report['paired_median_ratio_ci95']}")


if __name__ == "__main__":
    raise SystemExit(main())
