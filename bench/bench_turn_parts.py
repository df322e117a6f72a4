"""Where the gated turn's extra time goes: in-turn p50 of each part, and the bounds of a free lexical arm and gate.

Same turns as ``bench_turn.py`` (the final turn of the first N MTRAG-UN dev tasks, earlier turns
replayed untimed, modes alternating). Each measurement runs in one process:

``--parts`` (default) wraps the functions a turn calls (``PARTS``) with a timer and reports, per mode,
the p50 of each over the timed turns (0 where a mode never calls it: the always turn has no gate and
builds its prompt inline); the wrappers add a few microseconds each, so compare the two modes with
each other, not with ``bench_turn.py``.

``--free-lexical`` answers every lexical arm from memory (each distinct query scored by FTS5 once, in
a first pass that is not reported): the turn ratio it gives is the lower bound of any faster lexical
arm, e.g. an in-memory BM25 that reproduces FTS5's scores (docs/benchmarks.md, issue 16 round 6).

``--free-gate`` answers the gate's own decision from memory: the message's features, the rules, the
rewrite, the decision, the topic dependence and the history topic, each computed once per turn of each
task in a first pass that is not reported (the encoding, the prefetch, the search, persistence and the
trace still run): the turn ratio it gives is the lower bound of any faster gate, however it were
written (docs/benchmarks.md, issue 16 round 9). ``--bare`` runs the same passes with nothing free and
no timers, the figure to compare a bound with.

``--prefetch`` chooses which turns start the lexical prefetch (``both``, the default and the product;
``gated``, ``always``, ``none``; ``wait``: both start it and the gated turn waits for its rows before
encoding). With the parts it also reports the ONNX call of the two modes paired: for each final message
the gated call minus the always call, median over the pairs (docs/benchmarks.md, issue 16 round 8).

Usage:  python bench/bench_turn_parts.py [--data ../shared/data] [--tasks 100] [--free-lexical]
                                         [--free-gate] [--bare] [--prefetch both|gated|always|none|wait]
"""

from __future__ import annotations

import functools
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_turn as bt  # noqa: E402 - the sibling bench's task replay

import bara.decide.gate as gate  # noqa: E402
import bara.turn.always as always  # noqa: E402
import bara.turn.base as pipeline_base  # noqa: E402
import bara.turn.gated as pipeline  # noqa: E402
import bara.turn.steps as pipeline_steps  # noqa: E402
from bara.memory.conversations import Conversations  # noqa: E402
from bara.retrieval.embedders import OnnxMiniLMEmbedder  # noqa: E402
from bara.retrieval.hybrid import HybridRetriever  # noqa: E402
from bara.store import sqlite as sqlite_store  # noqa: E402
from bara.store.base import LexicalPrefetch, lexical_key  # noqa: E402
from bara.store.sqlite_lexical import LEXICAL_SQL, lexical_params, lexical_rows  # noqa: E402

#: (owner, attribute, label): what ``--parts`` times inside a turn.
PARTS: tuple[tuple[Any, str, str], ...] = (
    (gate, "compute_features", "features"), (gate, "apply_rules", "rules"),
    (pipeline, "lexical_guess", "rewrite + prefetch"), (HybridRetriever, "prefetch", "prefetch"),
    (pipeline_base.PipelineAssistant, "_embed", "encoding"), (pipeline, "history_topic", "history topic"),
    (gate.Gate, "conclude", "decision"), (gate, "topic_decision", "topic dependence"),
    (pipeline.GatedAssistant, "_known_names", "episodic check"), (pipeline, "compose_topic", "compose topic"),
    (HybridRetriever, "search", "search"), (pipeline.GatedAssistant, "_inputs", "prompt inputs"),
    (pipeline_base.PipelineAssistant, "_persist", "persist"), (Conversations, "record_turn", "record turn"),
    (pipeline_base, "user_meta", "message meta"), (pipeline_base.PipelineAssistant, "_trace", "trace"),
    (pipeline_base, "gate_summary", "gate summary"), (pipeline_base, "retrieval_summary", "retrieval summary"),
    (OnnxMiniLMEmbedder, "_run", "onnx call"),
)
PREFETCH = ("both", "gated", "always", "none", "wait")


