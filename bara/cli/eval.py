"""`bara eval ab | gate | tools | report`: parse, call :mod:`bara.eval`, print.

``register(eval_app)`` adds the four commands to the ``eval`` sub-app. With
``--json`` stdout carries exactly one JSON object; progress goes to stderr.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bara.cli.common import K_MAX, K_MIN, fail, id_callback, shown
from bara.errors import BaraError
from bara.settings import Settings, load_settings

PREREG = Path("eval") / "preregistered.toml"


def register(eval_app: typer.Typer) -> None:
    """Add `ab`, `gate`, `tools`, `report` and `calibrate` to the ``eval`` sub-app."""
    eval_app.command("ab")(eval_ab)
    eval_app.command("gate")(eval_gate)
    eval_app.command("tools")(eval_tools)
    eval_app.command("report")(eval_report)
    eval_app.command("memory")(eval_memory)
    eval_app.command("calibrate")(eval_calibrate)


def _err() -> Console:
    return Console(stderr=True, highlight=False)


def _settings() -> Settings:
    try:
        return load_settings()
    except BaraError as exc:
        fail(str(exc))


def output_folder(path: Optional[Path], option: str) -> None:
    """Exit 2 before any work when ``path`` cannot hold the run's files (a file, or not creatable)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        fail(f"{option} {path} is a file: pass a folder for the run's files (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"{option} {path}: cannot create the folder ({exc.strerror or exc}); pass a writable folder")


def output_file(path: Optional[Path], option: str) -> None:
    """Exit 2 before any work when ``path`` cannot be written as a file (a folder, or no writable folder)."""
    if path is None:
        return
    if path.is_dir():
        fail(f"{option} {path} is a folder: pass a file path, e.g. {path / 'floors.toml'}")
    output_folder(path.parent, f"{option}'s folder")


def default_prereg() -> Path:
    """``eval/preregistered.toml`` of the working directory, else of the source checkout."""
    return PREREG if PREREG.is_file() else Path(__file__).resolve().parents[2] / PREREG


def _embedder(settings: Settings) -> Any:
    from bara.retrieval.embedders import build_embedder

    return build_embedder(settings)


# -------------------------------------------------------------------------- ab
def eval_ab(tasks: Path = typer.Option(..., "--tasks", help="MTRAG-UN tasks .jsonl"),
            corpus: Path = typer.Option(..., "--corpus", help="Corpus .jsonl {_id,title,text,collection}"),
            modes: str = typer.Option("always,gated", "--modes", help="Comma-separated assistant modes."),
            k: int = typer.Option(4, "--k", min=K_MIN, max=K_MAX, help="Knowledge-base chunks per search."),
            limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks."),
            json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
            report: Optional[Path] = typer.Option(None, "--report", help="Folder for rows (resumable) and ab.json."),
            prereg: Optional[Path] = typer.Option(None, "--prereg", help="Criteria file (eval/preregistered.toml)."),
            judge_sample: int = typer.Option(40, "--judge-sample", min=0,
                                             help="Rows an LLM judge rates when a model is configured."),
            turns: str = typer.Option("last", "--turns", help="last: the final user turn of each task; "
                                                              "all: every user turn, in order."),
            mix_smalltalk: Optional[Path] = typer.Option(None, "--mix-smalltalk",
                                                         help="CLINC150-format .jsonl: insert its small-talk "
                                                              "utterances as extra user turns (--turns all)."),
            mix_domains: Optional[Path] = typer.Option(None, "--mix-domains",
                                                       help="CLINC150 domains.json (default: beside "
                                                            "--mix-smalltalk)."),
            mix_rate: float = typer.Option(0.3, "--mix-rate", min=0.0, max=0.95,
                                           help="Share of all user turns that are inserted small talk."),
            seed: int = typer.Option(0, "--seed", min=0, help="Seed of the small-talk mixing (0 or more).")) -> None:
    """Every mode on the final user turn of each task (or every turn with --turns all): retrieval, tokens,
    quality, abstention, latency. Modes: the assistant's, plus the reference `last2`."""
    from bara.eval.ab import RunConfig, evaluate_ab
    from bara.eval.mixing import MixConfig
    from bara.llm.build import build_model

    settings = _settings()
    if turns not in ("last", "all"):
        fail(f"--turns {turns!r}: pass 'last' (the final user turn) or 'all' (every user turn)")
    output_folder(report, "--report")
    mix = None
    if mix_smalltalk is not None:
        mix = MixConfig(mix_smalltalk, mix_domains or mix_smalltalk.parent / "domains.json", mix_rate, seed)
    config = RunConfig(tuple(m.strip() for m in modes.split(",") if m.strip()), k, limit, report, turns, mix)
    try:
        model = build_model(settings) if judge_sample else None
        with ProgressSteps(json_out) as step:
            result = evaluate_ab(tasks, corpus, config, settings, _embedder(settings), prereg or default_prereg(),
                                 model=model, judge_sample=judge_sample, progress=step).as_dict()
    except BaraError as exc:
        fail(str(exc))
    print(json.dumps(result, sort_keys=True)) if json_out else _print_ab(result)
    if not result["complete"]:
        _err().print("interrupted: finished rows are saved; rerun the same command to resume")
        raise typer.Exit(130)


