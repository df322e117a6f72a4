"""The real local model server for the `llm`-marked tests (`make llm` builds it, `make test-llm` runs them).

Each fixture starts llama-cpp-python's server on a free loopback port (bounded by llm_local_ready_s) and
stops it afterwards; without `make llm` the tests are skipped, saying so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest

from bara.llm import build_model
from bara.llm.local import LOCAL_ALIAS, LocalServer, missing_reason, start_local_server
from bara.settings import Settings, load_settings

#: Answers are capped short: the tests check shapes and counts, not prose, and the machine is shared.
MAX_TOKENS = 16
#: Deadlines of the tests that are not about deadlines: a loaded 2-core machine prefills ~10 tokens/s.
SLOW_S = 900.0


def skip_unless_built() -> pytest.MarkDecorator:
    """Module mark: skip (saying what to run) before any fixture is set up when the server is not built."""
    reason = missing_reason(Settings())
    return pytest.mark.skipif(reason is not None, reason=f"no local model server: {reason}")


def require_built() -> Settings:
    settings = load_settings()  # BARA_LLM_LOCAL_THREADS etc. apply to the server
    reason = missing_reason(settings)
    if reason:
        pytest.skip(f"no local model server: {reason}")
    return settings


def start(tmp: Path) -> LocalServer:
    return start_local_server(require_built(), log=tmp / "llama_server.log")


def module_server(tmp_path_factory) -> Iterator[LocalServer]:
    """One server for a test module (the body of its module-scoped fixture)."""
    server = start(tmp_path_factory.mktemp("llm"))
    try:
        yield server
    finally:
        server.stop()


def llm_settings(server: LocalServer, **overrides: Any) -> Settings:
    """bara pointed at ``server`` as a user would configure it (BARA_MODEL / BARA_LLM_BASE_URL)."""
    values: dict[str, Any] = {"model": f"openai:{LOCAL_ALIAS}", "llm_base_url": server.base_url,
                              "llm_send_max_tokens": True, "llm_max_tokens": MAX_TOKENS, "k": 2,
                              "llm_timeout_s": SLOW_S, "llm_deadline_s": SLOW_S, "gated_deadline_s": SLOW_S,
                              **overrides}
    return Settings(**values)


def llm_model(settings: Settings) -> Any:
    return build_model(settings, environ={}, client=httpx.Client(trust_env=False))
