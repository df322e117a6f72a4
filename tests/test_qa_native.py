"""QA regressions on the native API as a demanding client meets it: a wrong method on any API path is a
405 naming that route's own methods (not the static files' GET, HEAD), an unknown API path a JSON 404."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, make_app, sqlite_runtime

METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("qa_native"), embedder)
    keys = {"sam": runtime.keys.create("sam").key, "eve": runtime.keys.create("eve").key}
    app = make_app(runtime)
    with TestClient(app) as c:
        yield c, keys, runtime, app
    runtime.close()


def _error(r, status):
    assert r.status_code == status, r.text
    body = r.json()["error"]
    assert body["type"] and body["message"]
    return body


def _api_routes(app):
    """Every API path of the OpenAPI schema with its methods (path parameters filled in)."""
    for path, ops in app.openapi()["paths"].items():
        if path.startswith(("/api/", "/v1/")):
            yield {m.upper() for m in ops}, re.sub(r"\{[^}]+\}", "x", path)


def test_a_wrong_method_on_any_api_path_names_the_methods_it_takes(api):
    c, keys, _, app = api
    checked = 0
    for methods, path in _api_routes(app):
        for method in (m for m in METHODS if m not in methods):
            r = c.request(method, path, headers=bearer(keys["sam"]))
            body = _error(r, 405)
            allowed = set(r.headers["allow"].replace(" ", "").split(","))
            assert allowed == methods, (method, path, allowed)
            assert method in body["message"] and all(m in body["message"] for m in methods), body
            checked += 1
    assert checked > 20


@pytest.mark.parametrize("method,path", [("DELETE", "/api/conversations/abc"), ("GET", "/api/conversations/abc"),
                                         ("POST", "/api/nothing"), ("PATCH", "/v1/nothing"), ("GET", "/api")])
def test_an_unknown_api_path_is_a_json_404_whatever_the_method(api, method, path):
    c, keys, _, _ = api
    body = _error(c.request(method, path, headers=bearer(keys["sam"])), 404)
    assert body["type"] == "not_found" and path in body["message"]


def test_the_web_timeline_is_still_served(api):
    c, _, _, _ = api
    r = c.get("/")
    assert r.status_code == 200 and "<html" in r.text.lower()
