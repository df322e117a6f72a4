"""The `bara` command: parses, calls the library, prints. No logic lives here."""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from bara.app import Bara
from bara.cli.common import (FAULT, STORE_FAULT, bara_warnings_as_notices, fail, floor_option, free_text, k_option, open_bara,
                             open_writer, printable, say, shown)
from bara.errors import BaraError, StoreFaultError
from bara.memory.knowledge import FileOutcome, IngestReport, Selection, discover, nothing_readable
from bara.settings import load_settings
from bara.text.locator import locator
from bara.types import RetrievalOutcome

app = typer.Typer(help="bara: adaptive retrieval for multi-turn assistants.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
eval_app = typer.Typer(help="Evaluations on datasets with judgments.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")
console = Console()
err = Console(stderr=True)
DEBUG_ENV = "BARA_DEBUG"  # "1": an internal error shows its traceback instead of one line

DbOption = typer.Option(None, "--db", help="Store location (SQLite file). Default: settings / $BARA_DB.")


def _open(db: Optional[str], mode: str = "read", **overrides: Any) -> Bara:
    return open_writer(db, **overrides) if mode == "write" else open_bara(db, mode, **overrides)


@app.command()
def ingest(paths: List[Path] = typer.Argument(..., help="Files or folders to ingest."),
           db: Optional[str] = DbOption,
           prune: bool = typer.Option(False, "--prune", help="Remove stored files that no longer exist."),
           include: List[str] = typer.Option([], "--include", metavar="GLOB",
                                             help="Only files whose name or path under the folder matches (repeatable)."),
           exclude: List[str] = typer.Option([], "--exclude", metavar="GLOB",
                                             help="Leave out files whose name or path under the folder matches (repeatable)."),
           json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON.")) -> None:
    """Chunk, embed and store text, Markdown, reST, HTML, PDF and .docx files (unchanged ones are skipped; every file not indexed is listed with its reason)."""
    missing = [printable(str(p)) for p in paths if not p.expanduser().exists()]
    if missing:
        fail(f"no such file or folder: {', '.join(missing)}; pass files or folders that exist")
    select = Selection(tuple(include), tuple(exclude))
    nothing = None if prune or not _store_is_new(db) else nothing_readable(paths, load_settings(), select)
    if nothing is not None:  # checked before a new store is made: a run that can index nothing creates nothing
        _print_ingest(nothing, json_out)
        fail(f"nothing to index: {_why_nothing(nothing)}; no store was created")
    try:
        with _open(db, "write") as bara:
            bara.check_vectors(write=True, say=say)
            report = _ingest_with_progress(bara, paths, prune, quiet=json_out, select=select)
    except BaraError as exc:
        fail(exc)
    _print_ingest(report, json_out)
    if report.interrupted:
        raise typer.Exit(130)
    if report.files_read == 0 and not prune:
        fail(f"nothing to index: {_why_nothing(report)}; the store holds what it held before")


def _store_is_new(db: Optional[str]) -> bool:
    """Whether this ingest would create its SQLite store file (not for a folder given as --db: that
    is refused with its own message when the store is opened)."""
    try:
        location = load_settings(db=db).db
    except BaraError:
        return False
    path = Path(location).expanduser()
    return "://" not in location and location != ":memory:" and not path.exists()


def _why_nothing(report: IngestReport) -> str:
    if report.skipped:
        return (f"none of the {len(report.skipped)} file(s) could be read (reasons above: pass files in a "
                "supported format, or change --include/--exclude)")
    if report.excluded:
        return f"--include/--exclude left out all {report.excluded} file(s)"
    return "the folder holds no files"


def _ingest_with_progress(bara: Bara, paths: List[Path], prune: bool, quiet: bool,
                          select: Selection | None = None) -> IngestReport:
    total = len(discover(paths, select)[0])
    columns = (TextColumn("[bold]ingest"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[name]}"))
    with Progress(*columns, console=err, disable=quiet, transient=False) as bar:
        task = bar.add_task("ingest", total=total, name="")

        def step(outcome: FileOutcome) -> None:
            if outcome.status != "pruned":
                bar.update(task, advance=1, name=printable(Path(outcome.path).name))

        return bara.ingest(paths, prune=prune, progress=step, select=select)


def _print_ingest(report: IngestReport, json_out: bool) -> None:
    summary = {"files_read": report.files_read, "written": report.written, "unchanged": report.unchanged,
               "skipped": [_skipped_json(p, r) for p, r in report.skipped], "excluded": report.excluded,
               "pruned": report.pruned,
               "chunks_written": report.chunks_written, "chunks_unchanged": report.chunks_unchanged,
               "seconds": round(report.seconds, 3), "interrupted": report.interrupted}
    if json_out:
        print(json.dumps(summary))
        return
    console.print(f"files read {report.files_read} (written {report.written}, unchanged {report.unchanged}),"
                  f" skipped {len(report.skipped)}, pruned {report.pruned}"
                  + (f", excluded {report.excluded} by --include/--exclude" if report.excluded else ""), markup=False)
    console.print(f"chunks written {report.chunks_written}, chunks unchanged {report.chunks_unchanged},"
                  f" {report.seconds:.2f} s")
    for path, reason in report.skipped:
        console.print(f"  skipped {printable(path)}: {reason}", markup=False, soft_wrap=True)  # a path is never broken
    if report.interrupted:
        console.print("[yellow]interrupted: every committed document is whole; rerun to continue[/yellow]")


def _skipped_json(path: str, reason: str) -> dict:
    """``{"path", "reason", "detail"}``: the reason code (bara.memory.readers.REASONS), then what it means here."""
    code, _, detail = reason.partition(": ")
    return {"path": path, "reason": code, "detail": detail}


@app.command()
def search(query: str = typer.Argument(..., help="What to look for.", callback=free_text),
           k: Optional[int] = k_option(help="How many chunks to return."),
           floor: Optional[float] = floor_option(),
           rerank: Optional[bool] = typer.Option(None, "--rerank/--no-rerank", help="Cross-encoder rerank."),
           json_out: bool = typer.Option(False, "--json", help="Print JSON."),
           db: Optional[str] = DbOption) -> None:
    """Hybrid search of the knowledge base: fused score plus each arm's rank and score."""
    try:
        with _open(db) as bara:
            bara.check_vectors(write=False)
            outcome = bara.search(query, k=k, floor=floor, rerank=rerank)
    except BaraError as exc:
        fail(exc)
    if json_out:
        print(json.dumps(outcome_json(outcome)))
    else:
        _print_outcome(outcome)


def outcome_json(outcome: RetrievalOutcome) -> dict:
    def hit(h):  # noqa: ANN001, ANN202 - local formatter
        return {"id": h.id, "source": h.chunk.source, "section": h.chunk.section, "title": h.chunk.title,
                "score": round(h.score, 6), "similarity": round(h.similarity, 4),
                "lexical": {"rank": h.lexical.rank, "score": h.lexical.score},
                "dense": {"rank": h.dense.rank, "score": h.dense.score},
                "rerank_score": h.rerank_score, "text": h.chunk.text}
    return {"query": outcome.query, "status": outcome.status.value, "reasons": list(outcome.reasons),
            "hits": [hit(h) for h in outcome.hits], "dropped_by_floor": outcome.n_dropped,
            "timings_ms": {k: round(v, 3) for k, v in outcome.timings_ms.items()}}


def _print_outcome(outcome: RetrievalOutcome) -> None:
    table = Table(title=f"{outcome.status.value}: {shown(outcome.query[:60])}")
    for col in ("#", "source", "section", "fused", "sim", "bm25 rank/score", "dense rank/score"):
        table.add_column(col)
    for n, h in enumerate(outcome.hits, 1):
        table.add_row(str(n), shown(Path(h.chunk.source).name), shown(locator(h.chunk.section, h.chunk.title)[:40]),
                      f"{h.score:.4f}", f"{h.similarity:.3f}", _arm(h.lexical), _arm(h.dense))
    console.print(table)
    for n, h in enumerate(outcome.hits, 1):
        console.print(f"[bold]{n}.[/bold] {shown(h.chunk.text[:240].strip())}…")
    if outcome.reasons:
        console.print(f"reasons: {', '.join(outcome.reasons)}; dropped by floor: {outcome.n_dropped}")


def _arm(arm) -> str:  # noqa: ANN001
    return "-" if arm.rank is None else f"{arm.rank} / {arm.score:.3f}"


@eval_app.command("retrieval")
def eval_retrieval(corpus: Path = typer.Option(..., "--corpus", help="BEIR corpus .jsonl or .jsonl.gz"),
                   queries: Path = typer.Option(..., "--queries", help="BEIR queries .jsonl"),
                   qrels: Path = typer.Option(..., "--qrels", help="BEIR qrels .tsv"),
                   arms: str = typer.Option("bm25,dense,hybrid,hybrid+rerank", "--arms"),
                   json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """nDCG@10, Recall@100, MRR@10 and latency per arm on a BEIR-layout dataset."""
    from bara.eval.retrieval import ARM_NAMES

    chosen = [a.strip() for a in arms.split(",") if a.strip()]
    unknown = [a for a in chosen if a not in ARM_NAMES]
    if unknown or not chosen:
        fail(f"unknown arm(s) {unknown}; choose from {', '.join(ARM_NAMES)}" if unknown else
             f"--arms {arms!r} names no arm: pass one or more of {', '.join(ARM_NAMES)}, comma-separated")
    try:
        bara = Bara(load_settings())
        report = _run_eval(bara, corpus, queries, qrels, chosen, json_out)
    except BaraError as exc:
        fail(exc)
    print(json.dumps(report)) if json_out else _print_eval(report)


def _run_eval(bara: Bara, corpus: Path, queries: Path, qrels: Path, arms: list[str], quiet: bool) -> dict:
    from bara.eval.retrieval import evaluate_retrieval

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=err, disable=quiet) as bar:
        tasks: dict[str, TaskID] = {}

        def progress(stage: str, n: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(stage, total=total)
            bar.update(tasks[stage], advance=n)

        return evaluate_retrieval(corpus, queries, qrels, arms, bara.settings, bara.embedder,
                                  progress=progress).as_dict()


def _print_eval(report: dict) -> None:
    table = Table(title=f"{shown(report['dataset'])}: {report['n_queries']} queries, {report['n_docs']} docs")
    for col in ("arm", "nDCG@10", "Recall@100", "MRR@10", "p50 ms", "p95 ms"):
        table.add_column(col)
    for name, r in report["arms"].items():
        if "skipped" in r:
            table.add_row(name, f"skipped: {shown(r['skipped'])}", "", "", "", "")
            continue
        table.add_row(name, f"{r['ndcg@10']:.4f}", f"{r['recall@100']:.4f}", f"{r['mrr@10']:.4f}",
                      f"{r['latency_ms']['p50']:.2f}", f"{r['latency_ms']['p95']:.2f}")
    console.print(table)


from bara.cli.chat import register  # noqa: E402 - chat & memory commands live in their own module

register(app)

from bara.cli.funds import register as register_funds  # noqa: E402
register_funds(app)

from bara.cli.eval import register as register_eval  # noqa: E402 - eval ab/gate/tools/report
register_eval(eval_app)

from bara.cli.eval_rewrite import register as register_eval_rewrite  # noqa: E402 - eval rewrite
register_eval_rewrite(eval_app)

from bara.cli.db import register as register_db  # noqa: E402 - db start/stop/migrate
register_db(app)

from bara.cli.mcp import register as register_mcp  # noqa: E402 - bara mcp (MCP over stdio)
register_mcp(app)

from bara.cli.serve import register as register_serve  # noqa: E402 - serve and keys
register_serve(app)

from bara.cli.llm import register as register_llm  # noqa: E402 - llm serve-local
register_llm(app)


def main() -> None:
    warnings.showwarning = bara_warnings_as_notices(warnings.showwarning)
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except StoreFaultError as exc:  # a store fault no command caught: one line, not a traceback
        err.print("error: " + printable(str(exc)), markup=False, highlight=False)
        sys.exit(STORE_FAULT)
    except Exception as exc:  # a fault no command expected (a bug): one line, the traceback only when asked for
        if os.environ.get(DEBUG_ENV) == "1":
            raise
        err.print(f"error: internal error ({type(exc).__name__}: {printable(str(exc))}); this is a bug in bara: "
                  f"rerun with {DEBUG_ENV}=1 for the traceback and report it", markup=False, highlight=False)
        sys.exit(FAULT)