class ProgressSteps:
    """A rich progress bar on stderr (silent with --json) exposed as a ``step(stage, n, total)`` callback."""

    def __init__(self, quiet: bool):
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self.bar = Progress(*columns, console=_err(), disable=quiet)
        self.tasks: dict[str, Any] = {}

    def __enter__(self) -> Callable[[str, int, int], None]:
        self.bar.__enter__()
        return self.step

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)

    def step(self, stage: str, n: int, total: int) -> None:
        name = "index" if stage == "index" else "turns"
        if name not in self.tasks:
            self.tasks[name] = self.bar.add_task(name, total=total)
        self.bar.update(self.tasks[name], advance=n)


def _mode_table(title: str, modes: list[str]) -> Table:
    """A table with a metric column and one column per mode."""
    table = Table(title=title)
    for col in ["metric", *modes]:
        table.add_column(col)
    return table


def _add_latency_row(table: Table, result: dict, modes: list[str]) -> None:
    table.add_row("latency p50/p95 ms", *[f"{result['modes'][m]['latency_ms']['p50']} / "
                                          f"{result['modes'][m]['latency_ms']['p95']}" for m in modes])


def _print_ab(result: dict) -> None:
    console = Console(highlight=False)
    modes = list(result["modes"])
    table = _mode_table(f"{result['n_tasks']} tasks", modes)
    for key in ("retrieval_rate", "retrieval_calls", "context_tokens", "recall@5", "ndcg@10", "answer_f1",
                "rouge_l", "abstain_unanswerable", "answer_rate_answerable", "clarify_underspecified"):
        table.add_row(key, *[_cell(result["modes"][m].get(key), result["modes"][m]["ci"].get(key)) for m in modes])
    _add_latency_row(table, result, modes)
    if any("turns_all" in result["modes"][m] for m in modes):
        _add_whole_rows(table, result, modes)
    console.print(table)
    for v in result.get("verdicts", []):
        console.print(f"{v['id']}: {v['verdict']} (estimate {v['estimate']}, 95% CI {v['ci']})")
    console.print(f"problems: {shown(result['problems'])}  judge: {result['judge'].get('status')}")


def _add_whole_rows(table: Table, result: dict, modes: list[str]) -> None:
    """Whole-conversation rows (--turns all): per-turn means, inserted turns searched, after-inserted recall."""
    m = {mode: result["modes"][mode] for mode in modes}
    table.add_row("turns_all n", *[str(m[x].get("turns_all", {}).get("n", "-")) for x in modes])
    for key in ("retrieval_calls", "context_tokens"):
        table.add_row(f"turns_all {key}", *[_cell(m[x].get("turns_all", {}).get(key), None) for x in modes])
    table.add_row("turns_all latency p50/p95 ms", *[f"{m[x]['turns_all']['latency_ms']['p50']} / "
                                                    f"{m[x]['turns_all']['latency_ms']['p95']}"
                                                    if "turns_all" in m[x] else "-" for x in modes])
    table.add_row("inserted searched KB", *[_cell(m[x].get("inserted", {}).get("retrieval_rate"), None)
                                            for x in modes])
    table.add_row("after_inserted recall@5", *[_cell(m[x].get("after_inserted", {}).get("recall@5"), None)
                                               for x in modes])


def _cell(value: Any, ci: Any) -> str:
    if value is None:
        return "-"
    return f"{value:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else f"{value:.3f}"


