"""The document readers on real files: text checked against the .tex sources, headings, pages,
furniture, encrypted and image-only PDFs, the Debian HTML manuals; Word, Markdown and RST built here."""

from __future__ import annotations

import re

import pytest

from bara.memory.readers import read, reader_for
from bara.memory.readers.base import Unreadable
from bara.retrieval.structure import Structured, chunk_structured
from bara.settings import Settings


@pytest.fixture(scope="module")
def pdfs(data_dir):
    folder = data_dir / "docs" / "pdf"
    if not folder.is_dir():
        pytest.skip(f"documents not found at {folder}")
    return folder


@pytest.fixture(scope="module")
def htmls(data_dir):
    folder = data_dir / "docs" / "html"
    if not folder.is_dir():
        pytest.skip(f"documents not found at {folder}")
    return folder


def _doc(path) -> Structured:
    doc = read(path, Settings().ingest_max_file_bytes).content()
    assert isinstance(doc, Structured)
    return doc


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def _tex_body(tex: str) -> str:
    body = tex.split(r"\begin{document}", 1)[1].split(r"\end{document}", 1)[0]
    return re.sub(r"\\[a-z]+(\[[^]]*\])?(\{[^}]*\})?", " ", body)


def _headings(doc: Structured) -> list[tuple[int, int, str]]:
    return [(b.page, b.level, doc.text[b.start:b.end]) for b in doc.blocks if b.kind == "heading"]


def test_pdf_text_matches_its_tex_source_word_for_word(pdfs):
    doc = _doc(pdfs / "minimal-document.pdf")
    # the hyphenated "taki-mata" is rejoined, the page number "1" is furniture, nothing else differs
    assert _words(doc.text) == _words(_tex_body((pdfs / "minimal-document.tex").read_text()))


def test_two_column_pdf_reads_column_after_column(pdfs):
    doc = _doc(pdfs / "multicolumn.pdf")
    tex = (pdfs / "multicolumn.tex").read_text()
    flat = " ".join(doc.text.split())
    abstract = " ".join(tex.split(r"\begin{abstract}")[1].split(r"\end{abstract}")[0].split())
    assert abstract in flat
    # \lipsum[1-10]: its paragraphs in order, each whole (a column-mixing reader interleaves them)
    openings = ["Lorem ipsum dolor sit amet, consectetuer adipiscing elit. Ut purus elit",
                "Nam dui ligula, fringilla a, euismod sodales, sollicitudin vel, wisi.",
                "Nulla malesuada porttitor diam. Donec felis erat, congue non, volutpat at, tincidunt tristique",
                "Quisque ullamcorper placerat ipsum. Cras nibh."]
    at = [flat.find(o) for o in openings]
    assert -1 not in at and at == sorted(at)
    table = [b for b in doc.blocks if b.page == 3]
    page3 = " ".join(doc.text[b.start:b.end] for b in table)
    for country, capital in re.findall(r"^\s*([A-Z][a-z]+(?: Republic)?) & [\d.]+ & [\d,]+ & (\w+)", tex, re.M):
        assert country in page3 and capital in page3


def test_pdf_outline_headings_land_on_their_pages(pdfs):
    doc = _doc(pdfs / "pdflatex-outline.pdf")
    tex = (pdfs / "pdflatex-outline.tex").read_text()
    sections = re.findall(r"\\section\{(\w+)\}", tex)
    heads = _headings(doc)
    assert [h for _, _, h in heads] == [f"{n} {name}" for n, name in enumerate(sections, 1)]
    assert heads[0][0] == 2  # \tableofcontents \newpage: section 1 starts on page 2
    assert [p for p, _, _ in heads] == sorted(p for p, _, _ in heads) and heads[-1][0] == 4


def test_an_outline_that_does_not_match_the_text_adds_no_headings(pdfs):
    """Every title of this file's outline is wrong ("First", "Second"...): none may name a section; the
    headings come from the type sizes instead and are the .tex source's sections (the same document as
    pdflatex-outline.pdf)."""
    doc = _doc(pdfs / "mistitled_outlines_example.pdf")
    sections = re.findall(r"\\section\{(\w+)\}", (pdfs / "pdflatex-outline.tex").read_text())
    heads = [h for _, _, h in _headings(doc)]
    assert heads == ["Contents"] + [f"{n} {name}" for n, name in enumerate(sections, 1)]


