"""Tests for bara.retrieval.chunking: real RFCs, hand-built inputs and random text.

The RFC tests read the shared corpus from ``$BARA_DATA/rfc`` (default
/work/shared/data) and skip cleanly when it is absent.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings as hyp_settings, strategies as st

from bara.retrieval.chunking import chunk_document, looks_like_rfc
from bara.settings import Settings
from bara.types import Chunk

SETTINGS = Settings()
RFC_DIR = Path(os.environ.get("BARA_DATA", "/work/shared/data")) / "rfc"
PAGE_FOOTER = re.compile(r"\[page\s+\d+\]", re.I)
SENTENCE_END = re.compile(r"[.!?:;][\"')\]]*$")
BLANK_LINE_NEXT = re.compile(r"[ \t]*\r?\n[ \t\f]*\r?\n")


def words(text: str) -> list[str]:
    """Words as the chunker may rejoin them: a line ending in a hyphen joins the next line."""
    return [w for w in re.split(r"[\s-]+", text) if w]


def assert_well_formed(text: str, chunks: list[Chunk], size: int = SETTINGS.chunk_size_chars) -> None:
    """Invariants every chunking must keep, whatever the input."""
    for i, c in enumerate(chunks):
        assert c.text.strip(), "empty chunk"
        assert 0 <= c.start < c.end <= len(text)
        assert len(c.text) <= size
        assert c.ordinal == i and c.content_hash
        span, ws = text[c.start:c.end], words(c.text) or [""]
        assert ws[0] in span and ws[-1] in span, (ws[0], ws[-1], span[:80])
    for a, b in zip(chunks, chunks[1:], strict=False):
        assert a.start <= b.start and a.end <= b.end, "offsets must be monotonic"


def ends_cleanly(text: str, chunks: list[Chunk], i: int) -> bool:
    """Chunk i ends at a sentence end, a paragraph end or its section's end."""
    c = chunks[i]
    nxt = chunks[i + 1] if i + 1 < len(chunks) else None
    return bool(SENTENCE_END.search(c.text) or nxt is None or (nxt.section, nxt.title) != (c.section, c.title)
                or BLANK_LINE_NEXT.match(text, c.end))


# ----------------------------------------------------------------- real RFCs

@pytest.fixture(scope="module")
def rfcs() -> dict[str, tuple[str, str, list[Chunk]]]:
    """name -> (original text, title, chunks) for every RFC in the shared corpus."""
    files = sorted(RFC_DIR.glob("rfc*.txt"))
    if not files:
        pytest.skip(f"RFC corpus not found at {RFC_DIR} (set BARA_DATA)")
    out = {}
    for f in files:
        text = f.read_bytes().decode("utf-8", errors="replace")  # keep CRLF: offsets are raw
        title, chunks = chunk_document(text, f.name, SETTINGS)
        out[f.stem] = (text, title, chunks)
    return out


def test_every_rfc_is_detected_and_chunked(rfcs):
    assert len(rfcs) == 56
    for name, (text, title, chunks) in rfcs.items():
        assert looks_like_rfc(text), name
        assert title.startswith(f"RFC {name[3:]}: "), (name, title)
        assert len(chunks) >= 5, name
    print(f"\n{sum(len(c) for _, _, c in rfcs.values())} chunks from {len(rfcs)} RFCs")


def test_rfc_titles_come_from_the_first_page(rfcs):
    assert rfcs["rfc7230"][1] == "RFC 7230: Hypertext Transfer Protocol (HTTP/1.1): Message Syntax and Routing"
    assert rfcs["rfc768"][1] == "RFC 768: User Datagram Protocol"
    assert rfcs["rfc2616"][1] == "RFC 2616: Hypertext Transfer Protocol -- HTTP/1.1"


def test_rfc_chunks_are_well_formed(rfcs):
    for text, _, chunks in rfcs.values():
        assert_well_formed(text, chunks)
        assert all(len(c.text.strip()) >= SETTINGS.min_chunk_chars for c in chunks)


def test_no_page_furniture_survives(rfcs):
    for name, (text, _, chunks) in rfcs.items():
        headers = {" ".join(m.group(1).split()) for m in re.finditer(r"\f[\r\n]*([^\r\n]*)", text)}
        headers = {h for h in headers if h.startswith("RFC")}  # modern running headers
        for c in chunks:
            flat = " ".join(c.text.split())
            assert "\f" not in c.text, name
            assert not PAGE_FOOTER.search(c.text), (name, c.section, c.text[:120])
            assert not any(h in flat for h in headers), (name, c.section)


def test_rfc_chunks_end_at_sentence_or_paragraph(rfcs):
    good = total = 0
    for text, _, chunks in rfcs.values():
        good += sum(ends_cleanly(text, chunks, i) for i in range(len(chunks)))
        total += len(chunks)
    print(f"\nclean ends: {good}/{total} = {good / total:.1%}")
    assert good / total >= 0.95


