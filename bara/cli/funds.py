"""`bara funds load|users|tool` and `bara eval golden`: parse, call the library, print.

Registered on the main app by :func:`register` (see bara/cli/__init__.py).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, List, Optional

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from bara.app import Bara
from bara.cli.common import BAD_INPUT, FAULT, fail, id_callback, open_bara, say, shown
from bara.errors import BaraError
from bara.types import SHARED

console = Console()
err = Console(stderr=True)

DbOption = typer.Option(None, "--db", help="Store location (SQLite file). Default: settings / $BARA_DB.")
DataOption = typer.Option(None, "--data", envvar="BARA_DATA",
                          help="Shared data folder (holding amfi/ and mtrag/). Default: $BARA_DATA, else settings.")
JsonOption = typer.Option(False, "--json", help="Print JSON.")


def register(app: typer.Typer) -> None:
    """Add the ``funds`` group and ``eval golden`` to the ``bara`` app."""
    funds = typer.Typer(help="Mutual-fund portfolio assistant: AMFI data, demo users, tools.", no_args_is_help=True)
    funds.command("load")(load)
    funds.command("users")(users)
    funds.command("tool")(tool)
    app.add_typer(funds, name="funds")
    _eval_group(app).command("golden")(golden)


def _eval_group(app: typer.Typer) -> typer.Typer:
    for group in app.registered_groups:
        if group.name == "eval" and group.typer_instance is not None:
            return group.typer_instance
    group_app = typer.Typer(help="Evaluations.", no_args_is_help=True)
    app.add_typer(group_app, name="eval")
    return group_app


def _open(db: Optional[str], mode: str = "read", **overrides: Any) -> Bara:
    return open_bara(db, mode, **overrides)


def _data_dir(bara: Bara, data: Optional[Path]) -> Path:
    return Path(data or bara.settings.data_dir).expanduser()


# ------------------------------------------------------------------------ load
def load(data: Optional[Path] = DataOption, db: Optional[str] = DbOption,
         index: bool = typer.Option(True, "--index/--no-index", help="Index fact sheets and FiQA passages."),
         sheets: str = typer.Option("all", "--sheets", help="Fact sheets to index: 'all' schemes with NAVs "
                                                            "(minutes on a laptop) or 'held' (demo portfolios only)."),
         json_out: bool = JsonOption) -> None:
    """Load AMFI schemes and NAVs, create the demo users, and index the funds_docs collection."""
    if sheets not in ("all", "held"):
        fail(f"--sheets must be 'all' or 'held', not {sheets!r}")
    try:
        with _open(db, "write") as bara:
            bara.check_vectors(write=True, say=say)
            summary = _load(bara, _data_dir(bara, data), index and sheets, quiet=json_out)
    except BaraError as exc:
        fail(exc)
    if json_out:
        print(json.dumps(summary))
        return
    amfi, docs = summary["amfi"], summary["docs"]
    console.print(f"AMFI: {amfi['schemes']} schemes, {amfi['navs']} NAVs of {amfi['nav_schemes']} schemes "
                  f"({amfi['first_date']} to {amfi['last_date']}), {amfi['skipped_navs']} unusable NAV rows skipped"
                  + (f", {amfi['skipped_schemes']} cut-off scheme rows skipped" if amfi["skipped_schemes"] else ""))
    console.print(f"demo users: {', '.join(summary['users'])}")
    if docs:
        console.print(f"funds_docs: {docs['written']} written, {docs['unchanged']} unchanged, "
                      f"{docs['removed']} removed, {docs['chunks']} chunks, {docs['seconds']:.1f} s")


def _load(bara: Bara, data: Path, sheets: str | bool, quiet: bool) -> dict[str, Any]:
    """``sheets``: False (no indexing), "all" or "held".

    Not one transaction: indexing embeds for minutes and is resumable (unchanged documents are skipped),
    so it commits document by document. Instead the corpus is read first (a missing or damaged one stores
    nothing), and a failure while indexing says what was stored, what was not, and how to finish."""
    from bara.domains.funds import create_demo_users, fiqa_documents, load_amfi
    from bara.domains.funds.assistant import CORPUS

    if sheets:
        try:
            fiqa_documents(data / CORPUS)  # read before anything is stored
        except BaraError as exc:
            fail(f"{exc}\nnothing was stored: pass --data with a folder holding amfi/ and {CORPUS}, or pass "
                 "--no-index to load the AMFI data and demo users without the funds_docs index")
    columns = (TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, disable=quiet) as bar:
        step = bar.add_task("AMFI data", total=2)
        with bara.store.transaction():  # both or neither: a refused load must not leave users without NAVs
            report = load_amfi(bara.store, data)
            bar.update(step, advance=1, description="demo users")
            ids = create_demo_users(bara.store)
        bar.update(step, advance=1)
        docs = _index(bara, data, sheets, bar, vars(report), ids) if sheets else None
    return {"amfi": vars(report), "users": ids, "docs": vars(docs) if docs else None}


def _index(bara: Bara, data: Path, sheets: str | bool, bar: Progress, amfi: dict[str, Any], ids: list[str]) -> Any:
    """The funds_docs index; a failure exits 2 naming what is stored (AMFI data, users, some documents)."""
    from bara.domains.funds.assistant import index_fund_documents

    from bara.domains.funds import FundsRepo

    codes = None if sheets == "all" else FundsRepo(bara.store).held_codes()
    seen = {"total": 0, "done": 0}
    try:
        return index_fund_documents(bara, data, codes=codes, progress=_doc_progress(bar, seen))
    except BaraError as exc:
        fail(partial_load(exc, amfi, ids, seen, bara.settings.db, data, sheets))


def partial_load(exc: BaraError, amfi: dict[str, Any], ids: list[str], seen: dict[str, int], db: str,
                 data: Path, sheets: str | bool) -> str:
    """What a load that failed while indexing stored, what it did not, and the command that finishes it."""
    again = f"bara funds load --db {shlex.quote(db)} --data {shlex.quote(str(data))}" + \
        (" --sheets held" if sheets == "held" else "")
    return (f"{exc}\nstored: AMFI data ({amfi['schemes']} schemes, {amfi['navs']} NAVs) and the demo users "
            f"{', '.join(ids)}; {seen['done']} of {seen['total']} funds_docs documents were indexed before the "
            f"failure (each is stored whole).\nnot stored: the rest of the funds_docs index (fact sheets and FiQA "
            f"passages: search_documents finds nothing or only part).\nto finish: fix the cause above and run "
            f"`{again}` again (the AMFI data is reloaded, indexed documents are skipped); the portfolio tools "
            "already work without the index")


def _doc_progress(bar: Progress, seen: dict[str, int]):  # noqa: ANN202 - returns the progress callback
    task = bar.add_task("funds_docs", total=None)

    def step(source: str, n: int) -> None:
        if source == "total":
            seen["total"] = n
            bar.update(task, total=n)
        else:
            seen["done"] += n
            bar.update(task, advance=n)
    return step


# ----------------------------------------------------------------------- users
def users(json_out: bool = JsonOption, db: Optional[str] = DbOption) -> None:
    """List the demo users' ids (JSON: a list of strings)."""
    from bara.domains.funds import FundsRepo

    try:
        with _open(db) as bara:
            rows = FundsRepo(bara.store).users()
    except BaraError as exc:
        fail(exc)
    if not rows:
        err.print("no demo users in this store: run `bara funds load` (with the same --db) first")
    if json_out:
        print(json.dumps([r[0] for r in rows]))
        return
    table = Table(title="demo users")
    for col in ("id", "name", "transactions"):
        table.add_column(col)
    for uid, name, count in rows:
        table.add_row(shown(uid), shown(name), str(count))
    console.print(table)


