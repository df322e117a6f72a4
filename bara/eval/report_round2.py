"""Round-2 sections of `bara eval report`: whole conversations with mixed small talk, every verdict of
``eval/preregistered_round2.toml`` (the `eval ab` ones as that run judged them, the gate ones judged
here from the CLINC150 gate report), and the floor calibration.

Inputs in the report folder: ``mixed/ab.json`` (`bara eval ab --turns all ... --report DIR/mixed`),
``gate_clinc150.json`` (`bara eval gate --json`) and ``calibrate.json`` (`bara eval calibrate --json`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from matplotlib.figure import Figure

from bara.errors import BaraError, InputError
from bara.eval.prereg import gate_verdicts, load_prereg

MIXED_DIR = "mixed"
ROUND2_PREREG = Path("eval") / "preregistered_round2.toml"
COLORS = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3")
Fmt = Callable[..., str]
Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], list[str]]


def _prereg(ab: Mapping[str, Any]) -> Any:
    """The registration the mixed run was judged with (its manifest path), else the shipped file."""
    recorded = Path(str(((ab.get("manifest") or {}).get("data") or {}).get("prereg", {}).get("path", "")))
    shipped = Path(__file__).resolve().parents[2] / ROUND2_PREREG
    for path in (recorded, ROUND2_PREREG, shipped):
        if path.is_file():
            try:
                return load_prereg(path)
            except BaraError:
                continue
    return None


def all_verdicts(ab: Mapping[str, Any], gate: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """The mixed run's verdicts followed by the gate criteria judged on ``gate`` (not evaluated without it)."""
    prereg = _prereg(ab)
    rows = list(ab.get("verdicts", []))
    if prereg is None:
        return rows
    gate_crit = [c for c in prereg.criteria if c.source == "gate"]
    if gate is not None and "labels" in gate:
        return rows + gate_verdicts(prereg, gate)
    return rows + [{"id": c.id, "statement": c.statement, "test": c.test, "threshold": c.threshold,
                    "metric": c.metric, "source": "gate", "estimate": None, "ci": None,
                    "verdict": "not evaluated (no gate_clinc150.json)", "passed": None} for c in gate_crit]


def _yes_no(value: Any) -> str:
    return {True: "yes", False: "no"}.get(value, "–")


def verdict_table(rows: Sequence[Mapping[str, Any]], fmt: Fmt, ci: Fmt, table: Table) -> list[str]:
    out = []
    for v in rows:
        threshold = f"margin {fmt(v['margin'])}" if v["test"] in ("not_lower", "not_higher") else fmt(v["threshold"])
        versus = v.get("baseline") or ("CLINC150 val" if v.get("source") == "gate" else "–")
        values = (f"{fmt(v.get('treatment_value'))} vs {fmt(v.get('baseline_value'))}"
                  if v.get("baseline_value") is not None else "–")
        out.append([v["id"], v["statement"], v["test"], versus, threshold, values, fmt(v["estimate"]), ci(v["ci"]),
                    f"**{v['verdict']}**", _yes_no(v["passed"]),
                    _yes_no(v.get("point_met"))])
    return table(["criterion", "statement", "test", "vs", "threshold", "gated vs baseline (per conversation)",
                  "estimate", "95% CI", "verdict", "passed", "point met"], out)


def whole_table(ab: Mapping[str, Any], fmt: Fmt, ci: Fmt, table: Table) -> list[str]:
    modes = list(ab["modes"])
    m = ab["modes"]

    def cell(mode: str, key: str, sub: str) -> Any:
        return (m[mode].get(key) or {}).get(sub)

    rows = [["user turns (all)"] + [cell(x, "turns_all", "n") for x in modes],
            ["retrieval calls / turn (all turns)"] + [fmt(cell(x, "turns_all", "retrieval_calls")) for x in modes],
            ["context tokens / turn (all turns)"] + [fmt(cell(x, "turns_all", "context_tokens")) for x in modes],
            ["latency p50 / p95 ms (all turns)"] + [f"{fmt((cell(x, 'turns_all', 'latency_ms') or {}).get('p50'), 1)}"
                                                    f" / {fmt((cell(x, 'turns_all', 'latency_ms') or {}).get('p95'), 1)}"
                                                    for x in modes],
            ["inserted small-talk turns"] + [cell(x, "inserted", "n") for x in modes],
            ["inserted turns that searched the KB"] + [fmt(cell(x, "inserted", "retrieval_rate")) for x in modes],
            ["judged turns after an inserted turn"] + [cell(x, "after_inserted", "n") for x in modes],
            ["Recall@5 after an inserted turn"] + [fmt(cell(x, "after_inserted", "recall@5")) for x in modes],
            ["Recall@5, judged final turns (95% CI)"] + [f"{fmt(m[x].get('recall@5'))} {ci(m[x]['ci'].get('recall@5'))}"
                                                         for x in modes],
            ["context tokens, judged final turns"] + [fmt(m[x].get("context_tokens")) for x in modes]]
    return table(["whole conversations", *modes], rows)


