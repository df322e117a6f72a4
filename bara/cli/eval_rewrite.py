"""`bara eval rewrite`: bara's follow-up queries against human standalone rewrites (``bara.eval.rewrite_eval``).

With ``--json`` stdout carries exactly one JSON object; otherwise a table per half. Progress goes
to stderr. A malformed conversations or corpus file exits 2 with ``error:`` and what to change.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bara.cli.common import fail
from bara.errors import BaraError
from bara.settings import load_settings


def register(eval_app: typer.Typer) -> None:
    """Add `rewrite` to the ``eval`` sub-app."""
    eval_app.command("rewrite")(eval_rewrite)


def eval_rewrite(conversations: Path = typer.Option(..., "--conversations",
                                                    help="JSONL, one conversation a line: {id, source, turns: "
                                                         "[{user, rewrite, peer_rewrite?, assistant?, passage_id?}]}"),
                 corpus: Optional[Path] = typer.Option(None, "--corpus", help="BEIR corpus .jsonl {_id,title,text} "
                                                       "holding the turns' passage_id (enables Recall@k)."),
                 k: int = typer.Option(5, "--k", min=1, max=100, help="Passages per search (Recall@k)."),
                 split: str = typer.Option("all", "--split", help="dev | test | all: halves by sha256(conversation "
                                                                  "id), as `eval calibrate` splits."),
                 json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Replay each conversation through the gated pipeline (the file's replies as the assistant's turns)
    and score its queries against the human rewrites: term precision / recall / F1 (QuReTeC) and,
    with --corpus, Recall@k; beside the raw, last2, first_last, human and peer queries."""
    from bara.eval.rewrite_eval import evaluate_rewrite
    from bara.retrieval.embedders import build_embedder

    if split not in ("dev", "test", "all"):
        fail(f"--split {split!r}: pass dev, test or all")
    try:
        settings = load_settings()
        err = Console(stderr=True, highlight=False)
        columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        with Progress(*columns, console=err, disable=json_out) as bar:
            task: dict[str, Any] = {}

            def step(stage: str, n: int, total: int) -> None:
                if stage not in task:
                    task[stage] = bar.add_task(stage, total=total)
                bar.update(task[stage], advance=n)

            result = evaluate_rewrite(conversations, corpus, k, split, settings, build_embedder(settings), step)
    except BaraError as exc:
        fail(str(exc))
    if json_out:
        print(json.dumps(result, sort_keys=True))
        return
    _print(result)


def _print(result: dict) -> None:
    console = Console(highlight=False)
    parts = {"all": result, **result.get("halves", {})}
    for half, part in parts.items():
        systems = part["systems"]
        cols = sorted({c for s in systems.values() for c in s})
        table = Table(title=f"{result['set']} — {half} ({part['n_turns']} turns after the first)")
        table.add_column("system")
        for c in cols:
            table.add_column(c, justify="right")
        for name, figs in systems.items():
            table.add_row(name, *[str(figs.get(c, "")) for c in cols])
        console.print(table)
