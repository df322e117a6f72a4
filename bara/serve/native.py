"""The native API under ``/api``: turns with full traces, conversations, search, memory, ingest.

Every route but ``/api/health`` needs a key; the user is the key's. An id that is unknown and an id
that belongs to another user get the same 404. Sync handlers run in FastAPI's thread pool.
"""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Depends, File, Query, Request, Response, UploadFile

from bara.memory.admin import episodic_json
from bara.memory.readers.base import Unreadable
from bara.serve.auth import admin_caller, caller
from bara.serve.errors import ApiError, documented_operations, not_found
from bara.memory.api_keys import ApiKey
from bara.serve.runtime import can_exist, storable
from bara.text.blank import blank
from bara.serve.schemas import (ConversationList, ConversationOut, EpisodicOut, ForgetOut, HealthOut, IngestOut,
                                MemoryOut, SearchHit, SearchOut, TurnIn, TurnList, TurnOut, TurnRecord)

def existing_ids(request: Request) -> None:
    """Router dependency: a path id that no store can hold (a NUL in it) is the same 404 as an unknown id,
    instead of a database error."""
    for name, value in request.path_params.items():
        if isinstance(value, str) and not can_exist(value):
            raise not_found(_ID_NAMES.get(name, name))


def known_query_params(request: Request) -> None:
    """Router dependency: a query parameter the route does not take (``/api/search?q=x&limit=3``,
    ``/api/conversations?offset=20``) is a 422 naming the ones it takes, instead of being ignored while the
    client believes it applied; one given twice (``?q=a&q=b``: only the last counted) is a 422 too."""
    if not request.query_params:
        return
    taken = documented_query_params(request)
    unknown = sorted(set(request.query_params) - taken)
    if unknown:
        offer = f"it takes {', '.join(sorted(taken))}" if taken else "it takes no query parameters"
        raise ApiError(422, "unknown_parameter", f"{request.url.path} does not take the query parameter(s) "
                       f"{', '.join(unknown)}: {offer} (see /docs)", param=unknown[0])
    repeated = sorted(k for k in set(request.query_params) if len(request.query_params.getlist(k)) > 1)
    if repeated:  # only the last would count, silently
        raise ApiError(422, "repeated_parameter", f"the query parameter(s) {', '.join(repeated)} are given more "
                       "than once: send each once", param=repeated[0])


def documented_query_params(request: Request) -> set[str]:
    """The query parameters the OpenAPI schema documents for this request's path and method."""
    op = documented_operations(request).get(request.method.lower()) or {}
    return {p["name"] for p in op.get("parameters", []) if p.get("in") == "query"}


_ID_NAMES = {"conversation_id": "conversation", "trace_id": "trace", "fact": "profile fact"}
router = APIRouter(prefix="/api", dependencies=[Depends(existing_ids), Depends(known_query_params)])


def runtime(request: Request) -> Any:
    return request.app.state.runtime


def check_message(request: Request, message: str) -> None:
    limit = request.app.state.runtime.settings.serve_max_message_chars
    if blank(message):
        raise ApiError(422, "empty_message", "the message is empty (only spaces, control characters or invisible "
                       "formatting characters such as zero-width spaces): send some text")
    if len(message) > limit:
        raise ApiError(413, "message_too_long", f"the message has {len(message)} characters; the limit is "
                       f"{limit}: shorten it or split it into several turns")


def run_turn(request: Request, user: str, message: str, cid: str | None, mode: str | None,
             background: BackgroundTasks, create: bool = False) -> Any:
    """One turn; what it learned is stored after the response when the runtime says so (``learn_later``)."""
    rt = runtime(request)
    context = {k: v for k in ("traceparent", "tracestate") if (v := request.headers.get(k))}
    outcome = rt.run_turn(user, message, cid, mode, create=create, headers=context or None)
    rt.learn_later(background)
    request.app.state.metrics.observe_turn(outcome.trace)
    return outcome


@router.get("/health", response_model=HealthOut, tags=["service"])
def health(request: Request) -> HealthOut:
    """Liveness (always 200 while the process serves; no key needed), and whether the store works: ``store`` is
    down, with the fault's code, after a store fault in the last ``serve_health_fault_window_s`` or when a
    one-row read of it fails now. It comes back by itself once the fault clears."""
    rt = runtime(request)
    fault = rt.store_health()
    return HealthOut(status="degraded" if fault else "ok", mode=rt.mode, version=_version(),
                     store="down" if fault else "ok", store_error=fault, worker=os.getpid())


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bara")
    except PackageNotFoundError:
        return ""