def test_a_pdf_without_outline_gets_headings_from_its_type_sizes(pdfs):
    doc = _doc(pdfs / "multicolumn.pdf")
    tex = (pdfs / "multicolumn.tex").read_text()
    title = re.search(r"\\title\{(.*?)\}", tex)
    assert title and doc.title == title.group(1)
    assert [(p, lv, h) for p, lv, h in _headings(doc)] == [(1, 1, title.group(1)), (1, 2, "Abstract")]
    chunks = chunk_structured(doc, "multicolumn.pdf", Settings())
    assert chunks[0].section == f"p. 1 §{title.group(1)}" and "Your Name" in chunks[0].text
    abstract = next(c for c in chunks if "two columns filled" in c.text)
    table = next(c for c in chunks if "Vienna" in c.text)  # page 3's table, in a chunk that may start on page 2
    assert abstract.section == "p. 1 §Abstract" and table.section in ("p. 2 §Abstract", "p. 3 §Abstract")


def test_textbook_sections_and_pages(pdfs):
    doc = _doc(pdfs / "GeoTopo-komprimiert.pdf")
    heads = _headings(doc)
    names = [h for _, _, h in heads]
    assert "1.1 Topologische Räume" in names and "4.2.1 Flächeninhalt" in names
    levels = {h: lv for _, lv, h in heads}
    assert levels["1 Topologische Grundbegriffe"] == 1 and levels["1.2 Metrische Räume"] == 2
    assert levels["4.2.1 Flächeninhalt"] == 3
    assert max(b.page for b in doc.blocks) == 117 and doc.title == "Geometrie und Topologie"
    chunks = chunk_structured(doc, "GeoTopo.pdf", Settings())
    hit = next(c for c in chunks if "Ein topologischer Raum ist ein Paar" in c.text)
    assert hit.section.startswith("p. ") and hit.section.endswith("§1.1 Topologische Räume")
    assert hit.title == "Topologische Räume"
    # running heads ("5 1.1. TOPOLOGISCHE RÄUME") are page furniture, not text
    assert not any(re.match(r"\d+ 1\.1\. TOPOLOGISCHE RÄUME$", ln) for ln in doc.text.splitlines())


def test_pages_without_furniture(pdfs):
    doc = _doc(pdfs / "pdflatex-4-pages.pdf")
    assert sorted({b.page for b in doc.blocks}) == [1, 2, 3, 4]
    assert not any(re.fullmatch(r"\d+", ln.strip()) for ln in doc.text.splitlines())


@pytest.mark.parametrize("name, code", [("libreoffice-writer-password.pdf", "encrypted"),
                                        ("imagemagick-images.pdf", "no text layer")])
def test_pdfs_that_cannot_be_indexed_say_why(pdfs, name, code):
    with pytest.raises(Unreadable) as caught:
        read(pdfs / name, Settings().ingest_max_file_bytes).content()
    assert caught.value.code == code


def test_a_damaged_pdf_is_unreadable(tmp_path, pdfs):
    bad = tmp_path / "cut.pdf"
    bad.write_bytes((pdfs / "minimal-document.pdf").read_bytes()[:300])
    with pytest.raises(Unreadable) as caught:
        read(bad, Settings().ingest_max_file_bytes).content()
    assert caught.value.code == "unreadable"


def test_html_manuals_keep_content_and_headings_not_navigation(htmls):
    for path in sorted(htmls.glob("*.html")):
        doc = _doc(path)
        heads = _headings(doc)
        assert heads, path.name
        raw = path.read_text(errors="replace")
        prose = "\n".join(doc.text[b.start:b.end] for b in doc.blocks if b.kind != "code")  # code may say <stdio.h>
        assert not re.search(r"</?[a-zA-Z][^>@]*>|&[a-z]+;", prose) and "¶" not in doc.text, path.name
        assert "Next:" not in doc.text and "Navigation" not in [h for _, _, h in heads], path.name
        title = re.search(r"<title>(.*?)</title>", raw, re.S | re.I)
        first_h1 = next(h for _, lv, h in heads if lv == 1) if any(lv == 1 for _, lv, _ in heads) else ""
        assert doc.title == (" ".join(title.group(1).split()) if title else first_h1) != "", path.name
    basics = _doc(htmls / "The-Basics.html")
    assert _headings(basics) == [(0, 3, "2.1 The Basics")]
    assert "create an ffi_cif object that matches the signature" in " ".join(basics.text.split())
    policy = _headings(_doc(htmls / "python-policy.html"))
    assert (0, 3, "2.1. Removal of the unversioned packages") in policy


