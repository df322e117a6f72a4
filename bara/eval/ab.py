"""`bara eval ab`: every assistant mode on MTRAG-UN conversations, one final user turn per task.

For each task the conversation so far is replayed into a fresh conversation of
the store (every earlier user and agent message is appended, and the gate state
is advanced over the earlier user turns exactly as the gated pipeline would),
then the final user turn runs through :class:`bara.turn.base.PipelineAssistant` of each
mode with the same offline generator, so modes differ only in what they
retrieve. The corpus is indexed once into a cached store (one chunk per
passage, the ``bara eval retrieval`` index) and copied per run, so the cache
never collects conversations.

Each scored (task, mode) is appended to ``ab_rows.jsonl`` in the report folder
as soon as it finishes, keyed by task id, mode and a hash of the settings (plus
corpus, embedder and bara's source); a rerun skips the rows it finds for the
same hash and task content and ignores the rest (counted). Summaries and verdicts are computed by :mod:`bara.eval.prereg`.

With ``--turns all`` every user turn of each conversation runs through each mode
instead (:mod:`bara.eval.conversation_replay`), optionally with real small talk
inserted (:mod:`bara.eval.mixing`); the row of a task then also carries the cost
of each of its turns, and its content key covers the mixed turn sequence.
Reference modes (``last2``) run beside the pipeline's modes when named.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import tempfile
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from bara.retrieval.protocol import Embedder
from bara.store.base import Store
from bara.app import Bara
from bara.datafiles import check_file, require_some
from bara.errors import BaraError, InputError
from bara.eval.answers import answer_body, answer_kind, judge_agreement, judge_answer, rouge_l, token_f1
from bara.eval.beir import BeirDoc, read_corpus
from bara.eval.conversation_replay import (REFERENCE_MODES, ReferenceReplies, build_assistant, forget_user,
                                           retrieval_calls, run_conversation)
from bara.eval.gate import GateReplay, Task, file_sha256, gate_prototypes, read_tasks
from bara.eval.ab_rows import ROWS_FILE, ResultLog, ScoreRow  # noqa: F401 - ROWS_FILE is part of this API
from bara.eval.mixing import MixConfig, MixedConversation, mix_conversations, mix_manifest
from bara.eval.ab_summary import ABReport
from bara.eval.prereg import Prereg, load_prereg, summarize
from bara.eval.retrieval import INDEX_VERSION, build_index, prepared_index
from bara.memory.conversations import Conversations
from bara.turn.base import PipelineAssistant
from bara.turn.gated import MODES
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.trace import TurnTrace
from bara.types import Utterance

ROW_VERSION = "2"  # bump when a row's meaning changes (2: each (task, mode) starts from the clean index)
PATH_SETTINGS = ("db", "cache_dir", "data_dir")


@dataclass(frozen=True)
class RunConfig:
    modes: tuple[str, ...] = ("always", "gated")
    k: int = 4
    limit: int | None = None
    report_dir: Path | None = None
    turns: str = "last"  # "last": the final user turn after a replay; "all": every user turn in order
    mix: MixConfig | None = None  # small talk to insert (only with turns="all")


# ------------------------------------------------------------------------ index
def check_contexts(tasks: Sequence[Task], docs: Sequence[BeirDoc], problems: Counter) -> None:
    """Count reference passages the corpus lacks (they can never be retrieved)."""
    ids = {d.id for d in docs}
    for task in tasks:
        missing = sum(d not in ids for d in task.relevant)
        if missing:
            problems["context passage not in corpus"] += missing


def cached_index(corpus: Path, docs: Sequence[BeirDoc], settings: Settings, embedder: Embedder,
                 progress: Callable[[int], None] | None = None) -> Path:
    """The corpus index under ``cache_dir/eval`` (built once; later runs only open it)."""
    path = prepared_index(corpus, embedder, settings)
    with SQLiteStore(path) as store:
        build_index(store, docs, embedder, progress)
    return path


def working_copy(index: Path, folder: Path) -> Path:
    """A private copy of the cached index that this run's conversations may write into."""
    dest = folder / "ab-work.db"
    with closing(sqlite3.connect(index)) as src, closing(sqlite3.connect(dest)) as dst:
        src.backup(dst)
    return dest


def code_fingerprint() -> str:
    """sha256 of bara's own source files: rows computed by other code are never reused."""
    h = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]
    for path in sorted(root.rglob("*.py")):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:16]


