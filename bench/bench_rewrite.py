"""Recall@5 of follow-up query strategies on MTRAG-UN dev, over bara's hybrid retriever.

Why: a follow-up ("is it secure?") retrieves badly on its own words. This
compares four ways of turning the last user turn into a search query, on the
answerable and partially answerable dev tasks, against each task's reference
passages (``contexts``):

  last_turn   the last user turn alone
  last_two    the last two user turns joined
  bara        ``bara.understand.rewrite.rewrite_query`` (rules, no model)
  human       MTRAG's human standalone rewrite, where the conversation matches
  bara_topic  what the gated pipeline searches with: the rewrite only when the message depends
              on the conversation (``bara.understand.topic``), and for the dense arm the topic
              vector composed from the user turns' own vectors (the rewrite is never encoded)

Every figure is also given per half of the tasks, split by ``sha256(conversation_id)``
(even = dev, odd = test; the same split as ``bara eval calibrate``): the topic
thresholds and the floors were chosen on the dev half only. ``--floors`` adds R@5 of
``bara_topic`` at k=4 (as the pipeline runs) under candidate route floors.

The pooled corpus is indexed once, one chunk per passage (title + text), into a
cached SQLite store (``bara.eval.retrieval.index_path``/``build_index``), so
reruns neither re-embed nor re-index. Recall@5 comes from ir-measures (``R@5``).

Human rewrites are keyed by MTRAG conversation ids, which MTRAG-UN does not
reuse; a task is matched to a rewrite only when its user turns so far equal
(after lower-casing and dropping punctuation) the rewrite file's
``*_questions.jsonl`` entry, so coverage is small and is reported.

Usage:  python bench/bench_rewrite.py [--data ../shared/data] [--json out.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Sequence

import ir_measures
import numpy as np
from ir_measures import R

from bara.eval.beir import read_corpus
from bara.eval.retrieval import ARMS, build_index, index_path, run_arm
from bara.retrieval.embedders import build_embedder
from bara.retrieval.hybrid import HybridRetriever
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from bara.types import Utterance
from bara.understand.features import compute_features
from bara.understand.rewrite import RewriteRules, has_content, rewrite_query
from bara.understand.topic import compose_topic, topic_dependence, topic_from_history

RECALL = R @ 5
KEPT = ("ANSWERABLE", "PARTIAL")
STRATEGIES = ("last_turn", "last_two", "bara", "human", "bara_topic")
FLOORS = (-1.0, 0.10, 0.15, 0.20, 0.25, 0.30, 0.35)
REFERENCE = {"last_turn": 0.803, "last_two": 0.903}  # bm25s + MiniLM plain RRF, same tasks
#: bara's rewrite with a knob moved, to show what it is worth (issue 31: the term scorer's threshold and cap).
ABLATIONS = {
    "bara-threshold_0.3": RewriteRules(term_threshold=0.3),
    "bara-threshold_0.1": RewriteRules(term_threshold=0.1),
    "bara-max_terms_3": RewriteRules(max_terms=3),
}
_WORDS = re.compile(r"\w+")


# --- data ---------------------------------------------------------------------

def load_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def label(value: object) -> str:
    """MTRAG stores labels as one-item lists; the first item names the group."""
    return str(value[0]) if isinstance(value, list) and value else str(value)


def judged_tasks(root: Path) -> list[dict]:
    """Answerable and partial tasks: the ones with reference passages to find."""
    tasks = load_jsonl(root / "mtrag" / "tasks.dev.jsonl")
    return [t for t in tasks if label(t["answerability"]) in KEPT and t["contexts"]]


def qrels_of(tasks: Sequence[dict]) -> dict[str, dict[str, int]]:
    return {t["task_id"]: {c["document_id"]: 1 for c in t["contexts"]} for t in tasks}


def to_history(items: Sequence[dict]) -> tuple[Utterance, ...]:
    return tuple(Utterance("user" if m["speaker"] == "user" else "assistant", m["text"]) for m in items)


def user_turns(task: dict) -> list[str]:
    return [m["text"] for m in task["input"] if m["speaker"] == "user"]


def _key(texts: Sequence[str]) -> tuple[str, ...]:
    return tuple(" ".join(_WORDS.findall(t.lower())) for t in texts)


def human_rewrites(root: Path, tasks: Sequence[dict]) -> dict[str, str]:
    """task_id -> human rewrite, matched on the exact sequence of user turns so far."""
    folder = root / "mtrag" / "rewrites"
    by_turns: dict[tuple[str, ...], str] = {}
    for qfile in sorted(folder.glob("*_questions.jsonl")):
        rewrites = {r["_id"]: r["text"] for r in load_jsonl(qfile.with_name(qfile.name.replace(
            "_questions", "_rewrite")))}
        for row in load_jsonl(qfile):
            turns = [p for p in row["text"].split("|user|:") if p.strip()]
            if row["_id"] in rewrites:
                by_turns[_key(turns)] = rewrites[row["_id"]].replace("|user|:", "").strip()
    return {t["task_id"]: by_turns[k] for t in tasks if (k := _key(user_turns(t))) in by_turns}


# --- queries ------------------------------------------------------------------

def strategy_queries(tasks: Sequence[dict], human: dict[str, str]) -> tuple[dict[str, dict[str, str]], list[float]]:
    """Query text per strategy per task, and the rewrite's thread CPU time per call (ms).

    CPU time, not wall time, so other processes on a shared machine do not
    inflate the rewrite's own cost.
    """
    out: dict[str, dict[str, str]] = {s: {} for s in STRATEGIES}
    times: list[float] = []
    for task in tasks:
        tid, message, history = task["task_id"], task["input"][-1]["text"], to_history(task["input"][:-1])
        out["last_turn"][tid] = message
        out["last_two"][tid] = " ".join(user_turns(task)[-2:])
        t0 = time.thread_time_ns()
        out["bara"][tid] = rewrite_query(message, history).query
        times.append((time.thread_time_ns() - t0) / 1e6)
        if tid in human:
            out["human"][tid] = human[tid]
    return out, times


def ablation_queries(tasks: Sequence[dict]) -> dict[str, dict[str, str]]:
    """bara's rewrite under each ablated rule set."""
    return {name: {t["task_id"]: rewrite_query(t["input"][-1]["text"], to_history(t["input"][:-1]),
                                               rules=rules).query for t in tasks}
            for name, rules in ABLATIONS.items()}


