"""`bara ingest` / `bara search` on real documents: every readable file indexed, every other one
listed with its reason, a passage of each format found under its heading (real embedder, real store)."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from bara.memory.readers import read
from bara.prompts.frames import Source
from bara.retrieval.structure import Structured
from bara.text.locator import locator


@pytest.fixture
def cli(tmp_path, monkeypatch, embedder):
    import bara.app
    from bara.cli import app

    real = bara.app.Bara.__init__

    def with_session_embedder(self, settings, *args, **kwargs):  # the session's loaded model, not a second one
        kwargs.setdefault("embedder", embedder)
        real(self, settings, *args, **kwargs)

    monkeypatch.setattr(bara.app.Bara, "__init__", with_session_embedder)
    monkeypatch.setenv("BARA_CACHE_DIR", str(tmp_path / "cache"))
    runner = CliRunner()

    def run(*args: str):
        return runner.invoke(app, list(args))
    return run


def _json(result) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def _search(cli, db, query: str, k: int = 5) -> list[dict]:
    res = cli("search", query, "--json", "--db", db, "--k", str(k), "--floor", "-1")  # ranks, not the floor
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["hits"]


def test_the_documents_folder(cli, tmp_path, data_dir):
    docs = data_dir / "docs"
    if not docs.is_dir():
        pytest.skip(f"documents not found at {docs}")
    db = str(tmp_path / "kb.db")
    res = cli("ingest", str(docs), "--db", db, "--json", "--exclude", "GeoTopo*")  # the textbook: test_readers
    assert res.exit_code == 0, res.output
    summary = _json(res)
    reasons = {s["path"].rsplit("/", 1)[-1]: s["reason"] for s in summary["skipped"]}
    assert reasons.pop("libreoffice-writer-password.pdf") == "encrypted"
    assert reasons.pop("imagemagick-images.pdf") == "no text layer"
    assert set(reasons.values()) == {"unsupported format"}  # the .tex sources and files.json
    assert {n.rsplit(".", 1)[-1] for n in reasons} == {"tex", "json"}
    files = [p for p in docs.rglob("*") if p.is_file() and not p.name.startswith("GeoTopo")]
    assert summary["written"] + len(summary["skipped"]) == len(files) and summary["excluded"] == 1

    sentence = "Nam dui ligula, fringilla a, euismod sodales, sollicitudin vel, wisi."
    hits = [h for h in _search(cli, db, sentence)[:3] if sentence in " ".join(h["text"].split())]
    assert hits and hits[0]["source"].endswith("multicolumn.pdf") and hits[0]["section"] == "p. 1 §Abstract"

    for html in sorted((docs / "html").glob("*.html")):
        doc = read(html, 10**8).content()
        assert isinstance(doc, Structured)
        heading, sentence = _a_sentence(doc)
        hits = _search(cli, db, sentence)
        mine = [h for h in hits[:3] if h["source"] == str(html.resolve()) and sentence in " ".join(h["text"].split())]
        assert mine and mine[0]["section"] == heading, (html.name, sentence, [(h["source"], h["section"]) for h in hits])
    basics = _search(cli, db, "create an ffi_cif object that matches the signature of the function you wish to call")
    assert (basics[0]["source"].endswith("The-Basics.html") and basics[0]["section"] == "2.1 The Basics"
            and basics[0]["title"] == "The Basics")

    again = cli("ingest", str(docs), "--db", db, "--json", "--exclude", "GeoTopo*")
    assert again.exit_code == 0 and _json(again)["unchanged"] == summary["written"]
    assert _json(again)["chunks_written"] == 0


def _a_sentence(doc: Structured) -> tuple[str, str]:
    """The document's longest paragraph under a heading: that heading and its first sentence of 8+ words."""
    heading, pairs = "", []
    for b in doc.blocks:
        text = " ".join(doc.text[b.start:b.end].split())
        if b.kind == "heading":
            heading = text
        elif b.kind == "para" and heading:
            pairs.append((len(text), heading, text))
    _, heading, best = max(pairs)
    sentence = next((s for s in re.split(r"(?<=[.!?])\s+", best) if len(s.split()) >= 8), best)
    return heading, sentence


