"""`bara chat` and `bara memory ...`: parse, call the pipeline and ``bara.memory.admin``, print.

``register(app)`` adds the commands to the main typer app. Answers go to
stdout; the per-turn timeline and notices go to stdout too in human mode, and
in ``--json`` mode stdout carries exactly one JSON object per turn (notices go
to stderr).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
from rich.console import Console
from rich.text import Text

from bara.app import Bara
from bara.cli.common import (fail, free_text, id_callback, k_option, new_sqlite, note_knowledge, open_bara, printable,
                             say)
from bara.datafiles import check_file, json_value, read_lines
from bara.errors import BaraError
from bara.memory.admin import TIERS, inspect_report, query_tier
from bara.observe import build_observer
from bara.domain import TurnAssistant
from bara.turn.gated import MODES
from bara.text.locator import locator
from bara.settings import load_settings
from bara.trace import HitRecord, TurnTrace

DEFAULT_USER = "local"
_PREVIEW = 200  # characters of a message or remembered turn shown per line (--json shows them whole)
_EXIT_WORDS = frozenset({"exit", "quit", ":q"})
SCRIPT = 'chat script (JSON lines {"user": "text"})'

console = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

memory_app = typer.Typer(help="Inspect, query and delete what bara remembers.", no_args_is_help=True)

DbOption = typer.Option(None, "--db", help="Store location (SQLite file). Default: settings / $BARA_DB.")
UserOption = typer.Option(DEFAULT_USER, "--user", help="User id whose memory is used.",
                          callback=id_callback("user id"))
ConversationOption = typer.Option(None, "--conversation", callback=id_callback("conversation id"),
                                  help="Resume this conversation.")


def register(app: typer.Typer) -> None:
    """Add `chat` and the `memory` group to ``app``."""
    app.command("chat")(chat)
    app.add_typer(memory_app, name="memory")


def _open(db: Optional[str], mode: str = "read") -> Bara:
    return open_bara(db, mode)


def _location(db: Optional[str]) -> str:
    """Where ``--db`` (or the settings) put the store; a bad setting exits 2 here."""
    try:
        return load_settings(db=db).db
    except BaraError as exc:
        fail(exc)


# ----------------------------------------------------------------------------- chat

@dataclass(frozen=True)
class ScriptLine:
    number: int
    text: str | None
    problem: str = ""


def read_script(path: Path) -> Iterator[ScriptLine]:
    """JSON lines ``{"user": "text"}``; blank lines are skipped, malformed ones reported (a byte-order
    mark or a stray non-UTF-8 byte spoils nothing: bara.datafiles)."""
    for number, raw in enumerate(read_lines(path, SCRIPT), 1):
        if raw.strip():
            yield parse_script_line(number, raw)


def parse_script_line(number: int, raw: str) -> ScriptLine:
    try:
        item = json_value(raw)
    except json.JSONDecodeError as exc:
        return ScriptLine(number, None, f"not JSON ({exc.msg})")
    if not isinstance(item, dict) or not isinstance(item.get("user"), str):
        return ScriptLine(number, None, 'expected an object like {"user": "text"}')
    return ScriptLine(number, item["user"])


def _interactive(prompts: Console) -> Iterator[str]:
    """Lines typed at ``prompts`` (stderr with --json: stdout carries only the turns' JSON objects)."""
    while True:
        try:
            line = prompts.input("[bold cyan]you>[/bold cyan] ")
        except EOFError:
            prompts.print()
            return
        if line.strip().lower() in _EXIT_WORDS:
            return
        yield line


def _scripted(path: Path, json_out: bool) -> Iterator[str]:
    out = err if json_out else console
    for line in read_script(path):
        if line.text is None:
            err.print(Text(f"{printable(str(path))}:{line.number}: skipped: {line.problem}"))
            continue
        if not json_out:
            out.print(Text("you> ", style="bold cyan") + Text(line.text))
        yield line.text


def _conversation(bara: Bara, assistant: TurnAssistant, user: str, conversation: Optional[str], new: bool,
                  notices: Console) -> str:
    if conversation is not None and not new:
        return assistant.open_conversation(user, conversation)
    known = conversation is not None and bara.conversations.get(user, conversation) is not None
    cid = assistant.open_conversation(user, conversation, create=True)
    notices.print(Text(f"{'resuming' if known else 'new'} conversation {cid} (user {user}); resume it with "
                       f"--conversation {cid}", style="dim"))
    return cid


def chat(mode: str = typer.Option("gated", "--mode", help="gated (bara), always (sliding-window RAG baseline) "
                                  "or agent (portfolio assistant; run `bara funds load` first)."),
         user: str = UserOption,
         conversation: Optional[str] = ConversationOption,
         new: bool = typer.Option(False, "--new", help="Create --conversation ID if it does not exist."),
         script: Optional[Path] = typer.Option(None, "--script", help='JSON lines {"user": "text"} to replay.'),
         json_out: bool = typer.Option(False, "--json", help="Print one JSON trace object per turn."),
         db: Optional[str] = DbOption,
         otlp: Optional[str] = typer.Option(None, "--otlp", help="Export each turn's spans and metrics over "
                                            "OTLP/HTTP to this URL, e.g. http://127.0.0.1:4318 (needs bara[otel]).")
         ) -> None:
    """Chat over the knowledge base, with a per-turn timeline of every retrieval decision."""
    if mode not in (*MODES, "agent"):
        fail(f"--mode must be one of {', '.join((*MODES, 'agent'))}, not {mode!r}")
    if script is not None:
        try:
            usable = any(line.text is not None for line in read_script(check_file(script, SCRIPT)))
        except BaraError as exc:
            fail(exc)
        if not usable:  # a JSON array or any other file: nothing would run, and exit 0 would say it had
            fail(f'{script} holds no usable line: pass JSON lines, one object like {{"user": "text"}} per line')
    created = new_sqlite(_location(db))
    bara, warming, observer = _open(db, "write"), None, None
    try:
        observer = build_observer(bara.settings, otlp, embedder=bara.embedder)
        if mode != "agent":  # the agent answers from fund data (`bara funds load`), not the knowledge base
            note_knowledge(bara, created)
        bara.check_vectors(write=True, say=say)
        # the gated pipeline, the always-retrieve baseline, or the domain plug-in's own assistant (the
        # tool-using portfolio agent), built before the first message so a bad mode or model fails now
        assistant = bara.assistant(mode)
        cid = _conversation(bara, assistant, user, conversation, new, err if json_out else console)
        messages = _scripted(script, json_out) if script else _interactive(err if json_out else console)
        warming = None if script else _warm_while_typing(bara)
        for message in messages:
            if warming is not None:  # the first turn starts once the warm-up is done (one store user at a time)
                warming.join()
            cid = _one_turn(bara, mode, user, message, cid, json_out, observer)
    except BaraError as exc:
        fail(str(exc))
    finally:
        _close(bara, warming, observer)


def _close(bara: Bara, warming: threading.Thread | None, observer: Any) -> None:
    if warming is not None:
        warming.join()  # never close the store under the warm-up's search
    if observer is not None:
        observer.shutdown()  # the spans and metrics still queued go out before the process ends
    bara.close()


def _warm_while_typing(bara: Bara) -> threading.Thread:
    """Load the model and the knowledge base's search caches while the user types the first message
    (the first turn otherwise pays them: ~150 ms on the demo store). A failure is left for that turn
    to report."""
    def warm() -> None:
        try:
            bara.warm()
        except BaraError:
            pass

    thread = threading.Thread(target=warm, name="bara-chat-warm", daemon=True)
    thread.start()
    return thread


def _one_turn(bara: Bara, mode: str, user: str, message: str, cid: str, json_out: bool,
              observer: Any = None) -> str:
    result = bara.turn(user, cid, message, mode=mode)
    if observer is not None:
        observer.turn(result.trace, message)
    if json_out:
        print(json.dumps(result.trace.to_json(), ensure_ascii=False), flush=True)
    else:
        console.print(Text("bara> ", style="bold green") + Text(result.answer))
        console.print(timeline(result.trace))
    bara.flush()  # the answer is out: store what the turn learned while the user reads it
    return result.conversation_id or cid


# ------------------------------------------------------------------------- timeline

def _hit(n: int, h: HitRecord) -> str:
    where = locator(h.section, "")  # "§7.4.1", "p. 4 §2.1 Title" (bara.text.locator)
    return f"[{n}] {h.source}{' ' + where if where else ''} {h.score:.2f}"


def _latency(latency: dict[str, float]) -> str:
    parts = [f"{k} {v:.1f}" for k, v in latency.items() if v and k != "total"]
    return " \u00b7 ".join(parts + [f"total {latency.get('total', 0.0):.1f} ms"])


def timeline_lines(trace: TurnTrace) -> list[tuple[str, str]]:
    """(label, text) rows of the compact timeline shown under an answer."""
    t = trace
    tiers = " \u00b7 ".join(f"{k} {t.tiers.get(k, 0)}" for k in TIERS)
    query = f' \u00b7 query "{t.retrieval_query[:80]}"' + (" (rewritten)" if t.rewritten else "")
    rows = [("gate", f"turn {t.turn} \u00b7 intent {t.intent} ({t.intent_source}, {t.intent_confidence:.2f})"
                     f" \u00b7 mode {t.behavior_mode} \u00b7 route {t.route}"),
            ("tiers", f"{tiers} \u00b7 retrieved {'yes' if t.retrieved else 'no'}" + (query if t.retrieved else ""))]
    if t.hits:
        rows.append(("hits", " \u00b7 ".join(_hit(n, h) for n, h in enumerate(t.hits, 1))))
    rows.append(("context", f"dropped by floor {t.dropped_by_floor} \u00b7 tokens added {t.context_tokens}"
                            f" (prompt {t.prompt_tokens}) \u00b7 generator {t.generator}"))
    rows.append(("latency", _latency(dict(t.latency_ms))))
    rows.append(("reasons", ", ".join(t.reasons)))
    rows += [("hook error", f"{e.point} {e.hook}: {e.error}") for e in t.hook_errors]
    return rows


def timeline(trace: TurnTrace) -> Text:
    out = Text()
    for label, text in timeline_lines(trace):
        out.append(f"  {label:>10} ", style="bold dim")
        out.append(text + "\n", style="dim")
    return out


# --------------------------------------------------------------------------- memory

def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False, default=str))


