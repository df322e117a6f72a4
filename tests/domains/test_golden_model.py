"""`bara eval golden --model provider:name` against a loopback fake OpenAI-compatible server.

The fake is a tiny "model": it calls one tool chosen by keyword, then answers with the tool results
verbatim; with no tools offered it declines. Every request it receives is recorded, so the tool-spec
tokens and provider-reported tokens in the report are checked against what actually went over the wire.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pytest
from typer.testing import CliRunner

from bara.domains.funds.assistant import index_fund_documents
from bara.domains.funds.golden import CATEGORIES, Facts
from bara.domains.funds.golden_cases import DEV, TEST, cases_for
from bara.app import Bara
from bara.cli import app
from bara.domains.funds import create_demo_users, load_amfi
from bara.prompts.frames import estimate_tokens
from bara.settings import Settings
from loopback import LoopbackServer

PICKED = ("num-xirr-asha", "ret-fact-house", "ref-named-user", "sel-xirr", "sel-greeting")


class FakeModelServer(LoopbackServer):
    path = "/v1"
    """OpenAI Chat Completions on 127.0.0.1: one keyword-chosen tool call, then the results as the answer."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        super().__init__(self._handler())

    @staticmethod
    def reply(body: dict) -> dict:
        messages, tools = body["messages"], body.get("tools") or []
        last = max(i for i, m in enumerate(messages) if m["role"] == "user")
        results = [m["content"] for m in messages[last + 1:] if m["role"] == "tool"]
        text = messages[last]["content"]
        message: dict = {"role": "assistant", "content": None}
        if tools and not results:
            name = "compute_xirr" if "xirr" in text.lower() else "search_documents"
            args = {} if name == "compute_xirr" else {"query": text}
            message["tool_calls"] = [{"id": "call_1", "type": "function",
                                      "function": {"name": name, "arguments": json.dumps(args)}}]
            finish = "tool_calls"
        else:
            message["content"] = ("Here is what the tools returned: " + " ".join(results)) if results else \
                "I can't help with that: I can only access your own account."
            finish = "stop"
        prompt = estimate_tokens(json.dumps(body))
        return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 1_700_000_000, "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": 9, "total_tokens": prompt + 9}}

    def _handler(self) -> type:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
                fake.requests.append(body)
                data = json.dumps(fake.reply(body)).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


@pytest.fixture(scope="module")
def golden_db(tmp_path_factory, data_dir, embedder):
    tmp = tmp_path_factory.mktemp("golden_model")
    with Bara(Settings(db=str(tmp / "g.db"), cache_dir=tmp / "cache"), embedder=embedder) as bara:
        load_amfi(bara.store, data_dir)
        create_demo_users(bara.store)
        facts = Facts(bara.store)
        held = {h.code for u in ("u_asha", "u_bilal", "u_dev") for h in facts.holdings(u)}
        index_fund_documents(bara, data_dir, codes=held, fiqa_ids=set())
    return tmp


def run_cli(golden_db, args: list[str], env: dict) -> tuple[int, str, str]:
    base = {"BARA_CACHE_DIR": str(golden_db / "cache"), "BARA_MODEL": "", "BARA_LLM_BASE_URL": ""}
    result = CliRunner().invoke(app, ["eval", "golden", "--db", str(golden_db / "g.db"), *args],
                                                env={**base, **env})
    return result.exit_code, result.stdout, result.stderr


def case_args() -> list[str]:
    return [a for c in PICKED for a in ("--case", c)]


def test_splits_are_disjoint_jsonl_data_and_large_enough():
    ids = [c["id"] for c in DEV + TEST]
    assert len(ids) == len(set(ids)) >= 150
    assert len(TEST) >= 50 and {c["split"] for c in TEST} == {"test"}
    for split in (DEV, TEST):
        assert {c["category"] for c in split} == set(CATEGORIES)
    assert [c["id"] for c in cases_for("all")] == ids


def test_a_configured_model_runs_the_cases_and_tokens_are_counted(golden_db):
    with FakeModelServer() as fake:
        code, out, err = run_cli(golden_db, ["--model", "openai:gpt-fake", "--json", *case_args()],
                                 {"BARA_LLM_BASE_URL": fake.url, "OPENAI_API_KEY": "sk-test"})
    assert code == 0, err
    report = json.loads(out)
    assert report["model"] == "gpt-fake"
    assert {k: v["total"] for k, v in report["categories"].items()} == {
        "numeric": 1, "retrieval": 1, "refusal": 1, "tool_selection": 2}
    assert report["categories"]["numeric"]["passed"] == 1  # the XIRR reached the answer through the tool
    assert report["categories"]["refusal"]["passed"] == 1
    assert report["categories"]["tool_selection"]["passed"] == 2
    with_tools = [r for r in fake.requests if r.get("tools")]
    sent = sum(estimate_tokens(json.dumps([{k: t["function"][k] for k in ("name", "description", "parameters")}
                                           for t in r["tools"]], separators=(",", ":"))) for r in with_tools)
    assert report["totals"]["tool_spec_tokens"] == sent > 0
    assert report["totals"]["input_tokens"] == sum(estimate_tokens(json.dumps(r)) for r in fake.requests)
    assert len(fake.requests) == report["totals"]["model_calls"]
    assert len(with_tools) < len(fake.requests)  # the gate offered no tools for the refusal and the greeting


def test_without_a_model_it_says_so_and_runs_the_router(golden_db):
    code, out, err = run_cli(golden_db, ["--json", "--split", "dev", *case_args()], {})
    assert code == 0, err
    assert "no model configured" in err
    report = json.loads(out)
    assert report["model"] == "rule-router"
    assert report["totals"]["input_tokens"] == 0 and report["totals"]["tool_spec_tokens"] > 0
    assert set(report["splits"]) == {"dev"}


def test_bad_split_and_unreachable_model_are_clear_errors(golden_db):
    code, _, err = run_cli(golden_db, ["--split", "holdout"], {})
    assert code == 2 and "--split" in err
    code, _, err = run_cli(golden_db, ["--model", "openai:gpt-fake"], {"OPENAI_API_KEY": ""})
    assert code == 2 and "OPENAI_API_KEY" in err
