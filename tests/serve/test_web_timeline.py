"""The web timeline in a real browser: Debian's Chromium driven by Playwright against `bara serve`.

One conversation walks the issue's path: sign in with the key (Enter), a greeting (retrieval skipped,
and the reason codes why), an RFC question (hits with RFC sections, scores, stage bars), a follow-up
sent with the keyboard (the rewritten query beside the user's words), the side-by-side view (gated
and always, each with its timeline), and forgetting a profile fact (the inspector empties). What the
page shows is checked against the same server's API, never against numbers copied from a run.
axe-core (vendored, tests/vendor) finds no serious or critical violation at each step; the console
stays free of errors. Screenshots of every step go to $BARA_ARTEFACTS (default .bara/artefacts/).
"""

from __future__ import annotations

import json
import re
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Iterator

import pytest
from loopback import stop

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
AXE = ROOT / "tests" / "vendor" / "axe.min.js"
ARTEFACTS = Path(os.environ.get("BARA_ARTEFACTS", ROOT / ".bara" / "artefacts"))
BARA = [sys.executable, "-m", "bara.cli"]
STARTUP_S = 180  # bound on the server's start (model load on a busy 2-core machine)
STEP_MS = 60_000  # bound on one turn in the browser

GREETING = "Hello! My name is Dana."
QUESTION = "What does HSTS do when a certificate error occurs?"
FOLLOW_UP = "And what about its max-age directive?"

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium missing: `make test` installs it "
                                "(apt-get install chromium)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "BARA_MODEL": "", "BARA_CACHE_DIR": str(tmp / "cache"), "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    env.pop("BARA_CONFIG", None)
    return env


@pytest.fixture(scope="module")
def server(rfc_kb, tmp_path_factory):
    """`bara serve` on a loopback port over a private copy of the RFC knowledge base, with one key."""
    tmp = tmp_path_factory.mktemp("web")
    db, env = str(rfc_kb("web_kb")), _env(tmp)
    created = subprocess.run([*BARA, "keys", "create", "--user", "dana", "--db", db, "--json"], env=env,
                             capture_output=True, text=True, timeout=120, cwd=tmp)
    assert created.returncode == 0, created.stderr
    key = json.loads(created.stdout)["key"]
    port = _free_port()
    log = open(tmp / "serve.log", "w")
    proc = subprocess.Popen([*BARA, "serve", "--db", db, "--port", str(port)], env=env, cwd=tmp,
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_S
    try:
        while True:
            assert proc.poll() is None, f"bara serve exited: {(tmp / 'serve.log').read_text()[-2000:]}"
            try:
                with urllib.request.urlopen(f"{url}/api/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "bara serve did not answer /api/health in time"
            time.sleep(0.3)
        yield SimpleNamespace(url=url, key=key, db=db)
    finally:
        stop(proc, 20)
        log.close()


def _api(server, path: str, method: str = "GET") -> tuple[int, dict]:
    req = urllib.request.Request(server.url + path, method=method,
                                 headers={"Authorization": f"Bearer {server.key}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null")


def _axe(page) -> list[dict]:
    """Serious and critical axe-core violations on the page as it is now."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=str(AXE))
    found = page.evaluate("""async () => (await axe.run(document, {resultTypes: ['violations']})).violations
        .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' '))}))""")
    return [v for v in found if v["impact"] in ("serious", "critical")]


def _shot(page, name: str, focus=None) -> None:
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    if focus is not None:
        focus.scroll_into_view_if_needed()
    page.screenshot(path=str(ARTEFACTS / f"timeline-{name}.png"))


@contextmanager
def _page(server) -> Iterator[tuple[Any, list[str]]]:
    """A Chromium page (1200 x 1000) on the app, closed afterwards, and the console and page errors it
    logged, which the caller checks are none once the page is closed."""
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(server.url + "/")
            yield page, errors
        finally:
            browser.close()


def _render(page, trace: dict, message: str) -> None:
    """Render ``trace`` with the page's own timeline module in place of the welcome text."""
    page.evaluate("""async ([trace, message]) => {
        const { renderTimeline } = await import('/timeline.js');
        document.getElementById('welcome').replaceChildren(renderTimeline(trace, message));
    }""", [trace, message])