@memory_app.command("inspect")
def memory_inspect(user: str = UserOption,
                   conversation: Optional[str] = typer.Option(None, "--conversation",
                                                              callback=id_callback("conversation id"),
                                                              help="Also show this conversation's messages."),
                   json_out: bool = typer.Option(False, "--json", help="Print JSON."),
                   db: Optional[str] = DbOption) -> None:
    """Show a user's profile facts, notes, remembered Q&A, episodic memory (what they said, per
    conversation; JSON key "episodic") and conversations."""
    with _open(db) as bara:
        try:
            report = inspect_report(bara, user, conversation)
        except BaraError as exc:
            fail(str(exc))
    _print_json(report) if json_out else _print_inspect(report)


def _print_inspect(report: dict[str, Any]) -> None:
    console.print(Text(f"user {report['user']}", style="bold"))
    _section("profile", [f"{p['key']} = {p['value']}  (from: {p['from']})" for p in report["profile"]])
    _section("notes", [f"({n['kind']}) {n['text']}" for n in report["notes"]])
    _section("q&a", [q["question"] for q in report["qa"]])
    _print_episodic(report["episodic"])
    _section("conversations", [f"{c['id']}  {c['turns']} turns, {c['messages']} messages"
                               for c in report["conversations"]])
    if "messages" in report:
        _section("messages", [f"{m['seq']:>3} {m['role']}: {m['text'][:_PREVIEW]}" for m in report["messages"]])