def split_of(task: dict) -> str:
    """dev (even first byte of sha256(conversation_id)) or test: the halves never share a conversation."""
    return "dev" if hashlib.sha256(task["conversation_id"].encode()).digest()[0] % 2 == 0 else "test"


def topic_queries(tasks: Sequence[dict], embedder, settings: Settings) -> tuple[dict[str, str], dict]:
    """The gated pipeline's (text, vector) per task: rewrite and topic vector only when the message
    depends on the conversation. Earlier turns have no cached vectors here, so the topic is rebuilt
    from the last three content-bearing user turns, exactly as the pipeline does for such history."""
    texts = sorted({u for t in tasks for u in user_turns(t)})
    vec = dict(zip(texts, embedder.embed(texts), strict=False))
    queries, vectors = {}, {}
    for task in tasks:
        tid, message, history = task["task_id"], task["input"][-1]["text"], to_history(task["input"][:-1])
        earlier = [u for u in user_turns(task)[:-1] if has_content(u)][-3:]
        prior = topic_from_history([vec[u] for u in earlier], settings.gate_topic_carry_weight)
        features = compute_features(message, history, {}, settings=settings)
        topic = topic_dependence(message, features, vec[message], prior, bool(earlier), settings)
        queries[tid] = rewrite_query(message, history).query if topic.depends else message
        vectors[tid] = compose_topic(vec[message], prior, topic.depends, settings.gate_topic_carry_weight)
    return queries, vectors


def floor_sweep(retriever: HybridRetriever, tasks: Sequence[dict], qrels: dict, queries: dict[str, str],
                vectors: dict, k: int = 4) -> dict[str, dict[str, float | None]]:
    """R@5 of ``bara_topic`` at k hits under each candidate floor, per half."""
    out: dict[str, dict[str, float | None]] = {}
    for floor in FLOORS:
        run = {tid: {h.chunk.source: float(k - i) for i, h in enumerate(
            retriever.search(q, k=k, floor=floor, vector=vectors[tid]).hits)} for tid, q in queries.items()}
        scores = per_query(qrels, run)
        out[f"{floor:.2f}"] = {half: mean([scores[t["task_id"]] for t in tasks if split_of(t) == half])
                               for half in ("dev", "test")}
    return out


