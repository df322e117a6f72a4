"""OpenTelemetry export of every turn: GenAI semantic-convention spans with OpenInference attributes,
and turn metrics (docs/observability.md).

Off costs nothing: :func:`build_observer` returns None unless an OTLP endpoint is named (``--otlp``
or the standard ``OTEL_EXPORTER_OTLP_*`` variables), and only then imports the SDK (the ``otel``
extra: ``pip install 'bara[otel]'``). Surfaces call ``observer.turn(result.trace, message)`` after
each turn; the spans are built from the finished trace (:mod:`bara.observe.plan`), never inside it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Mapping

from bara.errors import ConfigError
from bara.observe.config import ObserveConfig, observe_config
from bara.settings import Settings

if TYPE_CHECKING:
    from bara.observe.process import ProcessObserver

__all__ = ["ObserveConfig", "build_observer", "observe_config"]


def build_observer(settings: Settings, otlp: str | None = None, embedder: object | None = None,
                   environ: Mapping[str, str] | None = None) -> "ProcessObserver | None":
    """An observer exporting over OTLP/HTTP from a child process (:mod:`bara.observe.process`), or None
    when export is off."""
    config = observe_config(settings, otlp, environ, embedder)
    if config is None:
        return None
    try:
        import opentelemetry.exporter.otlp.proto.http.trace_exporter  # noqa: F401 - present, or say what to install
        import opentelemetry.sdk.trace  # noqa: F401

        from bara.observe.process import ProcessObserver
    except ImportError as exc:
        raise ConfigError(f"OpenTelemetry export was asked for but its packages are missing ({exc.name}): "
                          "install them with pip install 'bara[otel]', or unset --otlp / "
                          "OTEL_EXPORTER_OTLP_ENDPOINT") from exc
    return ProcessObserver(config)
