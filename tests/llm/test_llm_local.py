"""The pieces of issue 35 that need no model server: max_tokens on the wire, the usage meter, the
bootstrap interval of a ratio, and `bara llm serve-local`'s refusals (exit 2 with what to change)."""

from __future__ import annotations

import json
import socket

import httpx
import numpy as np
import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.eval.stats import bootstrap_ratio_ci, ratio_of_sums
from bara.llm import ModelResponse, ScriptedModel, build_model
from bara.llm.local import LOCAL_GGUF, missing_reason, server_command
from bara.llm.metered import MeteredModel
from bara.messages import AssistantMessage, Usage, UserMessage
from bara.settings import Settings
from loopback import JsonHandler, LoopbackServer


class Recorder(LoopbackServer):
    """Answers every chat completion with one fixed reply and keeps the request bodies."""

    path = "/v1"

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        bodies = self.bodies

        class Handler(JsonHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
                self.reply({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                                         "finish_reason": "length"}],
                            "usage": {"prompt_tokens": 21, "completion_tokens": 3}})

        super().__init__(Handler)


@pytest.mark.parametrize("send", [True, False])
def test_max_tokens_is_sent_only_when_asked(send):
    with Recorder() as fake:
        settings = Settings(model="openai:local", llm_base_url=fake.url, llm_max_tokens=48, llm_send_max_tokens=send)
        model = build_model(settings, environ={}, client=httpx.Client(trust_env=False))
        assert model is not None
        reply = model.complete([UserMessage("q")])
    (body,) = fake.bodies
    assert body.get("max_tokens") == (48 if send else None)
    assert set(body) == {"model", "messages", *(("max_tokens",) if send else ())}
    assert reply.stop_reason == "max_tokens" and reply.usage == Usage(21, 3)


def test_the_meter_adds_up_reported_usage_and_resets_on_take():
    inner = ScriptedModel([ModelResponse(AssistantMessage("a"), Usage(100, 7)),
                           ModelResponse(AssistantMessage("b"), Usage(40, 2), "max_tokens")])
    meter = MeteredModel(inner)
    meter.complete([UserMessage("one")])
    meter.complete([UserMessage("two")])
    totals = meter.take()
    assert (totals.calls, totals.prompt_tokens, totals.completion_tokens) == (2, 140, 9)
    assert totals.stops == ("end", "max_tokens") and totals.seconds >= 0
    assert meter.take().calls == 0 and meter.name == "scripted"


def test_bootstrap_ratio_interval():
    rng = np.random.default_rng(1)
    den = rng.uniform(100, 200, size=40)
    num = den * rng.uniform(0.4, 0.6, size=40)
    lo, hi = bootstrap_ratio_ci(num, den)
    point = ratio_of_sums(num, den)
    assert 0.4 < lo < point < hi < 0.6
    assert bootstrap_ratio_ci(den * 0.5, den) == pytest.approx((0.5, 0.5))  # a constant ratio has no spread
    narrow = bootstrap_ratio_ci(np.tile(num, 4), np.tile(den, 4))  # 4x the units: about half the width
    assert narrow[1] - narrow[0] < 0.7 * (hi - lo)
    with pytest.raises(ValueError):
        bootstrap_ratio_ci([1.0], [1.0, 2.0])


def test_missing_model_file_says_to_run_make_llm(tmp_path):
    reason = missing_reason(Settings(model_dir=tmp_path))
    assert reason is not None and "make llm" in reason
    cmd = server_command(Settings(model_dir=tmp_path, llm_local_threads=2), 8123)
    assert cmd[1:3] == ["-m", "llama_cpp.server"] and str(tmp_path / LOCAL_GGUF) in cmd
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and cmd[cmd.index("--port") + 1] == "8123"


def test_serve_local_refuses_a_busy_port_and_a_missing_build(tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        busy = CliRunner().invoke(app, ["llm", "serve-local", "--port", port])
    assert busy.exit_code == 2 and "in use" in busy.output
    monkeypatch.setenv("BARA_MODEL_DIR", str(tmp_path))  # no GGUF there
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = str(probe.getsockname()[1])
    missing = CliRunner().invoke(app, ["llm", "serve-local", "--port", free])
    assert missing.exit_code == 2 and "make llm" in missing.output