# --- retrieval and scoring ----------------------------------------------------

def open_index(root: Path, settings: Settings) -> tuple[SQLiteStore, object, int]:
    """The cached pooled-corpus store (built on first use) and its embedder."""
    corpus = root / "mtrag" / "corpus.jsonl"
    embedder = build_embedder(settings)
    path = index_path(corpus, embedder, settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    store = SQLiteStore(path)
    docs = read_corpus(corpus, Counter())
    build_index(store, docs, embedder)
    return store, embedder, len(docs)


def run_strategy(retriever: HybridRetriever, embedder, queries: dict[str, str], depth: int,
                 vectors: dict | None = None) -> dict:
    """bara's hybrid ranking (no floor, no rerank) for every query of one strategy."""
    ids = list(queries)
    if vectors is None:
        vectors = dict(zip(ids, embedder.embed([queries[i] for i in ids]), strict=False)) if ids else {}
    run, _stages = run_arm(retriever, ARMS["hybrid"], queries, vectors, depth)
    return run


def per_query(qrels: dict, run: dict) -> dict[str, float]:
    """ir-measures R@5 per query id (queries the run misses score 0)."""
    scores = {m.query_id: float(m.value) for m in ir_measures.iter_calc([RECALL], qrels, run)}
    return {q: scores.get(q, 0.0) for q in qrels}


def mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 3) if len(values) else None


def paired(ours: dict[str, float], base: dict[str, float], rounds: int = 10_000) -> dict:
    """Per-query wins/losses of ``ours`` over ``base`` and a two-sided sign-flip p-value.

    Why: with 274 queries a gap of 0.02 is a handful of queries; the paired
    randomisation test says whether it could be noise. Seeded, so reruns agree.
    """
    diff = np.array([ours[q] - base[q] for q in sorted(ours)])
    signs = np.random.default_rng(0).choice([-1.0, 1.0], size=(rounds, len(diff)))
    null = np.abs((signs * diff).mean(axis=1))
    p = (int(np.sum(null >= abs(diff.mean()) - 1e-12)) + 1) / (rounds + 1)
    return {"wins": int((diff > 0).sum()), "losses": int((diff < 0).sum()), "p": round(p, 4)}


def breakdown(tasks: Sequence[dict], scores: dict[str, dict[str, float]],
              group: Callable[[dict], str]) -> dict[str, dict]:
    """Mean per-query R@5 of each strategy within each group of tasks."""
    groups: dict[str, list[str]] = defaultdict(list)
    for task in tasks:
        groups[group(task)].append(task["task_id"])
    return {g: {"n": len(ids), **{s: mean([scores[s][i] for i in ids if i in scores[s]])
                                  for s in scores}}
            for g, ids in sorted(groups.items())}


def evaluate(root: Path, settings: Settings, depth: int, floors: bool = False) -> dict:
    tasks = judged_tasks(root)
    qrels = qrels_of(tasks)
    human = human_rewrites(root, tasks)
    queries, rewrite_ms = strategy_queries(tasks, human)
    ablated = ablation_queries(tasks)
    store, embedder, n_docs = open_index(root, settings)
    try:
        retriever = HybridRetriever(store, embedder, settings)
        queries["bara_topic"], topic_vectors = topic_queries(tasks, embedder, settings)
        scores = {name: per_query({q: qrels[q] for q in qs}, run_strategy(
            retriever, embedder, qs, depth, topic_vectors if name == "bara_topic" else None))
            for name, qs in {**queries, **ablated}.items()}
        sweep = floor_sweep(retriever, tasks, qrels, queries["bara_topic"], topic_vectors) if floors else None
    finally:
        store.close()
    rep = report(tasks, {s: scores[s] for s in STRATEGIES}, human, rewrite_ms, n_docs)
    rep["by_split"] = breakdown(tasks, {s: scores[s] for s in STRATEGIES}, split_of)
    if sweep is not None:
        rep["floors_bara_topic_k4"] = sweep
    rep["ablation"] = {name: mean(list(scores[name].values())) for name in ABLATIONS}
    rep["bara_vs"] = {s: paired(scores["bara"], scores[s]) for s in ("last_turn", "last_two")}
    return rep


