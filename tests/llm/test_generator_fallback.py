"""When the model is unreachable, the trace's ``generator`` names the offline generator that answered,
with the model that failed and why (issue 32), in both pipeline modes; a model that answers is named
as before."""

from __future__ import annotations

import socket

import httpx
import pytest

from bara.app import Bara
from bara.llm import build_model
from bara.llm.offline import OfflineGenerator
from bara.turn.gated import Assistant
from bara.settings import Settings

QUESTION = "What is HTTP Strict Transport Security?"


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then released): connecting is refused at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("mode", ["gated", "always"])
def test_an_unreachable_model_is_named_with_the_offline_generator_that_answered(mode, rfc_kb, embedder):
    db = rfc_kb(f"fallback_{mode}")
    settings = Settings(db=str(db), cache_dir=db.parent, model="openai:gpt-unreachable",
                        llm_base_url=f"http://127.0.0.1:{_closed_port()}/v1", llm_max_retries=0,
                        llm_deadline_s=5.0, gated_deadline_s=5.0)
    model = build_model(settings, environ={"OPENAI_API_KEY": "sk-test"}, client=httpx.Client(trust_env=False))
    with Bara(settings, embedder=embedder) as bara:
        result = Assistant(bara, model=model, mode=mode).turn("u_fallback", QUESTION)
    failed = [r for r in result.trace.reasons if r.startswith("generate:model_failed_offline_used:")]
    assert failed, result.trace.reasons
    why = failed[0].rsplit(":", 1)[1]
    generator = result.trace.generator
    assert generator.startswith(OfflineGenerator.name), generator  # who wrote the answer
    assert f"{model.name}" in generator and why in generator, generator  # which model failed, and why
    assert result.answer.strip()
    assert result.trace.to_json()["generator"] == generator


def test_a_model_that_answers_is_named_as_the_generator(rfc_kb, embedder):
    from bara.llm.scripted import ScriptedModel

    db = rfc_kb("fallback_ok")
    with Bara(Settings(db=str(db), cache_dir=db.parent), embedder=embedder) as bara:
        result = Assistant(bara, model=ScriptedModel(["HSTS keeps browsers on HTTPS [1]."])).turn("u_ok", QUESTION)
    assert result.trace.generator == "model:scripted"
    assert not any(r.startswith("generate:model_failed_offline_used:") for r in result.trace.reasons)
