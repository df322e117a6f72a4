"""The OpenTelemetry SDK side: a tracer and a meter of bara's own, fed one finished turn at a time.

Imported only when export is on (:func:`bara.observe.build_observer`), so bara without the ``otel``
extra never imports the SDK. No global provider is installed: bara is a library, and an application
that configures OpenTelemetry itself keeps its own. Spans go through a ``BatchSpanProcessor`` (the
OTLP/HTTP export runs on the SDK's worker thread, not in the turn), metrics through a periodic reader.

Surfaces get it through :class:`~bara.observe.process.ProcessObserver`, which runs it in a child
process so that building and encoding the spans never competes with a turn for the interpreter lock.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from opentelemetry import trace as trace_api
from opentelemetry.context import Context
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from bara.observe.config import ObserveConfig
from bara.observe.measures import TurnMeasures, measures
from bara.observe.plan import SpanPlan, plan_turn
from bara.trace import TurnTrace

SCOPE = "bara.observe"
_TOKEN_BUCKETS = (0, 50, 100, 200, 400, 800, 1600, 3200, 6400)


class TurnMetrics:
    """OpenTelemetry instruments for what :class:`~bara.observe.measures.TurnMeasures` counts."""

    def __init__(self, provider: MeterProvider) -> None:
        meter = provider.get_meter(SCOPE)
        self.retrieval = meter.create_histogram("gen_ai.retrieval.duration", unit="s",
                                                description="Duration of one tier's search")
        self.turns = meter.create_counter("bara.turns", unit="{turn}", description="Turns by mode and route")
        self.skipped = meter.create_counter("bara.retrievals.skipped", unit="{turn}",
                                            description="Turns the gate answered without searching any tier")
        self.tokens = meter.create_histogram("bara.context.tokens", unit="{token}",
                                             description="Tokens of retrieved context added to the prompt",
                                             explicit_bucket_boundaries_advisory=_TOKEN_BUCKETS)
        self.items = meter.create_counter("bara.context.items", unit="{item}",
                                          description="Items injected into the prompt, per tier")

    def record(self, m: TurnMeasures) -> None:
        labels = {"bara.mode": m.mode, "bara.route": m.route}
        self.turns.add(1, labels)
        if m.skipped:
            self.skipped.add(1, labels)
        for tier, seconds in m.retrieval_s.items():
            self.retrieval.record(seconds, {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": tier})
        self.tokens.record(m.context_tokens, labels)
        for tier, n in m.items.items():
            self.items.add(n, {"bara.tier": tier})


class Observer:
    """Turns finished traces into spans and metrics, in the calling thread; ``shutdown`` flushes both."""

    def __init__(self, config: ObserveConfig, span_exporter: SpanExporter | None = None,
                 metric_reader: MetricReader | None = None) -> None:
        self.config = config
        resource = Resource.create({"service.name": config.service_name,
                                    "openinference.project.name": config.project})
        self.tracer_provider = TracerProvider(resource=resource)
        if span_exporter is None:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            self.tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=config.traces_endpoint)))
        else:  # tests: spans are there as soon as the turn is recorded
            self.tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
        self.tracer = self.tracer_provider.get_tracer(SCOPE)
        if metric_reader is None and config.metrics:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

            metric_reader = PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=config.metrics_endpoint))
        self.meter_provider = MeterProvider(metric_readers=[metric_reader] if metric_reader else [], resource=resource)
        self.metrics = TurnMetrics(self.meter_provider)

    def turn(self, trace: TurnTrace, message: str = "", headers: Mapping[str, str] | None = None) -> None:
        """Emit ``trace``'s spans (continuing a W3C ``traceparent`` in ``headers``) and record its metrics."""
        parent = TraceContextTextMapPropagator().extract(dict(headers)) if headers else None
        emit(self.tracer, plan_turn(trace, self.config, message), parent)
        self.metrics.record(measures(trace.mode, trace.route, trace.retrieved, trace.latency_ms,
                                     trace.context_tokens, trace.tiers))

    def force_flush(self) -> None:
        self.tracer_provider.force_flush()
        self.meter_provider.force_flush()

    def shutdown(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


def emit(tracer: trace_api.Tracer, plans: Sequence[SpanPlan], parent: Context | None = None) -> None:
    """Start every planned span with its real start time (parents first), then end each at its end."""
    spans: dict[str, Any] = {}
    for plan in plans:
        context = trace_api.set_span_in_context(spans[plan.parent]) if plan.parent in spans else parent
        span = tracer.start_span(plan.name, context=context, kind=SpanKind.CLIENT if plan.client else SpanKind.INTERNAL,
                                 attributes=plan.attrs, start_time=plan.start_ns)
        if plan.error:
            span.set_attribute("error.type", plan.error)
            span.set_status(Status(StatusCode.ERROR, plan.error))
        spans[plan.key] = span
    for plan in reversed(plans):
        spans[plan.key].end(end_time=max(plan.end_ns, plan.start_ns))