@router.post("/turns", response_model=TurnOut, tags=["turns"])
def post_turn(body: TurnIn, request: Request, response: Response, background: BackgroundTasks,
              key: ApiKey = Depends(caller)) -> TurnOut:
    """Answer one message. ``conversation_id`` omitted starts a conversation; ``mode`` runs this one
    message as gated, always (the sliding-window RAG baseline) or agent. The ``trace`` is the turn's
    full trace (see TraceOut); its id is also in the ``X-Bara-Trace-Id`` header."""
    check_message(request, body.message)
    cid = body.conversation_id
    if cid is not None and not can_exist(cid):
        raise not_found()
    # Whether the id is the caller's is the turn's first read (bara.turn.skeleton.load_conversation, in the user's
    # scope): an unknown or another user's id is UnknownConversationError, the same 404 (bara.serve.errors).
    out = run_turn(request, key.user_id, body.message, body.conversation_id, body.mode, background)
    if body.baseline:  # the side-by-side view's other answer: nothing of it stays among the conversations
        runtime(request).conversations.delete(key.user_id, out.conversation_id)
    response.headers["X-Bara-Trace-Id"] = out.trace["trace_id"]
    return TurnOut(answer=out.answer, conversation_id=out.conversation_id, trace=out.trace)


@router.get("/conversations", response_model=ConversationList, tags=["conversations"])
def list_conversations(request: Request, key: ApiKey = Depends(caller)) -> ConversationList:
    """The caller's conversations, most recently updated first."""
    infos = runtime(request).conversations.list(key.user_id)
    return ConversationList(conversations=[ConversationOut(id=c.id, created_at=c.created_at, updated_at=c.updated_at,
                                                           turn_count=c.turn_count, message_count=c.message_count)
                                           for c in infos])


@router.get("/conversations/{conversation_id:path}/turns", response_model=TurnList, tags=["conversations"])
def conversation_turns(conversation_id: str, request: Request, key: ApiKey = Depends(caller)) -> TurnList:
    """Every turn of one conversation in order, each with its stored trace (None for turns not made
    through this server, e.g. a history imported from chat-completions messages)."""
    rt = runtime(request)
    if rt.conversations.get(key.user_id, conversation_id) is None:
        raise not_found()
    traces = rt.traces.for_conversation(key.user_id, conversation_id)
    turns: list[TurnRecord] = []
    for m in rt.conversations.history(key.user_id, conversation_id):
        if m.role == "user":
            n = len(turns) + 1
            turns.append(TurnRecord(turn=n, user=m.text, assistant="", created_at=m.created_at, trace=traces.get(n)))
        elif m.role == "assistant" and turns:
            turns[-1].assistant = m.text
    return TurnList(conversation_id=conversation_id, turns=turns)


@router.get("/traces/{trace_id}", tags=["conversations"])
def get_trace(trace_id: str, request: Request, key: ApiKey = Depends(caller)) -> dict[str, Any]:
    """One stored trace by id (the ``X-Bara-Trace-Id`` header of a turn)."""
    trace = runtime(request).traces.get(key.user_id, trace_id)
    if trace is None:
        raise not_found("trace")
    return trace


@router.get("/search", response_model=SearchOut, tags=["search"])
def search(request: Request, q: str = Query(..., max_length=2000, description="query text"),
           k: int = Query(10, ge=1, description="hits to return (at most serve_max_k)"),
           floor: float = Query(0.0, ge=-1.0, le=1.0, description="cosine floor (0 shows everything)"),
           key: ApiKey = Depends(caller)) -> SearchOut:
    """Hybrid search over the shared knowledge base, with each hit's BM25 rank, dense rank and fused score."""
    rt = runtime(request)
    limit = rt.settings.serve_max_k
    if k > limit:
        raise ApiError(422, "k_too_large", f"k={k} is above the limit {limit}: ask for at most {limit} hits")
    outcome = rt.bara.search(q, k=k, floor=floor)
    hits = [SearchHit(id=h.id, source=h.chunk.source.rsplit("/", 1)[-1], section=h.chunk.section,
                      title=h.chunk.title, text=h.chunk.text, similarity=round(float(h.similarity), 4),
                      fused=round(float(h.fused), 6), lexical_rank=h.lexical.rank, lexical_score=h.lexical.score,
                      dense_rank=h.dense.rank, dense_score=h.dense.score) for h in outcome.hits]
    return SearchOut(query=q, k=k, status=outcome.status.value, reasons=list(outcome.reasons), hits=hits,
                     latency_ms={k_: round(float(v), 3) for k_, v in outcome.timings_ms.items()})