def test_known_rfc7230_sections(rfcs):
    _, _, chunks = rfcs["rfc7230"]
    found = {(c.section, c.title) for c in chunks}
    for expected in [("3.2.4", "Field Parsing"), ("3.2.6", "Field Value Components"),
                     ("2.7.1", "http URI Scheme"), ("A.1.1", "Multihomed Web Servers"),
                     ("B", "Collected ABNF"), ("", "Abstract"), ("", "Status of This Memo")]:
        assert expected in found, expected
    field_parsing = [c for c in chunks if c.section == "3.2.4"]
    assert any("No whitespace is allowed between the header field-name and colon" in c.text
               for c in field_parsing)
    assert not any("Table of Contents" in c.title or "....." in c.text for c in chunks)


def test_old_layout_rfcs_keep_sections(rfcs):
    sections = lambda name: {(c.section, c.title) for c in rfcs[name][2]}  # noqa: E731
    assert ("3.1", "Internet Header Format") in sections("rfc791")
    assert ("3.9", "Event Processing") in sections("rfc793")
    assert ("2.1", "The history of domain names") in sections("rfc1034")
    assert ("1.1", "The Internet Architecture") in sections("rfc1122")  # indented headings
    assert ("", "Fields") in sections("rfc768")  # underlined headings


def test_paragraph_split_by_page_break_is_rejoined(rfcs):
    # RFC 7230 page 5 ends "... then successful actions" and page 6 resumes "ought to be ...".
    text, _, chunks = rfcs["rfc7230"]
    hits = [c for c in chunks if "then successful actions ought to be reflected in corresponding" in c.text]
    assert hits and hits[0].section == "1"
    assert "\f" in text[hits[0].start:hits[0].end]  # the span really crosses the page break


def test_figures_keep_their_lines(rfcs):
    _, _, chunks = rfcs["rfc7230"]
    abnf = [c for c in chunks if "HTTP-message   = start-line" in c.text]
    assert abnf, "ABNF lines should stay intact"
    assert "\n" in abnf[0].text


def test_overlap_repeats_whole_trailing_sentences(rfcs):
    text, _, chunks = rfcs["rfc7230"]
    pairs = [(a, b) for a, b in zip(chunks, chunks[1:], strict=False) if a.section == b.section and b.start < a.end]
    assert len(pairs) > 20, "consecutive chunks of a long section should overlap"
    for a, b in pairs:
        shared = words(text[b.start:a.end])
        assert len(" ".join(shared)) <= SETTINGS.chunk_overlap_chars
        assert words(a.text)[-len(shared):] == shared and words(b.text)[:len(shared)] == shared
        before = text[max(0, b.start - 40):b.start]  # the overlap starts where a sentence starts
        assert re.search(r"([.!?:;][\"')\]]*\s+|\n[ \t\f]*\r?\n[ \t]*)$", before), before


def test_chunking_all_rfcs_is_repeatable(rfcs):
    """Chunking is a pure function of the text: a second pass over every RFC gives the same chunks.
    (Its speed is measured by bench/bench_chunking.py, not here: a timed test fails on a slower CPU.)"""
    for name, (text, title, chunks) in rfcs.items():
        again_title, again = chunk_document(text, f"{name}.txt", SETTINGS)
        assert (again_title, again) == (title, chunks), name


# ------------------------------------------------------------- hand-built RFC

FOOTER = "Doe                          Standards Track                    [Page {}]"
HEADER = "RFC 9999                 Example Protocol                  June 2020"
MINI_RFC = "\r\n".join([
    "Internet Engineering Task Force (IETF)                            J. Doe",
    "Request for Comments: 9999                                       Example",
    "Category: Standards Track                                     June 2020",
    "", "", "                        The Example Protocol", "",
    "Abstract", "", "   This document describes the example protocol in enough words.", "",
    "1.  Introduction", "",
    "   The example protocol moves widgets between hosts.  It is carried over",
    "   TCP and uses a single well-known port; the port number has no", "", "", FOOTER.format(1), "\f",
    HEADER, "", "",
    "   surprising features at all.  Widgets are small.", "",
    "2.  Widget Format", "",
    "   A widget has a header and a body.  The header is eight octets long.", "",
    "     +--------+--------+", "     | type   | length |", "     +--------+--------+", "",
    "Appendix A.  Examples", "", "   An example widget is shown in the figure above here.", "",
])


def test_mini_rfc_structure():
    assert looks_like_rfc(MINI_RFC)
    title, chunks = chunk_document(MINI_RFC, "mini", SETTINGS)
    assert title == "RFC 9999: The Example Protocol"
    assert [(c.section, c.title) for c in chunks] == [
        ("", "Abstract"), ("1", "Introduction"), ("2", "Widget Format"), ("A", "Examples")]
    intro = chunks[1].text
    assert "the port number has no surprising features at all." in intro
    assert "Page" not in intro and "June 2020" not in intro
    assert "+--------+--------+\n| type   | length |" in chunks[2].text
    assert_well_formed(MINI_RFC, chunks)


