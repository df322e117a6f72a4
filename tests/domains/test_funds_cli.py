"""`bara funds load|users|tool` on the real AMFI data in a temporary store."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.domains.funds import DEMO_USERS

IDS = sorted(uid for uid, _ in DEMO_USERS)


@pytest.fixture(scope="module")
def db(tmp_path_factory, data_dir):
    tmp = tmp_path_factory.mktemp("funds_cli")
    path = str(tmp / "funds.db")
    result = invoke(["funds", "load", "--no-index", "--json", "--db", path, "--data", str(data_dir)], tmp)
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["amfi"]["schemes"] > 10_000 and summary["amfi"]["nav_schemes"] > 1000
    assert sorted(summary["users"]) == IDS and summary["docs"] is None
    return path


def invoke(args: list[str], tmp) -> "object":
    return CliRunner().invoke(app, args, env={"BARA_CACHE_DIR": str(tmp / "cache")})


def tool(db: str, tmp_path, name: str, user: str, args: str) -> tuple[int, dict, str]:
    result = invoke(["funds", "tool", name, "--user", user, "--args", args, "--json", "--db", db], tmp_path)
    return result.exit_code, json.loads(result.stdout), result.output


def test_users_json_is_a_list_of_strings(db, tmp_path):
    result = invoke(["funds", "users", "--json", "--db", db], tmp_path)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == IDS


def test_users_table(db, tmp_path):
    result = invoke(["funds", "users", "--db", db], tmp_path)
    assert result.exit_code == 0 and "u_asha" in result.stdout and "Asha" in result.stdout


def test_tool_prints_the_envelope_for_the_bound_user(db, tmp_path):
    code, envelope, _ = tool(db, tmp_path, "get_holdings", "u_asha", "{}")
    assert code == 0 and envelope["ok"] is True
    assert envelope["data"]["holdings"] and envelope["data"]["totals"]["current_value"] > 0


def test_tool_arguments_are_validated(db, tmp_path):
    code, envelope, _ = tool(db, tmp_path, "asset_allocation", "u_bilal", '{"by": "fund_house"}')
    assert code == 0 and envelope["data"]["by"] == "fund_house"
    code, envelope, _ = tool(db, tmp_path, "compare_funds", "u_bilal", '{"schemes": ["only one"]}')
    assert code == 2 and envelope == {"ok": False, "error": envelope["error"]} and "schemes" in envelope["error"]


@pytest.mark.parametrize("name,args", [("get_holdings", '{not json'), ("get_holdings", '[1, 2]'),
                                       ("get_holdings", '"get_holdings"'), ("get_holdings", '{"user_id": "u_bilal"}'),
                                       ("get_transactions", '{"from_date": "yesterday"}'),
                                       ("compare_funds", '{"schemes": ["no such fund xyzzy", "nor this one qqq"]}'),
                                       ("compute_xirr", '{"scheme": "no such fund xyzzy"}')])
def test_bad_arguments_give_an_error_envelope_not_a_traceback(db, tmp_path, name, args):
    """Every --args the tool cannot use is bad input, whether JSON, schema or the tool refuses it: exit 2."""
    code, envelope, output = tool(db, tmp_path, name, "u_asha", args)
    assert code == 2 and envelope["ok"] is False and envelope["error"]
    assert "Traceback" not in output


def test_bad_json_error_says_how_to_fix_it(db, tmp_path):
    _, envelope, _ = tool(db, tmp_path, "get_transactions", "u_asha", "{oops")
    assert "not valid JSON" in envelope["error"] and "JSON object" in envelope["error"]


def test_unknown_tool_lists_the_known_ones(db, tmp_path):
    code, envelope, _ = tool(db, tmp_path, "drop_tables", "u_asha", "{}")
    assert code == 2 and "unknown tool 'drop_tables'" in envelope["error"] and "get_holdings" in envelope["error"]


def test_unknown_user_is_an_error_envelope(db, tmp_path):
    code, envelope, _ = tool(db, tmp_path, "get_holdings", "u_mallory", "{}")
    assert code == 2 and "bara funds users" in envelope["error"]


def test_an_injected_user_id_cannot_reach_another_users_rows(db, tmp_path):
    _, own, _ = tool(db, tmp_path, "get_transactions", "u_chitra", "{}")
    _, other, _ = tool(db, tmp_path, "get_transactions", "u_chitra", '{"user_id": "u_asha"}')
    assert own["ok"] and not other["ok"] and "user_id" in other["error"]
    assert {t["id"].split("-")[0] for t in own["data"]["transactions"]} == {"u_chitra"}


def test_load_is_repeatable(db, tmp_path, data_dir):
    result = invoke(["funds", "load", "--no-index", "--json", "--db", db, "--data", str(data_dir)], tmp_path)
    assert result.exit_code == 0
    again = invoke(["funds", "users", "--json", "--db", db], tmp_path)
    assert json.loads(again.stdout) == IDS


def test_load_with_a_wrong_data_dir_says_who_must_act(tmp_path):
    result = invoke(["funds", "load", "--no-index", "--db", str(tmp_path / "x.db"), "--data", str(tmp_path)],
                    tmp_path)
    assert result.exit_code == 2 and "AMFI data file not found" in result.output


def test_users_on_an_empty_store_points_to_load(tmp_path):
    from bara.store.sqlite import SQLiteStore

    SQLiteStore(tmp_path / "empty.db").close()  # a store without funds data (a missing one is an error)
    result = invoke(["funds", "users", "--json", "--db", str(tmp_path / "empty.db")], tmp_path)
    assert result.exit_code == 0 and json.loads(result.stdout) == [] and "bara funds load" in result.output


def test_load_rejects_an_unknown_sheets_scope(tmp_path):
    result = invoke(["funds", "load", "--sheets", "some", "--db", str(tmp_path / "x.db")], tmp_path)
    assert result.exit_code == 2 and "'all' or 'held'" in result.output



def _amfi_only(tmp_path, data_dir):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "amfi").symlink_to(data_dir / "amfi")
    return folder


def test_load_without_the_corpus_stores_nothing_and_says_how_to_go_on(tmp_path, data_dir):
    path = str(tmp_path / "f.db")
    result = invoke(["funds", "load", "--sheets", "held", "--db", path, "--data", str(_amfi_only(tmp_path, data_dir))],
                    tmp_path)
    assert result.exit_code == 2 and "MTRAG corpus not found" in result.output
    assert "nothing was stored" in result.output and "--no-index" in result.output
    assert json.loads(invoke(["funds", "users", "--json", "--db", path], tmp_path).stdout) == []


def test_a_load_that_fails_while_indexing_says_what_is_stored_and_how_to_finish(tmp_path, data_dir):
    """AMFI data and users are committed before the (resumable) indexing: the message must say so."""
    path = str(tmp_path / "f.db")
    result = CliRunner().invoke(app, ["funds", "load", "--sheets", "held", "--db", path, "--data", str(data_dir)],
                                env={"BARA_CACHE_DIR": str(tmp_path / "cache"),
                                     "BARA_EMBEDDER": str(tmp_path / "no-such-model")})  # fails at the first embed
    assert result.exit_code == 2 and "cannot load" in result.output
    assert "stored: AMFI data (" in result.output and "demo users u_asha" in result.output
    assert "0 of " in result.output and "not stored: the rest of the funds_docs index" in result.output
    assert f"to finish: fix the cause above and run `bara funds load --db {path} --data {data_dir} --sheets held`" \
        in result.output
    assert json.loads(invoke(["funds", "users", "--json", "--db", path], tmp_path).stdout) == IDS


def test_a_corpus_with_an_escaped_lone_surrogate_is_indexed_not_a_traceback(tmp_path, data_dir):
    folder = _amfi_only(tmp_path, data_dir)
    (folder / "mtrag").mkdir()
    (folder / "mtrag" / "corpus.jsonl").write_text(
        '{"_id": "a1", "title": "t", "text": "Index funds have low costs.", "collection": "fiqa"}\n'
        '{"_id": "a2", "title": "t", "text": "broken \\ud800 text", "collection": "fiqa"}\n')
    result = invoke(["funds", "load", "--sheets", "held", "--json", "--db", str(tmp_path / "f.db"),
                     "--data", str(folder)], tmp_path)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["docs"]["written"] > 2
