"""`bara chat` and `bara memory ...` through the real CLI over a small RFC knowledge base."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.cli.chat import parse_script_line

DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo_conversation.jsonl"
runner = CliRunner()


@pytest.fixture(scope="module")
def db(rfc_kb) -> str:
    return str(rfc_kb("chat_cli"))


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BARA_MODEL", raising=False)
    monkeypatch.delenv("BARA_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no stray ./bara.toml


def script(tmp_path: Path, *lines: str) -> str:
    path = tmp_path / "script.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def chat(db: str, *args: str):
    return runner.invoke(app, ["chat", "--db", db, *args])


def json_turns(result) -> list[dict]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_scripted_json_prints_one_object_per_turn_and_skips_malformed_lines(db, tmp_path):
    path = script(tmp_path, '{"user": "hi there!"}', "not json", '{"text": "wrong key"}', "",
                  '{"user": "What is HTTP Strict Transport Security?"}')
    result = chat(db, "--script", path, "--json", "--user", "cli-json")
    assert result.exit_code == 0, result.output
    turns = json_turns(result)
    assert [t["turn"] for t in turns] == [1, 2]
    assert turns[0]["retrieved"] is False and turns[1]["retrieved"] is True and turns[1]["hits"]
    assert {"turn", "intent", "route", "tiers", "latency_ms", "reasons", "answer"} <= set(turns[0])
    assert ":2: skipped: not JSON" in result.stderr and ':3: skipped: expected an object' in result.stderr
    assert turns[0]["conversation_id"] == turns[1]["conversation_id"]


def test_human_mode_shows_the_timeline(db, tmp_path):
    result = chat(db, "--script", script(tmp_path, '{"user": "What is HTTP Strict Transport Security?"}'),
                  "--user", "cli-human")
    assert result.exit_code == 0, result.output
    out = " ".join(result.stdout.split())
    assert "bara>" in out and "new conversation" in out
    for label in ("intent knowledge_base", "mode standard", "route rag", "kb 4", "hits [1] rfc6797.txt",
                  "dropped by floor", "tokens added", "retrieve_kb", "reasons", "route:rag"):
        assert label in out, label


def test_unknown_conversation_fails_unless_new(db, tmp_path):
    path = script(tmp_path, '{"user": "my name is Sam"}')
    missing = chat(db, "--script", path, "--conversation", "nope", "--user", "cli-conv")
    assert missing.exit_code == 2 and "does not exist" in missing.stderr and "--new" in missing.stderr
    created = chat(db, "--script", path, "--conversation", "nope", "--new", "--user", "cli-conv", "--json")
    assert created.exit_code == 0 and "new conversation nope" in created.stderr
    resumed = chat(db, "--script", script(tmp_path, '{"user": "what\'s my name?"}'), "--conversation", "nope",
                   "--user", "cli-conv", "--json")
    (turn,) = json_turns(resumed)
    assert turn["turn"] == 2 and "Sam" in turn["answer"] and turn["conversation_id"] == "nope"


def test_always_mode_from_the_cli(db, tmp_path):
    result = chat(db, "--script", script(tmp_path, '{"user": "hi"}'), "--mode", "always", "--json",
                  "--user", "cli-always")
    (turn,) = json_turns(result)
    assert turn["mode"] == "always" and turn["retrieved"] is True and turn["route"] == "always_rag"


def test_bad_mode_and_missing_script_are_clear_errors(db, tmp_path):
    assert chat(db, "--mode", "sometimes").exit_code == 2
    missing = chat(db, "--script", str(tmp_path / "absent.jsonl"))
    assert missing.exit_code == 2 and "does not exist" in missing.stderr


def test_interactive_session_quits_on_exit_and_eof(db):
    result = runner.invoke(app, ["chat", "--db", db, "--user", "cli-tty"], input="hi\nexit\nnever sent\n")
    assert result.exit_code == 0 and result.stdout.count("bara>") == 1 and "Hello" in result.stdout
    eof = runner.invoke(app, ["chat", "--db", db, "--user", "cli-tty"], input="thanks!\n")
    assert eof.exit_code == 0 and "welcome" in eof.stdout


def test_memory_inspect_query_and_forget(db, tmp_path):
    lines = ['{"user": "My name is Ada and I\'m a network engineer."}',
             '{"user": "Let\'s go with HSTS with a long max-age for the API."}',
             '{"user": "What does the includeSubDomains directive do?"}']
    assert chat(db, "--script", script(tmp_path, *lines), "--user", "cli-mem", "--json").exit_code == 0

    inspect = runner.invoke(app, ["memory", "inspect", "--db", db, "--user", "cli-mem", "--json"])
    report = json.loads(inspect.stdout)
    assert {p["key"]: p["value"] for p in report["profile"]} == {"name": "Ada", "role": "network engineer"}
    assert report["notes"][0]["kind"] == "decision" and len(report["qa"]) >= 1
    cid = report["conversations"][0]["id"]
    detail = json.loads(runner.invoke(app, ["memory", "inspect", "--db", db, "--user", "cli-mem",
                                            "--conversation", cid, "--json"]).stdout)
    assert [m["role"] for m in detail["messages"]][:2] == ["user", "assistant"] and "turn_count" in detail["state"]
    human = runner.invoke(app, ["memory", "inspect", "--db", db, "--user", "cli-mem"])
    assert "name = Ada" in human.stdout and "(decision)" in human.stdout
    other = runner.invoke(app, ["memory", "inspect", "--db", db, "--user", "cli-mem", "--conversation", "zzz"])
    assert other.exit_code == 2

    def query(text, tier):
        out = runner.invoke(app, ["memory", "query", text, "--tier", tier, "--db", db, "--user", "cli-mem", "--json"])
        assert out.exit_code == 0, out.output
        return json.loads(out.stdout)["results"]

    assert query("HSTS max-age", "kb")[0]["source"] == "rfc6797.txt"
    assert query("network engineer", "profile") == [{"key": "role", "value": "network engineer"}]
    assert "HSTS" in query("what did we decide about HSTS?", "notes")[0]["text"]
    assert query("What does the includeSubDomains directive do?", "qa")[0]["score"] > 0.9
    assert query("network engineer", "profile") != [] and query("HSTS", "notes") != []
    assert runner.invoke(app, ["memory", "query", "x", "--tier", "everything", "--db", db]).exit_code == 2
    stranger = runner.invoke(app, ["memory", "query", "HSTS", "--tier", "notes", "--db", db, "--user", "nobody",
                                   "--json"])
    assert json.loads(stranger.stdout)["results"] == []

    one = runner.invoke(app, ["memory", "forget", "--db", db, "--user", "cli-mem", "--key", "role"])
    assert one.exit_code == 0 and query("network engineer", "profile") == []
    assert "deleted for user cli-mem: 1 profile fact" in " ".join(one.stdout.split())  # not "1 profile facts"
    absent = runner.invoke(app, ["memory", "forget", "--db", db, "--user", "cli-mem", "--key", "role"])
    assert absent.exit_code == 2 and "pass --key with one of 'name'" in absent.stderr  # bad input: exit 2
    everything = runner.invoke(app, ["memory", "forget", "--db", db, "--user", "cli-mem", "--json"])
    assert json.loads(everything.stdout)["deleted"]["conversations"] == 1
    assert json.loads(everything.stdout)["deleted"]["episodic"] >= 1  # what the chat said, remembered
    again = runner.invoke(app, ["memory", "forget", "--db", db, "--user", "cli-mem", "--json"])
    assert json.loads(again.stdout)["deleted"]["episodic"] == 0  # nothing of it is left
    empty = json.loads(runner.invoke(app, ["memory", "inspect", "--db", db, "--user", "cli-mem", "--json"]).stdout)
    assert empty["profile"] == empty["notes"] == empty["qa"] == empty["conversations"] == []


def test_memory_inspect_shows_the_users_episodic_memory_and_no_one_elses(db, tmp_path, monkeypatch):
    """`bara memory inspect` lists what the user said, per conversation (--json key "episodic", the tier's
    name, as DELETE /api/memory reports it; `memory forget --json` counts the same rows as "episodes"),
    bounded with the rest counted; another user's words never appear; after forget there are none."""
    said = {"cli-ep-a": ["I adopted a puppy named Zqrexa.", "Zqrexa chewed my Zqshoea."],
            "cli-ep-b": ["My cat Zqbellab sleeps all day."]}
    for user, lines in said.items():
        path = script(tmp_path, *(json.dumps({"user": words}) for words in lines))
        assert chat(db, "--script", path, "--user", user, "--json").exit_code == 0

    def inspect(user: str, *args: str) -> str:
        out = runner.invoke(app, ["memory", "inspect", "--db", db, "--user", user, *args])
        assert out.exit_code == 0, out.output
        return out.stdout

    report = json.loads(inspect("cli-ep-a", "--json"))
    (conv,) = report["episodic"]["conversations"]
    assert conv["conversation_id"] == report["conversations"][0]["id"]
    assert report["episodic"]["turns"] == conv["turns"] == conv["sessions"] == 2
    assert [t["text"].split(": ", 1)[1] for t in conv["remembered"]] == said["cli-ep-a"]
    assert "Zqrexa" in conv["names"] and "Zqshoea" in conv["names"] and conv["first_date"]
    human = " ".join(inspect("cli-ep-a").split())
    assert "episodic memory (1 conversation, 2 turns)" in human and "User: Zqrexa chewed my Zqshoea." in human
    assert "Zqbellab" not in human and "Zqbellab" not in json.dumps(report)
    assert "Zqrexa" not in inspect("cli-ep-b", "--json") and "Zqbellab" in inspect("cli-ep-b", "--json")

    monkeypatch.setenv("BARA_MEMORY_INSPECT_EPISODIC_TURNS", "1")
    (latest,) = json.loads(inspect("cli-ep-a", "--json"))["episodic"]["conversations"]
    assert [t["text"].split(": ", 1)[1] for t in latest["remembered"]] == said["cli-ep-a"][1:]
    assert latest["remembered_left_out"] == 1 and "(1 earlier turn not shown)" in inspect("cli-ep-a")
    monkeypatch.delenv("BARA_MEMORY_INSPECT_EPISODIC_TURNS")

    forgot = runner.invoke(app, ["memory", "forget", "--db", db, "--user", "cli-ep-a", "--json"])
    assert json.loads(forgot.stdout)["deleted"]["episodic"] == 2
    assert json.loads(inspect("cli-ep-a", "--json"))["episodic"] == {"turns": 0, "conversations_left_out": 0,
                                                                    "conversations": []}
    assert "episodic memory (0 conversations, 0 turns) (none)" in " ".join(inspect("cli-ep-a").split())
    assert "Zqbellab" in inspect("cli-ep-b", "--json")  # the other user's memory stays