class Clock:
    """Milliseconds per label for the turn being timed (nothing is recorded between turns)."""

    def __init__(self) -> None:
        self.on = False
        self.turn: dict[str, float] = defaultdict(float)

    def wrap(self, owner: Any, name: str, label: str) -> None:
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if not self.on:
                return inner(*args, **kwargs)
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                self.turn[label] += (time.perf_counter() - start) * 1e3
        setattr(owner, name, timed)


def free_lexical() -> None:
    """Serve every lexical arm from a memo of FTS5's own answers (filled on first use)."""
    memo: dict[tuple[Any, ...], list[tuple[int, float]]] = {}

    def rows(store: Any, req: Any) -> list[tuple[int, float]]:
        params = lexical_params(req)
        if params not in memo:
            memo[params] = lexical_rows(store.query(LEXICAL_SQL, params))
        return memo[params]

    def prefetch(store: Any, req: Any) -> LexicalPrefetch | None:
        if not (req.use_lexical and req.terms):
            return None
        done: Future = Future()
        done.set_result(rows(store, req))
        return LexicalPrefetch(lexical_key(req), done, req.limit)

    sqlite_store.SQLiteStore.prefetch_lexical = prefetch  # type: ignore[method-assign]
    sqlite_store.SQLiteStore._lexical = lambda store, req, _prefetched, _matrix: rows(store, req)  # type: ignore[method-assign]


#: (module, function): the gate's pure steps that ``--free-gate`` answers from memory.
GATE_STEPS: tuple[tuple[Any, str], ...] = (
    (gate, "compute_features"), (gate, "apply_rules"), (pipeline_steps, "rewrite_for"),
    (gate.Gate, "conclude"), (pipeline, "history_topic"),
)


class Turn:
    """Which turn of which task is running (set by ``replay``), and how often each gate step has been
    called in it: ``--free-gate`` answers by these."""

    key: tuple[int, int] = (-1, -1)
    calls: dict[str, int] = defaultdict(int)

    @classmethod
    def enter(cls, task: int, turn: int) -> None:
        cls.key, cls.calls = (task, turn), defaultdict(int)


def free_gate() -> None:
    """Serve the gate's pure steps (``GATE_STEPS``) from a memo of their own answers, filled on first use
    and keyed by the task, the turn and the call's place in it (the same turn of the same task has the
    same inputs in every round, whichever user replays it): a key costs a tuple, not a walk of the
    arguments, so the bound is not blurred by the memo's own work."""
    memo: dict[tuple, Any] = {}
    for module, name in GATE_STEPS:
        def step(*args: Any, __inner: Callable = getattr(module, name), __name: str = name, **kwargs: Any) -> Any:
            nth = Turn.calls[__name]
            Turn.calls[__name] = nth + 1
            key = (__name, Turn.key, nth)
            if key not in memo:
                memo[key] = __inner(*args, **kwargs)
            return memo[key]
        setattr(module, name, step)


def prefetch_only(choice: str) -> None:
    """Let only the turns ``choice`` names start the lexical prefetch (``wait``: both start it, and the
    gated turn waits for its rows before it encodes)."""
    if choice == "both":
        return
    inner, turning = HybridRetriever.prefetch, {"mode": ""}
    for mode, owner in (("gated", pipeline.GatedAssistant), ("always", always.AlwaysAssistant)):
        body = owner._answer

        def marked(self: Any, *args: Any, __body: Callable = body, __mode: str = mode, **kwargs: Any) -> Any:
            turning["mode"] = __mode
            return __body(self, *args, **kwargs)
        owner._answer = marked  # type: ignore[method-assign]

    def prefetch(self: HybridRetriever, *args: Any, **kwargs: Any) -> LexicalPrefetch | None:
        if choice not in ("wait", turning["mode"]):
            return None
        started = inner(self, *args, **kwargs)
        if choice == "wait" and turning["mode"] == "gated" and started is not None:
            started.rows.result()
        return started
    HybridRetriever.prefetch = prefetch  # type: ignore[method-assign]


