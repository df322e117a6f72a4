"""QA regressions on the new command lines (`bara keys`, `bara mcp`, `bara eval memory`): bad input
exits 2 with a message saying what to change, and a read command never creates a store."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.cli import app

LOCOMO = "locomo/conv-26.json"


def run(*args: str):
    return CliRunner().invoke(app, list(args))


@pytest.mark.parametrize("command", [["keys", "list"], ["keys", "list", "--json"], ["keys", "revoke", "abc123"]])
def test_keys_read_commands_refuse_a_missing_store_without_creating_it(tmp_path, command):
    db = tmp_path / "typo.db"
    result = run(*command, "--db", str(db))
    assert result.exit_code == 2, result.output
    assert "no bara store" in result.output and str(db) in result.output
    assert not db.exists()


def test_keys_list_refuses_a_blank_user_and_says_when_there_are_none(tmp_path):
    db = str(tmp_path / "k.db")
    assert run("keys", "create", "--user", "sam", "--db", db).exit_code == 0
    blank = run("keys", "list", "--user", "  ", "--db", db)
    assert blank.exit_code == 2 and "non-empty" in blank.output
    nobody = run("keys", "list", "--user", "nobody", "--db", db)
    assert nobody.exit_code == 0 and "no keys" in nobody.output and "bara keys create" in nobody.output


@pytest.mark.parametrize("user", ["a\x01b", "u" * 300])
def test_mcp_refuses_user_ids_keys_create_refuses(tmp_path, user):
    db = tmp_path / "m.db"
    assert run("keys", "create", "--user", "sam", "--db", str(db)).exit_code == 0
    result = run("mcp", "--user", user, "--db", str(db))
    assert result.exit_code == 2 and "--user" in result.output


def test_mcp_refuses_a_missing_store_without_creating_it(tmp_path):
    db = tmp_path / "none.db"
    result = run("mcp", "--user", "sam", "--db", str(db))
    assert result.exit_code == 2 and "no bara store" in result.output
    assert not db.exists()


@pytest.mark.parametrize("content, says", [
    ("[]", "empty JSON list"),
    ('[{"speaker_a": "A"}]', "(item 0 of the list) is not a LoCoMo conversation"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": ["hello"], "qa": []}', "malformed"),
    ('{"speaker_a": "A", "speaker_b": "B", "session_1": [], "qa": [{"question": "q", "category": "two"}]}',
     "malformed"),
    ('{"speaker_a": "A", "speaker_b": "B", "qa": "none"}', "not a LoCoMo conversation"),
    ('"text"', "not a LoCoMo conversation"),
])
def test_eval_memory_malformed_file_exits_2(tmp_path, content, says):
    path = tmp_path / "conv-x.json"
    path.write_text(content, encoding="utf-8")
    result = run("eval", "memory", "--locomo", str(path), "--json")
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_eval_memory_reads_the_released_list_file_as_its_conversations(data_dir, tmp_path):
    """locomo10.json, as LoCoMo releases it, is a JSON list of conversations: the same figures as one file each."""
    files = [data_dir / "locomo" / name for name in ("conv-26.json", "conv-30.json")]
    listed = tmp_path / "locomo10.json"
    listed.write_text(json.dumps([json.loads(f.read_text(encoding="utf-8")) for f in files]), encoding="utf-8")
    args = ["--limit", "3", "--sessions", "1", "--modes", "turns", "--json"]
    one_each = run("eval", "memory", *(a for f in files for a in ("--locomo", str(f))), *args)
    as_list = run("eval", "memory", "--locomo", str(listed), *args)
    assert one_each.exit_code == 0 and as_list.exit_code == 0, as_list.output
    first, second = json.loads(one_each.stdout), json.loads(as_list.stdout)
    assert second["n_questions"] == first["n_questions"] == 6
    assert second["modes"]["turns"]["evidence_recall@10"] == first["modes"]["turns"]["evidence_recall@10"]


@pytest.mark.parametrize("judge", ["openai:", ":gpt-4o-mini", " : "])
def test_eval_memory_judge_needs_provider_and_name(data_dir, judge):
    result = run("eval", "memory", "--locomo", str(data_dir / LOCOMO), "--limit", "1", "--sessions", "1",
                 "--json", "--judge", judge)
    assert result.exit_code == 2 and "provider:name" in result.output


def test_eval_memory_json_keys_as_issue_14_names_them(data_dir):
    result = run("eval", "memory", "--locomo", str(data_dir / LOCOMO), "--limit", "4", "--sessions", "2", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert isinstance(out["n_questions"], int) and set(out["modes"]) == {"turns", "gated", "full"}
    for mode in out["modes"].values():
        assert {"evidence_recall@5", "evidence_recall@10", "context_tokens", "latency_ms",
                "abstain_adversarial"} <= set(mode)
        assert set(mode["latency_ms"]) == {"p50", "p95"}
    assert all(set(cats) == {"1", "2", "3", "4"} for cats in out["by_category"].values())


def test_serve_on_a_new_store_says_so(tmp_path):
    import socket

    db = tmp_path / "typo.db"
    with socket.socket() as busy:  # a busy port stops serve right after its store checks
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        result = run("serve", "--db", str(db), "--port", str(busy.getsockname()[1]))
    assert result.exit_code == 2
    assert "no store at" in result.output and "bara ingest" in result.output



def test_keys_revoke_by_whole_key_never_prints_the_secret(tmp_path):
    db = str(tmp_path / "r.db")
    created = json.loads(run("keys", "create", "--user", "sam", "--db", db, "--json").stdout)
    secret = created["key"].split("_", 2)[2]  # bara_<key_id>_<secret>: the secret itself may hold "_"
    revoked = run("keys", "revoke", created["key"], "--db", db)
    assert revoked.exit_code == 0 and created["key_id"] in revoked.output and secret not in revoked.output
    again = run("keys", "revoke", created["key"], "--db", db)
    assert again.exit_code == 2 and secret not in again.output


def test_eval_memory_given_a_folder_says_to_pass_its_files(data_dir):
    result = run("eval", "memory", "--locomo", str(data_dir / "locomo"), "--json")
    assert result.exit_code == 2 and "is a folder" in result.output and "conv-*.json" in result.output
