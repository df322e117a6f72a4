"""OpenTelemetry export (issue 39): real turns on the RFC store, spans caught by the SDK's in-memory
exporter, checked name by name and attribute by attribute; content off and identities hashed by
default; no SDK object (nor import) without an exporter."""

from __future__ import annotations

import hashlib
import hmac
import json
import subprocess
import sys
from pathlib import Path

import pytest
from kb_helpers import rfc_bara

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed (pip install 'bara[otel]')")

from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from bara.observe import build_observer, observe_config  # noqa: E402
from bara.observe.export import Observer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What does HSTS protect against?"


@pytest.fixture(scope="module")
def bara(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "observe") as b:
        yield b


def observer(bara, **env: str) -> tuple[Observer, InMemorySpanExporter, InMemoryMetricReader]:
    config = observe_config(bara.settings, "http://127.0.0.1:9/v1/traces", environ=env, embedder=bara.embedder)
    assert config is not None
    spans, metrics = InMemorySpanExporter(), InMemoryMetricReader()
    return Observer(config, span_exporter=spans, metric_reader=metrics), spans, metrics


def by_name(spans) -> dict[str, list]:
    out: dict[str, list] = {}
    for s in spans:
        out.setdefault(s.name, []).append(s)
    return out


def attrs(span) -> dict:
    return dict(span.attributes or {})


def gated_turns(bara, obs: Observer, user: str, messages: list[str]):
    from bara.turn.gated import Assistant

    assistant, cid, results = Assistant(bara), None, []
    for text in messages:
        result = assistant.turn(user, text, cid)
        cid = result.conversation_id
        obs.turn(result.trace, text)
        results.append(result)
    return results


def test_gated_turn_that_skips_retrieval(bara):
    obs, exporter, _ = observer(bara)
    (result,) = gated_turns(bara, obs, "obs-skip", ["Hi there!"])
    spans = exporter.get_finished_spans()
    names = by_name(spans)
    root = names["invoke_workflow bara.gated"][0]
    a = attrs(root)
    assert a["openinference.span.kind"] == "CHAIN" and a["gen_ai.operation.name"] == "invoke_workflow"
    assert a["gen_ai.conversation.id"] == a["session.id"] == result.conversation_id
    key = bara.settings.otel_user_id_key.encode()
    assert a["user.id"] == hmac.new(key, b"obs-skip", hashlib.sha256).hexdigest()[:32] != "obs-skip"
    gate = attrs(names["bara.gate"][0])
    assert gate["bara.gate.retrieval_skipped"] is True and gate["bara.gate.route"] == result.trace.route
    assert gate["bara.gate.intent"] == result.trace.intent and gate["bara.gate.intent_source"]
    assert gate["bara.gate.tiers_opened"] == () and gate["bara.gate.k.kb"] == 0
    assert set(gate["bara.gate.reasons"]) <= set(result.trace.reasons) and gate["bara.gate.reasons"]
    assert not [s for s in spans if attrs(s).get("gen_ai.operation.name") == "retrieval"]
    assert not [s for s in spans if attrs(s).get("openinference.span.kind") == "EMBEDDING"]
    llm = attrs(names["chat offline-extractive"][0])
    assert llm["openinference.span.kind"] == "LLM" and llm["gen_ai.request.model"] == "offline-extractive"
    assert llm["gen_ai.system"] == "bara" and "gen_ai.provider.name" not in llm  # v1.36 names by default
    memory = attrs(names["create_memory"][0])
    assert memory["gen_ai.memory.store.id"] == "conversations" and memory["gen_ai.memory.record.count"] == 2
    # every span but the turn has a parent inside this trace; times are the turn's own
    ids = {s.context.span_id for s in spans}
    assert all(s.parent is not None and s.parent.span_id in ids for s in spans if s is not root)
    assert all(root.start_time <= s.start_time <= s.end_time <= root.end_time for s in spans)
    content = ("input.value", "output.value", "gen_ai.retrieval.query.text", "gen_ai.output.messages")
    assert not [k for s in spans for k in attrs(s) if k in content]  # content is off by default
    assert result.trace.answer not in json.dumps([attrs(s) for s in spans], default=str)


