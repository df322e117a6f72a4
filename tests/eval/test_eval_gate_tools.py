"""`bara eval gate` (200 CLINC150 utterances, MTRAG tasks, bad rows) and `bara eval tools` (40 BFCL cases)."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from bara.errors import InputError
from bara.eval.gate import evaluate_gate
from bara.eval.tools_bfcl import ModelSelector, RouterSelector, evaluate_tools
from bara.llm import ScriptedModel
from bara.messages import AssistantMessage, ToolCall
from bara.settings import Settings

RATES = ("accuracy", "skip_precision", "skip_recall", "retrieve_recall")


def _bounded(report):
    return all(report[k] is None or 0.0 <= report[k] <= 1.0 for k in RATES)


@pytest.fixture(scope="module")
def clinc(tmp_path_factory, data_dir):
    """200 validation utterances, every 15th line, with domains.json beside them."""
    folder = tmp_path_factory.mktemp("clinc")
    lines = (data_dir / "clinc150" / "val.jsonl").read_text(encoding="utf-8").splitlines()[::15][:200]
    (folder / "val.jsonl").write_text("\n".join(lines) + "\n")
    shutil.copy(data_dir / "clinc150" / "domains.json", folder / "domains.json")
    return folder


def test_gate_on_clinc(clinc, embedder):
    out = evaluate_gate(clinc / "val.jsonl", None, Settings(), embedder).as_dict()
    domains = json.loads((clinc / "domains.json").read_text())
    chat = set(domains["small_talk"]) | set(domains["meta"])
    rows = [json.loads(line) for line in (clinc / "val.jsonl").read_text().splitlines()]
    assert out["n"] == 200 and out["problems"] == {}
    assert out["labels"]["no_retrieval"] == sum(r["intent"] in chat for r in rows)
    assert _bounded(out) and _bounded(out["rules_only"]) and out["gate"] == "rules + prototypes"
    assert out["latency_ms"]["p50"] <= out["latency_ms"]["p95"]
    assert out["accuracy"] >= out["labels"]["needs_retrieval"] / 200 - 0.05  # no worse than "always retrieve"
    assert sum(g["n"] for g in out["by_group"].values()) == 200


def test_gate_labelled_and_bad_rows(tmp_path, embedder):
    rows = ['{"text": "hello there", "needs_retrieval": false}', '{"text": "What does RFC 793 say about RST?",'
            ' "needs_retrieval": true}', '{"text": "", "needs_retrieval": true}', '{"text": "x", "needs_retrieval":'
            ' "yes"}', "{broken", '{"text": "what is my balance", "intent": "balance"}']
    (tmp_path / "labelled.jsonl").write_text("\n".join(rows) + "\n")
    out = evaluate_gate(tmp_path / "labelled.jsonl", None, Settings(), embedder).as_dict()
    assert out["n"] == 2 and _bounded(out)
    assert out["problems"] == {"missing or empty text": 1, "malformed JSON line": 1,
                               "no usable label (intent, needs_retrieval or MTRAG task)": 2,
                               "no usable domains.json for intent rows": 1}
    with pytest.raises(InputError):
        evaluate_gate(tmp_path / "missing.jsonl", None, Settings(), embedder)


def test_gate_on_mtrag_tasks(tmp_path, data_dir, embedder):
    lines = (data_dir / "mtrag" / "tasks.dev.jsonl").read_text(encoding="utf-8").splitlines()[:12]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    out = evaluate_gate(tmp_path / "tasks.jsonl", None, Settings(), embedder).as_dict()
    need = sum(json.loads(x)["answerability"][0] in ("ANSWERABLE", "PARTIAL") for x in lines)
    assert out["n"] == 12 and out["labels"]["needs_retrieval"] == need and _bounded(out)


# ----------------------------------------------------------------------- tools
@pytest.fixture(scope="module")
def bfcl(tmp_path_factory, data_dir):
    """20 `multiple` and 20 `irrelevance` cases; answers found under possible_answer/ by default."""
    folder = tmp_path_factory.mktemp("bfcl")
    (folder / "possible_answer").mkdir()
    for name in ("BFCL_v4_multiple.jsonl", "BFCL_v4_irrelevance.jsonl"):
        lines = (data_dir / "bfcl" / name).read_text(encoding="utf-8").splitlines()[:20]
        (folder / name).write_text("\n".join(lines) + "\n")
    shutil.copy(data_dir / "bfcl" / "possible_answer" / "BFCL_v4_multiple.jsonl", folder / "possible_answer")
    return folder


def test_tools_with_the_rule_router(bfcl, embedder):
    RuleRouter = pytest.importorskip("bara.domains.funds.router").RuleRouter
    files = [bfcl / "BFCL_v4_multiple.jsonl", bfcl / "BFCL_v4_irrelevance.jsonl"]
    out = evaluate_tools(files, [], RouterSelector(RuleRouter(embedder, Settings()))).as_dict()
    assert out["n"] == 40 and out["n_selection"] == 20 and out["n_irrelevance"] == 20
    assert 0.0 <= out["selection_accuracy"] <= 1.0 and 0.0 <= out["irrelevance_abstention"] <= 1.0
    assert out["problems"] == {} and out["model_errors"] == {} and out["model"] == "rule-router"
    only = evaluate_tools(files[1:], [], RouterSelector(RuleRouter(embedder, Settings()))).as_dict()
    assert only["selection_accuracy"] is None and only["n"] == 20


def test_tools_with_a_model_maps_names_back(bfcl, tmp_path):
    case = json.loads((bfcl / "BFCL_v4_multiple.jsonl").read_text().splitlines()[0])
    truth = json.loads((bfcl / "possible_answer" / "BFCL_v4_multiple.jsonl").read_text().splitlines()[0])
    (tmp_path / "one.jsonl").write_text(json.dumps(case) + "\n" + json.dumps({**case, "id": "multiple_999"})
                                        + "\n{bad\n")
    expected = next(iter(truth["ground_truth"][0]))

    def pick(messages, tools):
        name = next(t.name for t in tools if t.name == expected.replace(".", "_"))
        return AssistantMessage(tool_calls=(ToolCall("c1", name, {}),))

    out = evaluate_tools([tmp_path / "one.jsonl"], [bfcl / "possible_answer" / "BFCL_v4_multiple.jsonl"],
                         ModelSelector(ScriptedModel([pick]))).as_dict()
    assert out["selection_accuracy"] == 1.0 and out["n"] == 1 and out["model"] == "model:scripted"
    assert out["problems"] == {"case without a possible answer": 1, "malformed JSON line": 1}
    failing = evaluate_tools([tmp_path / "one.jsonl"], [bfcl / "possible_answer" / "BFCL_v4_multiple.jsonl"],
                             ModelSelector(ScriptedModel([]))).as_dict()
    assert failing["n"] == 0 and failing["model_errors"] == {"ScriptExhaustedError": 1}


def test_cli_gate_and_tools_json(clinc, bfcl, tmp_path, monkeypatch):
    from bara.cli import app

    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("BARA_MODEL", raising=False)
    gate = CliRunner().invoke(app, ["eval", "gate", "--data", str(clinc / "val.jsonl"), "--domains",
                                    str(clinc / "domains.json"), "--json"])
    assert gate.exit_code == 0, gate.output
    assert set(json.loads(gate.stdout)) >= {"n", *RATES, "latency_ms"}
    tools = CliRunner().invoke(app, ["eval", "tools", "--bfcl", str(bfcl / "BFCL_v4_irrelevance.jsonl"), "--json"])
    assert tools.exit_code == 0, tools.output
    out = json.loads(tools.stdout)
    assert set(out) >= {"n", "selection_accuracy", "irrelevance_abstention"} and out["selection_accuracy"] is None
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "gate_clinc.json").write_text(gate.stdout)
    (tmp_path / "runs" / "tools_bfcl.json").write_text(tools.stdout)
    assert CliRunner().invoke(app, ["eval", "report", str(tmp_path / "runs")]).exit_code == 0
    assert "Gate: retrieval necessity" in (tmp_path / "runs" / "report.md").read_text()
    assert CliRunner().invoke(app, ["eval", "report", str(tmp_path / "empty")]).exit_code == 2


def test_tools_verdicts_on_simple_and_parallel_multiple(tmp_path, data_dir):
    """issue 13: simple_python and parallel_multiple parse; each answerable case is right, partial (only
    tools from the answer), abstained or wrong, and ``only_answer_tools`` is right + partial."""
    (tmp_path / "possible_answer").mkdir()
    for name in ("BFCL_v4_simple_python.jsonl", "BFCL_v4_parallel_multiple.jsonl"):
        lines = (data_dir / "bfcl" / name).read_text(encoding="utf-8").splitlines()[:4]
        (tmp_path / name).write_text("\n".join(lines) + "\n")
        shutil.copy(data_dir / "bfcl" / "possible_answer" / name, tmp_path / "possible_answer")
    answers = {}
    for name in ("BFCL_v4_simple_python.jsonl", "BFCL_v4_parallel_multiple.jsonl"):
        for line in (tmp_path / "possible_answer" / name).read_text().splitlines():
            row = json.loads(line)
            answers[row["id"]] = [k for item in row["ground_truth"] for k in item]
    cases = [json.loads(x) for n in ("BFCL_v4_simple_python.jsonl", "BFCL_v4_parallel_multiple.jsonl")
             for x in (tmp_path / n).read_text().splitlines()]
    plan = {c["id"]: p for c, p in zip(cases, ["right", "abstained", "wrong", "right", "partial", "right",
                                                 "abstained", "wrong"], strict=False)}
    prompts = {json.dumps(c["question"][0][-1]["content"]): c["id"] for c in cases}

    def pick(messages, tools):
        case_id = prompts[json.dumps(messages[-1].text)]
        names, safe = answers[case_id], {t.name for t in tools}
        choice = {"right": names, "partial": names[:1], "abstained": [],
                  "wrong": sorted(safe - {n.replace(".", "_") for n in names})[:1] or ["not_offered"]}
        return AssistantMessage(tool_calls=tuple(ToolCall(f"c{i}", n.replace(".", "_"), {})
                                                 for i, n in enumerate(choice[plan[case_id]])))

    out = evaluate_tools([tmp_path / "BFCL_v4_simple_python.jsonl", tmp_path / "BFCL_v4_parallel_multiple.jsonl"],
                         [], ModelSelector(ScriptedModel([pick] * 8))).as_dict()
    assert out["problems"] == {} and out["n"] == 8
    simple, parallel = out["by_category"]["simple_python"], out["by_category"]["parallel_multiple"]
    assert simple["verdicts"] == {"abstained": 1, "right": 2, "wrong": 1}
    assert simple["accuracy"] == 0.5 and simple["only_answer_tools"] == 0.5
    assert parallel["verdicts"] == {"abstained": 1, "partial": 1, "right": 1, "wrong": 1}
    assert parallel["accuracy"] == 0.25 and parallel["only_answer_tools"] == 0.5
