"""Issue 16 QA of the command line and the library entry points: each test failed before its fix.

Patterns and helpers are those of the issue 15 tests (tests/cli/test_cli_bad_input.py): a user error
exits 2 with a message that says what to change, never a traceback; nothing is lost or created by
mistake.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bara.memory.knowledge import KnowledgeBase, discover
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore
from tests.cli.test_cli_bad_input import assert_clean_exit, invoke


# ---- a path given on its own to the library is one path, not a list of characters ----------------
def test_ingest_of_one_path_given_as_a_string_ingests_that_file(tmp_path, embedder, monkeypatch):
    monkeypatch.chdir(tmp_path)  # "a.txt" as characters: "a", ".", "t", "x", "t" ("." is this folder)
    Path("a.txt").write_text("Retransmission timers in TCP back off exponentially. " * 5)
    with SQLiteStore(tmp_path / "x.db") as store:
        report = KnowledgeBase(store, embedder, Settings(db=str(tmp_path / "x.db"))).ingest("a.txt")
    assert report.files_read == 1 and report.skipped == []


def test_prune_of_one_root_given_as_a_string_prunes_only_under_it(tmp_path, embedder):
    for name in ("docs", "other"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "gone.txt").write_text(f"A {name} file about congestion windows. " * 5)
    with SQLiteStore(tmp_path / "x.db") as store:
        kb = KnowledgeBase(store, embedder, Settings(db=str(tmp_path / "x.db")))
        kb.ingest([tmp_path / "docs", tmp_path / "other"])
        for name in ("docs", "other"):
            (tmp_path / name / "gone.txt").unlink()
        pruned = [o.path for o in kb.prune(str(tmp_path / "docs"))]  # as characters, "/" held every file
        assert pruned == [str((tmp_path / "docs" / "gone.txt").resolve())]
        assert store.list_sources() == [str((tmp_path / "other" / "gone.txt").resolve())]


def test_an_entry_that_cannot_be_examined_is_reported_and_the_rest_ingested(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("A good file about the retransmission timeout. " * 5)
    (docs / "locked.txt").write_text("cannot be examined")
    real = Path.is_file

    def is_file(self: Path) -> bool:  # a folder entry whose stat is refused (EACCES), as without search permission
        if self.name == "locked.txt":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)

    monkeypatch.setattr(Path, "is_file", is_file)
    files, skipped = discover([docs])
    assert files == [docs / "good.txt"]
    assert [(s.path, s.reason) for s in skipped] == [(str(docs / "locked.txt"), "unreadable: Permission denied")]


def test_a_pipe_named_outright_is_not_reported_as_missing(tmp_path):
    import os

    os.mkfifo(tmp_path / "pipe.txt")
    _, skipped = discover([tmp_path / "pipe.txt"])
    assert skipped[0].reason.startswith("unreadable: not a regular file")


# ---- settings: no NaN or infinity, floors are similarities, any settings file is an answer ---------
FLOAT_FIELDS = [n for n, f in Settings.model_fields.items() if f.annotation is float]


@pytest.mark.parametrize("content,says", [(None, "is a folder"), (b"bara = 3\n", "must be a table"),
                                          (b"\xef\xbb\xbfk = 7\n", None)])
def test_any_settings_file_is_read_or_refused_with_a_config_error(tmp_path, content, says):
    from bara.errors import ConfigError
    from bara.settings import load_settings

    path = tmp_path / "bara.toml"
    path.mkdir() if content is None else path.write_bytes(content)
    if says is None:  # a byte-order mark (Windows editors write one) is not a TOML error
        assert load_settings(environ={"BARA_CONFIG": str(path)}).k == 7
        return
    with pytest.raises(ConfigError, match=says):
        load_settings(environ={"BARA_CONFIG": str(path)})


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_no_float_setting_takes_nan_or_infinity(value):
    from bara.errors import ConfigError
    from bara.settings import load_settings

    taken = []
    for name in FLOAT_FIELDS:
        try:
            load_settings(environ={f"BARA_{name.upper()}": value})
            taken.append(name)
        except ConfigError as exc:
            assert name in str(exc)
    assert taken == []


@pytest.mark.parametrize("field", ["floor_kb", "floor_continuation", "floor_general", "floor_qa"])
def test_route_floors_are_cosine_similarities(field):
    from bara.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        Settings().override(**{field: 5.0})
    assert getattr(Settings().override(**{field: -1.0}), field) == -1.0


def test_an_infinite_weight_is_refused_by_the_cli_not_printed_as_infinity(tmp_path, rfc_kb):
    from typer.testing import CliRunner

    from bara.cli import app

    env = {"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_MODEL": "", "BARA_WEIGHT_DENSE": "inf"}
    result = CliRunner().invoke(app, ["search", "tcp", "--json", "--db", str(rfc_kb("round2_kb"))], env=env)
    assert_clean_exit(result, 2)
    assert "weight_dense" in result.output and "Infinity" not in result.output


@pytest.mark.parametrize("db", ["", "  "], ids=["empty", "spaces"])
@pytest.mark.parametrize("args", [["ingest", "FILE"], ["search", "tcp"], ["db", "migrate"], ["keys", "create", "--user", "a"]],
                         ids=lambda a: " ".join(a[:2]))
def test_a_blank_db_is_named_blank_and_creates_nothing(tmp_path, monkeypatch, args, db):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.txt").write_text("Retransmission timers in TCP back off exponentially. " * 5)
    result = invoke([*(str(tmp_path / "a.txt") if a == "FILE" else a for a in args), "--db", db], tmp_path)
    assert_clean_exit(result, 2)
    assert "db: Value error, is blank" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]


# ---- stores: a folder as --db, a store another process holds --------------------------------------
@pytest.mark.parametrize("args", [["search", "tcp"], ["ingest", "DOCS"], ["memory", "inspect"], ["funds", "load"],
                                  ["chat", "--script", "DOCS/s.jsonl"]], ids=lambda a: " ".join(a[:2]))
def test_a_folder_as_db_is_named_as_a_folder(tmp_path, args):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "s.jsonl").write_text('{"user": "hi"}\n')
    result = invoke([*(a.replace("DOCS", str(docs)) for a in args), "--db", str(docs)], tmp_path)
    assert_clean_exit(result, 2)
    assert f"{docs} is a folder" in result.output and "bara.db" in result.output
    assert "corrupt" not in result.output and "bara ingest PATH --db" not in result.output
    assert sorted(p.name for p in docs.iterdir()) == ["s.jsonl"]


def test_a_store_locked_by_another_process_is_a_busy_error_not_a_traceback(tmp_path):
    import sqlite3

    from typer.testing import CliRunner

    from bara.cli import app

    db = tmp_path / "x.db"
    SQLiteStore(db).close()
    (tmp_path / "a.txt").write_text("Retransmission timers in TCP back off exponentially. " * 5)
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process mid-write
    try:
        env = {"BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_MODEL": "", "BARA_STORE_BUSY_TIMEOUT_S": "0.05"}
        result = CliRunner().invoke(app, ["ingest", str(tmp_path / "a.txt"), "--db", str(db)], env=env)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_clean_exit(result, 3)  # a store fault, not bad input (issue 33: the README's exit codes)
    assert f"{db} is busy" in result.output and "Retry" in result.output


# ---- commands that change an existing store never create one on a mistyped --db -------------------
@pytest.mark.parametrize("args", [["db", "reembed"], ["db", "migrate"],
                                  ["eval", "golden", "--case", "num-value-asha", "--json"]],
                         ids=lambda a: " ".join(a[:2]))
def test_store_changing_commands_refuse_a_missing_store_and_create_nothing(tmp_path, args):
    db = tmp_path / "typo" / "bara.db"
    result = invoke([*args, "--db", str(db)], tmp_path)
    assert_clean_exit(result, 2)
    assert f"no store at {db}" in result.output
    assert not db.parent.exists()


@pytest.mark.parametrize("env", [{}, {"BARA_K": "many"}], ids=["text file", "bad BARA_K"])
def test_db_migrate_of_an_unusable_store_or_setting_exits_2(tmp_path, env):
    from typer.testing import CliRunner

    from bara.cli import app

    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a store\n")
    result = CliRunner().invoke(app, ["db", "migrate", "--db", str(notes)],
                                env={"BARA_CACHE_DIR": str(tmp_path / "cache"), **env})
    assert_clean_exit(result, 2)
    assert ("BARA_K" in env and "k:" in result.output) or "not a SQLite database" in result.output
    assert notes.read_text() == "my notes, not a store\n"


def test_another_programs_file_as_db_is_not_called_damaged(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a store\n" * 50)
    result = invoke(["search", "tcp", "--db", str(notes)], tmp_path)
    assert_clean_exit(result, 2)
    assert "not a SQLite database" in result.output and "damaged" not in result.output


def test_db_start_on_a_file_exits_2_and_leaves_the_file_alone(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me\n")
    result = invoke(["db", "start", "--dir", str(notes)], tmp_path)
    assert_clean_exit(result, 2)
    assert "is a file, not a folder" in result.output and notes.read_text() == "keep me\n"


@pytest.mark.parametrize("args", [["ingest", "FILE"], ["chat", "--script", "SCRIPT"], ["keys", "create", "--user", "a"],
                                  ["funds", "load", "--no-index"], ["search", "tcp"]], ids=lambda a: " ".join(a[:2]))
def test_an_in_memory_store_is_refused_by_one_shot_commands(tmp_path, args):
    (tmp_path / "a.txt").write_text("Retransmission timers in TCP back off exponentially. " * 5)
    (tmp_path / "s.jsonl").write_text('{"user": "hello"}\n')
    paths = {"FILE": str(tmp_path / "a.txt"), "SCRIPT": str(tmp_path / "s.jsonl")}
    result = invoke([*(paths.get(a, a) for a in args), "--db", ":memory:"], tmp_path)
    assert_clean_exit(result, 2)
    assert "keeps nothing once this command ends" in result.output and "bara_" not in result.stdout



# ---- the library's search and turn refuse what they cannot mean --------------------------------------
@pytest.fixture(scope="module")
def kb_bara(rfc_kb):
    from bara.app import Bara

    with Bara.open(db=str(rfc_kb("round2_lib"))) as bara:
        yield bara


@pytest.mark.parametrize("kwargs", [{"k": 0}, {"k": -1}, {"k": 2.5}, {"k": "3"}, {"k": True},
                                    {"floor": float("nan")}, {"floor": 2.0}, {"floor": -1.5}],
                         ids=lambda kw: repr(kw))
def test_search_refuses_a_k_or_floor_it_cannot_mean(kb_bara, kwargs):
    from bara.errors import InputError

    with pytest.raises(InputError, match="k must be a whole number|floor must be a cosine similarity"):
        kb_bara.retriever.search("tcp retransmission", **kwargs)


def test_search_keeps_its_numbers_at_the_edges(kb_bara):
    import numpy as np

    assert len(kb_bara.retriever.search("tcp retransmission", k=np.int64(2), floor=-1.0).hits) == 2
    assert len(kb_bara.retriever.search("tcp retransmission", k=1, floor=1).hits) <= 1


@pytest.mark.parametrize("bad", [None, 5, ["hi"]], ids=repr)
def test_a_message_or_query_that_is_not_text_is_an_input_error(kb_bara, bad):
    from bara.errors import InputError
    from bara.turn.gated import Assistant

    with pytest.raises(InputError, match="must be text"):
        kb_bara.retriever.search(bad)
    with pytest.raises(InputError, match="a message must be text"):
        Assistant(kb_bara).turn("round2-user", bad)
    assert kb_bara.conversations.list("round2-user") == []  # nothing stored


@pytest.mark.parametrize("tier,k,says", [("bogus", 3, "tier must be one of"), ("notes", -1, "not -1"),
                                         ("profile", 0, "not 0")])
def test_query_tier_refuses_an_unknown_tier_or_a_k_below_1(kb_bara, tier, k, says):
    from bara.errors import InputError
    from bara.memory.admin import query_tier

    with pytest.raises(InputError, match=says):
        query_tier(kb_bara, tier, "retransmission", "round2-user", k)


# ---- chat: --json keeps stdout to JSON when typed at; --new on a known id says it resumes -----------
def test_interactive_chat_json_prints_only_json_on_stdout(tmp_path, rfc_kb):
    import json

    db = str(rfc_kb("round2_chat"))
    result = invoke(["chat", "--json", "--db", db], tmp_path, stdin="what is a retransmission timeout?\nthanks\n")
    assert_clean_exit(result, 0)
    turns = [json.loads(line) for line in result.stdout.splitlines() if line.strip()]
    assert [t["turn"] for t in turns] == [1, 2]


def test_chat_new_on_a_known_conversation_says_it_resumes(tmp_path, rfc_kb):
    db = str(rfc_kb("round2_resume"))
    first = invoke(["chat", "--db", db, "--conversation", "c1", "--new", "--json"], tmp_path, stdin="hello\n")
    again = invoke(["chat", "--db", db, "--conversation", "c1", "--new", "--json"], tmp_path, stdin="hello again\n")
    assert_clean_exit(again, 0)
    assert "new conversation c1" in first.stderr and "resuming conversation c1" in again.stderr
    assert '"turn": 2' in again.stdout


@pytest.mark.parametrize("content", [b"", b'[{"user": "hi"}]\n', bytes(range(256)) * 4], ids=["empty", "array", "binary"])
def test_a_chat_script_with_no_usable_line_exits_2_and_stores_nothing(tmp_path, content):
    script = tmp_path / "s.json"
    script.write_bytes(content)
    result = invoke(["chat", "--script", str(script), "--json", "--db", str(tmp_path / "x.db")], tmp_path)
    assert_clean_exit(result, 2)
    assert "holds no usable line" in result.output and result.stdout == ""
    assert not (tmp_path / "x.db").exists()


# ---- every id-like option refuses bytes that are not UTF-8 (a UnicodeEncodeError traceback before) ------
@pytest.mark.parametrize("argv", [[b"keys", b"create", b"--user", b"\xff"], [b"keys", b"list", b"--user", b"\xff"],
                                  [b"keys", b"revoke", b"\xff"], [b"memory", b"forget", b"--user", b"u", b"--key", b"\xff"],
                                  [b"eval", b"tools", b"--bfcl", b"BFCL", b"--model", b"openai:\xff"],
                                  [b"mcp", b"--user", b"\xff"]], ids=lambda a: b" ".join(a[:2]).decode())
def test_undecodable_ids_exit_2_in_a_real_process(tmp_path, data_dir, argv):
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    db = tmp_path / "k.db"
    SQLiteStore(db).close()
    bfcl = os.fsencode(data_dir / "bfcl" / "BFCL_v4_irrelevance.jsonl")
    args = [bfcl if a == b"BFCL" else a for a in argv] + ([] if argv[0] == b"eval" else [b"--db", os.fsencode(db)])
    env = {**os.environ, "PYTHONPATH": str(root), "BARA_CACHE_DIR": str(tmp_path / "cache"), "LC_ALL": "C.UTF-8",
           "OPENAI_API_KEY": "x"}
    proc = subprocess.run([sys.executable.encode(), b"-m", b"bara.cli", *args], env=env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr and b"UTF-8" in proc.stderr


# ---- text from documents, ids and paths is shown as written, never parsed as rich markup ----------
def test_search_shows_a_document_with_square_brackets_as_written(tmp_path):
    (tmp_path / "m.md").write_text("# Timers\n\nThe retransmission timer [/bold] closes [red]early[/red]; see "
                                   "[link](http://x) and [/foo] in the notes about retransmission timers.\n")
    db = str(tmp_path / "m.db")
    assert_clean_exit(invoke(["ingest", str(tmp_path / "m.md"), "--db", db], tmp_path), 0)
    for query in ("retransmission timer", "[/bold] retransmission"):
        result = invoke(["search", query, "--db", db], tmp_path)
        assert_clean_exit(result, 0)
        assert "[/bold] closes [red]early[/red]" in result.output


def test_keys_list_shows_a_user_id_with_square_brackets(tmp_path):
    db = str(tmp_path / "k.db")
    assert_clean_exit(invoke(["keys", "create", "--user", "[/x]", "--db", db], tmp_path), 0)
    result = invoke(["keys", "list", "--db", db], tmp_path)
    assert_clean_exit(result, 0)
    assert "[/x]" in result.output


# ---- every command that ranks by vectors checks which embedder made them ---------------------------
def _stamped_by_another_embedder(rfc_kb, name: str) -> str:
    db = str(rfc_kb(name))
    with SQLiteStore(db) as store:
        store.execute("INSERT INTO store_meta (key, value, updated_at) VALUES ('embedder', 'some-other-model@128', 0) "
                      "ON CONFLICT (key) DO UPDATE SET value = excluded.value")
    return db


def test_funds_tool_refuses_a_store_of_another_embedder(tmp_path, rfc_kb):
    db = _stamped_by_another_embedder(rfc_kb, "round2_other_tool")
    args = ["funds", "tool", "search_documents", "--user", "u_asha", "--args", '{"query": "expense ratio"}']
    result = invoke([*args, "--db", db], tmp_path)
    assert_clean_exit(result, 2)
    assert "store vectors were made by some-other-model@128" in result.output and "bara db reembed" in result.output


def test_mcp_re_embeds_a_store_of_another_embedder_before_serving(tmp_path, rfc_kb):
    db = _stamped_by_another_embedder(rfc_kb, "round2_other_mcp")
    result = invoke(["mcp", "--user", "u1", "--db", db], tmp_path, stdin="")
    assert result.exit_code == 0, result.output
    assert "store vectors were made by some-other-model@128; re-embedding" in result.stderr