def test_word_document(tmp_path):
    import docx

    d = docx.Document()
    d.core_properties.title = "Field guide"
    d.add_heading("Field guide", 0)
    d.add_heading("1 Setup", level=1)
    d.add_paragraph("Install the sensor before the first frost. Calibrate it weekly.")
    d.add_heading("1.1 Wiring", level=2)
    d.add_paragraph("Red goes to the positive terminal.")
    table = d.add_table(rows=2, cols=2)
    for (r, c), text in {(0, 0): "Colour", (0, 1): "Terminal", (1, 0): "Red", (1, 1): "Positive"}.items():
        table.cell(r, c).text = text
    d.save(str(tmp_path / "guide.docx"))
    doc = _doc(tmp_path / "guide.docx")
    assert doc.title == "Field guide"
    assert [(lv, h) for _, lv, h in _headings(doc)] == [(1, "Field guide"), (1, "1 Setup"), (2, "1.1 Wiring")]
    assert "Colour | Terminal\nRed | Positive" in doc.text
    chunks = chunk_structured(doc, "guide.docx", Settings(min_chunk_chars=10))
    wiring = next(c for c in chunks if "positive terminal" in c.text)
    assert (wiring.section, wiring.title) == ("1.1 Wiring", "Wiring")
    (tmp_path / "old.docx").write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\0" * 600)
    with pytest.raises(Unreadable) as caught:
        read(tmp_path / "old.docx", 10**6).content()
    assert caught.value.code == "encrypted"


MYST = """---
title: Front matter title
---
# pip user guide

Use {ref}`pip download <pip-download>` to fetch wheels, see [the docs](https://pip.pypa.io) and **pin**.

## Repeatable Installs

```{note}
:class: tip
Pin every version with {doc}`requirements files <reqs>`.
```

```console
$ pip install -r requirements.txt
    --require-hashes
```
"""

RST = """==============
pip user guide
==============

Use :ref:`pip download <pip-download>` and :doc:`the reference` with *emphasis*.
See `the site <https://example.org>`_.

Repeatable Installs
===================

.. versionadded:: 20.0
   Pin every version with :pep:`440` specifiers.

.. toctree::
   :maxdepth: 2

   intro

.. code-block:: console

   $ pip install -r requirements.txt
       --require-hashes
"""


@pytest.mark.parametrize("name, src", [("guide.md", MYST), ("guide.rst", RST)])
def test_markup_is_rendered_to_text(tmp_path, name, src):
    path = tmp_path / name
    path.write_text(src)
    doc = _doc(path)
    assert doc.title == "pip user guide"
    assert [h for _, _, h in _headings(doc)] == ["pip user guide", "Repeatable Installs"]
    for markup in ("{ref}", "{doc}", ":ref:", ":doc:", ":pep:", "`", "**", "](", "<pip-download>", "===", "toctree",
                   ":class:", ":maxdepth:", "intro"):
        assert markup not in doc.text, (name, markup)
    flat = " ".join(doc.text.split())
    assert "Use pip download" in flat and "Pin every version with" in flat
    code = [doc.text[b.start:b.end] for b in doc.blocks if b.kind == "code"]
    assert code == ["$ pip install -r requirements.txt\n    --require-hashes"]  # code keeps its lines
    chunks = chunk_structured(doc, name, Settings(min_chunk_chars=10))
    assert {(c.section, c.title) for c in chunks} >= {("Repeatable Installs", "Repeatable Installs")}


def test_plain_text_and_unknown_formats(tmp_path):
    assert [getattr(reader_for(tmp_path / n), "name", None) for n in ("notes.txt", "LICENSE")] == ["text", "text"]
    assert reader_for(tmp_path / "data.csv") is None
    (tmp_path / "big.txt").write_text("x" * 5000)
    with pytest.raises(Unreadable) as caught:
        read(tmp_path / "big.txt", 4096)
    assert caught.value.code == "too large"


def test_pathological_markup_is_reported_not_a_crash(tmp_path):
    """Deep nesting: docutils needed 1.4 GB for 3,000 nested list levels; lxml stops at its depth limit."""
    (tmp_path / "deep.rst").write_text("".join(" " * i + "- x\n" for i in range(3000)))
    (tmp_path / "deep.html").write_text("<html><body>" + "<div>" * 20000 + "inside" + "</div>" * 20000 + "</body></html>")
    (tmp_path / "ticks.md").write_text("`" * 100_000)
    codes = {}
    for name in ("deep.rst", "deep.html", "ticks.md"):
        try:
            read(tmp_path / name, 10**8).content()
            codes[name] = "ok"
        except Unreadable as exc:
            codes[name] = exc.code
    assert codes == {"deep.rst": "unreadable", "deep.html": "empty", "ticks.md": "empty"}