@router.get("/memory", response_model=MemoryOut, tags=["memory"])
def get_memory(request: Request, key: ApiKey = Depends(caller)) -> MemoryOut:
    """The caller's profile facts, research notes, remembered Q&A and episodic memory (what they said in
    earlier conversations, per conversation; bounded by the ``memory_inspect_episodic_*`` settings)."""
    seen = runtime(request).bara.memory(key.user_id)
    note_rows = [{k: v for k, v in asdict(n).items() if k != "user_id"} for n in seen.notes]
    qa_rows = [{"source": h.source, "conversation_id": h.conversation_id, "question": h.question,
                "answer": h.answer, "created_at": h.created_at} for h in seen.qa]
    return MemoryOut(user=seen.user, profile=seen.facts, notes=note_rows, qa=qa_rows,
                     episodic=EpisodicOut.model_validate(episodic_json(seen.episodic)),
                     conversations=len(seen.conversations))


@router.delete("/memory", response_model=ForgetOut, tags=["memory"])
def delete_memory(request: Request, conversations: bool = Query(False, description="also delete every "
                  "conversation and its traces"), key: ApiKey = Depends(caller)) -> ForgetOut:
    """Forget the caller's profile, notes, Q&A and episodic memory (and, with ``conversations=true``,
    conversations and their traces)."""
    return ForgetOut(deleted=runtime(request).bara.forget(key.user_id, conversations=conversations).to_json())


@router.delete("/memory/profile/{fact}", response_model=ForgetOut, tags=["memory"])
def delete_profile_fact(fact: str, request: Request, key: ApiKey = Depends(caller)) -> ForgetOut:
    """Forget one profile fact of the caller (e.g. ``name``); 404 when the caller has no such fact."""
    deleted = runtime(request).bara.forget(key.user_id, fact=fact).profile
    if not deleted:
        raise not_found("profile fact")
    return ForgetOut(deleted={"profile": deleted})


async def one_upload(request: Request, _: ApiKey = Depends(admin_caller)) -> None:
    """Dependency of /api/ingest: a form holding several files (or fields) named ``file`` is refused,
    instead of indexing the last one and silently dropping the others."""
    form = await request.form()  # already parsed for the route's File parameter (cached); after the key check
    sent = len(form.getlist("file"))
    if sent > 1:
        raise ApiError(422, "one_file_per_request", f"the upload holds {sent} fields named 'file'; /api/ingest "
                       "takes one file per request: send each file in its own request", param="file")


@router.post("/ingest", response_model=IngestOut, tags=["knowledge"], dependencies=[Depends(one_upload)])
def ingest(request: Request, file: UploadFile = File(..., description="a PDF, HTML, Word (.docx), Markdown, reStructuredText or UTF-8 text file"),
           key: ApiKey = Depends(admin_caller)) -> IngestOut:
    """Add one text file to the shared knowledge base (admin keys only); a file of the same name is replaced."""
    rt = runtime(request)
    raw = file.file.read(rt.settings.serve_max_upload_bytes + 1)
    if len(raw) > rt.settings.serve_max_upload_bytes:
        raise ApiError(413, "request_too_large", f"the upload is larger than {rt.settings.serve_max_upload_bytes} "
                       "bytes: split the file")
    name = upload_name(file.filename)
    try:  # read as `bara ingest` reads a file of that name: PDF, HTML, Word, Markdown, RST, else UTF-8 text
        outcome = rt.bara.upload(f"upload/{name}", raw)
    except Unreadable as exc:
        raise _unreadable_upload(exc) from None
    return IngestOut(source=outcome.path, status=outcome.status, chunks=outcome.chunks, reason=outcome.reason)


def _unreadable_upload(exc: Unreadable) -> ApiError:
    """An upload no reader could use: text that is not UTF-8 is a 415 as before; a document that is
    encrypted, has no text layer or is damaged is a 422 whose code names the reason."""
    if exc.code == "unreadable" and ("binary" in exc.detail or "UTF-8" in exc.detail):
        return ApiError(415, "not_utf8", f"the file is not UTF-8 text ({exc}): convert it to UTF-8 text first")
    return ApiError(422, exc.code.replace(" ", "_"), f"the file cannot be indexed ({exc}): send a readable "
                    "PDF (with a text layer, no password), HTML, Word (.docx), Markdown, reStructuredText or text file")


def upload_name(filename: str | None) -> str:
    """The stored name of an upload: its last path part, storable and at most 200 characters; a name that
    shows nothing or names a folder (blank, ``.``, ``..``) is ``upload.txt``."""
    name = storable(filename or "").replace("\\", "/").rsplit("/", 1)[-1][:200].strip()
    return "upload.txt" if blank(name) or name in (".", "..") else name