def test_demo_script_runs_from_the_cli(db):
    result = chat(db, "--script", str(DEMO), "--json", "--user", "cli-demo")
    assert result.exit_code == 0, result.output
    turns = json_turns(result)
    assert len(turns) == len([line for line in DEMO.read_text().splitlines() if line.strip()])
    assert turns[0]["retrieved"] is False and any(t["tiers"]["notes"] for t in turns)


@pytest.mark.parametrize("raw,ok", [('{"user": "hi"}', True), ('{"user": 3}', False), ("[1]", False), ("{", False)])
def test_parse_script_line(raw, ok):
    line = parse_script_line(7, raw)
    assert (line.text is not None) == ok and (line.problem == "") == ok


def test_chat_loads_the_model_and_search_caches_while_the_first_message_is_typed(db, tmp_path):
    """`bara chat` (interactive) warms up in the background: the first turn no longer loads the model
    or reads the knowledge base's vectors (~150 ms on the demo store)."""
    from bara.app import Bara
    from bara.cli.chat import _warm_while_typing
    from bara.settings import Settings
    from bara.store.sqlite import SQLiteStore

    settings = Settings(db=db, cache_dir=tmp_path / "cache")
    with Bara(settings) as earlier:  # an earlier session cached the warm-up's own query vector
        earlier.embedder.embed(["warm up"])
    with Bara(settings) as bara:  # the CLI's embedder: MiniLM behind the embedding cache
        inner, store = bara.embedder.inner, bara.store  # type: ignore[attr-defined]
        assert isinstance(store, SQLiteStore) and not inner.loaded and store.scope_reads == 0
        _warm_while_typing(bara).join()
        assert inner.loaded  # loaded, though a cache hit never needs the model
        reads = store.scope_reads
        assert reads >= 1  # the knowledge base's vectors, read while the message was typed
        assert bara.retriever.search("What does the includeSubDomains directive do?").hits
        assert store.scope_reads == reads  # the first turn's search read none again