def replay(tasks: list[dict], assistants: dict, rounds: int, clock: Clock | None,
           report: Callable[[str, float, dict[str, float]], None], users: str = "") -> None:
    """``rounds`` passes over ``tasks``, final turns timed; ``users`` prefixes the user ids, so that an
    untimed pass's users do not come back in the timed ones (a returning user opens the episodic tier)."""
    for n, (r, i) in enumerate((r, i) for r in range(rounds) for i in range(len(tasks))):
        for mode in (bt.MODES if n % 2 == 0 else bt.MODES[::-1]):
            assistant, generator = assistants[mode]
            pairs, final = bt.exchanges(tasks[i])
            user = f"{users}{mode}-{r}-{i}"
            cid = assistant.open_conversation(user)
            for n_turn, (question, reply) in enumerate(pairs):
                Turn.enter(i, n_turn)
                generator.replies = [reply]
                assistant.turn(user, question, cid)
            generator.replies = []
            assistant.bara.flush()
            Turn.enter(i, len(pairs))
            if clock is not None:
                clock.turn.clear()
                clock.on = True
            start = time.perf_counter()
            assistant.turn(user, final, cid)
            wall = (time.perf_counter() - start) * 1e3
            if clock is not None:
                clock.on = False
            report(mode, wall, dict(clock.turn) if clock is not None else {})
            assistant.bara.flush()


def main(argv: list[str] | None = None) -> int:
    ap = bt.task_parser((__doc__ or "").splitlines()[0])
    ap.add_argument("--free-lexical", action="store_true", help="the bound of a lexical arm that costs nothing")
    ap.add_argument("--free-gate", action="store_true", help="the bound of a gate decision that costs nothing")
    ap.add_argument("--bare", action="store_true", help="no timers and nothing free: the turns as they are, "
                                                         "to compare a bound with in the same harness")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prefetch", choices=PREFETCH, default="both", help="which turns start the lexical prefetch")
    args = ap.parse_args(argv)
    settings, root, tasks = bt.tasks_of(args)
    prefetch_only(args.prefetch)
    free = args.free_lexical or args.free_gate
    clock = None if free or args.bare else Clock()
    if args.free_lexical:
        free_lexical()
    if args.free_gate:
        free_gate()
    if clock is not None:
        for owner, name, label in PARTS:
            clock.wrap(owner, name, label)  # type: ignore[union-attr]
    walls: dict[str, list[float]] = defaultdict(list)
    parts: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in bt.MODES}

    def keep(mode: str, wall: float, turn: dict[str, float]) -> None:
        walls[mode].append(wall)
        for _, _, label in PARTS:
            parts[mode][label].append(turn.get(label, 0.0))

    with tempfile.TemporaryDirectory(prefix="bara-bench-parts-") as scratch:
        db = Path(scratch) / "turn.db"
        shutil.copy(bt.cached_index(root, settings), db)
        assistants = bt.build_assistants(db, settings)
        replay(tasks[:10], assistants, 1, None, lambda *_: None, users="warm-")  # warm-up
        if clock is None:  # the memo's first pass; bare: the same pass, so the harness is the same
            replay(tasks, assistants, 1, None, lambda *_: None, users="first-")
        replay(tasks, assistants, args.rounds, clock, keep)
    p50 = {m: statistics.median(walls[m]) for m in bt.MODES}
    print(f"{len(tasks)} tasks x {args.rounds} rounds; turn p50 gated {p50['gated']:.3f} ms, always "
          f"{p50['always']:.3f} ms, ratio {p50['gated'] / p50['always']:.2f}x"
          + (" (lexical arm free)" if args.free_lexical else "") + (" (gate decision free)" if args.free_gate else "")
          + ("" if clock is None else " (with timers)") + f"; prefetch: {args.prefetch}")
    if clock is not None:
        paired = [g - a for g, a in zip(*(parts[m]["onnx call"] for m in bt.MODES), strict=True)]
        print(f"one ONNX call, gated - always, paired by message: median {statistics.median(paired):+.3f} ms "
              f"over {len(paired)} pairs")
        print(f"{'part':<20} {'gated p50 ms':>13} {'always p50 ms':>14}")
        for _, _, label in PARTS:
            gated, always = (statistics.median(parts[m][label]) for m in bt.MODES)
            print(f"{label:<20} {gated:>13.3f} {always:>14.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
