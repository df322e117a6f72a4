"""End to end with a real model: gated vs always over whole mixed conversations, back to back.

The seed's cost claim (gating saves latency and tokens because the model reads less), measured through
a model answering every turn: llama-cpp-python's OpenAI-compatible server with SmolLM2-135M on loopback
(`make llm`), started by this script, and bara's OpenAI-compatible provider talking to it.

Conversations are MTRAG-UN dev tasks (a seeded sample of ``--conversations``) with 30% CLINC150 small
talk inserted, exactly as ``bara eval ab --turns all --mix-smalltalk`` builds them
(:func:`bara.eval.mixing.mix_conversations`, same rate and seed as ``make eval-mixed``), run turn by turn
by :func:`bara.eval.conversation_replay.run_conversation` (the reference reply is stored after each
original turn, so later turns see the same history in both modes). Each conversation runs in ``gated``
then ``always`` mode (or the reverse: the first mode alternates by conversation so neither always follows
the other), in one process against one server, with the same generation cap (``--max-tokens``, sent as
``max_tokens``) and the server's fixed seed.

Per conversation and mode: wall time of all its turns (embedding, retrieval, the model's prompt
processing and generation, persistence), the prompt and completion tokens the server reported in its
replies' ``usage``, model calls and store searches. The ratios are gated/always of the totals, with
percentile bootstrap 95% intervals over conversations (paired; :func:`bara.eval.stats.bootstrap_ratio_ci`).

The model is far too small for its answers to be judged: this measures cost, not quality.

Usage:  python bench/bench_e2e.py [--conversations 24] [--max-tokens 32] [--data ../shared/data]
                                  [--rows rows.jsonl] [--base-url URL --model NAME] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Sequence

import httpx
import numpy as np

from bara.app import Bara
from bara.eval.ab import cached_index, prepare, working_copy
from bara.eval.conversation_replay import ReferenceReplies, forget_user, run_conversation
from bara.eval.mixing import MixConfig, MixedConversation, mix_conversations
from bara.eval.stats import bootstrap_ratio_ci, ratio_of_sums
from bara.llm import build_model
from bara.llm.local import LOCAL_ALIAS, LOCAL_GGUF, start_local_server
from bara.llm.metered import MeteredModel
from bara.turn.gated import Assistant
from bara.retrieval.embedders import build_embedder
from bara.settings import Settings, load_settings

MODES = ("gated", "always")
FIELDS = ("wall_s", "prompt_tokens", "completion_tokens", "model_calls", "searches")
MIX_RATE, MIX_SEED = 0.3, 20261130  # eval/eval.mk's EVAL_MIX_RATE / EVAL_MIX_SEED (round 2's registration)
K = 4  # as `make eval-mixed`


@dataclass(frozen=True)
class Row:
    """One conversation in one mode."""

    task_id: str
    mode: str
    turns: int
    wall_s: float
    prompt_tokens: int
    completion_tokens: int
    model_calls: int
    searches: int

    def as_dict(self) -> dict[str, Any]:
        return {"task_id": self.task_id, "mode": self.mode, "turns": self.turns, "wall_s": round(self.wall_s, 3),
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "model_calls": self.model_calls, "searches": self.searches}


def sample(n_tasks: int, n: int, seed: int) -> list[int]:
    """Indices of ``n`` tasks drawn without replacement (file order kept), the same for every run."""
    n = min(n, n_tasks)
    return sorted(int(i) for i in np.random.default_rng(seed).choice(n_tasks, size=n, replace=False))


def run_one(assistant: Assistant, meter: MeteredModel, replies: ReferenceReplies, conv: MixedConversation,
            mode: str, index: int) -> Row:
    user = f"e2e-{mode}-{index}"
    meter.take()
    start = time.perf_counter()
    try:
        costs, _ = run_conversation(assistant, replies, conv, user, f"{user}-c")
        wall = time.perf_counter() - start
    finally:
        forget_user(assistant, user)
    used = meter.take()
    return Row(conv.task_id, mode, len(conv.turns), wall, used.prompt_tokens, used.completion_tokens, used.calls,
               sum(c.retrieval_calls for c in costs))


def summary(rows: Sequence[Row], mode: str) -> dict[str, float]:
    mine = [r for r in rows if r.mode == mode]
    out: dict[str, float] = {f: int(sum(getattr(r, f) for r in mine)) for f in FIELDS}
    out["wall_s"] = round(sum(r.wall_s for r in mine), 3)
    return out


def report(rows: Sequence[Row], n: int, server: str, model: str = LOCAL_GGUF) -> dict[str, Any]:
    gated = sorted((r for r in rows if r.mode == "gated"), key=lambda r: r.task_id)
    always = sorted((r for r in rows if r.mode == "always"), key=lambda r: r.task_id)
    out: dict[str, Any] = {"conversations": n, "server": server, "model": model,
                           "gated": summary(rows, "gated"), "always": summary(rows, "always"),
                           "ratio": {}, "ci95": {}}
    for f in ("wall_s", "prompt_tokens"):
        num, den = [getattr(r, f) for r in gated], [getattr(r, f) for r in always]
        out["ratio"][f] = round(ratio_of_sums(num, den), 4)
        out["ci95"][f] = [round(v, 4) for v in bootstrap_ratio_ci(num, den)]
    return out


def conversations(data: Path, n: int, settings: Settings) -> tuple[Any, list[MixedConversation]]:
    tasks_path, corpus = data / "mtrag" / "tasks.dev.jsonl", data / "mtrag" / "corpus.jsonl"
    prep = prepare(tasks_path, corpus, None)
    tasks = [prep.tasks[i] for i in sample(len(prep.tasks), n, MIX_SEED)]
    mix = MixConfig(data / "clinc150" / "val.jsonl", data / "clinc150" / "domains.json", MIX_RATE, MIX_SEED)
    return prep, list(mix_conversations(tasks, mix))


def run(args: argparse.Namespace) -> dict[str, Any]:
    slow = {"llm_timeout_s": args.call_s, "llm_deadline_s": args.call_s, "gated_deadline_s": args.call_s}
    settings = load_settings().override(k=K, llm_send_max_tokens=True, llm_max_tokens=args.max_tokens,
                                   llm_max_retries=0, **slow)
    embedder = build_embedder(settings)
    prep, convs = conversations(args.data, args.conversations, settings)
    index = cached_index(args.data / "mtrag" / "corpus.jsonl", prep.docs, settings, embedder)
    log = Path(tempfile.gettempdir()) / "bara-bench-e2e-server.log"
    with ExitStack() as stack:
        if args.base_url:  # a server already running (any OpenAI-compatible one)
            base_url, name, server_name = args.base_url, args.model, f"{args.base_url} (started elsewhere)"
        else:
            base_url = stack.enter_context(start_local_server(settings, log=log)).base_url
            name, server_name = LOCAL_ALIAS, (f"llama-cpp-python {llama_cpp_version()} server, n_ctx "
                                              f"{settings.llm_local_n_ctx}, {settings.llm_local_threads} threads")
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bara-e2e-")))
        run_settings = settings.override(db=str(working_copy(index, tmp)), model=f"openai:{name}",
                                         llm_base_url=base_url)
        rows = run_modes(run_settings, embedder, convs, args.rows, time.monotonic() + args.budget_s)
    done = len(rows) // 2
    return report(rows, done, f"{server_name}, max_tokens {args.max_tokens}",
                  args.model if args.base_url else LOCAL_GGUF)


def summarise(path: Path, max_tokens: int) -> dict[str, Any]:
    """The summary of the conversations a rows file holds in both modes (an interrupted run's too)."""
    rows = [Row(**json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    both = {r.task_id for r in rows if r.mode == "gated"} & {r.task_id for r in rows if r.mode == "always"}
    rows = [r for r in rows if r.task_id in both]
    return report(rows, len(both), f"from {path.name}, max_tokens {max_tokens}")


def llama_cpp_version() -> str:
    try:
        return version("llama_cpp_python")
    except PackageNotFoundError:  # on the path but not installed as a distribution
        import llama_cpp

        return str(llama_cpp.__version__)


def run_modes(settings: Settings, embedder: Any, convs: Sequence[MixedConversation], rows_path: Path | None,
              stop_at: float) -> list[Row]:
    """Every conversation in both modes back to back, the first mode alternating by conversation; no new
    conversation starts after ``stop_at`` (the summary is over the conversations finished in both modes)."""
    model = build_model(settings, environ={}, client=httpx.Client(trust_env=False))
    assert model is not None  # settings name a model
    meter, replies, rows = MeteredModel(model), ReferenceReplies(), []
    out = rows_path.open("w", encoding="utf-8") if rows_path else None
    with Bara(settings, embedder=getattr(embedder, "inner", embedder)) as bara:
        assistants = {m: Assistant(bara, meter, mode=m, fallback_offline=False) for m in MODES}
        for a in assistants.values():
            a.hooks.add("before_persist", replies)
        for i, conv in enumerate(convs):
            if time.monotonic() >= stop_at:
                print(f"time budget spent: {i} of {len(convs)} conversations run", file=sys.stderr)
                break
            for mode in (MODES if i % 2 == 0 else MODES[::-1]):
                rows.append(run_one(assistants[mode], meter, replies, conv, mode, i))
                line = json.dumps(rows[-1].as_dict())
                print(line, file=sys.stderr, flush=True)
                if out:
                    out.write(line + "\n")
                    out.flush()
    if out:
        out.close()
    return rows


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--conversations", type=int, default=24, help="MTRAG-UN dev tasks sampled (seeded)")
    parser.add_argument("--max-tokens", type=int, default=32, help="generation cap, the same in both modes")
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("BARA_DATA", "../shared/data")))
    parser.add_argument("--rows", type=Path, default=None, help="write every (conversation, mode) row here")
    parser.add_argument("--budget-s", type=float, default=float("inf"),
                        help="start no new conversation after this many seconds (the summary covers those done)")
    parser.add_argument("--call-s", type=float, default=600.0,
                        help="deadline of one model call (a loaded 2-core machine prefills ~10 tokens/s)")
    parser.add_argument("--base-url", default="", help="use this running OpenAI-compatible /v1 root instead of "
                        "starting the local server")
    parser.add_argument("--model", default=LOCAL_ALIAS, help="the model name to ask for (with --base-url)")
    parser.add_argument("--summarise", type=Path, default=None,
                        help="only summarise a --rows file of an earlier (possibly interrupted) run")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON (else a table)")
    args = parser.parse_args()
    if args.conversations < 2 or args.max_tokens < 1:
        parser.error("--conversations must be >= 2 (an interval needs several) and --max-tokens >= 1")
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the local server too
    load = os.getloadavg()
    out = summarise(args.summarise, args.max_tokens) if args.summarise else run(args)
    print(f"load average before/after: {load[0]:.2f} / {os.getloadavg()[0]:.2f}", file=sys.stderr)
    if args.json:
        print(json.dumps(out))
        return
    for mode in MODES:
        print(mode, " ".join(f"{k}={v}" for k, v in out[mode].items()))
    for f, r in out["ratio"].items():
        lo, hi = out["ci95"][f]
        print(f"ratio {f}: {r:.3f} (95% CI {lo:.3f}-{hi:.3f})")


if __name__ == "__main__":
    main()
