"""The tools bara offers over MCP: knowledge-base search, the caller's memory, and the fund tools.

Same contract as the agent's own tools (:class:`bara.agent.tools.Tool`): a
pydantic argument model with ``extra="forbid"``, a description that says when
NOT to use the tool, and ``fn(ctx, args)``. The caller's user id lives in the
:class:`~bara.agent.tools.ToolContext` the server builds from its identity (the
``--user`` of ``bara mcp`` or the API key of the HTTP request); it is never an
argument, so ``{"user_id": ...}`` is rejected like any other unknown argument.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from bara.agent.tools import Tool, ToolContext, ToolError
from bara.domain import tools_of
from bara.memory.notes import KINDS, Note, extract_concepts
from bara.store.base import SqlRunner
from bara.retrieval.protocol import Embedder
from bara.text.blank import blank
from bara.prompts.mcp import (INVISIBLE_TEXT, RECALL_DESC, REMEMBER_DESC, SEARCH_KNOWLEDGE_DESC, NO_STORE, NO_USER)

#: Conversation id the notes written through MCP are filed under (``bara memory inspect`` shows it).
MCP_CONVERSATION = "mcp"


T = TypeVar("T")

def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    if blank(value):
        raise ValueError(INVISIBLE_TEXT)
    return value


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


Query = Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=500), AfterValidator(_no_nul)]


class SearchKnowledgeArgs(_Args):
    query: Query = Field(description="A focused natural-language query (3-500 characters)")
    k: int | None = Field(None, ge=1, le=20, description="How many passages to return (1-20; default: bara's k)")


class RecallArgs(_Args):
    query: Query | None = Field(None, description="What to recall; omit for the most recent items")
    k: int = Field(5, ge=1, le=20, description="Notes and Q&A pairs to return per tier (1-20)")


class RememberArgs(_Args):
    text: Annotated[str, StringConstraints(strip_whitespace=True, min_length=3, max_length=2000),
                    AfterValidator(_no_nul)] = Field(description="The note, in one or two sentences")
    kind: Literal["decision", "conclusion", "hypothesis", "open_question"] = Field(
        "conclusion", description="decision | conclusion | hypothesis | open_question")


def build_memory_tools() -> dict[str, Tool]:
    """search_knowledge, recall and remember, by name."""
    tools = (Tool("search_knowledge", SEARCH_KNOWLEDGE_DESC, SearchKnowledgeArgs, search_knowledge, timeout_s=10.0),
             Tool("recall", RECALL_DESC, RecallArgs, recall, timeout_s=10.0),
             Tool("remember", REMEMBER_DESC, RememberArgs, remember, timeout_s=10.0))
    return {t.name: t for t in tools}


def build_mcp_tools(store: SqlRunner) -> dict[str, Tool]:
    """The memory tools, plus the tools of every domain plug-in whose data ``store`` holds (the six fund
    tools once ``bara funds load`` ran against it)."""
    return {**build_memory_tools(), **tools_of(store)}


# ------------------------------------------------------------------------ tools
def search_knowledge(ctx: ToolContext, args: SearchKnowledgeArgs) -> dict[str, Any]:
    retriever = ctx.services.retriever
    if retriever is None:
        raise ToolError(NO_STORE)
    outcome = retriever.search(args.query, k=args.k)
    # the file's name, as /api/search gives it: the server's folders are not the model's business
    hits = [{"source": h.chunk.source.rsplit("/", 1)[-1], "section": h.chunk.section, "title": h.chunk.title,
             "text": h.chunk.text, "score": round(float(h.score), 4)} for h in outcome.hits]
    return {"query": args.query, "status": outcome.status.value, "reasons": list(outcome.reasons), "hits": hits}


def recall(ctx: ToolContext, args: RecallArgs) -> dict[str, Any]:
    user, _ = _user(ctx), _store(ctx)
    notes_memory, qa_memory, profile_memory = _tier(ctx.services.notes), _tier(ctx.services.qa), _tier(ctx.services.profile)
    if args.query:
        notes = [{"kind": h.note.kind, "text": h.note.text, "score": round(h.score, 4)}
                 for h in notes_memory.search(user, args.query, k=args.k)]
        qa = [{"question": h.question, "answer": h.answer, "score": round(h.score, 4)}
              for h in qa_memory.search(user, args.query, k=args.k)]
    else:
        notes = [{"kind": n.kind, "text": n.text} for n in notes_memory.list(user)[-args.k:][::-1]]
        qa = [{"question": h.question, "answer": h.answer} for h in qa_memory.list(user)[-args.k:][::-1]]
    profile = [{"key": e.key, "value": e.value} for e in profile_memory.entries(user)]
    return {"query": args.query, "profile": profile, "notes": notes, "qa": qa}


def remember(ctx: ToolContext, args: RememberArgs) -> dict[str, Any]:
    user, _ = _user(ctx), _store(ctx)
    assert args.kind in KINDS  # the Literal above mirrors bara.memory.notes.KINDS
    note = Note(args.kind, args.text, extract_concepts(args.text, ctx.settings.memory_notes_max_concepts))
    sources = _tier(ctx.services.notes).add(user, MCP_CONVERSATION, [note])
    return {"stored": True, "source": sources[0], "kind": note.kind, "concepts": list(note.concepts)}


def _user(ctx: ToolContext) -> str:
    if not isinstance(ctx.user_id, str) or not ctx.user_id.strip():
        raise ToolError(NO_USER)
    return ctx.user_id


def _store(ctx: ToolContext) -> Any:
    if ctx.store is None:
        raise ToolError(NO_STORE)
    return ctx.store


def _embedder(ctx: ToolContext) -> Embedder:
    if ctx.services.embedder is None:  # the server always gives one; a session without it has no memory search
        raise ToolError(NO_STORE)
    return ctx.services.embedder


def _tier(tier: T | None) -> T:
    """A memory tier of the session (the server always gives them; a session without one has no memory)."""
    if tier is None:
        raise ToolError(NO_STORE)
    return tier