def settings_hash(settings: Settings, corpus_sha: str, embedder: Embedder, run: Mapping[str, Any] | None = None) -> str:
    """What a row's numbers depend on besides the task: settings (paths aside), corpus, embedder, code,
    and for whole-conversation runs the turn scope and mixing (``run``; absent for ``--turns last``)."""
    public = {k: v for k, v in settings.model_dump(mode="json").items() if k not in PATH_SETTINGS}
    extra = {"run": dict(run)} if run else {}
    key = json.dumps({"settings": public, "corpus": corpus_sha, "row": ROW_VERSION, "index": INDEX_VERSION,
                      "embedder": getattr(embedder, "cache_key", getattr(embedder, "model_id", "")),
                      "code": code_fingerprint(), **extra}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------- replay
def replay(convs: Conversations, store: Store, user: str, cid: str, task: Task, gate: GateReplay) -> None:
    """Store the earlier turns (no generation) and the gate state they lead to, in one transaction."""
    state, window = None, []
    with store.transaction():
        convs.create(user, cid)
        for role, text in task.history:
            if role == "user":
                state = gate.step(text, window, state)
            convs.append(user, cid, role, text, {"replayed": True})
            window.append(Utterance(role, text))
        if state is not None:
            convs.save_state(user, cid, state.to_dict())


# ------------------------------------------------------------------------- rows
def score_row(task: Task, mode: str, shash: str, trace: TurnTrace | None, answer: str,
              error: str = "") -> ScoreRow:
    body = answer_body(answer)
    return ScoreRow(
        task_id=task.id, mode=mode, settings_hash=shash, task_sha=task.sha, answerability=task.answerability,
        multi_turn=task.multi_turn, question_types=tuple(task.question_types), collection=task.collection,
        retrieved=bool(trace and trace.retrieved), retrieval_calls=retrieval_calls(trace) if trace else 0,
        context_tokens=trace.context_tokens if trace else 0,
        hits=tuple(h.source for h in trace.hits) if trace else (), relevant=tuple(task.relevant),
        question=task.question, answer=answer, kind=answer_kind(answer),
        answer_f1=round(token_f1(body, task.reference), 4), rouge_l=round(rouge_l(body, task.reference), 4),
        latency_ms=dict(trace.latency_ms) if trace else {}, route=trace.route if trace else "",
        intent=trace.intent if trace else "", error=error)


# ------------------------------------------------------------------------ run
def available_modes() -> tuple[str, ...]:
    """The modes the assistant offers (``bara.turn.gated.MODES``, discovered) and the reference modes."""
    return (*MODES, *REFERENCE_MODES)


def check_modes(modes: Sequence[str]) -> tuple[str, ...]:
    offered = available_modes()
    unknown = [m for m in modes if m not in offered]
    if unknown or not modes:
        raise InputError(f"unknown mode(s) {unknown or modes}: the assistant offers {', '.join(offered)}")
    return tuple(dict.fromkeys(modes))


def _user(task: Task, mode: str) -> tuple[str, str]:
    user = f"eval-{mode}-{hashlib.sha256(task.id.encode()).hexdigest()[:12]}"
    return user, f"{user}-c"


def run_task(bara: Bara, assistant: PipelineAssistant, task: Task, mode: str, shash: str, gate: GateReplay) -> ScoreRow:
    """Replay the conversation, run its final user turn in ``mode``, and score it."""
    user, cid = _user(task, mode)
    try:
        replay(assistant.conversations, bara.store, user, cid, task, gate)
        result = assistant.turn(user, task.question, conversation_id=cid)
    except BaraError as exc:
        return score_row(task, mode, shash, None, "", error=f"turn failed: {type(exc).__name__}")
    finally:
        forget_user(assistant, user)
    return score_row(task, mode, shash, result.trace, result.answer)


def run_all_turns(assistant: PipelineAssistant, replies: ReferenceReplies, task: Task, conv: MixedConversation, mode: str,
                  shash: str) -> ScoreRow:
    """Run every user turn of the (mixed) conversation in ``mode``; score the last, keep every turn's cost."""
    user, cid = _user(task, mode)
    try:
        costs, result = run_conversation(assistant, replies, conv, user, cid)
        row = score_row(task, mode, shash, result.trace, result.answer)
    except BaraError as exc:
        costs, row = [], score_row(task, mode, shash, None, "", error=f"turn failed: {type(exc).__name__}")
    finally:
        forget_user(assistant, user)
    return replace(row, task_sha=content_sha(task, conv), turns=tuple(costs), after_inserted=conv.after_inserted)


def content_sha(task: Task, conv: MixedConversation | None) -> str:
    """What a row was computed from: the task line, and for whole conversations the exact turn sequence."""
    return task.sha if conv is None else f"{task.sha}:{conv.sha}"


def run_modes(bara: Bara, tasks: Sequence[Task], config: RunConfig, log: ResultLog, gate: GateReplay,
              convs: Mapping[str, MixedConversation] | None = None,
              progress: Callable[[str], None] | None = None) -> bool:
    """Run every missing (task, mode); returns False when interrupted (rows so far are kept)."""
    assistants = {m: build_assistant(bara, m) for m in config.modes}
    replies = ReferenceReplies()
    for assistant in assistants.values():
        assistant.hooks.add("before_persist", replies)
    try:
        for task in tasks:
            conv = convs.get(task.id) if convs is not None else None
            for mode in config.modes:
                if not log.done(task, mode, content_sha(task, conv)):
                    log.add(run_task(bara, assistants[mode], task, mode, log.shash, gate) if conv is None
                            else run_all_turns(assistants[mode], replies, task, conv, mode, log.shash))
                if progress:
                    progress(mode)
    except KeyboardInterrupt:
        return False
    return True


@dataclass(frozen=True)
class Prepared:
    tasks: tuple[Task, ...]
    docs: tuple[BeirDoc, ...]
    problems: Mapping[str, Mapping[str, int]]
    corpus_sha: str


def prepare(tasks_path: Path, corpus_path: Path, limit: int | None) -> Prepared:
    task_problems, corpus_problems = Counter(), Counter()
    tasks = read_tasks(tasks_path, task_problems)[:limit]
    require_some(tasks, tasks_path, "MTRAG-UN task", task_problems)
    check_file(corpus_path, "corpus")
    docs = read_corpus(corpus_path, corpus_problems)
    if not docs:
        corpus_problems["empty corpus (no usable passages): nothing can be retrieved"] += 1
    check_contexts(tasks, docs, task_problems)
    return Prepared(tuple(tasks), tuple(docs), {"tasks": dict(task_problems), "corpus": dict(corpus_problems)},
                    file_sha256(corpus_path))


def run_ab(prep: Prepared, corpus_path: Path, config: RunConfig, settings: Settings, embedder: Embedder,
           progress: Callable[[str, int, int], None] | None = None) -> tuple[list[dict], ResultLog, bool]:
    """Index (cached), then run every mode; returns this run's rows, the log and completeness.

    The final turns run with the uncached encoder (``embedder.inner`` when ``embedder`` is a
    :class:`~bara.retrieval.embed_cache.CachedEmbedder`), so their latency is the real cost of
    encoding; indexing and the replay of earlier turns may use the cache.
    """
    settings = settings.override(k=config.k)
    convs = {c.task_id: c for c in mix_conversations(prep.tasks, config.mix)} if config.turns == "all" else None
    log = ResultLog(config.report_dir, settings_hash(settings, prep.corpus_sha, embedder, run_key(config)))
    index = cached_index(corpus_path, prep.docs, settings, embedder,
                         (lambda n: progress("index", n, len(prep.docs))) if progress else None)
    total = len(prep.tasks) * len(config.modes)
    gate = GateReplay(settings, gate_prototypes(embedder), embedder)
    with tempfile.TemporaryDirectory(prefix="bara-ab-") as tmp:
        work = working_copy(index, Path(tmp))
        with Bara(settings.override(db=str(work)), embedder=getattr(embedder, "inner", embedder)) as bara:
            complete = run_modes(bara, prep.tasks, config, log, gate, convs,
                                 (lambda mode: progress(mode, 1, total)) if progress else None)
    shas = {t.id: content_sha(t, (convs or {}).get(t.id)) for t in prep.tasks}
    return log.current(prep.tasks, config.modes, shas), log, complete


def run_key(config: RunConfig) -> dict[str, Any] | None:
    """The run options rows depend on (None for ``--turns last``, so its rows keep their old hash)."""
    if config.turns != "all":
        return None
    mix = mix_manifest(config.mix)
    return {"turns": "all", "mix": {"smalltalk": mix["smalltalk"]["sha256"], "domains": mix["domains"]["sha256"],
                                    "rate": mix["rate"], "seed": mix["seed"]} if mix else None}


def check_config(config: RunConfig) -> None:
    """Bad combinations of options are the caller's to fix (exit 2 in the CLI)."""
    if config.turns not in ("last", "all"):
        raise InputError(f"--turns {config.turns!r}: pass 'last' (the final user turn) or 'all' (every user turn)")
    if config.mix is not None and config.turns != "all":
        raise InputError("--mix-smalltalk inserts turns into whole conversations: add --turns all")


# ---------------------------------------------------------------------- report
def versions() -> dict[str, str]:
    """Versions of what the numbers depend on (recorded in every report)."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in ("bara", "numpy", "ir-measures", "pytrec-eval-terrier", "onnxruntime", "tokenizers"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def manifest(tasks_path: Path, corpus_path: Path, prep: Prepared, settings: Settings, embedder: Embedder,
             prereg: Prereg, shash: str) -> dict[str, Any]:
    public = {k: v for k, v in settings.model_dump(mode="json").items() if k not in PATH_SETTINGS}
    return {"versions": {**versions(), "bara_source_sha256": code_fingerprint()}, "settings": public,
            "settings_hash": shash,
            "seeds": {"bootstrap": prereg.seed, "judge_sample": prereg.seed},
            "bootstrap": {"resamples": prereg.resamples, "confidence": prereg.confidence},
            "embedder": getattr(embedder, "model_id", ""), "generator": "offline-extractive (same in every mode)",
            "data": {"tasks": {"path": str(tasks_path), "sha256": file_sha256(tasks_path)},
                     "corpus": {"path": str(corpus_path), "sha256": prep.corpus_sha, "passages": len(prep.docs)},
                     "prereg": {"path": prereg.path, "sha256": prereg.sha256}}}


def judge_rows(model: Any, rows: Sequence[Mapping[str, Any]], docs: Sequence[BeirDoc], size: int,
               seed: int) -> dict[str, Any]:
    """An LLM judge on a seeded sample of answerable/partial rows, with its agreement with F1 and ROUGE-L."""
    if model is None:
        return {"status": "judge: not configured"}
    texts = {d.id: d.text for d in docs}
    pool = [r for r in rows if r.get("answerability") in ("ANSWERABLE", "PARTIAL") and not r.get("error")]
    picked = sorted(np.random.default_rng(seed).permutation(len(pool))[:size]) if pool else []
    judged = [(judge_answer(model, pool[i]["question"], [texts.get(h, "") for h in pool[i]["hits"]],
                            pool[i]["answer"]), pool[i]["answer_f1"], pool[i]["rouge_l"]) for i in picked]
    return {"status": "judged", "model": getattr(model, "name", "model"), **judge_agreement(judged)}


def evaluate_ab(tasks_path: Path, corpus_path: Path, config: RunConfig, settings: Settings, embedder: Embedder,
                prereg_path: Path, model: Any = None, judge_sample: int = 40,
                progress: Callable[[str, int, int], None] | None = None) -> ABReport:
    """The report of `bara eval ab` (its JSON also written to ``report_dir/ab.json`` when given)."""
    started = time.perf_counter()
    modes = check_modes(config.modes)
    check_config(config)
    prereg = load_prereg(prereg_path)
    prep = prepare(tasks_path, corpus_path, config.limit)
    rows, log, complete = run_ab(prep, corpus_path, replace(config, modes=modes), settings, embedder, progress)
    summary = summarize(rows, modes, prereg)
    problems = {**prep.problems, "run": dict(Counter(r["error"] for r in rows if r.get("error")))}
    resume = {"rows_loaded": log.loaded, **log.counts}
    judged = judge_rows(model, rows, prep.docs, judge_sample, prereg.seed)
    facts = manifest(tasks_path, corpus_path, prep, settings.override(k=config.k), embedder, prereg, log.shash)
    facts["run"] = {"turns": config.turns, "mix": mix_manifest(config.mix)}
    facts["wall_time_s"] = round(time.perf_counter() - started, 1)
    report = ABReport(summary, problems, resume, complete, judged, facts)
    if config.report_dir:
        (config.report_dir / "ab.json").write_text(json.dumps(report.as_dict(), indent=1, sort_keys=True) + "\n")
    return report
