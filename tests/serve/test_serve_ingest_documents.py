"""POST /api/ingest reads an upload as `bara ingest` reads a file of that name: a PDF's text layer, an
HTML manual's main content, a Word file; a password-protected PDF or one without text is refused with a
code naming the reason and stores nothing; text that is not UTF-8 stays a 415."""

from __future__ import annotations

import io

import pytest
from fastapi.testclient import TestClient
from serve_helpers import bearer, make_app, sqlite_runtime


@pytest.fixture(scope="module")
def api(rfc_kb, embedder):
    runtime = sqlite_runtime(rfc_kb("serve_ingest_docs"), embedder)
    keys = {"root": runtime.keys.create("root", admin=True).key, "sam": runtime.keys.create("sam").key}
    with TestClient(make_app(runtime)) as c:
        yield c, keys, runtime
    runtime.close()


def _upload(c, key, name, data):
    return c.post("/api/ingest", files={"file": (name, data)}, headers=bearer(key))


def _sources(runtime):
    return {r[0] for r in runtime.store.query("SELECT source FROM documents")}


def test_a_pdf_upload_is_read_by_its_text_layer_and_found_with_its_page(api, data_dir):
    c, keys, runtime = api
    r = _upload(c, keys["root"], "multicolumn.pdf", (data_dir / "docs/pdf/multicolumn.pdf").read_bytes())
    assert r.status_code == 200 and r.json()["status"] == "written" and r.json()["chunks"] > 0, r.text
    hits = c.get("/api/search", params={"q": "multi-column layout two columns", "k": 5},
                 headers=bearer(keys["sam"])).json()["hits"]
    mine = [h for h in hits if h["source"] == "multicolumn.pdf"]
    assert mine and mine[0]["section"].startswith("p. "), hits
    assert "%PDF" not in mine[0]["text"] and "obj" not in mine[0]["text"].split()


def test_an_html_upload_keeps_the_main_text_not_the_markup(api, data_dir):
    c, keys, runtime = api
    r = _upload(c, keys["root"], "zlib_how.html", (data_dir / "docs/html/zlib_how.html").read_bytes())
    assert r.status_code == 200 and r.json()["status"] == "written", r.text
    rows = runtime.store.query("SELECT c.text FROM chunks c JOIN documents d ON d.id = c.doc_id "
                               "WHERE d.source = ?", ("upload/zlib_how.html",))
    text = " ".join(t for (t,) in rows)
    assert "inflate" in text and "#include <stdio.h>" in text  # code listings stay as text
    assert not any(tag in text for tag in ("<pre", "</", "<a ", "href=", "<body"))


def test_a_word_upload_is_read(api):
    docx = pytest.importorskip("docx")
    c, keys, _ = api
    doc = docx.Document()
    doc.add_heading("Quokka backbone", level=1)
    doc.add_paragraph("The quokka backbone floods marsupial advertisements every seventeen seconds.")
    buf = io.BytesIO()
    doc.save(buf)
    assert _upload(c, keys["root"], "quokka.docx", buf.getvalue()).json()["status"] == "written"
    hits = c.get("/api/search", params={"q": "marsupial advertisements seventeen seconds", "k": 3},
                 headers=bearer(keys["sam"])).json()["hits"]
    assert hits[0]["source"] == "quokka.docx" and "Quokka backbone" in hits[0]["section"], hits[0]


@pytest.mark.parametrize(("name", "code"), [("libreoffice-writer-password.pdf", "encrypted"),
                                            ("imagemagick-images.pdf", "no_text_layer")])
def test_a_pdf_without_usable_text_is_refused_with_its_reason_and_stores_nothing(api, data_dir, name, code):
    c, keys, runtime = api
    r = _upload(c, keys["root"], name, (data_dir / "docs/pdf" / name).read_bytes())
    assert r.status_code == 422, r.text
    body = r.json()["error"]
    assert body["type"] == code and "PDF" in body["message"]
    assert f"upload/{name}" not in _sources(runtime)


def test_a_damaged_pdf_is_unreadable_not_a_500(api):
    c, keys, runtime = api
    r = _upload(c, keys["root"], "broken.pdf", b"%PDF-1.7\n1 0 obj << /Type /Catalog >>\ntrailer\n%%EOF")
    assert r.status_code == 422 and r.json()["error"]["type"] == "unreadable", r.text
    assert "upload/broken.pdf" not in _sources(runtime)


def test_binary_text_is_still_a_415(api):
    c, keys, _ = api
    r = _upload(c, keys["root"], "tool.log", b"ELF\x00\x01\x02 binary")
    assert r.status_code == 415 and r.json()["error"]["type"] == "not_utf8"