def _send(page, message: str, keyboard: bool = False):
    """Type a message, send it (button or Enter) and wait for its turn's timeline; returns the turn."""
    n = page.get_by_test_id("turn").count()
    box = page.get_by_test_id("message-input")
    if keyboard:
        box.focus()
        page.keyboard.type(message)
        page.keyboard.press("Enter")
    else:
        box.fill(message)
        page.get_by_test_id("send").click()
    turn = page.get_by_test_id("turn").nth(n)
    turn.get_by_test_id("timeline").wait_for(timeout=STEP_MS)
    return turn


def _turn_traces(server) -> list[dict]:
    status, convs = _api(server, "/api/conversations")
    assert status == 200
    mine = [c for c in convs["conversations"] if c["turn_count"] >= 1]
    newest = max(mine, key=lambda c: c["updated_at"])
    status, data = _api(server, f"/api/conversations/{newest['id']}/turns")
    assert status == 200
    return [t["trace"] for t in data["turns"]]


def _reasons(turn) -> list[str]:
    return [r.strip() for r in turn.get_by_test_id("timeline").first.get_by_test_id("reason").all_inner_texts()]


def test_timeline_in_a_real_browser(server):
    from playwright.sync_api import expect, sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 1000})
            page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page: {e}"))
            streams: list[str] = []
            page.on("response", lambda r: streams.append(r.headers.get("content-type", ""))
                    if r.url.endswith("/v1/chat/completions") else None)
            page.goto(server.url + "/")

            # Sign in: the key field is labelled; Enter signs in; the key stays in session storage.
            key_field = page.get_by_label("API key")
            expect(key_field).to_have_attribute("data-testid", "api-key")
            assert _axe(page) == []
            _shot(page, "01-signin")
            key_field.fill("bara_not_a_key")
            key_field.press("Enter")
            expect(page.locator("#signin-status")).to_contain_text("not accepted")
            errors.clear()  # the refused key's 401 is logged by the browser itself; it is expected
            key_field.fill(server.key)
            key_field.press("Enter")
            expect(page.get_by_test_id("message-input")).to_be_visible()
            assert page.evaluate("() => sessionStorage.getItem('bara.apiKey')") == server.key

            # A greeting: retrieval skipped, and the reason codes say why.
            greet = _send(page, GREETING)
            trace = _turn_traces(server)[-1]
            assert trace["retrieved"] is False
            timeline = greet.get_by_test_id("timeline")
            expect(timeline).to_contain_text("Retrieval skipped")
            expect(timeline).to_contain_text(trace["route"])
            assert _reasons(greet) == trace["reasons"]
            assert any(r.startswith("route:") for r in _reasons(greet))
            assert greet.get_by_test_id("hit").count() == 0
            expect(greet.locator('[data-testid="stage"][data-stage="retrieve_kb"]')).to_have_attribute(
                "data-status", "skipped")
            _shot(page, "02-greeting", timeline)
            assert streams and all(c.startswith("text/event-stream") for c in streams)  # the answer was streamed

            # An RFC question: hits with RFC sections and scores, a bar per stage that ran.
            ask = _send(page, QUESTION)
            trace = _turn_traces(server)[-1]
            assert trace["retrieved"] and trace["hits"]
            hits = ask.get_by_test_id("hit")
            kb_hits = ask.locator('[data-testid="hit"][data-tier="kb"]')
            expect(kb_hits).to_have_count(len(trace["hits"]))
            expect(hits).to_have_count(len(trace["hits"]) + len(trace["memory_hits"]))
            for shown, hit in zip(kb_hits.all_inner_texts(), trace["hits"], strict=False):
                assert hit["source"].removesuffix(".txt") in shown and f"§{hit['section']}" in shown
                assert f"{hit['score']:.3f}" in shown
            assert all(h["source"].startswith("rfc") for h in trace["hits"])
            expect(ask.get_by_test_id("dropped-hit")).to_have_count(len(trace.get("dropped_hits", [])))
            ran = [s for s, v in trace["latency_ms"].items() if s != "total" and v > 0]
            assert {"embed", "retrieve_kb", "generate"} <= set(ran)
            for stage in ran:
                expect(ask.locator(f'[data-testid="stage"][data-stage="{stage}"]')).to_have_attribute(
                    "data-status", "ok")
                expect(ask.locator(f'[data-stage="{stage}"] .stage-bar')).to_be_visible()
            assert _reasons(ask) == trace["reasons"]
            assert _axe(page) == []
            _shot(page, "03-question", ask.get_by_test_id("timeline"))

            # A follow-up, sent with the keyboard only: the rewritten query beside the user's words.
            follow = _send(page, FOLLOW_UP, keyboard=True)
            trace = _turn_traces(server)[-1]
            assert trace["rewritten"] and trace["retrieval_query"] != FOLLOW_UP
            rewrite = follow.get_by_test_id("rewrite")
            expect(rewrite).to_contain_text(FOLLOW_UP)
            expect(follow.get_by_test_id("search-query")).to_have_text(trace["retrieval_query"])
            _shot(page, "04-follow-up", follow.get_by_test_id("timeline"))

            # Side by side: the same message by gated and by always, each with a timeline, cost and hits.
            conversations_before = _conversation_ids(server)
            follow.get_by_test_id("open-compare").focus()  # keyboard only: focus, Enter, and Escape closes
            page.keyboard.press("Enter")
            compare = page.get_by_test_id("compare")
            expect(compare.get_by_test_id("timeline")).to_have_count(2, timeout=STEP_MS)
            expect(compare.get_by_test_id("compare-gated")).to_contain_text("mode gated")
            expect(compare.get_by_test_id("compare-always")).to_contain_text("mode always")
            expect(compare.locator("table.cost")).to_contain_text("Tokens added")
            assert compare.get_by_test_id("compare-always").get_by_test_id("hit").count() > 0
            assert _axe(page) == []
            _shot(page, "05-compare")
            page.keyboard.press("Escape")
            expect(compare).to_be_hidden()
            assert _conversation_ids(server) == conversations_before  # the baseline answer left no conversation

            # The memory inspector shows the profile fact the greeting taught; forget empties it.
            status, memory = _api(server, "/api/memory")
            assert status == 200 and memory["profile"], memory
            page.get_by_role("tab", name="Memory").click()
            facts = page.get_by_test_id("profile-fact")
            expect(facts).to_have_count(len(memory["profile"]))
            # ... and what the user said, per conversation (the episodic tier; the greeting is one turn of it)
            episodic = memory["episodic"]
            assert episodic["turns"] >= 1 and episodic["conversations"], episodic
            shown = page.get_by_test_id("episodic-conversation")
            expect(shown).to_have_count(len(episodic["conversations"]))
            shown.first.locator("summary").click()
            first = episodic["conversations"][0]
            expect(shown.first.get_by_test_id("episodic-turn")).to_have_count(len(first["remembered"]))
            expect(shown.first.get_by_test_id("episodic-turn").last).to_have_text(first["remembered"][-1]["text"])
            assert _axe(page) == []
            _shot(page, "06-memory")
            while facts.count():
                before = facts.count()
                facts.first.get_by_test_id("forget-fact").click()
                expect(facts).to_have_count(before - 1)
            expect(page.get_by_test_id("profile-empty")).to_be_visible()
            assert _api(server, "/api/memory")[1]["profile"] == {}
            _shot(page, "07-forgotten")

            # The search playground: lexical rank, dense rank and fused score per hit.
            page.get_by_role("tab", name="Search").click()
            page.get_by_label("Query").fill("HSTS max-age directive")
            page.get_by_label("Query").press("Enter")
            rows = page.get_by_test_id("search-hit")
            expect(rows.first).to_be_visible(timeout=STEP_MS)
            status, found = _api(server, "/api/search?q=HSTS%20max-age%20directive&k=8")
            expect(rows).to_have_count(len(found["hits"]))
            first = rows.first.inner_text()
            assert f"{found['hits'][0]['fused']:.4f}" in first
            for row, hit in zip(rows.all(), found["hits"], strict=False):  # the passage, not only its file
                words = " ".join(hit["text"].split())
                assert words[:60] in row.get_by_test_id("search-snippet").inner_text()
                assert ("§–" not in row.inner_text()) and (not hit["section"] or f"§{hit['section']}" in row.inner_text())
            assert _axe(page) == []
            _shot(page, "08-search")
        finally:
            browser.close()
    assert errors == []