def test_a_turn_that_searches_two_tiers(bara):
    obs, exporter, reader = observer(bara)
    results = gated_turns(bara, obs, "obs-two", [QUESTION, "Thanks. And what is HSTS?", QUESTION])
    trace = results[-1].trace
    last_trace_id = max(exporter.get_finished_spans(), key=lambda s: s.start_time).context.trace_id
    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == last_trace_id]
    retrievals = {attrs(s)["gen_ai.data_source.id"]: s for s in spans
                  if attrs(s).get("gen_ai.operation.name") == "retrieval"}
    assert set(retrievals) == {"kb", "qa"}, trace.reasons
    policy = trace.gates.policy or {}
    for tier, span in retrievals.items():
        a = attrs(span)
        assert span.name == f"retrieval {tier}" and a["openinference.span.kind"] == "RETRIEVER"
        assert a["gen_ai.request.top_k"] == float(policy[f"{tier}_k"])
        hits = trace.hits if tier == "kb" else [h for h in trace.memory_hits if h.tier == tier]
        assert a["bara.retrieval.hits"] == len(hits) > 0
        for i, hit in enumerate(hits):
            assert a[f"retrieval.documents.{i}.document.score"] == pytest.approx(hit.score)
            assert json.loads(a[f"retrieval.documents.{i}.document.metadata"])["tier"] == tier
            assert f"retrieval.documents.{i}.document.content" not in a
        assert f"retrieval.documents.{len(hits)}.document.id" not in a
    gate = attrs(next(s for s in spans if s.name == "bara.gate"))
    assert set(gate["bara.gate.tiers_opened"]) >= {"kb", "qa"} and gate["bara.gate.retrieval_skipped"] is False
    emb = [attrs(s) for s in spans if attrs(s).get("openinference.span.kind") == "EMBEDDING"]
    assert emb and emb[0]["gen_ai.embeddings.dimension.count"] == bara.embedder.dim
    assert emb[0]["embedding.model_name"] == bara.embedder.model_id
    data = reader.get_metrics_data()
    points = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"gen_ai.retrieval.duration", "bara.turns", "bara.context.tokens", "bara.context.items"} <= set(points)
    tiers = {p.attributes["gen_ai.data_source.id"] for p in points["gen_ai.retrieval.duration"].data.data_points}
    assert tiers == {"kb", "qa"}


def test_content_and_latest_conventions_only_when_asked(bara):
    obs, exporter, _ = observer(bara, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
                                OTEL_SEMCONV_STABILITY_OPT_IN="http,gen_ai_latest_experimental")
    (result,) = gated_turns(bara, obs, "obs-content", [QUESTION])
    names = by_name(exporter.get_finished_spans())
    root = attrs(names["invoke_workflow bara.gated"][0])
    assert root["input.value"] == QUESTION and root["output.value"] == result.trace.answer
    kb = attrs(names["retrieval kb"][0])
    assert kb["gen_ai.retrieval.query.text"] == result.trace.retrieval_query
    assert [d["id"] for d in json.loads(kb["gen_ai.retrieval.documents"])] == [
        kb[f"retrieval.documents.{i}.document.id"] for i in range(len(result.trace.hits))]
    assert kb["retrieval.documents.0.document.content"] == result.trace.hits[0].title
    llm = attrs(names["chat offline-extractive"][0])
    assert llm["gen_ai.provider.name"] == "bara" and "gen_ai.system" not in llm
    assert json.loads(llm["gen_ai.output.messages"])[0]["parts"][0]["content"] == result.trace.answer


def agent_turn(bara, obs: Observer, user: str):
    from bara.domains.funds import FundsRepo
    from bara.domains.funds.assistant import AgentAssistant
    from bara.llm import ScriptedModel
    from bara.llm.base import ModelResponse
    from bara.messages import AssistantMessage, ToolCall, Usage

    FundsRepo(bara.store)
    bara.store.execute("INSERT OR IGNORE INTO funds_users (id, name, created) VALUES (?, ?, ?)",
                       (user, "Sam", "2026-01-01"))
    calls = (ToolCall(id="c1", name="search_documents", arguments={"query": "index funds"}),
             ToolCall(id="c2", name="search_documents", arguments={"query": "expense ratio"}))
    model = ScriptedModel([ModelResponse(AssistantMessage(tool_calls=calls), Usage(120, 30), "tool_use"),
                           ModelResponse(AssistantMessage(text="Index funds track an index."), Usage(300, 12),
                                         "end_turn")])
    result = AgentAssistant(bara, model=model).turn(user, "What is an index fund and its expense ratio?")
    obs.turn(result.trace, "What is an index fund and its expense ratio?")
    return result