def _print_episodic(episodic: dict[str, Any]) -> None:
    """Per conversation: its sessions, turns and dates, the names indexed, its latest remembered turns."""
    convs = episodic["conversations"]
    lines: list[str] = []
    for c in convs:
        dates = " \u2013 ".join(dict.fromkeys(d for d in (c["first_date"], c["last_date"]) if d))
        counts = f"{_many(c['sessions'], 'session')}, {_many(c['turns'], 'turn')}"
        lines.append(f"{c['conversation_id']}  {counts}" + (f", {dates}" if dates else ""))
        if c["names"]:
            more = c["names_left_out"]
            lines.append("    names: " + ", ".join(c["names"]) + (f" (+{more} more)" if more else ""))
        if c["remembered_left_out"]:
            lines.append(f"    ({_many(c['remembered_left_out'], 'earlier turn')} not shown)")
        lines += [f"    {' '.join(t['text'].split())[:_PREVIEW]}" for t in c["remembered"]]
    if episodic["conversations_left_out"]:
        lines.append(f"({_many(episodic['conversations_left_out'], 'older conversation')} not shown)")
    listed = len(convs) + episodic["conversations_left_out"]
    console.print(Text(f"episodic memory ({_many(listed, 'conversation')}, {_many(episodic['turns'], 'turn')})",
                       style="bold"))
    for line in lines or ["(none)"]:
        console.print(Text(f"  {line}"))


