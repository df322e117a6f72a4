"""Schemathesis over the OpenAPI schema: no 5xx, and every response matches its documented schema."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                               status_code_conformance)
from serve_helpers import bearer, make_app, sqlite_runtime



@pytest.fixture(scope="module")
def served(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("serve_schema"), embedder)
    key = runtime.keys.create("fuzz", admin=True).key
    yield make_app(runtime), key
    runtime.close()


def _operations(app):
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    return {f"{op.method.upper()} {op.path}": op for op in (r.ok() for r in schema.get_all_operations())}


def test_api_conforms_to_its_schema(served):
    """Every operation, 15 generated cases each (derandomised): no 5xx; documented status, content type
    and body schema."""
    app, key = served
    operations = _operations(app)
    assert {"POST /api/turns", "POST /v1/chat/completions", "GET /api/search", "POST /api/ingest"} <= set(operations)
    for _name, op in sorted(operations.items()):

        @given(case=op.as_strategy())
        @settings(max_examples=15, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            case.call_and_validate(headers=bearer(key), checks=[not_a_server_error, status_code_conformance,
                                                                content_type_conformance,
                                                                response_schema_conformance])

        run()


def test_invalid_requests_are_documented_4xx(served):
    """Schemathesis's negative mode (bodies, queries and headers that break the schema), 25 cases per
    operation: never a 5xx, and every refusal is a documented status with an ErrorBody. Operations with
    no way to break their schema (no parameters) are skipped by Hypothesis as unsatisfiable."""
    from hypothesis.errors import Unsatisfiable
    from schemathesis.generation import GenerationMode

    app, key = served
    for _name, op in sorted(_operations(app).items()):

        @given(case=op.as_strategy(generation_mode=GenerationMode.NEGATIVE))
        @settings(max_examples=25, deadline=None, derandomize=True, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case):
            case.call_and_validate(headers=bearer(key), checks=[not_a_server_error, status_code_conformance,
                                                                content_type_conformance,
                                                                response_schema_conformance])

        try:
            run()
        except Unsatisfiable:
            continue
