"""Ingest: skips with reasons, unchanged no-op, atomic replace, prune, interrupt, CLI summary."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from bara.memory.knowledge import KnowledgeBase
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore


class CountingEmbedder:
    """Wraps the real embedder and counts texts embedded (to prove no-op re-ingest)."""

    def __init__(self, inner):
        self.inner, self.model_id, self.dim, self.texts = inner, inner.model_id, inner.dim, 0

    def embed(self, texts):
        self.texts += len(texts)
        return self.inner.embed(texts)


@pytest.fixture
def setup(tmp_path, embedder):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("Alpha protocol. " * 80)
    (folder / "b.md").write_text("# Beta\n\nBeta messages carry a header and a body. " * 10)
    settings = Settings(db=str(tmp_path / "x.db"), cache_dir=tmp_path / "cache")
    store = SQLiteStore(settings.db)
    counting = CountingEmbedder(embedder)
    yield folder, KnowledgeBase(store, counting, settings), store, counting
    store.close()


def test_bad_files_are_skipped_with_reasons(setup):
    folder, kb, store, _ = setup
    (folder / "empty.txt").write_text("   \n")
    (folder / "binary.txt").write_bytes(b"\x00\x01\x02 binary")
    (folder / "latin1.txt").write_bytes("caf\xe9 au lait".encode("latin-1"))
    report = kb.ingest([folder, folder / "missing.txt"])
    reasons = {p.split("/")[-1]: r for p, r in report.skipped}
    assert reasons["empty.txt"] == "empty"  # the reason codes of issue 36 (bara.memory.readers.REASONS)
    assert reasons["binary.txt"] == "unreadable: binary file"
    assert reasons["latin1.txt"].startswith("unreadable: not UTF-8")
    assert reasons["missing.txt"] == "unreadable: not found"
    assert report.written == 2 and store.count_chunks() == report.chunks_written > 0


def test_unchanged_reingest_does_nothing(setup):
    folder, kb, store, counting = setup
    kb.ingest([folder])
    before, embedded = store.query("SELECT id FROM chunks ORDER BY id"), counting.texts
    report = kb.ingest([folder])
    assert report.written == 0 and report.unchanged == 2 and report.chunks_unchanged == len(before)
    assert counting.texts == embedded
    assert store.query("SELECT id FROM chunks ORDER BY id") == before


def test_changed_file_replaces_its_chunks(setup):
    folder, kb, store, _ = setup
    kb.ingest([folder])
    (folder / "a.txt").write_text("Gamma replaces alpha entirely.")
    report = kb.ingest([folder])
    assert report.written == 1 and report.unchanged == 1
    texts = [r[0] for r in store.query("SELECT c.text FROM chunks c JOIN documents d ON d.id=c.doc_id"
                                       " WHERE d.source LIKE '%a.txt'")]
    assert texts == ["Gamma replaces alpha entirely."]


def test_prune_removes_deleted_files(setup):
    folder, kb, store, _ = setup
    kb.ingest([folder])
    (folder / "b.md").unlink()
    assert kb.ingest([folder]).pruned == 0
    report = kb.ingest([folder], prune=True)
    assert report.pruned == 1
    assert [s.split("/")[-1] for s in store.list_sources()] == ["a.txt"]


def test_interrupt_keeps_committed_documents_whole(setup):
    folder, kb, store, counting = setup
    (folder / "c.txt").write_text("Gamma text. " * 50)
    calls = {"n": 0}
    real = counting.embed

    def interrupt_on_second(texts):
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt
        return real(texts)

    counting.embed = interrupt_on_second
    report = kb.ingest([folder])
    assert report.interrupted and report.written == 1
    (only,) = store.list_sources()
    n_chunks = store.query("SELECT COUNT(*) FROM chunks")[0][0]
    assert n_chunks == report.chunks_written


def test_cli_ingest_and_search_json(tmp_path, monkeypatch, embedder):
    from bara.cli import app

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "hsts.txt").write_text("Strict Transport Security tells browsers to use HTTPS only. "
                                     "The max-age directive sets how long the rule is remembered.")
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    db = str(tmp_path / "cli.db")
    runner = CliRunner()
    res = runner.invoke(app, ["ingest", str(folder), "--db", db, "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout.strip().splitlines()[-1])
    assert summary["written"] == 1 and summary["chunks_written"] >= 1 and summary["skipped"] == []
    res = runner.invoke(app, ["search", "how long is the HTTPS rule remembered", "--json", "--db", db, "--k", "2"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    hit = out["hits"][0]
    assert hit["source"].endswith("hsts.txt") and {"rank", "score"} <= set(hit["lexical"]) and "section" in hit
    res = runner.invoke(app, ["search", "x", "--db", str(folder / "hsts.txt")])
    assert res.exit_code == 2 and "hsts.txt" in res.output
