"""Span attributes for each kind of span of a turn: GenAI semantic conventions and OpenInference.

Names follow the GenAI semantic conventions (development status): ``gen_ai.operation.name``,
``gen_ai.conversation.id``, ``gen_ai.data_source.id``, ``gen_ai.request.top_k``,
``gen_ai.embeddings.dimension.count``, ``gen_ai.tool.*``, ``gen_ai.memory.*``; the provider is
``gen_ai.system`` (v1.36, the default) or ``gen_ai.provider.name`` (``config.latest``), and the
opt-in structured content attributes (``gen_ai.input.messages``, ``gen_ai.output.messages``,
``gen_ai.retrieval.*``, ``gen_ai.tool.call.arguments`` / ``result``, ``gen_ai.memory.records``) are
emitted only under the latest conventions. OpenInference attributes (``openinference.span.kind``,
``input.value``, ``retrieval.documents.{i}.document.*``, ``llm.*``, ``tool.*``, ``session.id``,
``user.id``) sit beside them. Content only when ``config.capture_content``; ``user.id`` as
:meth:`ObserveConfig.user` says. bara's own decisions are ``bara.*``.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Mapping

from bara.observe.config import ObserveConfig
from bara.trace import HitRecord, TurnTrace

KIND = "openinference.span.kind"
OP = "gen_ai.operation.name"
JSON_MIME = "application/json"
TIER_K = {"kb": "kb_k", "notes": "notes_k", "qa": "qa_k", "episodic": "episodic_k"}
TIER_OPEN = {"kb": "inject_kb", "profile": "inject_profile", "notes": "inject_notes", "qa": "inject_qa",
             "episodic": "inject_episodic"}
TIER_FLOOR = {"kb": "kb_floor", "qa": "qa_floor"}


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str, separators=(",", ":"))


def _provider(config: ObserveConfig, name: str) -> dict[str, Any]:
    return {"gen_ai.provider.name" if config.latest else "gen_ai.system": name}


def model_name(generator: str) -> str:
    """The model of a trace's ``generator`` (``model:<name>``, or the offline generator's name)."""
    return generator.split(":", 1)[1] if generator.startswith("model:") else generator


def chain(stage: str) -> dict[str, Any]:
    return {KIND: "CHAIN", "bara.stage": stage}


# ----------------------------------------------------------------------------- turn and gate
def turn_name(trace: TurnTrace) -> str:
    return "invoke_agent bara" if trace.mode == "agent" else f"invoke_workflow bara.{trace.mode}"


def turn(trace: TurnTrace, config: ObserveConfig, message: str) -> dict[str, Any]:
    agent = trace.mode == "agent"
    out: dict[str, Any] = {
        KIND: "AGENT" if agent else "CHAIN", OP: "invoke_agent" if agent else "invoke_workflow",
        "bara.turn": trace.turn, "bara.mode": trace.mode, "bara.route": trace.route, "bara.intent": trace.intent,
        "bara.retrieved": trace.retrieved, "bara.context_tokens": trace.context_tokens,
        "bara.prompt_tokens": trace.prompt_tokens, "bara.generator": trace.generator,
        "bara.reasons": list(trace.reasons), "bara.hook_errors": len(trace.hook_errors),
        "bara.tiers_injected": [t for t, n in trace.tiers.items() if n],
    }
    if agent:
        out["gen_ai.agent.name"] = "bara"
        out.update(_agent_run(trace))
    if trace.conversation_id:
        out["gen_ai.conversation.id"] = out["session.id"] = trace.conversation_id
    user = config.user(trace.user)
    if user is not None:
        out["user.id"] = user
    if config.capture_content:
        out.update({"input.value": message, "input.mime_type": "text/plain", "output.value": trace.answer,
                    "output.mime_type": "text/plain"})
    return out


def _agent_run(trace: TurnTrace) -> dict[str, Any]:
    run = trace.gates.agent
    if run is None:
        return {}
    return {"bara.agent.status": run.status, "bara.agent.model_calls": run.model_calls,
            "bara.agent.tools_offered": list(run.tools_offered), "bara.agent.tool_calls": len(run.tool_calls),
            "gen_ai.usage.input_tokens": run.usage.input_tokens, "gen_ai.usage.output_tokens": run.usage.output_tokens}


def turn_error(trace: TurnTrace) -> str | None:
    run = trace.gates.agent
    return "agent_run_failed" if run is not None and run.status == "error" else None


def gate(trace: TurnTrace) -> dict[str, Any]:
    """The gate's decision: intent and its source, behaviour, route, tiers opened, k, floors, skipped, reasons."""
    policy = dict(trace.gates.policy or {})
    behavior = dict(trace.gates.behavior or {})
    out: dict[str, Any] = {
        KIND: "CHAIN", "bara.stage": "gate", "bara.gate.intent": trace.intent,
        "bara.gate.intent_source": trace.intent_source, "bara.gate.intent_confidence": float(trace.intent_confidence),
        "bara.gate.behavior_mode": trace.behavior_mode, "bara.gate.route": str(policy.get("route", trace.route)),
        "bara.gate.tiers_opened": [t for t, f in TIER_OPEN.items() if policy.get(f)],
        "bara.gate.retrieval_skipped": not policy.get("retrieves", trace.retrieved),
        "bara.gate.reasons": list(dict.fromkeys([*behavior.get("reasons", ()), *policy.get("reasons", ())])),
    }
    out.update({f"bara.gate.k.{tier}": int(policy.get(key) or 0) for tier, key in TIER_K.items()})
    out.update({f"bara.gate.floor.{tier}": float(policy.get(key) or 0.0) for tier, key in TIER_FLOOR.items()})
    if trace.kb_floor:
        out["bara.gate.floor.kb_applied"] = float(trace.kb_floor)
    return out