def test_agent_turn_with_two_tool_calls(bara):
    obs, exporter, _ = observer(bara)
    result = agent_turn(bara, obs, "u_obs_agent")
    spans = exporter.get_finished_spans()
    names = by_name(spans)
    root = names["invoke_agent bara"][0]
    a = attrs(root)
    assert a["openinference.span.kind"] == "AGENT" and a["gen_ai.operation.name"] == "invoke_agent"
    assert a["gen_ai.usage.input_tokens"] == 420 and a["gen_ai.usage.output_tokens"] == 42
    tools = sorted(names["execute_tool search_documents"], key=lambda s: s.start_time)
    assert [attrs(t)["gen_ai.tool.call.id"] for t in tools] == ["c1", "c2"]
    for t in tools:
        ta = attrs(t)
        assert ta["openinference.span.kind"] == "TOOL" and ta["gen_ai.tool.name"] == "search_documents"
        assert t.parent.span_id == root.context.span_id
        assert "gen_ai.tool.call.arguments" not in ta and "input.value" not in ta  # content off
    llms = sorted(names["chat scripted"], key=lambda s: s.start_time)
    assert [attrs(s)["gen_ai.response.finish_reasons"] for s in llms] == [("tool_use",), ("end_turn",)]
    assert [attrs(s)["gen_ai.usage.input_tokens"] for s in llms] == [120, 300]
    assert llms[0].end_time <= tools[0].start_time and tools[1].end_time <= llms[1].start_time
    assert result.trace.gates.agent is not None and len(result.trace.gates.agent.tool_calls) == 2


def test_tool_arguments_and_results_with_content_capture(bara):
    obs, exporter, _ = observer(bara, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true",
                                OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai_latest_experimental")
    agent_turn(bara, obs, "u_obs_agent_content")
    tools = sorted(by_name(exporter.get_finished_spans())["execute_tool search_documents"], key=lambda s: s.start_time)
    args = [json.loads(attrs(t)["gen_ai.tool.call.arguments"]) for t in tools]
    assert args == [{"query": "index funds"}, {"query": "expense ratio"}]
    assert all(json.loads(attrs(t)["gen_ai.tool.call.result"])["ok"] in (True, False) for t in tools)


def test_incoming_traceparent_is_continued(bara):
    obs, exporter, _ = observer(bara)
    from bara.turn.gated import Assistant

    result = Assistant(bara).turn("obs-parent", "Hi there!")
    trace_id, parent_id = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
    obs.turn(result.trace, "Hi there!", {"traceparent": f"00-{trace_id}-{parent_id}-01"})
    root = next(s for s in exporter.get_finished_spans() if s.name.startswith("invoke_workflow"))
    assert format(root.context.trace_id, "032x") == trace_id and format(root.parent.span_id, "016x") == parent_id


def test_user_id_in_clear_or_omitted_only_when_configured(bara):
    for mode, expected in (("clear", "obs-id"), ("omit", None)):
        settings = bara.settings.override(otel_user_id=mode)
        config = observe_config(settings, "http://127.0.0.1:9", environ={})
        assert config is not None and config.user("obs-id") == expected


def test_off_builds_nothing_and_imports_no_sdk():
    from bara.settings import Settings

    assert build_observer(Settings(), environ={}) is None
    assert build_observer(Settings(), environ={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                                               "OTEL_SDK_DISABLED": "true"}) is None
    code = ("import sys, bara.observe, bara.serve.app, bara.cli; from bara.settings import Settings; "
            "assert bara.observe.build_observer(Settings(), environ={}) is None; "
            "print(sorted(m for m in sys.modules if m.startswith('opentelemetry.sdk')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(Path.home())})
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_a_bad_otlp_url_says_what_to_pass():
    from bara.errors import InputError
    from bara.settings import Settings

    with pytest.raises(InputError, match="OTLP/HTTP address"):
        observe_config(Settings(), "127.0.0.1:4318", environ={})



def test_the_otlp_exporter_runs_in_a_child_process_and_posts_to_the_endpoint(bara):
    """build_observer's path: the turn only queues its trace; a spawned child builds the spans and
    POSTs them as OTLP/HTTP protobuf (here to a loopback sink that decodes what it is sent)."""
    import http.server
    import threading

    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from bara.turn.gated import Assistant

    received: list[tuple[str, bytes]] = []

    class Sink(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            received.append((self.path, self.rfile.read(int(self.headers.get("Content-Length") or 0))))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):  # quiet
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        obs = build_observer(bara.settings, f"http://127.0.0.1:{server.server_address[1]}", embedder=bara.embedder,
                             environ={})
        assert obs is not None and type(obs).__name__ == "ProcessObserver"
        result = Assistant(bara).turn("obs-child", "Hi there!")
        obs.turn(result.trace, "Hi there!")
        obs.shutdown()  # exports what is queued, then ends the child
    finally:
        server.shutdown()
    names = []
    for path, body in received:
        if path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            names += [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]
    assert "invoke_workflow bara.gated" in names and "bara.gate" in names
    assert "/v1/metrics" in {p for p, _ in received}
