"""Exit codes of `bara` commands: 2 whenever the user's input must change (with a message saying what),
1 only for a runtime fault that is not the input."""

from __future__ import annotations

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