# ------------------------------------------------------------------------ tool
def tool(name: str = typer.Argument(..., help="Tool name, e.g. get_holdings."),
         user: str = typer.Option(..., "--user", help="The signed-in user id the tool runs for.",
                                  callback=id_callback("user id")),
         args: str = typer.Option("{}", "--args", help="Tool arguments as a JSON object."),
         json_out: bool = JsonOption, db: Optional[str] = DbOption) -> None:
    """Call one tool as the agent runtime would for USER and print its result envelope.

    Exit 0 on ok; 2 when the input must change (``--args`` not a usable JSON object, arguments the tool
    refuses, an unknown tool or user: the envelope's error says what to change); 1 when the tool itself
    failed (crashed, timed out, or lacks what the session should provide).
    """
    try:
        with _open(db) as bara:
            bara.check_vectors(write=False)  # search_documents must not rank with another embedder's vectors
            result = call_tool(bara, name, user, args)
    except BaraError as exc:
        fail(exc)
    envelope = json.dumps(result.envelope(), ensure_ascii=False)
    print(envelope) if json_out else console.print_json(envelope)
    if not result.ok:
        raise typer.Exit(BAD_INPUT if result.bad_input else FAULT)


def call_tool(bara: Bara, name: str, user: str, args: str) -> Any:
    """The :class:`~bara.agent.tools.ToolResult` of one tool call with ``args`` as JSON text; an unknown
    user is a refused input, like an unknown tool or arguments the tool refuses."""
    from bara.agent.tools import ToolContext, ToolResult, ToolServices, parse_tool_args, run_tool
    from bara.domains.funds import FundsRepo, build_fund_tools

    parsed = parse_tool_args(args, bara.settings.tool_args_max_depth)  # unusable --args first, whoever the user
    if isinstance(parsed, str):
        return ToolResult(ok=False, error=parsed, bad_input=True)
    repo = FundsRepo(bara.store)
    if repo.user_name(user) is None:
        return ToolResult(ok=False, bad_input=True,
                          error=f"user: {user!r} is not a funds user here; pick one from `bara funds users`")
    ctx = ToolContext.start(user, bara.store, bara.settings, ToolServices(retriever=bara.retriever, domain={"funds": repo}))
    with bara.store.scoped((SHARED, user)):  # as in an agent turn: the database sees only this user
        return run_tool(build_fund_tools(), name, args, ctx)