# ------------------------------------------------------------------------ gate
def eval_gate(data: Path = typer.Option(..., "--data", help="CLINC150 {text,intent}, {text,needs_retrieval} "
                                                             "or MTRAG-UN tasks .jsonl"),
              domains: Optional[Path] = typer.Option(None, "--domains", help="CLINC150 domains.json "
                                                                             "(default: beside --data)"),
              json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Retrieval-necessity accuracy of the gate (full gate and rules only) on labelled utterances."""
    from bara.eval.gate import evaluate_gate

    settings = _settings()
    embedder = _embedder(settings)
    try:
        result = evaluate_gate(data, domains, settings, getattr(embedder, "inner", embedder)).as_dict()
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps(result, sort_keys=True))
        return
    keys = ("n", "accuracy", "skip_precision", "skip_recall", "retrieve_recall", "latency_ms")
    Console(highlight=False).print({k: result[k] for k in keys}, {"rules_only": result["rules_only"]},
                                   {"problems": result["problems"]})


# ----------------------------------------------------------------------- tools
def eval_tools(bfcl: List[Path] = typer.Option(..., "--bfcl", help="BFCL cases .jsonl (repeatable)"),
               answers: Optional[List[Path]] = typer.Option(None, "--answers",
                                                            help="BFCL possible_answer .jsonl (repeatable; "
                                                                 "default: possible_answer/<same name>)"),
               model: Optional[str] = typer.Option(None, "--model", callback=id_callback("model name"), help="LLM as provider:name; default: the "
                                                                         "offline rule router."),
               json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Tool selection on BFCL cases: right function chosen, nothing called when none applies."""
    from bara.eval.tools_bfcl import evaluate_tools

    settings = _settings()
    try:
        result = evaluate_tools(bfcl, answers or [], _selector(settings, model)).as_dict()
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps(result, sort_keys=True))
        return
    keys = ("n", "selection_accuracy", "irrelevance_abstention", "by_category", "splits", "model", "problems")
    Console(highlight=False).print({k: result[k] for k in keys})


def _selector(settings: Settings, model: Optional[str]) -> Any:
    from bara.eval.tools_bfcl import ModelSelector, RouterSelector

    if model:
        from bara.llm.build import build_model

        return ModelSelector(build_model(settings.override(model=model)))
    from bara.domains.funds.router import RuleRouter

    embedder = _embedder(settings)
    return RouterSelector(RuleRouter(embedder, settings))


# ---------------------------------------------------------------------- report
def eval_report(folder: Path = typer.Argument(..., help="Folder of saved runs (ab.json, gate*.json, tools*.json)")
                ) -> None:
    """Write report.md with PNG plots from the saved runs in FOLDER."""
    from bara.eval.report import write_report

    try:
        path = write_report(folder)
    except BaraError as exc:
        fail(str(exc))
    print(path)


# ---------------------------------------------------------------------- memory
def eval_memory(locomo: List[Path] = typer.Option(..., "--locomo", help="LoCoMo files: one conversation each (conv-*.json) or the released list (locomo10.json)."),
                more: Optional[List[Path]] = typer.Argument(None, help="More LoCoMo files after --locomo."),
                modes: str = typer.Option("turns,gated,full", "--modes", help="Comma-separated: turns,gated,full."),
                k: int = typer.Option(10, "--k", min=1, max=100, help="Items counted per question (recall@k)."),
                json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
                judge: Optional[str] = typer.Option(None, "--judge", callback=id_callback("model name"), help="provider:name of a model that answers "
                                                                           "and judges (else retrieval only)."),
                limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only N questions per file."),
                sessions: Optional[int] = typer.Option(None, "--sessions", min=1,
                                                       help="Replay only the first N sessions (a quick slice)."),
                conversations: Optional[str] = typer.Option(None, "--conversations",
                                                            help="Comma-separated sample ids to run (a tuning or "
                                                                 "held-out split), e.g. conv-42,conv-43.")) -> None:
    """LoCoMo long-term memory: evidence recall, context tokens, latency and abstention per mode."""
    from bara.eval.locomo import MemoryEvalConfig, parse_modes, run_memory_eval, summarise
    from bara.prompts.locomo import NO_MODEL

    settings = _settings()
    files: tuple[Path, ...] = (*locomo, *(more or []))
    folders = [str(f) for f in files if f.is_dir()]
    if folders:
        fail(f"{', '.join(folders)} is a folder: pass the LoCoMo files in it, e.g. --locomo {folders[0]}/conv-*.json")
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        fail(f"LoCoMo file(s) not found: {', '.join(missing)}; pass --locomo conv-*.json files")
    try:
        config = MemoryEvalConfig(files, parse_modes(modes), k, limit, sessions,
                                  tuple(c.strip() for c in (conversations or "").split(",") if c.strip()))
        model = _judge_model(settings, judge) if judge else None
        err = _err()
        rows, n = run_memory_eval(config, settings.override(memory_episodic_k=k), _embedder(settings),
                                  progress=None if json_out else (lambda text: err.print(text, markup=False)))
        result = summarise(rows, n).as_dict()
        result["judge"] = _judged(model, judge, rows, files) if model and judge else {"status": "not_run", "reason": NO_MODEL}
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps(result, sort_keys=True))
    else:
        _print_memory(result)


