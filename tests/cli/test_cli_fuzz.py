"""Property tests over the CLI's arguments, query text, file names and file contents.

Whatever the input — invalid UTF-8 (arriving as lone surrogates, as Python decodes argv), control
characters, full-text syntax, absurd numbers — every command ends with a result (exit 0, or 1 for a
tool's error envelope) or a typed error with exit code 2: never a traceback. Tool JSON arguments are
fuzzed in the provider-fault suite.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from bara.cli import app

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()
ODD = ["\udcff", "\ud800", "\udc80", "\x00", "\x1b[31m", "\r\n", "\t", "\u202e", "\ufeff", "'", '"', "*", "NEAR(",
       " OR ", "--", ";", "%", "\\", "\u00e9", "\U0001f600", "[page 1]", "RFC 1  ", "#", "\f", " " * 50]
odd_text = st.lists(st.one_of(st.characters(), st.sampled_from(ODD)), max_size=25).map("".join)
number_text = st.one_of(st.integers(-10**6, 10**6).map(str), st.sampled_from(["nan", "inf", "-inf", "1e309", "0x10",
                                                                              "", " ", "1.5", "-0", "٣"]), odd_text)
FUZZ = settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
FEW = settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def run(args: list[str], tmp: Path, codes: tuple[int, ...] = (0, 2)):
    result = runner.invoke(app, args, env={"BARA_CACHE_DIR": str(tmp / "cache"), "BARA_MODEL": ""})
    assert result.exception is None or isinstance(result.exception, SystemExit), (args, repr(result.exception))
    assert result.exit_code in codes, (args, result.exit_code, result.output[-800:])
    assert "Traceback" not in result.output
    return result


@pytest.fixture(scope="module")
def kb_db(rfc_kb) -> str:
    return str(rfc_kb("fuzz_kb"))


@FUZZ
@given(query=odd_text, k=st.one_of(st.none(), number_text), floor=st.one_of(st.none(), number_text))
def test_search_never_tracebacks(kb_db, tmp_path_factory, query, k, floor):
    args = ["search", query, "--json", "--db", kb_db]
    args += ["--k", k] if k is not None else []
    args += ["--floor", floor] if floor is not None else []
    result = run(args, tmp_path_factory.getbasetemp())
    if result.exit_code == 0:
        assert json.loads(result.stdout)["status"] in ("ok", "empty", "degraded")


@FUZZ
@given(user=odd_text, conversation=st.one_of(st.none(), odd_text))
def test_memory_inspect_never_tracebacks(kb_db, tmp_path_factory, user, conversation):
    args = ["memory", "inspect", "--user", user, "--json", "--db", kb_db]
    args += ["--conversation", conversation] if conversation is not None else []
    run(args, tmp_path_factory.getbasetemp())


@FEW
@given(text=odd_text, tier=st.one_of(st.sampled_from(["kb", "profile", "notes", "qa"]), odd_text),
       user=odd_text, k=st.one_of(st.none(), number_text))
def test_memory_query_never_tracebacks(kb_db, tmp_path_factory, text, tier, user, k):
    args = ["memory", "query", text, "--tier", tier, "--user", user, "--json", "--db", kb_db]
    args += ["--k", k] if k is not None else []
    run(args, tmp_path_factory.getbasetemp())


@FUZZ
@given(name=st.one_of(st.sampled_from(["get_holdings", "compute_xirr", "search_documents"]), odd_text),
       user=odd_text)
def test_funds_tool_names_and_users_never_traceback(kb_db, tmp_path_factory, name, user):
    run(["funds", "tool", name, "--user", user, "--json", "--db", kb_db], tmp_path_factory.getbasetemp(),
        codes=(0, 1, 2))


@FUZZ
@given(db=odd_text)
def test_any_db_path_for_readers_is_an_answer_or_a_typed_error(tmp_path_factory, db):
    tmp = tmp_path_factory.mktemp("db")
    os.chdir(tmp)  # relative fuzzed paths land in a private folder
    try:
        for args in (["search", "x"], ["funds", "users"], ["memory", "inspect"]):
            run([*args, "--db", db], tmp)
    finally:
        os.chdir(ROOT)


@FUZZ
@given(k=number_text, limit=number_text, arms=odd_text)
def test_eval_arguments_are_validated(tmp_path_factory, k, limit, arms):
    tmp = tmp_path_factory.getbasetemp()
    missing = str(tmp / "missing.jsonl")
    run(["eval", "ab", "--tasks", missing, "--corpus", missing, "--k", k, "--limit", limit, "--judge-sample", "0"],
        tmp)
    run(["eval", "retrieval", "--corpus", missing, "--queries", missing, "--qrels", missing, "--arms", arms], tmp)


file_names = st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"/", b"_").replace(b"\x00", b"_")).filter(
    lambda b: b not in (b".", b".."))
contents = st.one_of(st.binary(max_size=3000), odd_text.map(lambda t: t.encode("utf-8", "surrogateescape")))


@FEW
@given(files=st.lists(st.tuples(file_names, contents), min_size=1, max_size=4, unique_by=lambda f: f[0]))
def test_ingest_of_any_names_and_contents_never_tracebacks(tmp_path_factory, files):
    tmp = tmp_path_factory.mktemp("ingest")
    folder = os.fsencode(tmp / "docs")
    os.mkdir(folder)
    for name, data in files:
        with open(os.path.join(folder, name + b".txt"), "wb") as fh:
            fh.write(data)
    result = run(["ingest", os.fsdecode(folder), "--json", "--db", str(tmp / "x.db")], tmp)
    summary = json.loads(result.stdout)
    assert summary["files_read"] + len(summary["skipped"]) == len(files)


@FEW
@given(lines=st.lists(st.one_of(odd_text.map(lambda t: json.dumps({"user": t})), odd_text), min_size=1, max_size=3))
def test_chat_script_of_any_lines_never_tracebacks(kb_db, tmp_path_factory, lines):
    tmp = tmp_path_factory.mktemp("chat")
    script = tmp / "s.jsonl"
    script.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    run(["chat", "--script", str(script), "--json", "--user", "fuzz", "--db", kb_db], tmp)


@pytest.mark.parametrize("argv", [[b"search", b"caf\xe9 \xff\xfe tls"], [b"memory", b"inspect", b"--user", b"\xff"],
                                  [b"funds", b"tool", b"get_holdings", b"--user", b"\xc3"]])
def test_invalid_utf8_argv_in_a_real_process(kb_db, tmp_path, argv):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "BARA_CACHE_DIR": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "1",
           "LC_ALL": "C.UTF-8"}
    proc = subprocess.run([sys.executable.encode(), b"-m", b"bara.cli", *argv, b"--db", kb_db.encode()], env=env,
                          capture_output=True, timeout=300)
    assert proc.returncode in (0, 2), proc.stderr[-2000:]
    assert b"Traceback" not in proc.stderr