def test_word_markdown_and_rst_are_found_under_their_headings(cli, tmp_path):
    import docx

    folder = tmp_path / "notes"
    folder.mkdir()
    d = docx.Document()
    d.add_heading("Beekeeping", 1)
    d.add_heading("2.1 Winter feeding", 2)
    d.add_paragraph("Colonies are fed thick sugar syrup in early autumn so that the bees can store it before the cold.")
    d.save(str(folder / "bees.docx"))
    (folder / "kayak.md").write_text("# Kayaks\n\n## Rolling\n\nThe *Eskimo roll* rights a capsized kayak with a hip "
                                     "snap; see {ref}`rescue <self-rescue>` and [the club](https://example.org).\n")
    (folder / "bread.rst").write_text("=====\nBread\n=====\n\nSourdough\n=========\n\nA sourdough starter is fed "
                                      "flour and water every day and kept at :term:`room temperature`.\n")
    (folder / "table.csv").write_text("a,b\n1,2\n")
    db = str(tmp_path / "kb.db")
    res = cli("ingest", str(folder), "--db", db)
    assert res.exit_code == 0, res.output
    assert "table.csv: unsupported format" in " ".join(res.output.split())
    cases = [("when are colonies fed sugar syrup", "bees.docx", "2.1 Winter feeding", "Colonies are fed thick sugar"),
             ("how does a roll right a capsized kayak", "kayak.md", "Rolling", "The Eskimo roll rights a capsized kayak"
              " with a hip snap; see rescue and the club."),
             ("how is a sourdough starter fed", "bread.rst", "Sourdough", "A sourdough starter is fed flour and water")]
    for query, name, section, text in cases:
        hit = _search(cli, db, query, k=1)[0]
        assert hit["source"].endswith(name) and hit["section"] == section, hit
        assert hit["text"].startswith(text), hit["text"]
        assert not re.search(r"[*`{}\[\]]|:term:|====", hit["text"]), hit["text"]


def test_include_and_exclude_choose_files(cli, tmp_path):
    folder = tmp_path / "kb"
    (folder / "drafts").mkdir(parents=True)
    (folder / "a.md").write_text("# A\n\nAlpha paragraphs talk about the alpha protocol at length.\n")
    (folder / "b.txt").write_text("Beta text talks about the beta protocol at length.\n")
    (folder / "drafts" / "c.md").write_text("# C\n\nGamma drafts talk about the gamma protocol at length.\n")
    db = str(tmp_path / "kb.db")
    res = cli("ingest", str(folder), "--db", db, "--json", "--include", "*.md", "--exclude", "drafts/*")
    summary = _json(res)
    assert res.exit_code == 0 and summary["written"] == 1 and summary["excluded"] == 2 and summary["skipped"] == []


def test_nothing_readable_exits_2_and_creates_no_store(cli, tmp_path):
    folder = tmp_path / "exports"
    folder.mkdir()
    (folder / "sheet.csv").write_text("a,b\n1,2\n")
    (folder / "data.json").write_text("{}")
    (folder / "empty.txt").write_text("  \n")
    db = tmp_path / "kb.db"
    res = cli("ingest", str(folder), "--db", str(db), "--json")
    assert res.exit_code == 2 and "nothing to index" in res.stderr and not db.exists()
    reasons = {s["path"].rsplit("/", 1)[-1]: s["reason"] for s in _json(res)["skipped"]}
    assert reasons == {"sheet.csv": "unsupported format", "data.json": "unsupported format", "empty.txt": "empty"}
    text = cli("ingest", str(folder), "--db", str(db))
    assert text.exit_code == 2 and "sheet.csv: unsupported format" in " ".join(text.output.split())
    (tmp_path / "void").mkdir()
    res = cli("ingest", str(tmp_path / "void"), "--db", str(db))
    assert res.exit_code == 2 and "no files" in res.stderr and not db.exists()
    res = cli("ingest", str(folder), "--db", str(db), "--include", "*.pdf")
    assert res.exit_code == 2 and "left out all 3" in " ".join(res.stderr.split()) and not db.exists()
    (tmp_path / "good").mkdir()
    (tmp_path / "good" / "a.txt").write_text("Alpha protocol messages carry a header and a body.")
    assert cli("ingest", str(tmp_path / "good"), "--db", str(db)).exit_code == 0 and db.exists()
    res = cli("ingest", str(folder), "--db", str(db), "--json")  # an existing store: exit 2, left as it was
    assert res.exit_code == 2 and "nothing to index" in res.stderr and _json(res)["written"] == 0
    hits = _search(cli, str(db), "alpha protocol messages")
    assert [h["source"].rsplit("/", 1)[-1] for h in hits] == ["a.txt"]


@pytest.mark.parametrize("section, title, shown", [
    ("7.4.1", "Hello Messages", "§7.4.1 Hello Messages"),  # the RFC chunker: number and heading
    ("Repeatable Installs", "Repeatable Installs", "§Repeatable Installs"),  # said once
    ("Guide > Repeatable Installs", "Repeatable Installs", "§Guide > Repeatable Installs"),
    ("p. 4 §2.1 Title", "Title", "p. 4 §2.1 Title"),
    ("p. 3", "", "p. 3"),
    ("", "Introduction", "Introduction"),
    ("2.1 Subtitle", "Title", "§2.1 Subtitle Title"),
])
def test_a_source_line_names_its_heading_once(section, title, shown):
    assert locator(section, title) == shown
    label = Source(1, 1, "/kb/file.pdf", section, title, "text", 1.0).label
    assert label == f"file.pdf {shown}"