def _conversation_ids(server) -> list[str]:
    status, convs = _api(server, "/api/conversations")
    assert status == 200
    return sorted(c["id"] for c in convs["conversations"])


PHONE = {"width": 390, "height": 844}


def _fits(page, width: int = PHONE["width"]) -> None:
    """Nothing wider than the phone: the document does not scroll sideways, and no visible element ends
    past the right edge (a box cut off by an overflow: hidden parent would hide a button the same way)."""
    assert page.evaluate("() => document.documentElement.scrollWidth") <= width
    assert page.evaluate("() => document.scrollingElement.scrollWidth") <= width
    wide = page.evaluate("""(w) => [...document.querySelectorAll('button, input, textarea, select, a, [data-testid]')]
        .filter((el) => el.offsetParent !== null && !el.closest('dialog:not([open])'))
        .filter((el) => { const r = el.getBoundingClientRect(); return r.width > 0 && r.right > w + 1; })
        .map((el) => el.tagName + '#' + el.id + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right))""",
                         width)
    assert wide == [], wide[:8]


def test_the_page_on_a_phone(server):
    """At 390 x 844 (a phone, touch, mobile viewport): sign in, send with the Send button, read the turn's
    timeline and hits, compare, the memory inspector and the search playground, each usable with no
    sideways scrolling, axe-clean, with a screenshot of each step."""
    from playwright.sync_api import expect, sync_playwright

    errors: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2)
            page = context.new_page()
            page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(f"page: {e}"))
            page.goto(server.url + "/")
            _fits(page)
            assert _axe(page) == []
            _shot(page, "phone-01-signin")

            page.get_by_label("API key").fill(server.key)
            page.get_by_role("button", name="Sign in").tap()
            box = page.get_by_test_id("message-input")
            expect(box).to_be_visible()
            _fits(page)

            box.fill(QUESTION)
            page.get_by_test_id("send").tap()  # fails when anything covers the button or it is off-screen
            turn = page.get_by_test_id("turn").last
            timeline = turn.get_by_test_id("timeline")
            timeline.wait_for(timeout=STEP_MS)
            hits = turn.locator('[data-testid="hit"][data-tier="kb"]')
            expect(hits.first).to_be_visible()
            assert hits.count() == len(_turn_traces(server)[-1]["hits"])
            _fits(page)
            assert _axe(page) == []
            _shot(page, "phone-02-turn", hits.first)

            before = _conversation_ids(server)
            turn.get_by_test_id("open-compare").tap()
            compare = page.get_by_test_id("compare")
            expect(compare.get_by_test_id("timeline")).to_have_count(2, timeout=STEP_MS)
            assert compare.evaluate("(c) => c.scrollWidth <= c.clientWidth + 1")
            assert _axe(page) == []
            _shot(page, "phone-03-compare")
            page.get_by_role("button", name="Close").tap()
            expect(compare).to_be_hidden()
            assert _conversation_ids(server) == before

            page.get_by_role("tab", name="Memory").tap()
            expect(page.get_by_test_id("memory-profile")).to_be_visible()
            _fits(page)
            assert _axe(page) == []
            _shot(page, "phone-04-memory", page.get_by_test_id("memory"))

            page.get_by_role("tab", name="Search").tap()
            page.get_by_label("Query").fill("HSTS max-age directive")
            page.get_by_role("button", name="Search", exact=True).tap()
            rows = page.get_by_test_id("search-hit")
            expect(rows.first).to_be_visible(timeout=STEP_MS)
            expect(rows.first.get_by_test_id("search-snippet")).not_to_be_empty()
            _fits(page)
            assert _axe(page) == []
            _shot(page, "phone-05-search", rows.first)
        finally:
            browser.close()
    assert errors == []