# ----------------------------------------------------------------------------- retrieval
def _tier_hits(trace: TurnTrace, tier: str) -> tuple[HitRecord, ...]:
    return trace.hits if tier == "kb" else tuple(h for h in trace.memory_hits if h.tier == tier)


def _doc_id(hit: HitRecord) -> str:
    return str(hit.id) if hit.id else f"{hit.source}#{hit.section}" if hit.section else hit.source


def retrieval(trace: TurnTrace, tier: str, config: ObserveConfig) -> dict[str, Any]:
    """One tier's search: GenAI ``retrieval`` and an OpenInference RETRIEVER with its documents."""
    policy = dict(trace.gates.policy or {})
    hits = _tier_hits(trace, tier)
    k = policy.get(TIER_K[tier]) or (len(hits) if trace.mode != "gated" else 0)
    out: dict[str, Any] = {KIND: "RETRIEVER", OP: "retrieval", "gen_ai.data_source.id": tier,
                           "gen_ai.request.top_k": float(k), "bara.tier": tier, "bara.retrieval.hits": len(hits),
                           "bara.retrieval.rewritten": trace.rewritten}
    if tier == "kb":
        out["bara.retrieval.dropped_by_floor"] = trace.dropped_by_floor
        out["bara.retrieval.floor"] = float(trace.kb_floor)
    for i, hit in enumerate(hits):
        prefix = f"retrieval.documents.{i}.document"
        out[f"{prefix}.id"] = _doc_id(hit)
        out[f"{prefix}.score"] = float(hit.score)
        out[f"{prefix}.metadata"] = _json({"tier": hit.tier, "source": hit.source, "section": hit.section,
                                           "fused": hit.fused, "lexical_rank": hit.lexical_rank,
                                           "dense_rank": hit.dense_rank})
        if config.capture_content:
            out[f"{prefix}.content"] = hit.title
    if config.latest:
        out["gen_ai.retrieval.documents"] = _json([{"id": _doc_id(h), "score": float(h.score)} for h in hits])
    if config.capture_content:
        out["input.value"] = trace.retrieval_query
        if config.latest:
            out["gen_ai.retrieval.query.text"] = trace.retrieval_query
    return out


def embedding(config: ObserveConfig) -> dict[str, Any]:
    return {KIND: "EMBEDDING", OP: "embeddings", "embedding.model_name": config.embedder_model,
            "gen_ai.request.model": config.embedder_model, "gen_ai.embeddings.dimension.count": config.embedder_dim,
            **_provider(config, "bara")}


def rerank(detail: Mapping[str, Any], config: ObserveConfig) -> dict[str, Any]:
    model = str(detail.get("model", ""))
    return {KIND: "RERANKER", OP: "rerank", "reranker.model_name": model, "gen_ai.request.model": model,
            "reranker.top_k": int(detail.get("top_k") or 0), "bara.rerank.status": str(detail.get("status", "")),
            **_provider(config, "bara")}


