"""`bara eval ab --turns all` with mixed small talk and the `last2` reference, on an 8-conversation slice
of MTRAG-UN dev (their passages plus distractors, 96-token encoder window: the harness is under test)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.app import Bara
from bara.eval.ab import ROWS_FILE, RunConfig, cached_index, evaluate_ab, working_copy
from bara.eval.beir import read_corpus
from bara.eval.conversation_replay import Last2Assistant, ReferenceReplies, build_assistant, run_conversation
from bara.eval.gate import read_tasks
from bara.eval.mixing import MixConfig, mix_conversations
from bara.eval.prereg import load_prereg
from bara.retrieval.embed_cache import CachedEmbedder, EmbeddingCache
from bara.retrieval.embedders import OnnxMiniLMEmbedder
from bara.settings import Settings
from kb_helpers import write_mtrag_slice

ROOT = Path(__file__).resolve().parents[2]
PREREG = ROOT / "eval" / "preregistered_round2.toml"
N_TASKS, DISTRACTORS, MAX_TOKENS = 8, 60, 96
MODES = ("always", "gated", "last2")


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory, data_dir):
    return write_mtrag_slice(tmp_path_factory.mktemp("whole_slice"), data_dir, N_TASKS, DISTRACTORS, stride=11,
                             keep=lambda task: len(task["input"]) >= 5)


@pytest.fixture(scope="module")
def env(slice_files):
    cache = slice_files / "cache"
    settings = Settings(db=str(slice_files / "unused.db"), cache_dir=cache, embed_max_tokens=MAX_TOKENS)
    return settings, CachedEmbedder(OnnxMiniLMEmbedder(max_tokens=MAX_TOKENS), EmbeddingCache(cache / "e.sqlite"))


def _mix(data_dir, seed=3):
    clinc = data_dir / "clinc150"
    return MixConfig(clinc / "val.jsonl", clinc / "domains.json", 0.3, seed)


def run(env, folder, data_dir, report=None, **kw):
    settings, embedder = env
    config = RunConfig(modes=MODES, k=4, limit=kw.pop("limit", None), report_dir=report, turns="all",
                       mix=_mix(data_dir, kw.pop("seed", 3)))
    return evaluate_ab(folder / "tasks.jsonl", folder / "corpus.jsonl", config, settings, embedder, PREREG, **kw).as_dict()


@pytest.fixture(scope="module")
def whole(env, slice_files, data_dir, tmp_path_factory):
    report = tmp_path_factory.mktemp("whole_report")
    return run(env, slice_files, data_dir, report), report


def test_json_keys_and_whole_conversation_figures(whole, slice_files, data_dir):
    out, _ = whole
    assert out["complete"] and set(out["modes"]) == set(MODES) and out["manifest"]["run"]["turns"] == "all"
    convs = mix_conversations(read_tasks(slice_files / "tasks.jsonl", Counter()),
                              _mix(data_dir))
    n_turns = sum(len(c.turns) for c in convs)
    n_inserted = sum(t.inserted for c in convs for t in c.turns)
    for name, mode in out["modes"].items():
        assert {"recall@5", "context_tokens", "retrieval_calls", "latency_ms"} <= set(mode)  # judged-turn keys
        whole_turns = mode["turns_all"]
        assert set(whole_turns) == {"n", "retrieval_calls", "context_tokens", "latency_ms"}
        assert whole_turns["n"] == n_turns and set(whole_turns["latency_ms"]) == {"p50", "p95"}
        assert mode["inserted"]["n"] == n_inserted > 0 and 0.0 <= mode["inserted"]["retrieval_rate"] <= 1.0
        assert set(mode["after_inserted"]) == {"n", "recall@5"}
        assert mode["errors"] == 0, name
    assert out["modes"]["always"]["inserted"]["retrieval_rate"] == 1.0  # always searches every turn
    assert out["modes"]["last2"]["turns_all"]["retrieval_calls"] == 1.0
    ids = [c.id for c in load_prereg(PREREG).criteria if c.source == "ab"]
    assert [v["id"] for v in out["verdicts"]] == ids
    assert all(v["verdict"] in ("win", "within noise", "regression") for v in out["verdicts"])


def test_resume_reuses_rows_and_a_new_seed_does_not(whole, env, slice_files, data_dir):
    out, report = whole
    again = run(env, slice_files, data_dir, report)
    assert again["resume"]["rows_loaded"] == N_TASKS * len(MODES)
    assert again["verdicts"] == out["verdicts"]
    assert again["modes"]["gated"]["turns_all"]["context_tokens"] == out["modes"]["gated"]["turns_all"][
        "context_tokens"]
    other = run(env, slice_files, data_dir, report, seed=4, limit=2)
    assert other["resume"]["rows_loaded"] == 0  # other seed: other conversations, other hash
    rows = [json.loads(line) for line in (report / ROWS_FILE).read_text().splitlines()]
    assert len(rows) == (N_TASKS + 2) * len(MODES)


@pytest.fixture()
def bara(env, slice_files, tmp_path):
    settings, embedder = env
    docs = read_corpus(slice_files / "corpus.jsonl", Counter())
    index = cached_index(slice_files / "corpus.jsonl", docs, settings, embedder)
    with Bara(settings.override(db=str(working_copy(index, tmp_path))), embedder=embedder) as b:
        yield b


def test_last2_searches_the_two_last_user_messages_joined(bara):
    assistant = Last2Assistant(bara)
    first = assistant.turn("u", "What is IBM Cloud Code Engine?", conversation_id=None)
    assert first.trace.retrieval_query == "What is IBM Cloud Code Engine?"
    cid = first.conversation_id
    second = assistant.turn("u", "thanks a lot", conversation_id=cid)
    third = assistant.turn("u", "How do I deploy an app there?", conversation_id=cid)
    assert second.trace.retrieval_query == "What is IBM Cloud Code Engine? thanks a lot"
    assert third.trace.retrieval_query == "thanks a lot How do I deploy an app there?"
    stored = [m.text for m in assistant.conversations.history("u", cid, limit=10) if m.role == "user"]
    assert stored[-1] == "How do I deploy an app there?"  # the user's own words are stored


def test_reference_replies_are_stored_and_inserted_turns_keep_the_answer(bara, slice_files, data_dir):
    task = read_tasks(slice_files / "tasks.jsonl", Counter())[0]
    conv = mix_conversations([task], _mix(data_dir))[0]
    assistant, replies = build_assistant(bara, "gated"), ReferenceReplies()
    assistant.hooks.add("before_persist", replies)
    costs, result = run_conversation(assistant, replies, conv, "ref-user", "ref-c")
    assert len(costs) == len(conv.turns) and [c.inserted for c in costs] == [t.inserted for t in conv.turns]
    history = assistant.conversations.history("ref-user", "ref-c", limit=10 * len(conv.turns))
    replies_stored = [m.text for m in history if m.role == "assistant"]
    for turn, stored in zip(conv.turns, replies_stored, strict=False):
        if turn.reference_reply:
            assert stored == turn.reference_reply
        else:
            assert stored and stored != ""
    assert replies_stored[-1] == result.answer


def test_cli_options_and_bad_input(env, slice_files, data_dir, tmp_path, monkeypatch):
    from bara.cli import app

    monkeypatch.setenv("BARA_CACHE_DIR", str(slice_files / "cache"))
    monkeypatch.setenv("BARA_EMBED_MAX_TOKENS", str(MAX_TOKENS))
    monkeypatch.delenv("BARA_MODEL", raising=False)
    clinc = data_dir / "clinc150"
    base = ["eval", "ab", "--tasks", str(slice_files / "tasks.jsonl"), "--corpus", str(slice_files / "corpus.jsonl")]
    args = [*base, "--modes", "gated,last2", "--limit", "2", "--turns", "all", "--mix-smalltalk",
            str(clinc / "val.jsonl"), "--mix-rate", "0.3", "--seed", "5", "--prereg", str(PREREG), "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert {"turns_all", "inserted", "after_inserted"} <= set(out["modes"]["last2"])
    assert out["manifest"]["run"]["mix"]["domains"]["path"].endswith("domains.json")
    assert CliRunner().invoke(app, [*base, "--turns", "some"]).exit_code == 2
    assert CliRunner().invoke(app, [*base, "--mix-smalltalk", str(clinc / "val.jsonl")]).exit_code == 2
    (tmp_path / "b.jsonl").write_text('{"text": "what is my balance", "intent": "balance"}\n')
    bad = CliRunner().invoke(app, [*base, "--turns", "all", "--mix-smalltalk", str(tmp_path / "b.jsonl"),
                                   "--mix-domains", str(clinc / "domains.json")])
    assert bad.exit_code == 2 and "no utterance" in bad.output


def test_report_has_every_round2_verdict(whole, env, data_dir, tmp_path):
    from bara.cli import app
    from bara.eval.gate import evaluate_gate

    out, report = whole
    folder = tmp_path / "eval"
    (folder / "mixed").mkdir(parents=True)
    (folder / "mixed" / "ab.json").write_text((report / "ab.json").read_text())
    lines = (data_dir / "clinc150" / "val.jsonl").read_text().splitlines()[::60]  # 50 utterances, all domains
    (tmp_path / "val.jsonl").write_text("\n".join(lines) + "\n")
    settings, embedder = env
    gate = evaluate_gate(tmp_path / "val.jsonl", data_dir / "clinc150" / "domains.json", settings,
                         embedder.inner).as_dict()
    assert sum(gate["confusion"].values()) == gate["n"] == 50
    (folder / "gate_clinc150.json").write_text(json.dumps(gate))
    result = CliRunner().invoke(app, ["eval", "report", str(folder)])
    assert result.exit_code == 0, result.output
    text = (folder / "report.md").read_text()
    assert "Round-2 pre-registered verdicts" in text and (folder / "ab_whole.png").stat().st_size > 1000
    for crit in load_prereg(PREREG).criteria:
        row = next(line for line in text.splitlines() if line.startswith(f"| {crit.id} |"))
        assert "not evaluated" not in row, crit.id


def test_a_conversation_scores_the_same_alone_as_after_others(whole, env, data_dir, slice_files, tmp_path):
    """Every (task, mode) starts from the clean index: what earlier runs stored (Q&A pairs shift FTS5's
    bm25 statistics) must not change a later row."""
    _, report = whole
    rows = {(r["task_id"], r["mode"]): r for r in map(json.loads, (report / ROWS_FILE).read_text().splitlines())}
    lines = (slice_files / "tasks.jsonl").read_text().splitlines()
    tasks = read_tasks(slice_files / "tasks.jsonl", Counter())
    in_context = mix_conversations(tasks, _mix(data_dir))
    # a later task whose mix is the same alone (counts round on the running total, so not every one is)
    i = next(i for i in range(len(tasks) - 1, 0, -1)
             if mix_conversations([tasks[i]], _mix(data_dir))[0].turns == in_context[i].turns)
    last = lines[i]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "tasks.jsonl").write_text(last + "\n")
    (alone / "corpus.jsonl").write_text((slice_files / "corpus.jsonl").read_text())
    settings, embedder = env
    config = RunConfig(modes=MODES, k=4, report_dir=alone, turns="all", mix=_mix(data_dir))
    evaluate_ab(alone / "tasks.jsonl", alone / "corpus.jsonl", config, settings, embedder, PREREG)
    task_id = json.loads(last)["task_id"]
    for row in map(json.loads, (alone / ROWS_FILE).read_text().splitlines()):
        before = rows[(task_id, row["mode"])]
        assert row["hits"] == before["hits"], row["mode"]
        assert [(t["calls"], t["tokens"], t["kb"]) for t in row["turns"]] == [
            (t["calls"], t["tokens"], t["kb"]) for t in before["turns"]], row["mode"]
