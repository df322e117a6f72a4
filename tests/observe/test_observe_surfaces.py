"""`bara serve` and `bara chat` with OpenTelemetry export (issue 39): the service continues an incoming
W3C traceparent and counts turns by route on /metrics; --otlp reaches the workers as the standard
variable; a bad --otlp URL exits 2 saying what to pass."""

from __future__ import annotations

import pytest
from serve_helpers import bearer, make_app, sqlite_runtime

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed (pip install 'bara[otel]')")

from fastapi.testclient import TestClient  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from bara.observe import observe_config  # noqa: E402
from bara.observe.export import Observer  # noqa: E402

TRACE_ID, PARENT_ID = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"


def test_serve_continues_the_callers_traceparent_and_counts_routes(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("observe_serve"), embedder)
    exporter = InMemorySpanExporter()
    config = observe_config(runtime.settings, "http://127.0.0.1:9", environ={}, embedder=embedder)
    assert config is not None
    runtime.observer = Observer(config, span_exporter=exporter, metric_reader=InMemoryMetricReader())
    key = runtime.keys.create("alice").key
    try:
        with TestClient(make_app(runtime)) as client:
            headers = {**bearer(key), "traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"}
            r = client.post("/api/turns", json={"message": "What does HSTS protect against?"}, headers=headers)
            assert r.status_code == 200, r.text
            r = client.post("/api/turns", json={"message": "Hi there!"}, headers=bearer(key))
            assert r.status_code == 200, r.text
            text = client.get("/metrics").text
    finally:
        runtime.close()
    roots = [s for s in exporter.get_finished_spans() if s.name == "invoke_workflow bara.gated"]
    assert len(roots) == 2
    continued = [s for s in roots if s.parent is not None]
    assert len(continued) == 1 and format(continued[0].context.trace_id, "032x") == TRACE_ID
    assert format(continued[0].parent.span_id, "016x") == PARENT_ID  # type: ignore[union-attr]
    assert 'bara_turns_total{mode="gated",route="rag"} 1.0' in text
    assert 'bara_retrievals_skipped_total{mode="gated",route="llm_only"} 1.0' in text
    assert 'bara_retrieval_seconds_count{tier="kb"} 1.0' in text
    assert 'bara_context_items_total{tier="kb"}' in text


def test_serve_otlp_flag_sets_the_standard_variable(serve_calls, monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "")  # recorded, so restored after the test
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT")
    env = serve_calls("--otlp", "http://127.0.0.1:6006/v1/traces")
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://127.0.0.1:6006"


@pytest.mark.parametrize("command", [["serve", "--otlp", "localhost:4318"],
                                     ["chat", "--otlp", "localhost:4318", "--script", "x.jsonl"]])
def test_a_bad_otlp_url_exits_2(command, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from bara.cli import app

    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.jsonl").write_text('{"user": "hi"}\n')
    result = CliRunner().invoke(app, [*command, "--db", str(tmp_path / "s.db")])
    assert result.exit_code == 2 and "error:" in result.output and "OTLP/HTTP address" in result.output, result.output