# ----------------------------------------------------- plain text, Markdown

def test_rfc_detection_needs_rfc_layout():
    assert not looks_like_rfc("RFC 7230 defines HTTP/1.1 message syntax.\n\n# Notes\n")
    assert not looks_like_rfc("See [Page 3] of the manual.")
    assert looks_like_rfc("Network Working Group\nRequest for Comments: 1234\n")
    assert looks_like_rfc("text\nDoe            Informational          [Page 1]\n\f\nmore\n"
                          "Doe            Informational          [Page 2]\n")


def test_empty_and_blank_inputs_give_no_chunks():
    for text in ["", "   ", "\f\f\n\f", "\r\n\t\r\n  \f \n"]:
        assert chunk_document(text, "s", SETTINGS)[1] == []


def test_plain_text_packs_paragraphs_and_sentences():
    para = " ".join(f"Sentence number {i} talks about widgets and gadgets." for i in range(40))
    text = "A Plain Title\n\n" + para + "\n\nA short closing paragraph with some words.\n"
    assert not looks_like_rfc(text)
    title, chunks = chunk_document(text, "p", SETTINGS)
    assert title == "A Plain Title"
    assert len(chunks) >= 2
    assert all(c.section == "" for c in chunks)
    assert all(SENTENCE_END.search(c.text) for c in chunks)
    assert chunks[1].text.startswith("Sentence number")  # overlap starts on a sentence
    assert_well_formed(text, chunks)


def test_long_sentence_is_cut_at_word_boundaries():
    text = " ".join(f"word{i}" for i in range(600))  # no punctuation at all
    _, chunks = chunk_document(text, "p", SETTINGS)
    assert len(chunks) >= 4
    for c in chunks:
        assert all(re.fullmatch(r"word\d+", w) for w in c.text.split())
    assert_well_formed(text, chunks)


def test_word_longer_than_limit_is_hard_cut():
    text = "x" * 2500 + " tail words here to finish the text."
    _, chunks = chunk_document(text, "p", SETTINGS)
    assert [len(c.text) for c in chunks][:2] == [1000, 1000]
    assert_well_formed(text, chunks)


def test_windows_line_endings_tabs_and_unicode():
    text = ("Ünïcödé prose is hard-wrapped at a fixed width, so this line\r\nand the next one are "
            "a single paragraph. Ça marche très bien!\r\n\r\n"
            "\tcode\tcolumn\r\n\tmore\tcolumns\r\n\tlast\tone\r\n")
    _, chunks = chunk_document(text, "w", SETTINGS)
    assert "so this line and the next one" in chunks[0].text  # prose is reflowed
    assert "code    column\nmore    columns" in chunks[0].text  # short lines stay lines, tabs expanded
    assert "\r" not in chunks[0].text and "\t" not in chunks[0].text
    assert_well_formed(text, chunks)


def test_markdown_sections_and_code():
    text = ("# Guide\n\nIntro text that is long enough to be kept as a chunk.\n\n"
            "## Install\n\nRun the installer and wait for it to finish completely.\n\n"
            "```\n# not a heading\npip install bara\n```\n\n"
            "### Linux\n\nUse the package manager of your distribution, as usual.\n")
    title, chunks = chunk_document(text, "m.md", SETTINGS)
    assert title == "Guide"
    assert [(c.section, c.title) for c in chunks] == [
        ("Guide", "Guide"), ("Guide > Install", "Install"), ("Guide > Install > Linux", "Linux")]
    assert "# not a heading\npip install bara" in chunks[1].text
    assert_well_formed(text, chunks)


def test_chunks_never_cross_sections():
    body = " ".join(f"Fact {i} is stated here in a full sentence." for i in range(60))
    text = f"# One\n\n{body}\n\n# Two\n\n{body}\n"
    _, chunks = chunk_document(text, "m", SETTINGS)
    for c in chunks:
        inside = text[c.start:c.end]
        assert "# Two" not in inside and "# One" not in inside


# ----------------------------------------------------------------- property

ALPHABET = st.sampled_from(list("abcXYZ019 .!?-#|\t\n\r\f") + ["  ", "\r\n", "é", "日", "\u2028", "[Page 3]"])


@hyp_settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ALPHABET, max_size=1500).map("".join))
def test_random_text_keeps_invariants(text):
    small = SETTINGS.override(chunk_size_chars=200, chunk_overlap_chars=40, min_chunk_chars=1)
    _, chunks = chunk_document(text, "r", small)
    assert_well_formed(text, chunks, size=200)