def _judge_model(settings: Settings, judge: str) -> Any:
    from bara.llm.build import build_model

    provider, _, name = judge.partition(":")
    if not provider.strip() or not name.strip():
        fail(f"--judge {judge!r} must be provider:name, e.g. openai:gpt-4o-mini")
    return build_model(settings.override(model=name, llm_provider=provider))


def _judged(model: Any, judge: str, rows: dict, files: tuple[Path, ...]) -> dict[str, Any]:
    from bara.eval.locomo_data import load_locomo_all
    from bara.eval.locomo_judge import judge_rows

    convs = [c for f in files for c in load_locomo_all(f)]
    speakers = {c.sample_id: (c.speaker_a, c.speaker_b) for c in convs}
    refs = {(c.sample_id, q.question): q.answer for c in convs for q in c.questions}
    return {"status": "ok", "model": judge,
            "modes": {m: judge_rows(model, r, speakers, refs) for m, r in rows.items() if m != "full"}}


def _print_memory(result: dict) -> None:
    console = Console(highlight=False)
    modes = list(result["modes"])
    table = _mode_table(f"LoCoMo: {result['n_questions']} questions", modes)
    for key in ("evidence_recall@5", "evidence_recall@10", "context_tokens", "abstain_adversarial",
                "false_abstain_answerable", "abstain_precision"):
        table.add_row(key, *[str(result["modes"][m][key]) for m in modes])
    _add_latency_row(table, result, modes)
    for cat in ("1", "2", "3", "4"):
        table.add_row(f"recall@10 cat {cat}", *[str(result["by_category"][m][cat]["evidence_recall@10"])
                                                 for m in modes])
    console.print(table)
    judge = result.get("judge", {})
    console.print(f"judge: {shown(judge.get('reason') if judge.get('status') != 'ok' else judge['modes'])}")
# ------------------------------------------------------------------- calibrate
def eval_calibrate(tasks: Path = typer.Option(..., "--tasks", help="MTRAG-UN dev tasks .jsonl"),
                   corpus: Path = typer.Option(..., "--corpus", help="Corpus .jsonl {_id,title,text,collection}"),
                   k: int = typer.Option(4, "--k", min=1, max=100, help="Knowledge-base chunks per search."),
                   max_drop: float = typer.Option(0.05, "--max-drop", min=0.0, max=0.5,
                                                  help="Largest share of relevant hits a floor may drop."),
                   min_hits: int = typer.Option(30, "--min-hits", min=1,
                                                help="Relevant hits a route needs for its own floor "
                                                     "(else the pooled floor)."),
                   out: Optional[Path] = typer.Option(None, "--out", help="Floors file to write "
                                                                          "(e.g. eval/floors.toml)."),
                   limit: Optional[int] = typer.Option(None, "--limit", min=1, help="Only the first N tasks."),
                   json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Per-route similarity floors that drop at most --max-drop of relevant hits (tuned on half the dev
    conversations, reported on the other half); writes them with the data hash and embedder id."""
    from bara.eval.ab import prepare
    from bara.eval.calibrate import calibrate, to_toml

    settings = _settings()
    output_file(out, "--out")
    try:
        prep = prepare(tasks, corpus, limit)
        with ProgressSteps(json_out) as step:
            calibration = calibrate(prep, corpus, tasks, settings, _embedder(settings), k, max_drop, min_hits, step)
    except BaraError as exc:
        fail(str(exc))
    result = calibration.as_dict()
    if out is not None:
        try:
            out.write_text(to_toml(calibration), encoding="utf-8")
        except OSError as exc:  # checked before the run; lost since (removed, filled up): the figures are still printed
            _err().print(f"error: cannot write {out} ({exc.strerror or exc}); the floors follow on stdout", markup=False)
            print(to_toml(calibration))
            raise typer.Exit(2) from exc
    if json_out:
        print(json.dumps(result, sort_keys=True))
        return
    rep = result["report"]
    Console(highlight=False).print(result["floors"], {"tune": result["tune"]},
                                   {"report (held-out half)": {"calibrated": rep["calibrated"],
                                                               "current": rep["current"]}})
