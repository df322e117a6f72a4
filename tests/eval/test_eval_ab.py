"""`bara eval ab` end to end on a 30-task MTRAG-UN slice: sane metrics, resume, bad input, CLI, report.

The slice's corpus is the passages its tasks reference plus 100 distractors, indexed
once per module into a private cache with a 96-token encoder window (cold embedding of
the full corpus at 256 tokens would take minutes; the harness, not retrieval quality,
is under test here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.errors import InputError
from bara.eval.ab import ROWS_FILE, RunConfig, evaluate_ab
from bara.llm import ScriptedModel
from bara.retrieval.embed_cache import CachedEmbedder, EmbeddingCache
from bara.retrieval.embedders import OnnxMiniLMEmbedder
from bara.settings import Settings
from kb_helpers import write_mtrag_slice

ROOT = Path(__file__).resolve().parents[2]
PREREG = ROOT / "eval" / "preregistered.toml"
N_TASKS, DISTRACTORS = 30, 100
MAX_TOKENS = 96
BOUNDED = ("retrieval_rate", "recall@5", "ndcg@10", "answer_f1", "rouge_l", "abstain_unanswerable",
           "answer_rate_answerable", "clarify_underspecified")


@pytest.fixture(scope="module")
def slice_files(tmp_path_factory, data_dir):
    """30 tasks spread over the dev file, and a corpus of their passages plus distractors."""
    return write_mtrag_slice(tmp_path_factory.mktemp("ab_slice"), data_dir, N_TASKS, DISTRACTORS, stride=7)


@pytest.fixture(scope="module")
def env(slice_files):
    cache = slice_files / "cache"
    settings = Settings(db=str(slice_files / "unused.db"), cache_dir=cache, embed_max_tokens=MAX_TOKENS)
    encoder = OnnxMiniLMEmbedder(max_tokens=MAX_TOKENS)
    return settings, CachedEmbedder(encoder, EmbeddingCache(cache / "embeddings.sqlite"))


def run(env, folder, report=None, **kw):
    settings, embedder = env
    config = RunConfig(modes=kw.pop("modes", ("always", "gated")), k=kw.pop("k", 4), limit=kw.pop("limit", None),
                       report_dir=report)
    return evaluate_ab(folder / kw.pop("tasks", "tasks.jsonl"), folder / kw.pop("corpus", "corpus.jsonl"), config,
                       settings, embedder, PREREG, **kw).as_dict()


@pytest.fixture(scope="module")
def full(env, slice_files):
    return run(env, slice_files)


def test_metrics_are_bounded_and_consistent(full):
    assert full["n_tasks"] == N_TASKS and full["complete"] and set(full["modes"]) == {"always", "gated"}
    for mode in full["modes"].values():
        for key in BOUNDED:
            assert mode[key] is None or 0.0 <= mode[key] <= 1.0, key
            ci = mode["ci"][key]
            assert ci is None or ci[0] <= mode[key] <= ci[1], key
        assert mode["context_tokens"] >= 0 and mode["latency_ms"]["p50"] <= mode["latency_ms"]["p95"]
        assert mode["errors"] == 0
    always = full["modes"]["always"]
    assert always["retrieval_rate"] == 1.0 and always["retrieval_calls"] == 1.0
    assert always["abstain_unanswerable"] == 0.0  # floor 0: always has passages to quote
    assert full["modes"]["gated"]["retrieval_rate"] <= 1.0


def test_breakdowns_verdicts_and_manifest(full):
    assert {"answerability", "multi_turn", "question_type", "collection"} <= set(full["by_category"])
    assert sum(c["always"]["n"] for c in full["by_category"]["answerability"].values()) == N_TASKS
    assert [v["id"] for v in full["verdicts"]] == ["retrieval_calls", "context_tokens", "recall_at_5", "answer_f1"]
    assert all(v["verdict"] in ("win", "within noise", "regression") for v in full["verdicts"])
    assert full["judge"] == {"status": "judge: not configured"}
    man = full["manifest"]
    assert len(man["data"]["tasks"]["sha256"]) == 64 and man["seeds"]["bootstrap"] and man["versions"]["numpy"]
    assert "db" not in man["settings"] and man["settings"]["k"] == 4


def _numbers(report):
    """Everything but timings, which are the only figures allowed to vary between runs."""
    return {m: {k: v for k, v in s.items() if k not in ("latency_ms", "stages_ms")}
            for m, s in report["modes"].items()}, report["verdicts"], report["by_category"]


def test_interrupted_run_resumes_without_duplicates(env, slice_files, full, tmp_path):
    done = []

    def interrupt(stage, n, total):
        if stage != "index":
            done.append(stage)
            if len(done) == 7:
                raise KeyboardInterrupt

    first = run(env, slice_files, tmp_path, progress=interrupt)
    assert not first["complete"] and len((tmp_path / ROWS_FILE).read_text().splitlines()) == 7
    again = run(env, slice_files, tmp_path)
    rows = [json.loads(line) for line in (tmp_path / ROWS_FILE).read_text().splitlines()]
    assert again["complete"] and again["resume"]["rows_loaded"] == 7
    assert len(rows) == 2 * N_TASKS and len({(r["task_id"], r["mode"]) for r in rows}) == 2 * N_TASKS
    assert _numbers(again) == _numbers(full)  # deterministic: resumed == uninterrupted
    assert json.loads((tmp_path / "ab.json").read_text())["complete"]


def test_torn_rows_and_changed_settings_are_ignored(env, slice_files, tmp_path):
    run(env, slice_files, tmp_path, limit=3)
    with (tmp_path / ROWS_FILE).open("a") as fh:
        fh.write('{"task_id": "x", "mo')  # a run killed mid-write
    again = run(env, slice_files, tmp_path, limit=4)
    assert again["resume"] == {"rows_loaded": 6, "malformed row ignored": 1}
    other = run(env, slice_files, tmp_path, limit=2, k=3)
    assert other["resume"]["stale row ignored (settings changed)"] == 8 and other["resume"]["rows_loaded"] == 0
    assert other["n_tasks"] == 2


def test_bad_input_is_counted_not_fatal(env, slice_files, tmp_path):
    good = (slice_files / "tasks.jsonl").read_text().splitlines()[:2]
    extra = dict(json.loads(good[0]), task_id="extra", surprise=1, contexts=[])
    lines = [*good, "{not json", "[1, 2]", json.dumps(extra), good[0],
             json.dumps({"task_id": "agent-last", "input": [{"speaker": "agent", "text": "hi"}]})]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "corpus.jsonl").write_text('{"_id": "x"}\nnot json\n')
    out = run(env, tmp_path, tmp_path / "report")
    tasks, corpus = out["problems"]["tasks"], out["problems"]["corpus"]
    assert tasks["malformed JSON line"] == 1 and tasks["line is not a JSON object"] == 1
    assert tasks["unknown field: surprise"] == 1 and tasks["duplicate task_id"] == 1
    assert tasks["no final user turn"] == 1 and sum(v for k, v in tasks.items() if k.startswith("no contexts")) >= 1
    assert corpus["corpus.jsonl: invalid JSON line"] == 1 and corpus["corpus.jsonl: missing _id or text"] == 1
    assert any(k.startswith("empty corpus") for k in corpus)
    assert out["n_tasks"] == 3 and out["modes"]["always"]["recall@5"] == 0.0
    with pytest.raises(InputError):
        run(env, slice_files, modes=("always", "psychic"))


def test_judge_runs_only_when_a_model_is_given(env, slice_files):
    model = ScriptedModel([lambda messages, tools: '{"faithfulness": 4, "relevance": 3}'] * 5, name="judge")
    out = run(env, slice_files, limit=4, model=model, judge_sample=5)
    assert out["judge"]["status"] == "judged" and out["judge"]["n"] == len(model.calls) >= 1
    assert out["judge"]["faithfulness_mean"] == 4.0


def test_cli_json_and_report(env, slice_files, tmp_path, monkeypatch):
    from bara.cli import app

    monkeypatch.setenv("BARA_CACHE_DIR", str(slice_files / "cache"))
    monkeypatch.setenv("BARA_EMBED_MAX_TOKENS", str(MAX_TOKENS))
    monkeypatch.delenv("BARA_MODEL", raising=False)
    args = ["eval", "ab", "--tasks", str(slice_files / "tasks.jsonl"), "--corpus", str(slice_files / "corpus.jsonl"),
            "--modes", "always,gated", "--k", "4", "--limit", "4", "--json", "--report", str(tmp_path)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["n_tasks"] == 4 and set(out) >= {"n_tasks", "modes", "by_category"}
    assert set(out["modes"]["gated"]) >= {"retrieval_rate", "context_tokens", "recall@5", "ndcg@10", "answer_f1",
                                          "abstain_unanswerable", "answer_rate_answerable", "latency_ms"}
    assert set(out["modes"]["gated"]["latency_ms"]) == {"p50", "p95"}
    report = CliRunner().invoke(app, ["eval", "report", str(tmp_path)])
    assert report.exit_code == 0, report.output
    text = (tmp_path / "report.md").read_text()
    assert "Pre-registered verdicts" in text and "sha256" in text
    assert all((tmp_path / p).stat().st_size > 1000 for p in ("ab_metrics.png", "ab_latency.png",
                                                               "ab_by_answerability.png"))
    bad = CliRunner().invoke(app, [*args[:6], "--modes", "nope", "--json"])
    assert bad.exit_code == 2