def _many(n: int, thing: str) -> str:
    return f"{n} {thing}" + ("" if n == 1 else "s")


def _section(title: str, lines: list[str]) -> None:
    console.print(Text(f"{title} ({len(lines)})", style="bold"))
    for line in lines or ["(none)"]:
        console.print(Text(f"  {line}"))


@memory_app.command("query")
def memory_query(text: str = typer.Argument(..., help="What to look for.", callback=free_text),
                 tier: str = typer.Option(..., "--tier", help="kb | profile | notes | qa"),
                 user: str = UserOption,
                 k: Optional[int] = k_option(),
                 json_out: bool = typer.Option(False, "--json", help="Print JSON."),
                 db: Optional[str] = DbOption) -> None:
    """Search one memory tier the way the pipeline would (the user's rows only)."""
    if tier not in TIERS:
        fail(f"--tier must be one of {', '.join(TIERS)}, not {tier!r}")
    with _open(db) as bara:
        try:
            bara.check_vectors(write=False)
            rows = query_tier(bara, tier, text, user, k or bara.settings.k)
        except BaraError as exc:
            fail(str(exc))
    if json_out:
        _print_json({"tier": tier, "query": text, "user": user, "results": rows})
        return
    _section(f"{tier} results for {text!r}", [" \u00b7 ".join(f"{k}: {v}" for k, v in r.items()) for r in rows])


@memory_app.command("forget")
def memory_forget(user: str = typer.Option(..., "--user", help="User whose memory to delete.",
                                           callback=id_callback("user id")),
                  key: Optional[str] = typer.Option(None, "--key", help="Delete only this profile fact.",
                                                    callback=id_callback("profile key")),
                  json_out: bool = typer.Option(False, "--json", help="Print JSON."),
                  db: Optional[str] = DbOption) -> None:
    """Delete one profile fact (--key), or everything about the user: profile, notes, Q&A, episodes,
    conversations."""
    with _open(db, "update") as bara:
        try:
            known = bara.profile.get(user)
            if key is not None and key not in known:
                fail(_unknown_key(user, key, sorted(known)))
            deleted = bara.forget(user, fact=key, conversations=True).to_json()
        except BaraError as exc:
            fail(exc)
    if json_out:
        _print_json({"user": user, "deleted": deleted})
        return
    console.print(Text(f"deleted for user {user}: " + ", ".join(f"{v} {_NOUNS[k][v != 1]}" for k, v in deleted.items())))


#: What ``memory forget`` says of each JSON key, in the singular and the plural ("1 conversation").
_NOUNS = {"profile": ("profile fact", "profile facts"), "notes": ("note", "notes"), "qa": ("q&a", "q&a"),
          "episodic": ("episode", "episodes"), "traces": ("turn trace", "turn traces"),
          "conversations": ("conversation", "conversations")}


def _unknown_key(user: str, key: str, known: list[str]) -> str:
    """What to change when --key names no stored profile fact (nothing is deleted)."""
    fix = (f"pass --key with one of {', '.join(map(repr, known))}" if known else
           "this user has no profile facts: check --user")
    return f"user {user!r} has no profile fact {key!r}; nothing was deleted: {fix}, or leave --key out to " \
           "forget everything about the user"
