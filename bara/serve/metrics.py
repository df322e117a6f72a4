"""Prometheus metrics: requests, per-stage latencies, retrievals skipped vs run, errors; per turn also
(the same counts as the OpenTelemetry metrics of ``bara.observe``) turns by route, each
tier's search time, and the retrieved context's tokens and items per tier.

One registry per app (tests build many apps in one process). With several uvicorn workers each
process counts its own requests; set ``PROMETHEUS_MULTIPROC_DIR`` to an empty directory before
starting to get one merged view (prometheus-client's multiprocess mode).
"""

from __future__ import annotations

import os
import time
from typing import Any

from prometheus_client import (CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram,
                               generate_latest)
from starlette.requests import Request
from starlette.responses import Response

from bara.observe.measures import json_measures

_TOKEN_BUCKETS = (0, 50, 100, 200, 400, 800, 1600, 3200, 6400)
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("bara_http_requests", "HTTP requests by route and status",
                                ("method", "route", "status"), registry=r)
        self.latency = Histogram("bara_http_request_seconds", "HTTP request latency by route", ("route",),
                                 buckets=_BUCKETS, registry=r)
        self.stages = Histogram("bara_stage_seconds", "Per-stage turn latency", ("stage",), buckets=_BUCKETS,
                                registry=r)
        self.retrievals = Counter("bara_retrievals", "Turns by whether any retrieval ran", ("mode", "outcome"),
                                  registry=r)
        self.errors = Counter("bara_errors", "Errors by type (HTTP 5xx, provider faults, degraded stages)",
                              ("type",), registry=r)
        self.turns = Counter("bara_turns", "Turns by mode and route", ("mode", "route"), registry=r)
        self.skipped = Counter("bara_retrievals_skipped", "Turns answered without searching any tier, by route",
                               ("mode", "route"), registry=r)
        self.retrieval = Histogram("bara_retrieval_seconds", "One tier's search time", ("tier",), buckets=_BUCKETS,
                                   registry=r)
        self.context_tokens = Histogram("bara_context_tokens", "Tokens of retrieved context added to the prompt",
                                        ("route",), buckets=_TOKEN_BUCKETS, registry=r)
        self.context_items = Counter("bara_context_items", "Items injected into the prompt, per tier", ("tier",),
                                     registry=r)

    def observe_turn(self, trace: dict[str, Any]) -> None:
        for stage, ms in (trace.get("latency_ms") or {}).items():
            if ms:
                self.stages.labels(stage).observe(ms / 1e3)
        self.retrievals.labels(trace.get("mode", ""), "run" if trace.get("retrieved") else "skipped").inc()
        for code in trace.get("errors") or ():
            self.errors.labels(code.split(":", 1)[0] + "_failed").inc()
        self._observe_retrieval(trace)

    def _observe_retrieval(self, trace: dict[str, Any]) -> None:
        m = json_measures(trace)
        self.turns.labels(m.mode, m.route).inc()
        if m.skipped:
            self.skipped.labels(m.mode, m.route).inc()
        for tier, seconds in m.retrieval_s.items():
            self.retrieval.labels(tier).observe(seconds)
        self.context_tokens.labels(m.route).observe(m.context_tokens)
        for tier, n in m.items.items():
            self.context_items.labels(tier).inc(n)

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        self.requests.labels(method, route, str(status)).inc()
        self.latency.labels(route).observe(seconds)
        if status >= 500:
            self.errors.labels(f"http_{status}").inc()

    def render(self) -> Response:
        registry = self.registry
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


async def middleware(request: Request, call_next: Any) -> Response:
    t0 = time.perf_counter()
    response = await call_next(request)
    route = getattr(request.scope.get("route"), "path", "unmatched")
    request.app.state.metrics.observe_request(request.method, route, response.status_code, time.perf_counter() - t0)
    return response
