"""`bara eval memory --locomo`: the JSON shape on a small slice of a real LoCoMo conversation, the
metric, the loader, input errors, and the optional judge against a loopback fake model server."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.eval.locomo_data import evidence_recall, load_locomo
from loopback import JsonHandler, LoopbackServer

METRIC_KEYS = {"evidence_recall@5", "evidence_recall@10", "context_tokens", "latency_ms", "abstain_adversarial"}
SLICE = ["--sessions", "2", "--limit", "6"]


@pytest.fixture(scope="module")
def conv26(data_dir):
    return data_dir / "locomo" / "conv-26.json"


def _run(args, env=None):
    from bara.cli import app

    return CliRunner().invoke(app, ["eval", "memory", *args], env=env)


def test_evidence_recall_counts_evidence_among_the_first_k_items():
    assert evidence_recall(["D1:3", "D2:1"], ["D1:3", "", "D2:1"], 2) == 0.5
    assert evidence_recall(["D1:3", "D2:1"], ["D1:2|D1:3", "D2:1"], 2) == 1.0  # a window holds two turns
    assert evidence_recall(["D1:3"], [], 10) == 0.0
    assert evidence_recall([], ["D1:3"], 10) is None


def test_loader_orders_sessions_by_date_and_splits_evidence(conv26):
    conv = load_locomo(conv26)
    dates = [s.when for s in conv.sessions]
    assert dates == sorted(dates) and len(conv.sessions) >= 19
    assert {conv.speaker_a, conv.speaker_b} == {t.speaker for t in conv.turns}
    assert all(e.startswith("D") and ":" in e for q in conv.questions for e in q.evidence)
    assert {q.category for q in conv.questions} == {1, 2, 3, 4, 5}


def test_json_keys_on_a_slice(conv26):
    result = _run(["--locomo", str(conv26), *SLICE, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["n_questions"] == 6
    assert set(data["modes"]) == {"turns", "gated", "full"} == set(data["by_category"])
    for mode, metrics in data["modes"].items():
        assert METRIC_KEYS <= set(metrics), mode
        assert set(metrics["latency_ms"]) == {"p50", "p95"}
        assert set(data["by_category"][mode]) == {"1", "2", "3", "4"}
        for cat in data["by_category"][mode].values():
            assert METRIC_KEYS <= set(cat)
    gated, full = data["modes"]["gated"], data["modes"]["full"]
    assert 0.0 <= gated["evidence_recall@5"] <= gated["evidence_recall@10"] <= 1.0
    assert 0 < gated["context_tokens"] < full["context_tokens"]
    assert full["evidence_recall@10"] is None  # full is tokens only
    assert data["judge"]["status"] == "not_run" and "--judge" in data["judge"]["reason"]


def test_modes_and_k_are_honoured(conv26):
    result = _run(["--locomo", str(conv26), *SLICE, "--modes", "turns", "--k", "3", "--json"])
    data = json.loads(result.stdout)
    assert set(data["modes"]) == {"turns"}
    assert data["modes"]["turns"]["context_tokens"] > 0


@pytest.mark.parametrize("args,says", [
    (["--locomo", "/nonexistent/conv.json"], "not found"),
    (["--modes", "turns,everything"], "unknown mode"),
    (["--judge", "nocolon"], "provider:name"),
])
def test_bad_input_exits_2_and_says_what_to_change(conv26, args, says):
    full = args if args[0] == "--locomo" else ["--locomo", str(conv26), *SLICE, *args]
    result = _run(full)
    assert result.exit_code == 2
    assert says in result.output and "Traceback" not in result.output


class _FakeJudge(LoopbackServer):
    """A loopback OpenAI-compatible server: answers by quoting the excerpts it was shown, judges CORRECT
    when the reference occurs in the answer. So the judged score follows what memory retrieved."""

    path = "/v1"

    def __init__(self) -> None:
        self.requests: list[dict] = []
        fake = self

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                fake.requests.append(body)
                system, user = body["messages"][0]["content"], body["messages"][-1]["content"]
                if "grade an answer" in system:
                    ref = user.split("Reference answer: ", 1)[1].split("\n", 1)[0].lower()
                    answer = user.split("Answer: ", 1)[1].lower()
                    text = "CORRECT" if ref and ref in answer else "WRONG"
                else:
                    text = system.split("Excerpts:", 1)[1]
                self.reply({"id": "x", "object": "chat.completion", "created": 0, "model": "fake",
                            "choices": [{"index": 0, "finish_reason": "stop",
                                         "message": {"role": "assistant", "content": text}}],
                            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

        super().__init__(Handler)


def test_judge_answers_and_grades_with_the_configured_model(conv26):
    with _FakeJudge() as fake:
        env = {"BARA_LLM_BASE_URL": fake.url, "BARA_LLM_TIMEOUT_S": "10", "BARA_LLM_MAX_RETRIES": "0"}
        result = _run(["--locomo", str(conv26), *SLICE, "--modes", "turns,gated", "--json",
                       "--judge", "openai:fake-judge"], env=env)
    assert result.exit_code == 0, result.output
    judge = json.loads(result.stdout)["judge"]
    assert judge["status"] == "ok" and judge["model"] == "openai:fake-judge"
    for mode in ("turns", "gated"):
        scored = judge["modes"][mode]
        assert scored["failed"] == 0 and scored["n"] > 0 and 0.0 <= scored["accuracy"] <= 1.0
    # two calls (answer, grade) per answerable question per mode, all sent to the loopback server
    assert len(fake.requests) == 2 * (judge["modes"]["turns"]["n"] + judge["modes"]["gated"]["n"])
    assert all(r["model"] == "fake-judge" for r in fake.requests)


# ---- malformed LoCoMo files: exit 2 naming what to change, never a traceback or a silent wrong run ----------
def _conv_json(**change) -> dict:
    turns = [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog named Rex."},
             {"speaker": "Bob", "dia_id": "D1:2", "text": "Nice!"}]
    conv = {"speaker_a": "Ann", "speaker_b": "Bob", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": turns}
    raw = {"sample_id": "x", "conversation": conv,
           "qa": [{"question": "What is Ann's dog called?", "answer": "Rex", "evidence": ["D1:1"], "category": 1}]}
    for key, value in change.items():
        (raw if key in raw else conv)[key] = value
    return raw


@pytest.mark.parametrize("change,says", [
    ({"speaker_b": None}, "speaker_b"),
    ({"speaker_a": ""}, "speaker_a"),
    ({"qa": []}, "no questions"),
    ({"session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "a"},
                    {"speaker": "Bob", "dia_id": "D1:1", "text": "b"}]}, "'D1:1'"),
])
def test_a_malformed_locomo_file_exits_2_and_says_what_to_change(tmp_path, change, says):
    path = tmp_path / "conv.json"
    raw = _conv_json(**change)
    if change.get("speaker_b", "") is None:
        del raw["conversation"]["speaker_b"]
    path.write_text(json.dumps(raw))
    result = _run(["--locomo", str(path)])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_json_null_fields_are_empty_not_the_word_none_and_undated_sessions_keep_their_place(tmp_path):
    from bara.eval.locomo_data import load_locomo_all

    later = [{"speaker": "Ann", "dia_id": "D2:1", "text": None}]
    last = [{"speaker": "Bob", "dia_id": "D3:1", "text": "bye", "blip_caption": None}]
    raw = _conv_json(session_2=later, session_3=last, session_3_date_time="2:00 pm on 9 June, 2023",
                     qa=[{"question": "Q?", "answer": None, "adversarial_answer": "trap", "category": 5},
                         {"question": None, "answer": "A", "evidence": None, "category": 1}])
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(raw))
    (conv,) = load_locomo_all(path)
    assert [s.n for s in conv.sessions] == [1, 2, 3]
    assert [t.text for t in conv.turns[2:]] == ["", "bye"]
    assert [(q.question, q.answer, q.evidence) for q in conv.questions] == [("Q?", "trap", ()), ("", "A", ())]
