"""Issue 15, input and storage defects: each test failed before its fix.

Missing, damaged and read-only stores; unvalidated numbers; missing paths; undecodable names and
arguments; prune matching a sibling folder; large documents embedded in cached batches.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest
from typer.testing import CliRunner

from bara.cli import app
from bara.memory.knowledge import KnowledgeBase
from bara.settings import Settings
from bara.store.sqlite import SQLiteStore

runner = CliRunner()


def invoke(args: list[str], tmp: Path, stdin: str | None = None):
    return runner.invoke(app, args, env={"BARA_CACHE_DIR": str(tmp / "cache"), "BARA_MODEL": "", "COLUMNS": "300"}, input=stdin)


def assert_clean_exit(result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


# ---- defect 13: a mistyped --db for a read command creates nothing -------------------------------
READERS = [["search", "tcp"], ["funds", "users"], ["memory", "inspect"], ["memory", "query", "x", "--tier", "kb"],
           ["memory", "forget", "--user", "u1"], ["funds", "tool", "get_holdings", "--user", "u1"]]


@pytest.mark.parametrize("args", READERS, ids=lambda a: " ".join(a[:2]))
def test_read_commands_do_not_create_a_store(tmp_path, args):
    db = tmp_path / "typo" / "bara.db"
    result = invoke([*args, "--db", str(db)], tmp_path)
    assert_clean_exit(result, 2)
    assert f"no store at {db}" in result.output and "bara ingest" in result.output
    assert not db.exists() and not db.parent.exists()


# ---- defect 9: a path that does not exist ------------------------------------------------------
def test_ingest_of_a_missing_path_exits_2_before_writing(tmp_path):
    (tmp_path / "real.txt").write_text("Real text about retransmission timers in TCP. " * 5)
    db = tmp_path / "x.db"
    result = invoke(["ingest", str(tmp_path / "real.txt"), str(tmp_path / "nope"), "--db", str(db)], tmp_path)
    assert_clean_exit(result, 2)
    assert "no such file or folder" in result.output and "nope" in result.output
    assert not db.exists()  # nothing half-done: the command stopped before opening the store


def test_make_demo_stops_when_the_data_folder_is_missing(tmp_path):
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    assert "test -d $(DATA)/rfc" in demo and "exit 2" in demo


# ---- defect 8 and 14: numbers from the command line ----------------------------------------------
@pytest.fixture
def kb_db(rfc_kb) -> str:
    return str(rfc_kb("hardening_kb"))


@pytest.mark.parametrize("value", ["0", "-1", "101", "100000"])
def test_k_is_validated(kb_db, tmp_path, value):
    for args in (["search", "tcp", "--k", value], ["memory", "query", "tcp", "--tier", "kb", "--k", value]):
        result = invoke([*args, "--db", kb_db], tmp_path)
        assert_clean_exit(result, 2)
        assert "--k" in result.output and ("than or equal to 1" in result.output or "1<=x<=100" in result.output)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1.5", "-2"])
def test_floor_must_be_a_finite_similarity(kb_db, tmp_path, value):
    result = invoke(["search", "tcp", "--floor", value, "--db", kb_db], tmp_path)
    assert_clean_exit(result, 2)
    assert "--floor" in result.output and "-1 to 1" in result.output


def test_k_at_the_cap_is_honoured(kb_db, tmp_path):
    result = invoke(["search", "HTTP over TLS", "--k", "100", "--floor", "-1", "--json", "--db", kb_db], tmp_path)
    assert_clean_exit(result, 0)
    hits = json.loads(result.stdout)["hits"]
    assert 4 < len(hits) <= 100  # more than the default k: the flag is used, not ignored


# ---- defect 4: undecodable bytes in names and arguments ----------------------------------------
def _bad_name(folder: Path) -> Path:
    raw = os.fsencode(folder) + b"/caf\xe9-\xff.txt"
    fd = os.open(raw, os.O_WRONLY | os.O_CREAT, 0o644)
    os.write(fd, b"Latin-1 named file about congestion windows and slow start. " * 5)
    os.close(fd)
    return Path(os.fsdecode(raw))


def test_an_undecodable_file_name_is_skipped_and_the_rest_ingested(tmp_path, embedder):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("A good file about the retransmission timeout. " * 5)
    _bad_name(docs)
    with SQLiteStore(tmp_path / "x.db") as store:
        report = KnowledgeBase(store, embedder, Settings(db=str(tmp_path / "x.db"))).ingest([docs])
        assert report.written == 1 and [p for p, _ in report.skipped][0].endswith("\\udcff.txt")
        assert "not valid UTF-8" in report.skipped[0][1]
        assert store.list_sources() == [str((docs / "good.txt").resolve())]


def test_cli_ingest_reports_an_undecodable_name(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("A good file about the retransmission timeout. " * 5)
    _bad_name(docs)
    result = invoke(["ingest", str(docs), "--db", str(tmp_path / "x.db")], tmp_path)
    assert_clean_exit(result, 0)
    assert "not valid UTF-8" in result.output and "written 1" in result.output


def test_undecodable_query_is_searched(kb_db, tmp_path):
    result = invoke(["search", "strict transport \udcff\udcfe security", "--json", "--db", kb_db], tmp_path)
    assert_clean_exit(result, 0)
    out = json.loads(result.stdout)
    assert "\ufffd" in out["query"] and out["status"] in ("ok", "empty")


@pytest.mark.parametrize("args", [["memory", "inspect", "--user", "u\udcff"],
                                  ["memory", "inspect", "--user", "  "],
                                  ["memory", "inspect", "--conversation", "c\udcff"],
                                  ["funds", "tool", "get_holdings", "--user", "\udcff"]])
def test_undecodable_or_blank_ids_are_refused(kb_db, tmp_path, args):
    result = invoke([*args, "--db", kb_db], tmp_path)
    assert_clean_exit(result, 2)
    assert "UTF-8" in result.output or "usable" in result.output


# ---- defect 5: prune matches whole path components ----------------------------------------------
def test_prune_leaves_a_sibling_folder_alone(tmp_path, embedder):
    docs, docs2 = tmp_path / "docs", tmp_path / "docs2"
    for folder in (docs, docs2):
        folder.mkdir()
        (folder / "a.txt").write_text(f"Notes kept in {folder.name} about retransmission. " * 5)
    with SQLiteStore(tmp_path / "x.db") as store:
        kb = KnowledgeBase(store, embedder, Settings(db=str(tmp_path / "x.db")))
        kb.ingest([docs, docs2])
        (docs2 / "a.txt").unlink()  # gone from docs2, but docs2 is not what we prune
        assert kb.ingest([docs], prune=True).pruned == 0
        assert str((docs2 / "a.txt").resolve()) in store.list_sources()
        assert kb.ingest([docs2], prune=True).pruned == 1


# ---- defect 6: a store damaged in the middle ------------------------------------------------------
def _damage(db: Path) -> None:
    """Overwrite the middle third of the file (the 100-byte header stays intact)."""
    size = db.stat().st_size
    with db.open("r+b") as fh:
        fh.seek(size // 3)
        fh.write(bytes([0xA5]) * (size // 3))


def test_a_damaged_store_gives_a_clear_error_and_is_not_written(kb_db, tmp_path):
    db = Path(kb_db)
    _damage(db)
    before = db.read_bytes()
    search = invoke(["search", "HTTP Strict Transport Security", "--db", kb_db], tmp_path)
    assert_clean_exit(search, 2)
    assert kb_db in search.output.replace("\n", "") and "damaged" in search.output and "backup" in search.output
    (tmp_path / "new.txt").write_text("A new file about retransmission timers. " * 5)
    ingest = invoke(["ingest", str(tmp_path / "new.txt"), "--db", kb_db], tmp_path)
    assert_clean_exit(ingest, 2)
    assert "damaged" in ingest.output
    (tmp_path / "s.jsonl").write_text(json.dumps({"user": "what is HSTS?"}) + "\n")
    chat = invoke(["chat", "--script", str(tmp_path / "s.jsonl"), "--db", kb_db], tmp_path)
    assert_clean_exit(chat, 2)
    assert "damaged" in chat.output
    assert db.read_bytes() == before  # nobody wrote into it


# ---- defect 11: a read-only store -------------------------------------------------------------------
@pytest.fixture
def read_only_db(kb_db, monkeypatch):
    path = Path(kb_db)
    path.chmod(0o444)
    if os.geteuid() == 0:  # root may write anyway: make the OS answer as it would for a user
        real = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if (
            mode & os.W_OK and Path(p).resolve() == path.resolve()) else real(p, mode, **kw))
    yield kb_db
    path.chmod(0o644)


def test_read_commands_work_on_a_read_only_store(read_only_db, tmp_path):
    result = invoke(["search", "HTTP Strict Transport Security", "--json", "--db", read_only_db], tmp_path)
    assert_clean_exit(result, 0)
    assert json.loads(result.stdout)["hits"]
    assert_clean_exit(invoke(["memory", "inspect", "--db", read_only_db], tmp_path), 0)


def test_writers_say_the_store_is_read_only(read_only_db, tmp_path):
    (tmp_path / "new.txt").write_text("A new file about retransmission timers. " * 5)
    result = invoke(["ingest", str(tmp_path / "new.txt"), "--db", read_only_db], tmp_path)
    assert_clean_exit(result, 2)
    assert "read-only" in result.output and "damaged" not in result.output and "corrupt" not in result.output


# ---- defect 10: large documents are embedded in cached batches ------------------------------------
class _Interrupting:
    """The real embedder, interrupted (as by Ctrl-C) after ``limit`` calls."""

    def __init__(self, inner, limit: int):
        self.inner, self.model_id, self.dim, self.calls, self.limit = inner, inner.model_id, inner.dim, 0, limit
        self.sizes: list[int] = []

    def embed(self, texts):
        if self.calls == self.limit:
            raise KeyboardInterrupt
        self.calls += 1
        self.sizes.append(len(texts))
        return self.inner.embed(texts)


def test_an_interrupted_large_document_keeps_its_vectors_and_resumes(tmp_path, embedder):
    from bara.retrieval.embed_cache import CachedEmbedder, EmbeddingCache

    big = tmp_path / "big.txt"
    big.write_text("\n\n".join(f"Paragraph {i} explains how timer number {i} backs off after a loss event."
                               * 3 for i in range(300)))
    settings = Settings(db=str(tmp_path / "x.db"), ingest_embed_batch=20)
    cache = EmbeddingCache(tmp_path / "cache.db")
    with SQLiteStore(settings.db) as store:
        first = _Interrupting(embedder, limit=3)
        report = KnowledgeBase(store, CachedEmbedder(first, cache), settings).ingest([big])
        assert report.interrupted and store.count_chunks() == 0  # no partial document
        assert first.sizes == [20, 20, 20] and cache.count() == 60  # what was computed is kept
        second = _Interrupting(embedder, limit=10_000)
        report = KnowledgeBase(store, CachedEmbedder(second, cache), settings).ingest([big])
        assert report.written == 1 and store.count_chunks() == report.chunks_written
        assert sum(second.sizes) == report.chunks_written - 60  # resumed: cached batches not embedded again
        assert max(second.sizes) <= 20
    with sqlite3.connect(settings.db) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
