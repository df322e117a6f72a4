"""Exit codes of `bara` commands: 2 whenever the user's input must change (with a message saying what),
1 only for a runtime fault that is not the input."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from bara.agent.tools import Tool, ToolContext, ToolError, ToolInputError, run_tool, toolbox
from bara.app import Bara
from bara.cli import app
from bara.domains.funds.tools import NoArgs
from bara.memory.profile import ProfileFact
from bara.settings import Settings, load_settings
from bara.store.sqlite import SQLiteStore


def invoke(args: list[str], tmp) -> "object":
    return CliRunner().invoke(app, args, env={"BARA_CACHE_DIR": str(tmp / "cache")})


def test_forget_an_unknown_profile_key_is_bad_input_and_keeps_the_profile(tmp_path):
    """--key naming no stored fact: exit 2, the message names the stored keys, and nothing is deleted."""
    path = str(tmp_path / "mem.db")
    with Bara(load_settings(db=path)) as bara:
        bara.profile.set_facts("u1", [ProfileFact("location", "Pune", "I live in Pune")])
    result = invoke(["memory", "forget", "--user", "u1", "--key", "locaton", "--db", path], tmp_path)
    assert result.exit_code == 2, result.output
    assert "'location'" in result.output and "nothing was deleted" in result.output
    with Bara(load_settings(db=path)) as bara:
        assert bara.profile.get("u1") == {"location": "Pune"}


def test_forget_a_key_of_a_user_with_no_profile_says_to_check_the_user(tmp_path):
    path = str(tmp_path / "mem.db")
    SQLiteStore(path).close()
    result = invoke(["memory", "forget", "--user", "nobody", "--key", "location", "--db", path], tmp_path)
    assert result.exit_code == 2 and "check --user" in result.output


def _tools(fn) -> dict[str, Tool]:  # noqa: ANN001 - a tool body
    return toolbox([Tool("t", "test tool; never for real questions", NoArgs, fn, timeout_s=5.0)])


def _run(fn, args: str = "{}"):  # noqa: ANN001, ANN202
    ctx = ToolContext.start("u1", None, Settings())  # type: ignore[arg-type] - these tools use no store
    return run_tool(_tools(fn), "t", args, ctx)


def _refuses(ctx, args):  # noqa: ANN001, ANN202
    raise ToolInputError("scheme: nothing matches 'xyzzy'")


def _lacks(ctx, args):  # noqa: ANN001, ANN202
    raise ToolError("fund data is unavailable: the session has no store")


def _crashes(ctx, args):  # noqa: ANN001, ANN202
    raise RuntimeError("boom")


def test_tool_results_say_whether_the_call_or_the_tool_failed():
    """What `bara funds tool` turns into exit 2 (the call must change) or 1 (a fault of the tool)."""
    assert _run(_refuses).bad_input and _run(lambda c, a: {}, '{"x": 1}').bad_input
    assert _run(lambda c, a: {}, "{oops").bad_input
    assert not _run(_lacks).bad_input and not _run(_crashes).bad_input
    assert _run(lambda c, a: {"n": 1}).ok


def _main(monkeypatch, capsys, args: list[str]) -> tuple[int, str]:
    """`bara ARGS` through the console script's entry point, in this process: (exit code, stderr)."""
    import sys
    import warnings

    from bara.cli import main

    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)  # main() wraps it for the process
    monkeypatch.setattr(sys, "argv", ["bara", *args])
    with pytest.raises(SystemExit) as done:
        main()
    return int(done.value.code or 0), capsys.readouterr().err


def _fault(exc: BaseException):  # noqa: ANN202
    def opened(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise exc
    return opened


def test_an_unexpected_error_exits_1_with_one_line_and_no_traceback(monkeypatch, capsys, tmp_path):
    """A bug (an exception no command expects) is a runtime fault: exit 1, one line naming it and how to
    see more; the traceback only with BARA_DEBUG=1."""
    monkeypatch.setattr("bara.cli.open_bara", _fault(RuntimeError("the index is upside down")))
    code, err = _main(monkeypatch, capsys, ["search", "What is HSTS?", "--db", str(tmp_path / "kb.db")])
    assert code == 1
    assert "internal error (RuntimeError: the index is upside down)" in err and "BARA_DEBUG=1" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 3  # one message, wrapped at most
    monkeypatch.setenv("BARA_DEBUG", "1")
    with pytest.raises(RuntimeError, match="upside down"):  # the interpreter prints its traceback
        _main(monkeypatch, capsys, ["search", "What is HSTS?", "--db", str(tmp_path / "kb.db")])


def test_an_interrupted_command_exits_130_without_a_traceback(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr("bara.cli.open_bara", _fault(KeyboardInterrupt()))
    code, err = _main(monkeypatch, capsys, ["search", "What is HSTS?", "--db", str(tmp_path / "kb.db")])
    assert code == 130 and "Traceback" not in err


def test_sigint_during_an_ingest_exits_130_and_keeps_the_committed_documents(tmp_path):
    """A real Ctrl-C (SIGINT) while `bara ingest` writes its second file: exit 130, the message says the
    committed documents are whole, no traceback; the store holds the first file, whole, and not the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    folder = tmp_path / "docs"
    folder.mkdir()
    for i in range(4):
        (folder / f"note{i}.md").write_text(f"# Note {i}\n\n" + " ".join(
            f"Sentence {j} of note {i} says the retransmission timer doubles." for j in range(20)))
    db, marker = tmp_path / "kb.db", tmp_path / "reached"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root), "BARA_CACHE_DIR": str(tmp_path / "cache"), "BARA_MODEL": "",
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    child = Path(__file__).resolve().parents[1] / "crash_child.py"
    proc = subprocess.Popen([sys.executable, str(child), str(marker), "call:bara.store.sqlite:SQLiteStore.write_document",
                             "2", "--", "ingest", str(folder), "--db", str(db)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while not marker.exists() and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert marker.exists(), err[-2000:]
    assert proc.returncode == 130, (proc.returncode, out[-2000:], err[-2000:])
    assert "interrupted: every committed document is whole" in out + err and "Traceback" not in out + err
    store = SQLiteStore(db, mode="read")
    try:
        assert len(store.list_sources()) == 1 and store.count_chunks("", "kb") >= 1
    finally:
        store.close()
