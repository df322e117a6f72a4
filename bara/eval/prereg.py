"""Pre-registered criteria (``eval/preregistered.toml``), the bootstrap that judges them, and the
per-mode summaries of `bara eval ab` rows.

Recall@5 and nDCG@10 come from ir-measures (pytrec_eval underneath); the answer
scores are computed per row by :mod:`bara.eval.answers`.

Intervals are percentile bootstrap intervals (Efron & Tibshirani, 1993, "An
Introduction to the Bootstrap", ch. 13): resample the tasks with replacement
``B`` times, recompute the statistic, and take the ``alpha/2`` and
``1 - alpha/2`` quantiles. Comparisons are *paired*: the same resampled tasks
are used for both modes, so per-task differences drive the interval.

Verdicts, per criterion (``test``):

* ``ratio_at_most`` (lower is better, e.g. tokens <= 0.6x baseline): on the
  interval of ``mean(treatment) / mean(baseline)``: **win** when its upper end
  is <= threshold, **regression** when its lower end is > threshold, else
  **within noise**. Passed only on a win.
* ``not_lower`` (higher is better, non-inferiority, e.g. Recall@5): on the
  interval of ``mean(treatment - baseline)``: **win** when its lower end is
  > 0, **regression** when its upper end is < -margin, else **within noise**.
  Passed unless a regression.
* ``not_higher``: the mirror image of ``not_lower`` (e.g. latency).
* ``at_most`` / ``at_least`` (one mode against a fixed threshold, e.g. the share
  of inserted small talk that searched <= 0.10): on the interval of a ratio of
  sums ``sum(num) / sum(den)`` over resampled units (conversations, or
  utterances for the gate): **win** when the whole interval is on the good side
  of the threshold, **regression** when it is wholly on the bad side, else
  **within noise**. Passed only on a win.

A criterion may name its own ``baseline`` (e.g. ``last2``) and its ``source``
(``ab``, judged by `bara eval ab`; ``gate``, judged by `bara eval report` from
the confusion counts of `bara eval gate`). Every verdict row also says whether
the point estimate alone meets the threshold (``point_met``).

Everything is seeded (``[bootstrap] seed``): same inputs, same intervals.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import ir_measures
import numpy as np
from ir_measures import R, nDCG

from bara.errors import InputError
from bara.eval.ab_summary import ABSummary
from bara.eval.conversation_metrics import conversation_summary, turn_metrics
from bara.eval.stats import percentiles

TESTS = ("ratio_at_most", "not_lower", "not_higher", "at_most", "at_least")
ONE_SAMPLE = ("at_most", "at_least")
#: one-sample metrics of `eval ab` rows: metric -> (numerator, denominator) per-task keys (ratio of sums)
RATIO_METRICS = {"inserted.retrieval_rate": ("inserted.searched", "inserted.n")}
DEFAULT_PATH = Path("eval") / "preregistered.toml"


@dataclass(frozen=True)
class Criterion:
    id: str
    metric: str
    test: str
    threshold: float = 1.0
    margin: float = 0.0
    statement: str = ""
    source: str = "ab"
    baseline: str = ""  # "" = the study's baseline


@dataclass(frozen=True)
class Prereg:
    baseline: str
    treatment: str
    criteria: tuple[Criterion, ...]
    resamples: int = 2000
    confidence: float = 0.95
    seed: int = 0
    path: str = ""
    sha256: str = ""
    mixing: Mapping[str, Any] | None = None  # [mixing] of a whole-conversation registration


def load_prereg(path: Path) -> Prereg:
    """Read and validate the criteria file; an unusable file is an InputError naming the problem."""
    try:
        raw = path.read_bytes()
        data = tomllib.loads(raw.decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputError(f"pre-registration {path} is unreadable ({exc}); pass --prereg with a valid TOML file") from exc
    study, boot = data.get("study", {}), data.get("bootstrap", {})
    criteria = tuple(_criterion(c, path) for c in data.get("criteria", []))
    return Prereg(str(study.get("baseline", "always")), str(study.get("treatment", "gated")), criteria,
                  int(boot.get("resamples", 2000)), float(boot.get("confidence", 0.95)), int(boot.get("seed", 0)),
                  str(path), hashlib.sha256(raw).hexdigest(), data.get("mixing"))


def _criterion(c: Mapping[str, Any], path: Path) -> Criterion:
    if c.get("test") not in TESTS or not c.get("metric") or not c.get("id"):
        raise InputError(f"{path}: each [[criteria]] needs id, metric and test (one of {', '.join(TESTS)}); got {c}")
    if c.get("source", "ab") not in ("ab", "gate"):
        raise InputError(f"{path}: criterion {c['id']!r} has source {c['source']!r}; use 'ab' or 'gate'")
    return Criterion(str(c["id"]), str(c["metric"]), str(c["test"]), float(c.get("threshold", 1.0)),
                     float(c.get("margin", 0.0)), str(c.get("statement", "")), str(c.get("source", "ab")),
                     str(c.get("baseline", "")))


# ------------------------------------------------------------------- bootstrap
def _indices(n: int, resamples: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(resamples, n))


def _bounds(stats: np.ndarray, confidence: float) -> list[float]:
    alpha = (1 - confidence) / 2
    lo, hi = np.nanpercentile(stats, [100 * alpha, 100 * (1 - alpha)])
    return [round(float(lo), 4), round(float(hi), 4)]


def bootstrap_ci(values: Sequence[float], resamples: int = 2000, confidence: float = 0.95,
                 seed: int = 0) -> list[float] | None:
    """Percentile bootstrap interval of the mean (Efron & Tibshirani, 1993); None for no data."""
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return None
    return _bounds(arr[_indices(arr.size, resamples, seed)].mean(axis=1), confidence)


def paired_bootstrap(treatment: Sequence[float], baseline: Sequence[float], resamples: int = 2000,
                     confidence: float = 0.95, seed: int = 0) -> dict[str, Any] | None:
    """Difference and ratio of means over paired tasks, each with its percentile interval."""
    t, b = np.asarray(treatment, dtype=float), np.asarray(baseline, dtype=float)
    if t.size == 0 or t.size != b.size:
        return None
    idx = _indices(t.size, resamples, seed)
    mt, mb = t[idx].mean(axis=1), b[idx].mean(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(mb > 0, mt / np.where(mb > 0, mb, 1.0), np.nan)
    base = float(b.mean())
    return {"n": int(t.size), "treatment": round(float(t.mean()), 4), "baseline": round(base, 4),
            "diff": round(float(t.mean() - base), 4), "diff_ci": _bounds(mt - mb, confidence),
            "ratio": round(float(t.mean() / base), 4) if base > 0 else None,
            "ratio_ci": _bounds(ratios, confidence) if np.isfinite(ratios).any() else None}


def ratio_of_sums(num: Sequence[float], den: Sequence[float], resamples: int = 2000, confidence: float = 0.95,
                  seed: int = 0) -> dict[str, Any] | None:
    """``sum(num) / sum(den)`` over units with its percentile interval (units resampled, Efron &
    Tibshirani 1993); resamples with a zero denominator are dropped. None when there is no denominator."""
    n, d = np.asarray(num, dtype=float), np.asarray(den, dtype=float)
    if d.size == 0 or d.sum() <= 0:
        return None
    idx = _indices(d.size, resamples, seed)
    sn, sd = n[idx].sum(axis=1), d[idx].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        stats = np.where(sd > 0, sn / np.where(sd > 0, sd, 1.0), np.nan)
    return {"n": int(d.sum()), "units": int(d.size), "estimate": round(float(n.sum() / d.sum()), 4),
            "ci": _bounds(stats, confidence)}


# --------------------------------------------------------------------- verdicts
def verdict(criterion: Criterion, paired: Mapping[str, Any] | None) -> dict[str, Any]:
    """One row of the verdict table: estimate, interval, verdict and whether the criterion passed."""
    row: dict[str, Any] = {"id": criterion.id, "metric": criterion.metric, "test": criterion.test,
                           "threshold": criterion.threshold, "margin": criterion.margin,
                           "statement": criterion.statement}
    if criterion.source != "ab" or criterion.baseline:
        row.update(source=criterion.source, baseline=criterion.baseline or None)
    if criterion.test in ONE_SAMPLE:
        return _one_sample_verdict(criterion, row, paired)
    ratio = criterion.test == "ratio_at_most"
    ci = (paired or {}).get("ratio_ci" if ratio else "diff_ci")
    if ci is None or paired is None:
        return {**row, "estimate": None, "ci": None, "verdict": "not evaluated", "passed": None}
    estimate = paired["ratio"] if ratio else paired["diff"]
    call = _ratio_call(ci, criterion.threshold) if ratio else _diff_call(ci, criterion)
    passed = call == "win" if ratio else call != "regression"
    out = {**row, "estimate": estimate, "ci": ci, "verdict": call, "passed": passed}
    if criterion.source != "ab" or criterion.baseline:  # round-2 rows: also the point reading
        point = estimate <= criterion.threshold if ratio else (estimate >= 0 if criterion.test == "not_lower"
                                                              else estimate <= 0)
        out.update(point_met=bool(point), treatment_value=paired.get("treatment"),
                   baseline_value=paired.get("baseline"))
    return out


def _one_sample_verdict(criterion: Criterion, row: dict[str, Any], stat: Mapping[str, Any] | None) -> dict[str, Any]:
    """at_most / at_least on a ratio-of-sums interval; passed only on a win."""
    if not stat or stat.get("ci") is None:
        return {**row, "estimate": None, "ci": None, "verdict": "not evaluated", "passed": None, "point_met": None}
    lo, hi, t = stat["ci"][0], stat["ci"][1], criterion.threshold
    if criterion.test == "at_most":
        call = "win" if hi <= t else "regression" if lo > t else "within noise"
        point = stat["estimate"] <= t
    else:
        call = "win" if lo >= t else "regression" if hi < t else "within noise"
        point = stat["estimate"] >= t
    return {**row, "estimate": stat["estimate"], "ci": stat["ci"], "n": stat["n"], "verdict": call,
            "passed": call == "win", "point_met": bool(point)}


def _ratio_call(ci: Sequence[float], threshold: float) -> str:
    if ci[1] <= threshold:
        return "win"
    return "regression" if ci[0] > threshold else "within noise"


def _diff_call(ci: Sequence[float], c: Criterion) -> str:
    lo, hi = (ci[0], ci[1]) if c.test == "not_lower" else (-ci[1], -ci[0])
    if lo > 0:
        return "win"
    return "regression" if hi < -c.margin else "within noise"


def judge(prereg: Prereg, per_task: Mapping[str, Mapping[str, Mapping[str, float]]]) -> dict[str, Any]:
    """Paired comparisons and verdicts of treatment vs baseline.

    ``per_task[mode][metric]`` maps task id -> value; only tasks both modes scored are paired.
    """
    base, treat = per_task.get(prereg.baseline), per_task.get(prereg.treatment)
    metrics = sorted({c.metric for c in prereg.criteria if c.test not in ONE_SAMPLE} | set((base or {}).keys()))
    comparisons = {m: _pair(prereg, (treat or {}).get(m, {}), (base or {}).get(m, {})) for m in metrics}
    rows = [verdict(c, _statistic(prereg, c, per_task, comparisons)) for c in prereg.criteria if c.source == "ab"]
    return {"baseline": prereg.baseline, "treatment": prereg.treatment, "comparisons": comparisons,
            "verdicts": rows}


def _statistic(prereg: Prereg, c: Criterion, per_task: Mapping[str, Mapping[str, Mapping[str, float]]],
               comparisons: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The paired comparison (or one-sample ratio) a criterion is judged on."""
    treat = per_task.get(prereg.treatment) or {}
    if c.test in ONE_SAMPLE:
        num_key, den_key = RATIO_METRICS.get(c.metric, (c.metric, ""))
        den = treat.get(den_key, {})
        keys = sorted(den)
        return ratio_of_sums([treat.get(num_key, {}).get(k, 0.0) for k in keys], [den[k] for k in keys],
                             prereg.resamples, prereg.confidence, prereg.seed)
    if not c.baseline or c.baseline == prereg.baseline:
        return comparisons.get(c.metric)
    return _pair(prereg, treat.get(c.metric, {}), (per_task.get(c.baseline) or {}).get(c.metric, {}))


