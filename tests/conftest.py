"""Test-wide guards: no network, a private cache and data dir location."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

# Property tests are derandomised so a CI run is reproducible (a failure reproduces on rerun), and
# time-independent (the 2-core CI machine is often busy).
hypothesis_settings.register_profile("bara", derandomize=True, deadline=None, database=None,
                                     suppress_health_check=[HealthCheck.too_slow])
hypothesis_settings.load_profile("bara")

DATA = Path(os.environ.get("BARA_DATA", Path(__file__).resolve().parents[1] / ".." / "shared" / "data")).resolve()
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

_real_connect = socket.socket.connect


def _guarded_connect(self: socket.socket, address: object) -> object:
    host = address[0] if isinstance(address, tuple) else str(address)
    if self.family == socket.AF_UNIX or str(host) in ("127.0.0.1", "::1", "localhost") or str(host).startswith("127."):
        return _real_connect(self, address)
    raise OSError(f"network access blocked in tests: {address!r}")


socket.socket.connect = _guarded_connect  # type: ignore[method-assign]

from pg_fixtures import pg_schema, pg_server_urls, pg_store_factory  # noqa: E402,F401 - embedded PostgreSQL


#: ``BARA_*`` variables the suite itself reads to choose what runs (data location, long variants, the
#: artefact and wheel folders, how many kills): kept. Every other ``BARA_*`` variable is a setting (or the
#: settings file, the store URL, the serve mode) and would change results, so each test starts without it.
SUITE_VARIABLES = frozenset({"BARA_DATA", "BARA_SLOW", "BARA_ARTEFACTS", "BARA_WHEELHOUSE", "BARA_CRASH_KILLS"})


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path_factory):
    """Each test starts with no ``BARA_*`` setting from the developer's shell and in an empty working
    folder (no ``./bara.toml`` to pick up); a test that needs either sets it itself via monkeypatch."""
    for name in [key for key in os.environ if key.upper().startswith("BARA_") and key not in SUITE_VARIABLES]:
        monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path_factory.mktemp("cwd", numbered=True))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.skip(f"shared data not found at {DATA} (set BARA_DATA)")
    return DATA


@pytest.fixture(scope="session")
def embedder():
    """The real default embedder (ONNX MiniLM, the variant Settings defaults to), loaded once for the
    session, uncached."""
    from bara.retrieval.embedders import OnnxMiniLMEmbedder
    from bara.settings import Settings

    return OnnxMiniLMEmbedder(variant=Settings().embedder.removeprefix("minilm-"))


RFC_KB_FILES = ("rfc2119.txt", "rfc2818.txt", "rfc6797.txt")


@pytest.fixture(scope="session")
def rfc_kb(tmp_path_factory, data_dir, embedder):
    """A factory of private copies of a small RFC knowledge-base store, ingested once per session."""
    import shutil

    from bara.app import Bara
    from bara.settings import Settings

    base = tmp_path_factory.getbasetemp() / "rfc_kb.db"
    with Bara(Settings(db=str(base), cache_dir=base.parent), embedder=embedder) as bara:
        bara.knowledge.ingest([data_dir / "rfc" / f for f in RFC_KB_FILES])

    def copy(name: str) -> Path:
        dest = tmp_path_factory.mktemp(name) / "kb.db"
        shutil.copy(base, dest)
        return dest

    return copy


@pytest.fixture
def user(request) -> str:
    """A user id of this test's own (tests sharing a store never see each other's memory)."""
    return f"user-{request.node.name}"


@pytest.fixture
def sqlite_store(tmp_path):
    """A new SQLite store in the test's own folder, closed after the test."""
    from bara.store.sqlite import SQLiteStore

    store = SQLiteStore(tmp_path / "store.db")
    yield store
    store.close()


@pytest.fixture
def serve_calls(monkeypatch, tmp_path):
    """`bara serve` up to the point it would start uvicorn: the environment its workers would read."""
    from typer.testing import CliRunner

    from bara.cli import app
    from bara.serve import workers
    from bara.serve.app import ENV_MODE

    for name in ("BARA_EMBED_SPIN_IN_CALL", "BARA_SERVE_LEARN_AFTER_RESPONSE", "BARA_DB", ENV_MODE):  # serve sets these:
        monkeypatch.setenv(name, "")  # recorded, so restored after the test ...
        monkeypatch.delenv(name)  # ... and unset during it
    monkeypatch.delenv("BARA_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)  # no ./bara.toml
    seen: list[dict[str, str]] = []
    monkeypatch.setattr(workers, "serve", lambda *a, **k: seen.append(dict(os.environ)))
    db = tmp_path / "s.db"
    with socket.socket() as probe:  # a port free right now (serve refuses a busy one)
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])

    def serve(*args: str) -> dict[str, str]:
        result = CliRunner().invoke(app, ["serve", "--db", str(db), "--port", port, *args])
        assert result.exit_code == 0, result.output
        return seen[-1]
    return serve
