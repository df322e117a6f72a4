"""QA regressions on `bara mcp`'s tools: what a search returns to the model."""

from __future__ import annotations

from bara.app import Bara
from bara.mcp.server import call_as
from bara.mcp.tools import build_mcp_tools
from bara.settings import Settings


def test_search_knowledge_names_files_not_the_servers_folders(rfc_kb, embedder):
    db = rfc_kb("qa_mcp")
    with Bara(Settings(db=str(db), cache_dir=db.parent / "cache"), embedder=embedder) as bara:
        envelope = call_as(bara, build_mcp_tools(bara.store), "search_knowledge",
                           {"query": "HSTS max-age directive", "k": 3}, "sam")
    assert envelope["ok"], envelope
    hits = envelope["data"]["hits"]
    assert hits and all("/" not in h["source"] and h["source"].endswith(".txt") for h in hits)
    assert not any(str(db.parent) in h["text"] + h["source"] for h in hits)