def _post_turn(server, key: str, message: str) -> dict:
    req = urllib.request.Request(server.url + "/api/turns", method="POST", data=json.dumps({"message": message}).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


def test_forgetting_a_profile_fact_touches_only_the_callers(server, tmp_path):
    """DELETE /api/memory/profile/{fact} (the inspector's Forget) removes the caller's fact and no one
    else's; a fact the caller does not have is a 404, like any unknown id."""
    made = subprocess.run([*BARA, "keys", "create", "--user", "eve", "--db", server.db, "--json"], env=_env(tmp_path),
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    eve = SimpleNamespace(url=server.url, key=json.loads(made.stdout)["key"], db=server.db)
    for who, name in ((server, "Dana"), (eve, "Eve")):
        trace = _post_turn(who, who.key, f"Hello! My name is {name}.")["trace"]
        assert trace["stored"]["profile_facts"] == {"name": name}
    status, body = _api(eve, "/api/memory/profile/name", method="DELETE")
    assert status == 200 and body["deleted"] == {"profile": 1}
    assert _api(eve, "/api/memory")[1]["profile"] == {}
    assert _api(server, "/api/memory")[1]["profile"] == {"name": "Dana"}
    status, body = _api(eve, "/api/memory/profile/name", method="DELETE")
    assert status == 404 and body["error"]["type"] == "not_found"
    assert _api(server, "/api/memory")[1]["profile"] == {"name": "Dana"}


def test_failed_and_degraded_stages_are_styled_apart(server):
    """A real turn's trace with a failed embedding, a degraded search, a fallback answer and a failing
    hook (the reason codes the pipeline writes for them) renders those stages and codes distinctly."""
    from playwright.sync_api import expect

    req = urllib.request.Request(server.url + "/api/turns", method="POST", data=json.dumps({"message": QUESTION}).encode(),
                                 headers={"Authorization": f"Bearer {server.key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        trace = json.loads(r.read())["trace"]
    trace["reasons"] += ["embed:failed:EmbedderError", "kb:degraded", "generate:model_failed_offline_used:LLMTimeout",
                         "hook:before_persist_failed"]
    trace["hook_errors"] = [{"point": "before_persist", "hook": "audit", "error": "RuntimeError: disk full"}]
    with _page(server) as (page, errors):
        _render(page, trace, QUESTION)
        timeline = page.get_by_test_id("timeline")
        expect(timeline).to_have_class(re.compile(r"\bhas-problems\b"))
        stage = 'li[data-testid="stage"][data-stage="{}"]'
        expect(timeline.locator(stage.format("embed"))).to_have_attribute("data-status", "error")
        expect(timeline.locator(stage.format("retrieve_kb"))).to_have_attribute("data-status", "degraded")
        expect(timeline.locator(stage.format("generate"))).to_have_attribute("data-status", "degraded")
        expect(timeline.locator(stage.format("persist"))).to_have_attribute("data-status", "error")
        failed = timeline.locator(".reason-error")
        expect(failed).to_have_count(4)
        expect(timeline).to_contain_text("Hook audit failed at before_persist: RuntimeError: disk full")
        assert _axe(page) == []
        _shot(page, "09-failures", timeline)
    assert errors == []


ODD = "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>"
RTL = "ما هو العائد على محفظتي؟ שלום עולם"
EMOJI = "💰📈🇮🇳 👩🏽‍💻"


@pytest.mark.parametrize("shape", ["empty", "odd"])
def test_odd_traces_render_as_text_and_stay_in_the_page(server, shape):
    """An empty trace, or one whose every string is huge, right-to-left, emoji or HTML-like, renders
    without console errors, without running or building markup from the text, and without widening
    the page past the viewport."""

    long_word = "x" * 5000
    trace: dict = {} if shape == "empty" else {
        "turn": 1, "answer": ODD + RTL + EMOJI + long_word, "retrieval_query": RTL + long_word,
        "retrieved": True, "rewritten": True,
        "reasons": [ODD, "kb:" + long_word], "route": ODD,
        "hits": [{"id": 1, "source": ODD + long_word, "section": RTL, "title": EMOJI + long_word, "score": 0.5,
                  "fused": 0.5, "tier": "kb"}],
        "stored": {"profile_facts": {ODD: RTL + long_word}, "notes": [ODD + long_word]},
        "hook_errors": [{"point": ODD, "hook": RTL, "error": long_word}], "latency_ms": {ODD: 5.0, "total": 5.0}}
    message = "" if shape == "empty" else ODD + " " + RTL + " " + EMOJI + " " + long_word
    with _page(server) as (page, errors):
        _render(page, trace, message)
        timeline = page.get_by_test_id("timeline")
        assert timeline.count() == 1
        assert timeline.locator("img, script").count() == 0
        assert page.evaluate("() => window.__pwned") is None
        if shape == "odd":
            assert ODD in timeline.inner_text()
            # right-to-left words read right to left (base direction from the text, not the page)
            assert timeline.get_by_test_id("search-query").evaluate("(q) => q.matches(':dir(rtl)')")
            assert timeline.locator(".hit-title").evaluate("(t) => t.matches(':dir(ltr)')")  # emoji+latin
        wide = page.evaluate("""() => [...document.querySelectorAll('[data-testid=timeline] *')]
            .filter((el) => el.getBoundingClientRect().right > window.innerWidth + 1)
            .map((el) => el.tagName + '.' + el.className + ' ' + Math.round(el.getBoundingClientRect().right))""")
        assert wide == [] and page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth"), wide[:8]
        assert _axe(page) == []
        _shot(page, f"10-odd-{shape}", timeline)
    assert errors == []


@pytest.mark.parametrize(("section", "title", "shown"), [
    ("p. 4 \u00a72.1 Scope", "Scope", "guide.pdf p. 4 \u00a72.1 Scope"),  # a PDF page: the reader's section, once
    ("7.4.1", "Hello Messages", "rfc5246 \u00a77.4.1 Hello Messages"),  # an RFC: number, then heading
    ("Install", "Install", "guide.pdf \u00a7Install"),  # a Markdown heading: not twice
])
def test_a_hit_names_its_section_and_heading_once(server, section, title, shown):
    """The page says where a hit is the way bara search and the offline answer do (bara.text.locator)."""
    source = "rfc5246.txt" if section[0].isdigit() else "guide.pdf"
    trace = {"turn": 1, "answer": "x", "retrieved": True, "reasons": [], "route": "kb",
             "hits": [{"id": 1, "source": source, "section": section, "title": title, "score": 0.5, "fused": 0.5,
                       "tier": "kb"}], "latency_ms": {"total": 1.0}}
    with _page(server) as (page, errors):
        _render(page, trace, "where?")
        text = " ".join(page.get_by_test_id("timeline").locator(".hit-where").inner_text().split())
        assert text == shown, text
    assert errors == []


def test_odd_messages_in_the_chat_render_as_text_in_their_own_direction(server):
    """A right-to-left message with HTML-like text and a very long word, sent through the page: shown as
    text (nothing built from it), right to left, and within the viewport, in the turn and the heading."""
    from playwright.sync_api import expect

    message = RTL + " " + ODD + " " + EMOJI + " " + "y" * 3000
    with _page(server) as (page, errors):
        page.get_by_label("API key").fill(server.key)
        page.get_by_label("API key").press("Enter")
        expect(page.get_by_test_id("message-input")).to_be_visible()
        turn = _send(page, message)
        mine = turn.locator(".msg-user p")
        assert mine.inner_text() == message
        assert turn.locator("img, script").count() == 0 and page.evaluate("() => window.__pwned") is None
        assert mine.evaluate("(p) => p.matches(':dir(rtl)')")
        assert turn.locator(".msg-bot .answer").evaluate("(p) => p.matches(':dir(ltr)')")  # an English answer
        heading = page.locator("#chat-heading")
        expect(heading).to_contain_text(RTL[:10])
        assert heading.evaluate("(h) => h.matches(':dir(rtl)')")
        assert page.evaluate("() => document.scrollingElement.scrollWidth <= innerWidth")
        assert _axe(page) == []
        _shot(page, "11-odd-message", turn)
    assert errors == []