def plot_whole(ab: Mapping[str, Any], path: Path) -> None:
    """Per mode: calls and tokens per user turn (all turns), inserted turns searched, judged Recall@5."""
    modes = list(ab["modes"])
    panels = (("turns_all", "retrieval_calls", "retrieval calls / user turn"),
              ("turns_all", "context_tokens", "context tokens / user turn"),
              ("inserted", "retrieval_rate", "inserted small talk: share searched"),
              ("", "recall@5", "Recall@5, judged final turns"))
    fig = Figure(figsize=(11, 2.8))
    for i, (group, key, title) in enumerate(panels):
        ax = fig.add_subplot(1, 4, i + 1)
        values = [((ab["modes"][x].get(group) or {}) if group else ab["modes"][x]).get(key) or 0.0 for x in modes]
        ax.bar(modes, values, color=COLORS[:len(modes)])
        ax.set_title(title, fontsize=9)
        ax.tick_params(labelsize=8)
    mix = ((ab.get("manifest") or {}).get("run") or {}).get("mix") or {}
    fig.suptitle(f"Whole MTRAG-UN dev conversations, {ab['n_tasks']} conversations, small talk mixed at "
                 f"rate {mix.get('rate')} (seed {mix.get('seed')})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def calibration_lines(cal: Mapping[str, Any], fmt: Fmt, table: Table) -> list[str]:
    rep, cur = cal["report"]["calibrated"], cal["report"]["current"]
    rows = [[r, fmt(c["floor"]), c["source"], c["relevant_hits"], fmt(cal["tune_check"]["routes"][r]["relevant_dropped"]),
             rep["routes"][r]["tasks"], fmt(rep["routes"][r]["relevant_dropped"]), fmt(rep["routes"][r]["other_dropped"]),
             fmt(cur["routes"][r]["floor"]), fmt(cur["routes"][r]["relevant_dropped"])]
            for r, c in cal["tune"].items()]
    s = cal["settings"]
    return ["## Floor calibration (`bara eval calibrate`, written to eval/floors.toml)", "",
            f"Embedder `{s['embedder_key']}`, k={s['k']}, max drop {s['max_drop']}; split: {s['split']}. "
            f"{cal['data']['tasks']['probed']} judged tasks probed (gated, floor forced to 0).", "",
            *table(["route", "floor", "from", "tune relevant hits", "tune dropped", "report tasks",
                    "report relevant dropped", "report other dropped", "current floor", "current relevant dropped"],
                   rows), "",
            f"Recall@5 on the report half: no floor {fmt(rep['recall@5_no_floor'])}, calibrated floors "
            f"{fmt(rep['recall@5'])}, current floors {fmt(cur['recall@5'])}.", ""]


def round2_section(folder: Path, fmt: Fmt, ci: Fmt, table: Table) -> list[str]:
    """The round-2 lines of report.md (empty when no mixed run is saved); writes ab_whole.png."""
    mixed = load_json(folder / MIXED_DIR / "ab.json")
    cal = load_json(folder / "calibrate.json")
    lines: list[str] = []
    if mixed is not None:
        gate = load_json(folder / "gate_clinc150.json")
        plot_whole(mixed, folder / "ab_whole.png")
        man = mixed.get("manifest") or {}
        mix = (man.get("run") or {}).get("mix") or {}
        lines += ["## Round 2: whole conversations with mixed small talk", "",
                  f"{mixed['n_tasks']} conversations, every user turn run in order; small talk "
                  f"`{(mix.get('smalltalk') or {}).get('path')}` at rate {mix.get('rate')}, seed {mix.get('seed')}; "
                  f"modes {', '.join(mixed['modes'])}; complete: {mixed.get('complete')}; wall time "
                  f"{man.get('wall_time_s')} s; registration `{(man.get('data') or {}).get('prereg', {}).get('path')}`.",
                  "", "![whole conversations](ab_whole.png)", "",
                  "### Round-2 pre-registered verdicts", "", *verdict_table(all_verdicts(mixed, gate), fmt, ci, table),
                  "", "### Per mode", "", *whole_table(mixed, fmt, ci, table), "",
                  f"problems: `{json.dumps(mixed.get('problems'), sort_keys=True)}`; resume: "
                  f"`{json.dumps(mixed.get('resume'), sort_keys=True)}`", ""]
    if cal is not None:
        lines += calibration_lines(cal, fmt, table)
    return lines


def load_json(path: Path) -> dict[str, Any] | None:
    """A report input: the JSON object in ``path``, or None when there is no such file. A file that is
    there but unreadable, not JSON or not an object is an InputError (it was left out of the report
    without a word)."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise unusable_run(path, exc) from exc
    if not isinstance(data, dict):
        raise unusable_run(path, f"a JSON {type(data).__name__}, not an object")
    return data


def unusable_run(path: Path, why: object) -> InputError:
    return InputError(f"{path} is not a usable saved run ({why}): re-run the evaluation that writes it, or move "
                      "it out of the folder")
