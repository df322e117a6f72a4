"""When bara exports telemetry, where to, and what a span may carry.

Export is on only when an OTLP endpoint is named: ``--otlp URL`` on ``bara serve`` / ``bara chat``, or
the standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables (and
``OTEL_SDK_DISABLED`` is not ``true``). Otherwise :func:`observe_config` returns None and no
OpenTelemetry object is built. Content (messages, queries, document titles, tool arguments and
results) is recorded only under ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``; the
latest experimental GenAI conventions replace the v1.36 names under
``OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass
from typing import Mapping

from bara.errors import InputError
from bara.llm.build import resolve_model
from bara.settings import Settings

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
OPT_IN_ENV = "OTEL_SEMCONV_STABILITY_OPT_IN"
LATEST = "gen_ai_latest_experimental"
TRACES_PATH = "/v1/traces"
METRICS_PATH = "/v1/metrics"


@dataclass(frozen=True)
class ObserveConfig:
    """What the exporter needs; ``traces_endpoint`` None lets the SDK read the OTLP variables itself."""

    traces_endpoint: str | None
    metrics_endpoint: str | None
    capture_content: bool = False
    latest: bool = False  # emit the latest experimental GenAI conventions (not v1.36)
    user_id: str = "hash"  # hash | clear | omit
    user_id_key: str = ""
    service_name: str = "bara"
    project: str = "bara"  # openinference.project.name: the Phoenix project the spans land in
    embedder_model: str = ""
    embedder_dim: int = 0
    llm_provider: str = "bara"  # gen_ai.provider.name of the gated generator and agent model
    metrics: bool = True  # False under OTEL_METRICS_EXPORTER=none (e.g. Phoenix takes traces only)
    queue_turns: int = 2048  # Settings.otel_queue_turns

    def user(self, user_id: str) -> str | None:
        """``user.id`` as spans carry it: a keyed SHA-256 (first 32 hex digits), the id, or None."""
        if self.user_id == "omit":
            return None
        if self.user_id == "clear":
            return user_id
        digest = hmac.new(self.user_id_key.encode(), user_id.encode(), hashlib.sha256).hexdigest()
        return digest[:32]


def _true(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def otlp_endpoints(url: str) -> tuple[str, str]:
    """The traces and metrics endpoints of an OTLP/HTTP base URL (or of its ``/v1/traces`` URL)."""
    if not url.startswith(("http://", "https://")):
        raise InputError(f"--otlp {url!r} is not an http(s) URL: pass the collector's OTLP/HTTP address, "
                         "e.g. --otlp http://127.0.0.1:4318")
    base = url.rstrip("/")
    if base.endswith(TRACES_PATH):
        base = base[: -len(TRACES_PATH)]
    return base + TRACES_PATH, base + METRICS_PATH


def observe_config(settings: Settings, otlp: str | None = None, environ: Mapping[str, str] | None = None,
                   embedder: object | None = None) -> ObserveConfig | None:
    """The export configuration, or None when nothing asks for export (then nothing is built)."""
    env = os.environ if environ is None else environ
    if _true(env.get("OTEL_SDK_DISABLED")):
        return None
    named = otlp or ""
    if not named and not (env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        return None
    traces, metrics = otlp_endpoints(named) if named else (None, None)
    opt_in = {v.strip() for v in (env.get(OPT_IN_ENV) or "").split(",")}
    service = env.get("OTEL_SERVICE_NAME") or "bara"
    return ObserveConfig(traces_endpoint=traces, metrics_endpoint=metrics, capture_content=_true(env.get(CAPTURE_ENV)),
                         latest=LATEST in opt_in, user_id=settings.otel_user_id, user_id_key=settings.otel_user_id_key,
                         service_name=service, project=env.get("PHOENIX_PROJECT_NAME") or service,
                         embedder_model=str(getattr(embedder, "model_id", "") or settings.embedder),
                         embedder_dim=int(getattr(embedder, "dim", 0) or 0),
                         llm_provider=_provider(settings),
                         metrics=(env.get("OTEL_METRICS_EXPORTER") or "otlp").strip().lower() != "none",
                         queue_turns=settings.otel_queue_turns)


def _provider(settings: Settings) -> str:
    """``gen_ai.provider.name`` for the configured model: its provider, or ``bara`` (offline, in-process)."""
    resolved = resolve_model(settings)
    return resolved[0] if resolved else "bara"