def report(tasks: Sequence[dict], scores: dict, human: dict, rewrite_ms: list[float], n_docs: int) -> dict:
    covered = list(human)
    return {
        "n_tasks": len(tasks), "n_docs": n_docs, "measure": str(RECALL),
        "recall@5": {s: mean(list(scores[s].values())) for s in STRATEGIES},
        "reference_bm25s_minilm_rrf": REFERENCE,
        "human_coverage": {"n": len(covered), "share": round(len(covered) / len(tasks), 3),
                           **{s: mean([scores[s][i] for i in covered]) for s in STRATEGIES}},
        "by_multi_turn": breakdown(tasks, scores, lambda t: label(t["Multi-Turn"])),
        "by_collection": breakdown(tasks, scores, lambda t: label(t["Collection"])),
        "rewrite_cpu_ms": {p: round(float(np.percentile(rewrite_ms, q)), 3)
                           for p, q in (("p50", 50), ("p99", 99), ("max", 100))},
    }


# --- output -------------------------------------------------------------------

def table(rep: dict) -> str:
    """Markdown table: overall, human-covered subset, each Multi-Turn type and collection."""
    rows = [("all", rep["n_tasks"], rep["recall@5"])]
    rows.append(("human-covered", rep["human_coverage"]["n"], rep["human_coverage"]))
    rows += [(f"half={g}", v["n"], v) for g, v in rep["by_split"].items()]
    rows += [(f"Multi-Turn={g}", v["n"], v) for g, v in rep["by_multi_turn"].items()]
    rows += [(f"Collection={g}", v["n"], v) for g, v in rep["by_collection"].items()]
    rows.append(("reference (bm25s+MiniLM RRF)", rep["n_tasks"], rep["reference_bm25s_minilm_rrf"]))
    lines = ["| subset | n | " + " | ".join(s + "*" if s == "human" else s for s in STRATEGIES) + " |",
             "|" + "---|" * (len(STRATEGIES) + 2)]
    for name, n, vals in rows:
        cells = " | ".join("-" if vals.get(s) is None else f"{vals[s]:.3f}" for s in STRATEGIES)
        lines.append(f"| {name} | {n} | {cells} |")
    lines.append(f"\n* human: mean over the row's tasks that have a matching human rewrite "
                 f"({rep['human_coverage']['n']} of {rep['n_tasks']} overall)")
    if rep.get("floors_bara_topic_k4"):
        lines.append("bara_topic R@5 at k=4 by route floor (dev / test): " + ", ".join(
            f"{f}: {v['dev']:.3f} / {v['test']:.3f}" for f, v in rep["floors_bara_topic_k4"].items()))
    lines.append("ablation (bara with one rule off): " + ", ".join(
        f"{k} {v:.3f}" for k, v in rep["ablation"].items()))
    lines.append("bara vs baselines, per query: " + ", ".join(
        f"{k}: {v['wins']} wins / {v['losses']} losses, sign-flip p={v['p']}" for k, v in rep["bara_vs"].items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="shared data root (default $BARA_DATA or Settings.data_dir)")
    ap.add_argument("--depth", type=int, default=100, help="hits ranked per query")
    ap.add_argument("--json", type=Path, help="also write the JSON report here")
    ap.add_argument("--floors", action="store_true", help="also sweep route floors for bara_topic at k=4")
    args = ap.parse_args(argv)
    settings = Settings()
    root = Path(args.data or os.environ.get("BARA_DATA") or settings.data_dir)
    t0 = time.perf_counter()
    rep = evaluate(root, settings, args.depth, args.floors)
    rep["bench_seconds"] = round(time.perf_counter() - t0, 1)
    print(table(rep))
    print(f"bara rewrite CPU: p50 {rep['rewrite_cpu_ms']['p50']} ms, p99 {rep['rewrite_cpu_ms']['p99']} ms; "
          f"human rewrites cover {rep['human_coverage']['n']}/{rep['n_tasks']} tasks; "
          f"{rep['bench_seconds']} s")
    text = json.dumps(rep, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