# ----------------------------------------------------------------------------- model and tool calls
def _llm(model: str, config: ObserveConfig) -> dict[str, Any]:
    provider = config.llm_provider
    return {KIND: "LLM", OP: "chat", "gen_ai.request.model": model, "llm.model_name": model, "llm.provider": provider,
            **_provider(config, provider)}


def gated_llm(trace: TurnTrace, config: ObserveConfig) -> dict[str, Any]:
    """The gated turn's one generation; bara counts the prompt's tokens itself (no provider usage here)."""
    out = _llm(model_name(trace.generator), config)
    out.update({"llm.token_count.prompt": trace.prompt_tokens, "bara.prompt_tokens": trace.prompt_tokens,
                "bara.context_tokens": trace.context_tokens})
    if config.capture_content:
        out.update(_output(trace.answer, "stop", config))
    return out


def agent_llm(trace: TurnTrace, detail: Mapping[str, Any], config: ObserveConfig, last: bool) -> dict[str, Any]:
    """One model call of an agent run: usage and finish reason as the provider reported them."""
    out = _llm(str(detail.get("model", "")), config)
    inp, outp = int(detail.get("input_tokens") or 0), int(detail.get("output_tokens") or 0)
    reason = str(detail.get("stop_reason", ""))
    out.update({"gen_ai.usage.input_tokens": inp, "gen_ai.usage.output_tokens": outp,
                "llm.token_count.prompt": inp, "llm.token_count.completion": outp, "llm.token_count.total": inp + outp,
                "gen_ai.response.finish_reasons": [reason], "bara.iteration": int(detail.get("iteration") or 0),
                "bara.tool_calls_requested": int(detail.get("tool_calls") or 0)})
    if config.capture_content and last:
        out.update(_output(trace.answer, reason, config))
    return out


def _output(text: str, finish: str, config: ObserveConfig) -> dict[str, Any]:
    out: dict[str, Any] = {"output.value": text, "output.mime_type": "text/plain"}
    if config.latest:
        out["gen_ai.output.messages"] = _json([{"role": "assistant", "parts": [{"type": "text", "content": text}],
                                               "finish_reason": finish}])
    return out


def tool(detail: Mapping[str, Any], config: ObserveConfig) -> dict[str, Any]:
    name, call_id = str(detail.get("name", "")), str(detail.get("id", ""))
    out: dict[str, Any] = {KIND: "TOOL", OP: "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.type": "function",
                           "gen_ai.tool.call.id": call_id, "tool.name": name, "tool_call.id": call_id,
                           "tool_call.function.name": name, "bara.tool.ok": bool(detail.get("ok")),
                           "bara.iteration": int(detail.get("iteration") or 0)}
    if config.capture_content:
        args, result = _json(detail.get("args")), _json(detail.get("result"))
        out.update({"input.value": args, "input.mime_type": JSON_MIME, "output.value": result,
                    "output.mime_type": JSON_MIME, "tool_call.function.arguments": args})
        if config.latest:
            out.update({"gen_ai.tool.call.arguments": args, "gen_ai.tool.call.result": result})
    return out


def tool_error(detail: Mapping[str, Any]) -> str | None:
    if detail.get("ok"):
        return None
    result = detail.get("result") or {}
    return str(result.get("code") or "tool_error") if isinstance(result, Mapping) else "tool_error"


# ----------------------------------------------------------------------------- memory writes
def memory_writes(trace: TurnTrace) -> Iterator[tuple[str, str, int, list[dict[str, Any]]]]:
    """(operation, store, record count, records) for each memory write the turn made."""
    if "privacy:memory_forgotten" in trace.reasons:
        yield "delete_memory", "all", 0, []
    stored = trace.stored
    if stored.turn:
        yield "create_memory", "conversations", len(stored.seqs) if stored.seqs else 2, []
    if stored.profile_facts:
        yield "update_memory", "profile", len(stored.profile_facts), [
            {"id": key, "content": value} for key, value in stored.profile_facts.items()]
    if stored.notes:
        yield "create_memory", "notes", len(stored.notes), [{"content": text} for text in stored.notes]
    if stored.qa:
        yield "create_memory", "qa", 1, []


def memory(operation: str, store: str, count: int, records: list[dict[str, Any]],
           config: ObserveConfig) -> dict[str, Any]:
    out: dict[str, Any] = {KIND: "CHAIN", OP: operation, "gen_ai.memory.store.id": store}
    if operation != "delete_memory":
        out["gen_ai.memory.record.count"] = count
    if config.capture_content and config.latest and records:
        out["gen_ai.memory.records"] = _json(records)
    return out