# ---------------------------------------------------------------------- golden
def golden(json_out: bool = JsonOption, db: Optional[str] = DbOption,
           gate_tools: Optional[bool] = typer.Option(None, "--gate-tools/--no-gate-tools",
                                                     help="Override agent_gate_tools for this run."),
           case: Optional[List[str]] = typer.Option(None, "--case", help="Only cases whose id starts with this "
                                                                         "(repeatable)."),
           split: str = typer.Option("all", "--split", help="dev (tuned on), test (held out) or all."),
           model: Optional[str] = typer.Option(None, "--model", callback=id_callback("model name"), help="LLM as provider:name (openai:..., "
                                               "anthropic:..., or openai:<name> with llm_base_url for a local "
                                               "server); default: BARA_MODEL, else the offline rule router."),
           verbose: bool = typer.Option(False, "--verbose", "-v", help="Show every case, not only failures.")) -> None:
    """Golden set of the portfolio assistant: numeric, retrieval, refusal and tool-selection scores."""
    from bara.domains.funds.golden_cases import SPLITS, cases_for

    if split not in (*SPLITS, "all"):
        fail(f"--split must be dev, test or all, not {split!r}")
    picked = [c for c in cases_for(split) if not case or c["id"].startswith(tuple(case))]
    if not picked:
        fail(f"no golden case id starts with {case}; see bara/domains/funds/data/golden_*.jsonl")
    try:
        if model is not None and (":" not in model or not all(model.split(":", 1))):
            fail(f"--model {model!r} must be provider:name, e.g. openai:gpt-4o-mini")
        with open_bara(db, "update", "bara funds load", **({"model": model} if model else {})) as bara:
            bara.check_vectors(write=True, say=say)  # as `bara chat --mode agent` does before its turns
            chosen = _golden_model(bara)
            report = _run_golden(bara, chosen, gate_tools, picked, quiet=json_out)
    except BaraError as exc:
        fail(exc)
    if json_out:
        print(json.dumps(report.to_json()))
        return
    _print_golden(report, verbose)


def _golden_model(bara: Bara) -> Any:
    """The configured model, or None (the offline router) after saying so on stderr."""
    from bara.llm.build import build_model

    model = build_model(bara.settings)
    if model is None:
        err.print("no model configured (pass --model provider:name or set BARA_MODEL): running the offline "
                  "rule router")
    return model


def _run_golden(bara: Bara, model: Any, gate_tools: Optional[bool], cases: list, quiet: bool) -> Any:
    from bara.domains.funds.golden import run_golden

    columns = (TextColumn("[bold]golden"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[case]}"))
    with Progress(*columns, console=err, disable=quiet) as bar:
        task = bar.add_task("golden", total=len(cases), case="")
        return run_golden(bara, model=model, gate_tools=gate_tools, cases=cases,
                          progress=lambda o: bar.update(task, advance=1, case=o.id))


def _print_golden(report: Any, verbose: bool) -> None:
    table = Table(title=f"golden set: model {shown(report.model)}, gate_tools {report.gate_tools}")
    for col in ("category", "passed", "total"):
        table.add_column(col)
    splits = report.splits()
    for col in splits:
        table.add_column(f"{col} passed/total")
    for name, score in report.categories().items():
        table.add_row(name, str(score["passed"]), str(score["total"]),
                      *[f"{v[name]['passed']}/{v[name]['total']}" for v in splits.values()])
    console.print(table)
    for o in report.outcomes:
        if verbose or not o.passed:
            mark = "[green]pass[/green]" if o.passed else "[red]FAIL[/red]"
            console.print(f"{mark} {shown(o.id)} ({o.category}) tools={shown(list(o.tools))}: {shown(o.detail)}")
    t = report.totals()
    console.print(f"{t['passed']}/{t['cases']} passed; {t['model_calls']} model calls, {t['tool_calls']} tool calls "
                  f"({t['searches']} searches), {t['tool_specs_offered']} tool specs offered "
                  f"(~{t['tool_spec_tokens']} tokens), {t['input_tokens']} input tokens reported, {t['seconds']:.1f} s")
