"""The trace JSON (``bara chat --json``, the HTTP trace, the web timeline) keeps its shape: the same keys in
the same order at every level, for a scripted gated conversation, the always baseline, a vetoed persist,
a policy-override hook, an empty turn and an agent turn with one tool call. Timing-dependent values are
not compared.

``tests/fixtures/trace_shape.json`` was written from the code before the trace became typed records
(issue 9); regenerate it only for an intended format change: ``PYTHONPATH=tests python tests/turn/test_trace_shape.py``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kb_helpers import rfc_bara

PINNED = Path(__file__).resolve().parents[1] / "fixtures" / "trace_shape.json"
DEMO = Path(__file__).resolve().parents[2] / "scripts" / "demo_conversation.jsonl"


def shape(value: Any) -> Any:
    """Keys in order at every level; a list is the distinct shapes of its items (first seen first), so
    the number of hits, dropped candidates or reasons, which may differ between machines (the int8
    embedder's vectors depend on the CPU's kernels), is not part of the shape; a leaf is its JSON type."""
    if isinstance(value, dict):
        return ["dict", [[k, shape(v)] for k, v in value.items()]]
    if isinstance(value, list):
        items: list[Any] = []
        for item in map(shape, value):
            if item not in items:
                items.append(item)
        return ["list", items]
    return type(value).__name__


def conforms(got: Any, pinned: Any) -> bool:
    """``got`` has ``pinned``'s shape: the same keys in the same order with conforming values; every item
    shape of a list is one the pin has (an empty list on either side says nothing about its items)."""
    if isinstance(got, list) and isinstance(pinned, list) and got[:1] == pinned[:1] == ["dict"]:
        return [k for k, _ in got[1]] == [k for k, _ in pinned[1]] and all(
            conforms(g, p) for (_, g), (_, p) in zip(got[1], pinned[1], strict=True))
    if isinstance(got, list) and isinstance(pinned, list) and got[:1] == pinned[:1] == ["list"]:
        return not got[1] or not pinned[1] or all(any(conforms(g, p) for p in pinned[1]) for g in got[1])
    return got == pinned


def traces(bara) -> dict[str, list[dict[str, Any]]]:
    """The trace JSON of every scripted turn, by scenario."""
    from bara.domains.funds.assistant import AgentAssistant
    from bara.llm import ScriptedModel
    from bara.messages import AssistantMessage, ToolCall
    from bara.turn.gated import Assistant

    messages = [json.loads(line)["user"] for line in DEMO.read_text(encoding="utf-8").splitlines() if line.strip()]
    gated = Assistant(bara)
    cid = None
    out: dict[str, list[dict[str, Any]]] = {"gated": [], "always": [], "vetoed": [], "overridden": [], "empty": [],
                                            "agent": []}
    for text in messages:
        result = gated.turn("shape-user", text, cid)
        cid = result.conversation_id
        out["gated"].append(result.trace.to_json())
    always = Assistant(bara, mode="always")
    cid = None
    for text in messages[:4]:
        result = always.turn("shape-always", text, cid)
        cid = result.conversation_id
        out["always"].append(result.trace.to_json())
    vetoing = Assistant(bara)
    vetoing.hooks.add("before_persist", lambda plan, ctx: plan.veto("experiment"))
    out["vetoed"].append(vetoing.turn("shape-veto", "What is HSTS?").trace.to_json())
    overriding = Assistant(bara)
    overriding.hooks.add("policy_override", lambda p, ctx: replace(p, inject_kb=False, kb_k=0, inject_qa=False))
    out["overridden"].append(overriding.turn("shape-override", "What is HSTS?").trace.to_json())
    out["empty"].append(Assistant(bara).turn("shape-empty", "   ").trace.to_json())
    from bara.domains.funds import FundsRepo

    FundsRepo(bara.store)  # funds tables, then one account for the agent turn (no holdings needed)
    bara.store.execute("INSERT INTO funds_users (id, name, created) VALUES (?, ?, ?)", ("u_shape", "Sam", "2026-01-01"))
    call = ToolCall(id="c1", name="search_documents", arguments={"query": "index funds"})
    model = ScriptedModel([AssistantMessage(tool_calls=(call,)), "Index funds track an index."])
    out["agent"].append(AgentAssistant(bara, model=model).turn("u_shape", "What is an index fund?").trace.to_json())
    return out


def shapes(full: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {name: [shape(t) for t in turns] for name, turns in full.items()}


@pytest.fixture(scope="module")
def bara(rfc_kb, embedder):
    with rfc_bara(rfc_kb, embedder, "trace_shape") as b:
        yield b


def test_trace_json_keeps_its_keys_order_and_types(bara):
    got = shapes(traces(bara))
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    for name in pinned:
        assert len(got[name]) == len(pinned[name]), name
        for i, (g, p) in enumerate(zip(got[name], pinned[name], strict=False)):
            assert conforms(g, p), f"{name} turn {i + 1}: the trace JSON changed shape"


def test_shape_tells_key_order_and_types_apart():
    assert shape({"a": 1, "b": [{"c": "x"}]}) != shape({"b": [{"c": "x"}], "a": 1})
    assert shape({"a": 1}) != shape({"a": 1.0}) and shape({"a": None}) != shape({"a": {}})
    assert not conforms(shape({"a": 1, "b": 2}), shape({"b": 2, "a": 1}))
    assert not conforms(shape({"hits": [{"id": "x", "score": 0.5}]}), shape({"hits": [{"id": "x"}]}))


def test_shape_does_not_count_items():
    """Three hits on one machine and two on another are the same shape; a new key in any item is not."""
    three = shape({"hits": [{"id": "a", "score": 0.1}] * 3, "reasons": ["x", "y"]})
    assert conforms(shape({"hits": [{"id": "b", "score": 0.2}] * 2, "reasons": []}), three)
    assert not conforms(shape({"hits": [{"id": "b", "score": 0.2, "new": 1}], "reasons": []}), three)


if __name__ == "__main__":  # regenerate the pinned shapes (an intended format change only)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import tempfile

    from conftest import DATA, RFC_KB_FILES

    from bara.app import Bara
    from bara.retrieval.embedders import OnnxMiniLMEmbedder
    from bara.settings import Settings

    embedder = OnnxMiniLMEmbedder(variant=Settings().embedder.removeprefix("minilm-"))
    with tempfile.TemporaryDirectory() as tmp, \
            Bara(Settings(db=f"{tmp}/kb.db", cache_dir=Path(tmp)), embedder=embedder) as b:
        b.knowledge.ingest([DATA / "rfc" / f for f in RFC_KB_FILES])
        full = traces(b)
        PINNED.write_text(json.dumps(shapes(full)) + "\n", encoding="utf-8")
        if len(sys.argv) > 1:  # also dump the full traces (timings zeroed) for a byte comparison
            for turns in full.values():
                for t in turns:
                    t["latency_ms"] = {k: 0 for k in t["latency_ms"]}
                    t["conversation_id"] = ""
                    for c in t["gates"].get("agent", {}).get("tool_calls", []):
                        c["latency_ms"] = 0
            text = re.sub(r"[0-9a-f]{32}", "<id>", json.dumps(full, indent=1, ensure_ascii=False))
            Path(sys.argv[1]).write_text(text, encoding="utf-8")
