"""issue 9 seams: bara.agent is generic (never imports a domain), the golden data is checked on load,
the funds prompts live in one module, and the thin-search threshold follows rrf_k."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import bara.agent
from bara.domains.funds import prompts as P
from bara.domains.funds.golden_cases import CASES, parse_cases, unique_ids
from bara.domains.funds.router.steps import Seen, is_thin, read_turn
from bara.domains.funds.settings import thin_score
from bara.errors import InputError
from bara.messages import SystemMessage, UserMessage
from bara.settings import Settings

AGENT_DIR = Path(bara.agent.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module a file imports, at any level (functions and TYPE_CHECKING blocks included)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return out


def test_agent_package_never_imports_a_domain():
    files = sorted(AGENT_DIR.rglob("*.py"))
    assert files, AGENT_DIR
    bad = {f.name: sorted(m for m in imported_modules(f) if m.startswith("bara.domains") or m == "bara.domains")
           for f in files}
    assert not {k: v for k, v in bad.items() if v}


def test_import_scan_sees_function_level_imports(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("def g():\n    from bara.domains.funds import router\n", encoding="utf-8")
    assert "bara.domains.funds.router" in imported_modules(f)


def test_golden_cases_keep_their_ids_and_counts():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids)) == 160
    assert sum(c["split"] == "dev" for c in CASES) == 89


@pytest.mark.parametrize("row, message", [
    ('{"id": "a", "category": "numeric", "user": "u", "message": "m", "expect": {}}', "needs expect.figures"),
    ('{"id": "a", "category": "vibes", "user": "u", "message": "m", "expect": {"none": true}}', "not one of"),
    ('{"id": "a", "category": "tool_selection", "user": "u", "message": "m", "expect": {"nope": 1}}', "unknown keys"),
    ('{"id": 3, "category": "refusal", "user": "u", "message": "m", "expect": {"refusal": "x"}}', "must be"),
    ('{"id": "a", "category": "refusal", "user": "u", "message": "m"}', "lacks"),
    ('[1, 2]', "JSON object"),
    ('{"id": "a",', "not JSON"),
])
def test_golden_schema_check_names_the_line(row, message):
    with pytest.raises(InputError, match=message) as err:
        parse_cases('{"id": "ok", "category": "refusal", "user": "u", "message": "m", "expect": {"refusal": "x"}}\n'
                    + row, "golden_x.jsonl", "dev")
    assert "golden_x.jsonl line 2" in str(err.value)


def test_golden_ids_must_be_unique():
    row = {"id": "a", "category": "refusal", "user": "u", "message": "m", "expect": {"refusal": "x"}}
    with pytest.raises(InputError, match="used twice"):
        unique_ids(({**row, "split": "dev"}, {**row, "split": "test"}))


def test_agent_system_prompt_is_what_the_router_reads():
    system = P.AGENT_SYSTEM.format(name="Asha Rao", user_id="u_asha")
    turn = read_turn([SystemMessage(system), UserMessage("my xirr?")])
    assert (turn.user_name, turn.user_id, turn.text) == ("Asha Rao", "u_asha", "my xirr?")


def test_thin_score_follows_rrf_k():
    s = Settings()  # at the defaults a hit only one arm found is thin, one both arms rank first is not
    assert max(s.weight_lexical, s.weight_dense) / (s.rrf_k + 1) < thin_score(s)
    assert thin_score(s) < (s.weight_lexical + s.weight_dense) / (s.rrf_k + 1)
    hits = [{"score": 0.03}, {"score": 0.03}]
    search = Seen("search_documents", {"query": "q"}, {"ok": True, "data": {"hits": hits}})
    assert not is_thin(search, Settings())
    assert is_thin(search, Settings(rrf_k=10))  # 2/(10+40) = 0.04: the same hits are now one-arm strength
    assert is_thin(search, Settings(router_thin_min_hits=3))


def test_search_hits_are_read_back_as_typed_records():
    from bara.domains.funds.router.records import SearchHit, search_hits

    hits = search_hits({"hits": [{"source": "fiqa/1", "title": "T", "text": "x", "score": 0.03},
                                 {"source": "s", "score": None}, "junk"]})
    assert hits == (SearchHit("fiqa/1", "T", "x", 0.03), SearchHit("s", "", "", 0.0), SearchHit())
    assert search_hits({}) == () and search_hits({"hits": None}) == ()