def _pair(prereg: Prereg, treat: Mapping[str, float], base: Mapping[str, float]) -> dict[str, Any] | None:
    keys = sorted(set(treat) & set(base))
    return paired_bootstrap([treat[k] for k in keys], [base[k] for k in keys], prereg.resamples,
                            prereg.confidence, prereg.seed)


# -------------------------------------------------------------------- summaries
JUDGED = ("ANSWERABLE", "PARTIAL")
PER_TASK = ("retrieval_rate", "retrieval_calls", "context_tokens", "recall@5", "ndcg@10", "answer_f1", "rouge_l",
            "abstain_unanswerable", "answer_rate_answerable", "clarify_underspecified", "latency_total_ms")
RETRIEVAL_MEASURES = {"recall@5": R @ 5, "ndcg@10": nDCG @ 10}
DIMENSIONS = ("answerability", "multi_turn", "question_type", "collection")


def retrieval_scores(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Recall@5 and nDCG@10 (ir-measures) of each row with reference passages, keyed "mode<TAB>task".

    A row that retrieved nothing scores 0 (ir-measures skips queries absent from the run).
    """
    names = {str(m): n for n, m in RETRIEVAL_MEASURES.items()}
    qrels = {_qid(r): {d: 1 for d in r["relevant"]} for r in rows if r.get("relevant")}
    run = {_qid(r): {d: float(len(r["hits"]) - i) for i, d in enumerate(dict.fromkeys(r["hits"]))}
           for r in rows if r.get("relevant") and r.get("hits")}
    out = {q: dict.fromkeys(RETRIEVAL_MEASURES, 0.0) for q in qrels}
    for m in ir_measures.iter_calc(list(RETRIEVAL_MEASURES.values()), qrels, run) if run else ():
        out[m.query_id][names[str(m.measure)]] = float(m.value)
    return out


def gate_verdicts(prereg: Prereg, gate: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Verdicts of the ``source = "gate"`` criteria on one `bara eval gate` report.

    Skip is the positive class: ``skip_recall = TP / (TP + FN)``, ``skip_precision = TP / (TP + FP)``
    with TP = skipped and not needed, FP = skipped but needed, FN = retrieved but not needed. The
    per-utterance 0/1 arrays are rebuilt from those counts (the ``confusion`` key, else from the
    rounded rates and label counts) and resampled as utterances.
    """
    c = gate_confusion(gate)
    units = {"skip_recall": ([1.0] * c["tp"] + [0.0] * c["fn"], [1.0] * (c["tp"] + c["fn"])),
             "skip_precision": ([1.0] * c["tp"] + [0.0] * c["fp"], [1.0] * (c["tp"] + c["fp"]))}
    out = []
    for crit in (x for x in prereg.criteria if x.source == "gate"):
        num, den = units.get(crit.metric, ([], []))
        stat = ratio_of_sums(num, den, prereg.resamples, prereg.confidence, prereg.seed)
        out.append(verdict(crit, stat))
    return out


def gate_confusion(gate: Mapping[str, Any]) -> dict[str, int]:
    """TP/FP/FN/TN of skipping, from `bara eval gate` JSON (exact counts when it has ``confusion``)."""
    if isinstance(gate.get("confusion"), Mapping):
        return {k: int(gate["confusion"][k]) for k in ("tp", "fp", "fn", "tn")}
    not_needed = int(gate["labels"]["no_retrieval"])
    tp = round((gate.get("skip_recall") or 0.0) * not_needed)
    fp = round(tp / gate["skip_precision"] - tp) if gate.get("skip_precision") else 0
    return {"tp": tp, "fp": fp, "fn": not_needed - tp, "tn": int(gate["n"]) - not_needed - fp}


def _qid(row: Mapping[str, Any]) -> str:
    return f"{row['mode']}\t{row['task_id']}"


def row_metrics(row: Mapping[str, Any], retrieval: Mapping[str, float] | None) -> dict[str, float]:
    """The per-task values a row contributes (quality metrics only where the task defines them)."""
    out = {"retrieval_rate": float(row["retrieved"]), "retrieval_calls": float(row["retrieval_calls"]),
           "context_tokens": float(row["context_tokens"]),
           "latency_total_ms": float((row.get("latency_ms") or {}).get("total", 0.0))}
    kind, answerability = row.get("kind"), row.get("answerability")
    if answerability in JUDGED:
        out.update({"answer_f1": float(row["answer_f1"]), "rouge_l": float(row["rouge_l"]), **(retrieval or {})})
    flag = {"ANSWERABLE": ("answer_rate_answerable", "answer"), "UNANSWERABLE": ("abstain_unanswerable", "abstain"),
            "UNDERSPECIFIED": ("clarify_underspecified", "clarify")}.get(str(answerability))
    if flag:
        out[flag[0]] = float(kind == flag[1])
    out.update(turn_metrics(row))
    return out


def per_task(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """mode -> metric -> task id -> value."""
    scores = retrieval_scores(rows)
    out: dict[str, dict[str, dict[str, float]]] = {}
    for row in rows:
        for metric, value in row_metrics(row, scores.get(_qid(row))).items():
            out.setdefault(row["mode"], {}).setdefault(metric, {})[row["task_id"]] = value
    return out


def _mean(values: Sequence[float]) -> float | None:
    return round(float(np.mean(values)), 4) if len(values) else None


def mode_summary(values: Mapping[str, Mapping[str, float]], rows: Sequence[Mapping[str, Any]],
                 prereg: Prereg) -> dict[str, Any]:
    """Means with bootstrap intervals, counts, latency per stage and answer kinds of one mode."""
    out: dict[str, Any] = {m: _mean(list(values.get(m, {}).values())) for m in PER_TASK if m != "latency_total_ms"}
    out["ci"] = {m: bootstrap_ci(list(values.get(m, {}).values()), prereg.resamples, prereg.confidence, prereg.seed)
                 for m in PER_TASK if m != "latency_total_ms"}
    out["n"] = {m: len(values.get(m, {})) for m in PER_TASK if m != "latency_total_ms"}
    out["latency_ms"] = percentiles(list(values.get("latency_total_ms", {}).values()))
    out["stages_ms"] = stage_latency(rows)
    out["answer_kinds"] = dict(sorted(Counter(r.get("kind", "") for r in rows).items()))
    out["errors"] = sum(bool(r.get("error")) for r in rows)
    out.update(conversation_summary(rows, values.get("recall@5", {})))
    return out


def stage_latency(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    stages = sorted({s for r in rows for s in (r.get("latency_ms") or {})})
    return {s: {**percentiles([r["latency_ms"].get(s, 0.0) for r in rows if r.get("latency_ms")]),
                "mean": _mean([r["latency_ms"].get(s, 0.0) for r in rows if r.get("latency_ms")])} for s in stages}


def _groups(row: Mapping[str, Any], dimension: str) -> list[str]:
    if dimension == "question_type":
        return list(row.get("question_types") or ["unknown"])
    return [str(row.get(dimension) or "unknown")]


def by_category(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """dimension -> value -> mode -> means; question types are multi-label (a task counts in each)."""
    scores = retrieval_scores(rows)
    cells: dict[tuple[str, str, str], list[Mapping[str, Any]]] = {}
    for row in rows:
        for dim in DIMENSIONS:
            for value in _groups(row, dim):
                cells.setdefault((dim, value, row["mode"]), []).append(row)
    out: dict[str, dict[str, dict[str, Any]]] = {d: {} for d in DIMENSIONS}
    for (dim, value, mode), group in sorted(cells.items()):
        out[dim].setdefault(value, {})[mode] = _cell(group, scores)
    return out


def _cell(rows: Sequence[Mapping[str, Any]], scores: Mapping[str, Mapping[str, float]]) -> dict[str, Any]:
    judged = [scores[_qid(r)] for r in rows if _qid(r) in scores]
    kinds = Counter(r.get("kind") for r in rows)
    return {"n": len(rows), "retrieval_rate": _mean([float(r["retrieved"]) for r in rows]),
            "retrieval_calls": _mean([r["retrieval_calls"] for r in rows]),
            "context_tokens": _mean([r["context_tokens"] for r in rows]),
            "recall@5": _mean([s["recall@5"] for s in judged]), "ndcg@10": _mean([s["ndcg@10"] for s in judged]),
            "answer_f1": _mean([r["answer_f1"] for r in rows]), "rouge_l": _mean([r["rouge_l"] for r in rows]),
            **{f"share_{k}": round(kinds[k] / len(rows), 4) for k in ("answer", "abstain", "clarify", "canned")}}


def summarize(rows: Sequence[Mapping[str, Any]], modes: Sequence[str], prereg: Prereg) -> ABSummary:
    """The per-mode table, the breakdowns and the pre-registered verdicts of one set of rows."""
    values = per_task(rows)
    comparison = judge(prereg, values) if {prereg.baseline, prereg.treatment} <= set(modes) else None
    return ABSummary(len({r["task_id"] for r in rows}),
                     {m: mode_summary(values.get(m, {}), [r for r in rows if r["mode"] == m], prereg) for m in modes},
                     by_category(rows), comparison)
