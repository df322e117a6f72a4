"""`bara eval report DIR`: a Markdown report with PNG plots from saved evaluation runs.

Reads ``ab.json`` (written by ``bara eval ab --report DIR``), the round-2 runs
(``mixed/ab.json``, ``calibrate.json``: :mod:`bara.eval.report_round2`) and any
``gate*.json`` / ``tools*.json`` (the ``--json`` output of ``bara eval gate`` /
``bara eval tools``) in DIR; writes ``report.md`` and its plots beside them.
Plots use matplotlib's object API on the Agg canvas (no display, no global
pyplot state).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from matplotlib import colormaps
from matplotlib.figure import Figure

from bara.errors import InputError
from bara.eval.report_round2 import MIXED_DIR, load_json, round2_section, unusable_run

PLOT_METRICS = (("retrieval_rate", "retrieval rate"), ("retrieval_calls", "retrieval calls / turn"),
                ("context_tokens", "context tokens / turn"), ("recall@5", "Recall@5"), ("ndcg@10", "nDCG@10"),
                ("answer_f1", "answer token F1"), ("rouge_l", "ROUGE-L"),
                ("abstain_unanswerable", "abstains on UNANSWERABLE"),
                ("answer_rate_answerable", "answers ANSWERABLE"))
TABLE_METRICS = PLOT_METRICS + (("clarify_underspecified", "clarifies UNDERSPECIFIED"),)
STAGE_SKIP = ("total",)
COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)


def _ci(ci: Sequence[float] | None) -> str:
    return f"[{_fmt(ci[0])}, {_fmt(ci[1])}]" if ci else ""


def _table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]


# ------------------------------------------------------------------------ plots
def _bars(ax: Any, modes: Sequence[str], summary: Mapping[str, Any], metric: str, title: str) -> None:
    means = [summary[m].get(metric) or 0.0 for m in modes]
    cis = [summary[m]["ci"].get(metric) or [v, v] for m, v in zip(modes, means, strict=False)]
    errors = [[max(v - c[0], 0) for v, c in zip(means, cis, strict=False)], [max(c[1] - v, 0) for v, c in zip(means, cis, strict=False)]]
    ax.bar(modes, means, yerr=errors, capsize=4, color=COLORS[:len(modes)])
    ax.set_title(title, fontsize=9)
    ax.tick_params(labelsize=8)


def plot_metrics(ab: Mapping[str, Any], path: Path) -> None:
    """One panel per headline metric: a bar per mode with its 95% bootstrap interval."""
    modes = list(ab["modes"])
    fig = Figure(figsize=(11, 7))
    for i, (metric, title) in enumerate(PLOT_METRICS):
        _bars(fig.add_subplot(3, 3, i + 1), modes, ab["modes"], metric, title)
    fig.suptitle(f"MTRAG-UN dev, {ab['n_tasks']} tasks: mean per task with 95% bootstrap CI", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_latency(ab: Mapping[str, Any], path: Path) -> None:
    """Mean milliseconds per pipeline stage, stacked per mode."""
    modes = list(ab["modes"])
    stages = sorted({s for m in modes for s in ab["modes"][m].get("stages_ms", {}) if s not in STAGE_SKIP})
    fig = Figure(figsize=(10, 1.6 + 0.6 * len(modes)))
    ax = fig.add_subplot(1, 1, 1)
    left, palette = [0.0] * len(modes), colormaps["tab20"]
    for n, stage in enumerate(stages):
        widths = [(ab["modes"][m].get("stages_ms", {}).get(stage) or {}).get("mean") or 0.0 for m in modes]
        ax.barh(modes, widths, left=left, label=stage, color=palette(n % 20))
        left = [a + b for a, b in zip(left, widths, strict=False)]
    ax.set_xlabel("mean ms per turn (stacked by stage)")
    ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_by_answerability(ab: Mapping[str, Any], path: Path) -> None:
    """Per answerability class: how often each mode answered, abstained or asked back."""
    groups = ab.get("by_category", {}).get("answerability", {})
    modes = list(ab["modes"])
    kinds = {"share_answer": "answered", "share_abstain": "abstained (not in the KB)",
             "share_clarify": "asked a clarifying question"}
    fig = Figure(figsize=(11, 3.2))
    for i, (kind, title) in enumerate(kinds.items()):
        ax = fig.add_subplot(1, 3, i + 1)
        width = 0.8 / max(len(modes), 1)
        for j, mode in enumerate(modes):
            values = [(groups[g].get(mode) or {}).get(kind) or 0.0 for g in groups]
            ax.bar([k + j * width for k in range(len(groups))], values, width, label=mode, color=COLORS[j % 5])
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(groups))], [g.title() for g in groups], fontsize=7)
        ax.set_title(f"share {title}", fontsize=9)
        ax.set_ylim(0, 1.05)
    fig.axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# --------------------------------------------------------------------- markdown
def mode_table(ab: Mapping[str, Any]) -> list[str]:
    modes = list(ab["modes"])
    rows = [[label] + [f"{_fmt(ab['modes'][m].get(k))} {_ci(ab['modes'][m]['ci'].get(k))} (n={ab['modes'][m]['n'].get(k)})"
                       for m in modes] for k, label in TABLE_METRICS]
    rows.append(["latency p50 / p95 ms"] + [f"{_fmt(ab['modes'][m]['latency_ms']['p50'], 1)} / "
                                            f"{_fmt(ab['modes'][m]['latency_ms']['p95'], 1)}" for m in modes])
    return _table(["metric (mean, 95% CI)"] + modes, rows)


def verdict_table(ab: Mapping[str, Any]) -> list[str]:
    rows = [[v["id"], v["statement"], v["test"], _fmt(v["threshold"]) if v["test"] == "ratio_at_most" else
             f"margin {_fmt(v['margin'])}", _fmt(v["estimate"]), _ci(v["ci"]), f"**{v['verdict']}**",
             {True: "yes", False: "no"}.get(v["passed"], "–")] for v in ab.get("verdicts", [])]
    return _table(["criterion", "statement", "test", "threshold", "estimate", "95% CI", "verdict", "passed"], rows)


def comparison_table(ab: Mapping[str, Any]) -> list[str]:
    comp = ab.get("comparison") or {}
    rows = [[m, c["n"], _fmt(c["baseline"]), _fmt(c["treatment"]), _fmt(c["diff"]), _ci(c["diff_ci"]),
             _fmt(c["ratio"]), _ci(c["ratio_ci"])] for m, c in sorted((comp.get("comparisons") or {}).items()) if c]
    head = ["metric", "paired n", comp.get("baseline", "baseline"), comp.get("treatment", "treatment"),
            "diff", "diff 95% CI", "ratio", "ratio 95% CI"]
    return _table(head, rows)


def category_table(ab: Mapping[str, Any], dimension: str) -> list[str]:
    cells = ab.get("by_category", {}).get(dimension, {})
    keys = ("n", "retrieval_rate", "context_tokens", "recall@5", "answer_f1", "share_answer", "share_abstain",
            "share_clarify")
    rows = [[value, mode] + [_fmt(c.get(k)) for k in keys] for value, modes in cells.items()
            for mode, c in modes.items()]
    return _table([dimension, "mode", *keys], rows)


def stage_table(ab: Mapping[str, Any]) -> list[str]:
    modes = list(ab["modes"])
    stages = sorted({s for m in modes for s in ab["modes"][m].get("stages_ms", {})})
    rows = [[s] + [_stage_cell(ab["modes"][m].get("stages_ms", {}).get(s)) for m in modes] for s in stages]
    return _table(["stage (ms: mean / p50 / p95)"] + modes, rows)


def _stage_cell(cell: Mapping[str, Any] | None) -> str:
    if not cell:
        return "–"
    return f"{_fmt(cell.get('mean'), 2)} / {_fmt(cell.get('p50'), 2)} / {_fmt(cell.get('p95'), 2)}"


def ab_section(ab: Mapping[str, Any]) -> list[str]:
    man = ab.get("manifest", {})
    lines = ["## A/B: modes on MTRAG-UN conversations", "",
             f"{ab['n_tasks']} tasks; modes {', '.join(ab['modes'])}; run complete: {ab.get('complete')}; "
             f"wall time {man.get('wall_time_s')} s.", "", "![per-mode metrics](ab_metrics.png)", ""]
    lines += ["### Pre-registered verdicts", "", *verdict_table(ab), "", "### Per mode", "", *mode_table(ab), ""]
    lines += ["### Paired differences (treatment − baseline)", "", *comparison_table(ab), ""]
    lines += ["### By answerability", "", "![answer kinds](ab_by_answerability.png)", "",
              *category_table(ab, "answerability"), ""]
    for dim in ("multi_turn", "question_type", "collection"):
        lines += [f"### By {dim.replace('_', ' ')}", "", *category_table(ab, dim), ""]
    lines += ["### Latency per stage", "", "![latency per stage](ab_latency.png)", "", *stage_table(ab), ""]
    judge = ab.get("judge") or {}
    lines += ["### LLM judge", "", f"`{json.dumps(judge, sort_keys=True)}`", ""]
    lines += ["### Bad input and resume", "", f"- problems: `{json.dumps(ab.get('problems'), sort_keys=True)}`",
              f"- resume: `{json.dumps(ab.get('resume'), sort_keys=True)}`", ""]
    return lines


def gate_section(name: str, gate: Mapping[str, Any]) -> list[str]:
    keys = ("accuracy", "skip_precision", "skip_recall", "retrieve_recall")
    rows = [["full gate (" + str(gate.get("gate")) + ")"] + [_fmt(gate.get(k)) for k in keys] +
            [_fmt(gate["latency_ms"]["p50"], 2), _fmt(gate["latency_ms"]["p95"], 2)],
            ["rules only"] + [_fmt(gate["rules_only"].get(k)) for k in keys] +
            [_fmt(gate["rules_only"]["latency_ms"]["p50"], 2), _fmt(gate["rules_only"]["latency_ms"]["p95"], 2)]]
    groups = [[g, c["n"], c["needs_retrieval"], _fmt(c["accuracy"]), _fmt(c["retrieve_rate"])]
              for g, c in gate.get("by_group", {}).items()]
    data = gate.get("data", {})
    return [f"## Gate: retrieval necessity ({name})", "", f"{gate['n']} utterances from `{data.get('path')}` "
            f"(sha256 `{str(data.get('sha256'))[:16]}…`); labels {gate.get('labels')}.", "",
            *_table(["gate", *keys, "p50 ms", "p95 ms"], rows), "",
            *_table(["group", "n", "needs retrieval", "accuracy", "retrieve rate"], groups), "",
            f"problems: `{json.dumps(gate.get('problems'), sort_keys=True)}`", ""]


def tools_section(name: str, tools: Mapping[str, Any]) -> list[str]:
    rows = [[c, v["n"], _fmt(v["accuracy"]), _fmt(v.get("only_answer_tools")),
             ", ".join(f"{k} {n}" for k, n in sorted((v.get("verdicts") or {}).items()))]
            for c, v in tools.get("by_category", {}).items()]
    files = ", ".join(f"`{'/'.join(Path(d['path']).parts[-2:])}` ({d['sha256'][:12]}…)" for d in tools.get("data", []))
    return [f"## Tools: BFCL selection ({name})", "", f"model `{tools.get('model')}`; {tools['n']} cases; "
            f"selection accuracy {_fmt(tools.get('selection_accuracy'))}, irrelevance abstention "
            f"{_fmt(tools.get('irrelevance_abstention'))}; data {files}.", "",
            *_table(["category", "n", "accuracy", "only answer tools", "verdicts"], rows), "",
            f"problems: `{json.dumps(tools.get('problems'), sort_keys=True)}`; model errors: "
            f"`{json.dumps(tools.get('model_errors'), sort_keys=True)}`", ""]


def reproducibility(ab: Mapping[str, Any]) -> list[str]:
    man = ab.get("manifest", {})
    return ["## Reproducibility", "", f"- versions: `{json.dumps(man.get('versions'), sort_keys=True)}`",
            f"- settings hash `{man.get('settings_hash')}`; embedder `{man.get('embedder')}`; "
            f"generator {man.get('generator')}", f"- seeds: `{json.dumps(man.get('seeds'), sort_keys=True)}`; "
            f"bootstrap `{json.dumps(man.get('bootstrap'), sort_keys=True)}`",
            f"- data: `{json.dumps(man.get('data'), sort_keys=True)}`",
            f"- settings: `{json.dumps(man.get('settings'), sort_keys=True)}`", ""]


def write_report(folder: Path) -> Path:
    """Write ``report.md`` (and plots) for the runs saved in ``folder``; returns the report's path. A saved
    run that lacks what its section needs is an InputError naming the file, not a KeyError."""
    ab = load_json(folder / "ab.json")
    gates = {p: g for p in sorted(folder.glob("gate*.json")) if (g := load_json(p)) and "accuracy" in g}
    tools = {p: t for p in sorted(folder.glob("tools*.json")) if (t := load_json(p)) and "selection_accuracy" in t}
    if ab is None and not gates and not tools and not (folder / MIXED_DIR / "ab.json").is_file():
        raise InputError(f"{folder} holds no saved runs: run `bara eval ab --report {folder}` first")
    lines = ["# bara evaluation report", ""]
    if ab is not None:
        lines += _section(folder / "ab.json", _ab_lines, ab, folder)
    lines += _section(folder / MIXED_DIR, round2_section, folder, _fmt, _ci, _table)
    for path, gate in gates.items():
        lines += _section(path, gate_section, path.stem, gate)
    for path, tool in tools.items():
        lines += _section(path, tools_section, path.stem, tool)
    lines += _section(folder / "ab.json", reproducibility, ab) if ab is not None else []
    out = folder / "report.md"
    out.write_text("\n".join(lines).rstrip() + "\n", encoding="utf-8")
    return out


def _ab_lines(ab: Mapping[str, Any], folder: Path) -> list[str]:
    plot_metrics(ab, folder / "ab_metrics.png")
    plot_latency(ab, folder / "ab_latency.png")
    plot_by_answerability(ab, folder / "ab_by_answerability.png")
    return ab_section(ab)


def _section(path: Path, build: Callable[..., list[str]], *args: Any) -> list[str]:
    try:
        return build(*args)
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        raise unusable_run(path, f"{type(exc).__name__}: {exc}") from exc
