"""No SQL in the front ends: the HTTP service, MCP, the CLI, the turn, the evaluation harness and a
domain's router, assistant, golden set and facts reach the store through the ``Bara`` façade and the
repositories (which own their tables' SQL), never by writing SQL or calling the store's SQL runner.
The checker is shown to flag a small module that does, so a green run means something."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BARA = ROOT / "bara"
FUNDS = BARA / "domains" / "funds"

#: A string that starts like an SQL statement (upper-case keyword, as every statement here is written).
_SQL = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|CREATE|ALTER|DROP|WITH)\s")
#: The store's SQL-runner methods (``bara.store.base.SqlRunner``).
_RUNNER = frozenset({"execute", "executemany", "write", "query", "query_many"})


def front_ends() -> list[Path]:
    paths = [*(BARA / "cli").rglob("*.py"), *(BARA / "serve").rglob("*.py"), *(BARA / "mcp").rglob("*.py"),
             *(BARA / "eval").rglob("*.py"), *(BARA / "turn").rglob("*.py"),
             *(FUNDS / "router").rglob("*.py"), FUNDS / "assistant.py", FUNDS / "facts.py",
             *(p for p in FUNDS.glob("golden*.py") if p.name != "golden_rows.py")]
    return sorted(p for p in paths if p.is_file())


def sql_in(source: str) -> list[str]:
    """Where ``source`` writes SQL: statement-like string literals (an f-string's text parts too) and calls
    of a store's SQL runner."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _SQL.match(node.value):
            found.append(f"line {node.lineno}: SQL text {node.value[:40]!r}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _RUNNER:
            receiver = ast.unparse(node.func.value)
            if re.search(r"store|runner|conn", receiver, re.I):
                found.append(f"line {node.lineno}: {receiver}.{node.func.attr}(...)")
    return found


def test_the_front_ends_write_no_sql():
    offenders = {str(p.relative_to(ROOT)): hits for p in front_ends() if (hits := sql_in(p.read_text()))}
    assert offenders == {}, "front ends that write SQL (move it into a repository):\n" + "\n".join(
        f"{path}: {'; '.join(hits)}" for path, hits in offenders.items())


def test_the_front_ends_are_found():
    names = {p.relative_to(BARA).as_posix() for p in front_ends()}
    assert {"serve/runtime.py", "serve/openai_compat.py", "mcp/tools.py", "cli/funds.py", "turn/gated.py",
            "domains/funds/golden.py", "domains/funds/router/__init__.py", "eval/ab.py"} <= names
    assert "domains/funds/golden_rows.py" not in names and "domains/funds/repo.py" not in names


def test_the_checker_flags_sql_text_and_runner_calls():
    flagged = sql_in('def f(rt, user):\n'
                     '    rows = rt.store.query("SELECT 1 FROM serve_keys")\n'
                     '    sql = f"DELETE FROM t WHERE {user}"\n'
                     '    self_runner.execute(sql)\n')
    assert len(flagged) == 4, flagged  # the call, its literal, the f-string's text, the second call
    assert sql_in('def f(bara, q):\n    return bara.retriever.search(q, k=3, note="Select one")\n') == []
