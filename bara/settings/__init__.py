"""Every threshold and default bara uses, typed, in one place (the first sections in :mod:`bara.settings.core`).

Load order (later wins): built-in defaults < TOML file < ``BARA_*`` environment
variables < per-call overrides (:meth:`Settings.override`).

Environment variables use the field name upper-cased with a ``BARA_`` prefix,
e.g. ``BARA_K=6`` or ``BARA_DB=/tmp/x.db``; a ``BARA_*`` variable that names no setting is an
:class:`UnknownSettingWarning` naming the closest ones (:mod:`bara.settings.environment`).

A domain plug-in's settings are its own section, ``Settings.domains[<domain>]`` (funds: the rule
router's ``router_*`` thresholds, ``bara/domains/funds/settings.py``), read with :meth:`Settings.section`;
their flat names still load and show as before (:mod:`bara.settings.sections`).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (BaseModel, Field, SerializationInfo, SerializerFunctionWrapHandler, ValidationError,
                      model_serializer, model_validator)

from bara.errors import ConfigError
from bara.settings.core import CoreSettings, _cache_home
from bara.settings.environment import UnknownSettingWarning, env_values, warn_unknown
from bara.settings.sections import flat_values, gather, section_fields, section_of

#: The rewrite's term-scorer weights, fitted on the dev halves (scripts/train_rewrite_scorer.py).
_REWRITE_TERM_WEIGHTS = {"bias": -4.645, "carried": 0.477, "first_user": 1.845, "prev_user": 0.951,
                         "user_share": -0.412, "user_recency": 1.117, "prev_reply": 0.734, "reply_lead": 0.944,
                         "reply_share": -0.455, "name": 1.315, "phrase": 0.248, "anchor": -0.047, "long": -0.268,
                         "focus": 0.55, "stale": 0.646, "reply_name": 1.093, "ref": 0.167, "short": 0.565,
                         "own_name": -0.399, "overlap": -0.021, "first_ref": 0.112, "reply_ref": -0.124,
                         "first_short": -0.331, "person_ref": -0.032}

__all__ = ["CoreSettings", "Settings", "UnknownSettingWarning", "load_settings"]

M = TypeVar("M", bound=BaseModel)


class Settings(CoreSettings):  # the first sections are in bara/settings/core.py
    """One typed object for every tunable; each field says why it has its default."""

    # --- episodic memory & LoCoMo (bara/memory/episodic.py) ---
    memory_episodic_k: int = Field(default=10, ge=1, le=100,
                                   description="Episodes shown for a personal question: LoCoMo evidence spans "
                                               "1-4 turns, 10 one-line turns cost ~400 tokens.")
    memory_floor_episodic: float = Field(default=0.30, ge=-1.0, le=1.0,
                                         description="Cosine floor for episodes: drops turns that only share a name "
                                                     "with the question (tuned on LoCoMo dev: 0.15 loses 6 points).")
    memory_episodic_context_weight: float = Field(default=0.3, ge=0.0, le=2.0,
                                                  description="How far a stored turn's vector leans to its "
                                                              "neighbours' (context_vectors); +4 points R@10 on dev.")
    memory_episodic_window: int = Field(default=1, ge=0, le=4,
                                        description="Turns after each hit shown with it (the reply that confirms "
                                                    "or dates it); a window is one prompt item.")
    memory_episodic_candidates: int = Field(default=1, ge=1, le=50,
                                            description="Candidates per kept episode before the speaker boost "
                                                        "reorders them (k * this).")
    memory_episodic_speaker_boost: float = Field(default=0.25, ge=0.0, le=5.0,
                                                 description="Relative lift of a turn said by the person the "
                                                             "question names (fused * (1 + boost)).")
    memory_episodic_hop_queries: int = Field(default=3, ge=0, le=10,
                                             description="Cap on second-round (multi-hop) searches per question; "
                                                         "0 turns multi-hop off.")
    memory_episodic_hop_seed_hits: int = Field(default=3, ge=1, le=20,
                                               description="Round-1 hits whose mentions seed round 2.")
    memory_episodic_hop_weight: float = Field(default=0.5, ge=0.0, le=2.0,
                                              description="RRF weight of each round-2 list against round 1's 1.0: "
                                                          "the seeds are guesses, the question is not.")
    # attribution check (bara/memory/episodic_attribution.py); tuned on LoCoMo conv-26/30/41 only
    memory_episodic_attribution: bool = Field(default=True, description="Read whose event the best turns tell when "
                                              "a question names one speaker; none the named person's -> "
                                              "episodic:attributed_to_other (items stay in the prompt).")
    memory_episodic_attribution_turns: int = Field(default=3, ge=1, le=20,
                                                   description="Best turns whose owner is read: one turn is often "
                                                               "a reply about the other speaker's event.")
    memory_episodic_attribution_search: bool = Field(default=True, description="Read the turns of one extra search "
                                                     "with the person's name removed (no speaker boost): the boost "
                                                     "puts the named person's turns first whatever they tell.")
    memory_episodic_attribution_shown: bool = Field(default=True, description="Fire only when the other person's "
                                                    "turn it cites is one of the tier's items (in the prompt): on "
                                                    "LoCoMo dev, false flags 2.1% -> 1.0% of answerable questions.")
    gate_episodic_min_signals: int = Field(default=1, ge=1, le=5,
                                           description="Personal-memory signals (a known person named, a when/what-"
                                                       "did/remember cue, a first-person past statement) needed to "
                                                       "open the episodic tier.")
    memory_episodic_record_turns: bool = Field(default=True, description="Chat turns are remembered as episodes (the "
                                                                 "user's words with the turn's date).")
    memory_inspect_episodic_conversations: int = Field(default=20, ge=0, le=10_000, description=(
        "Conversations of episodic memory `bara memory inspect` and GET /api/memory list (most recently said "
        "first; the rest are counted): a user who starts a conversation a day has 365 after a year."))
    memory_inspect_episodic_turns: int = Field(default=10, ge=0, le=10_000, description=(
        "Remembered turns shown per listed conversation (its latest, oldest first; the rest are counted): a "
        "LoCoMo conversation holds hundreds, and each turn may be a whole message (serve_max_message_chars)."))
    memory_inspect_episodic_names: int = Field(default=30, ge=0, le=10_000, description=(
        "Indexed names shown per listed conversation (most sessions first; the rest are counted): a long "
        "conversation indexes every person, pet and place said mid-sentence, most of them once."))
    memory_write_behind: bool = Field(default=True, description="A turn's notes, Q&A pair and episodic record are stored "
                                                        "after its answer (bara.memory.writebehind): off the answer "
                                                        "path; lost only if the process dies before the next turn.")
    # --- serve (HTTP service: bara serve) -----------------------------------
    serve_max_body_bytes: int = Field(default=1_000_000, ge=1024, description="1 MB holds a long chat history; "
                                      "bigger bodies are refused before parsing (memory safety).")
    serve_max_upload_bytes: int = Field(default=20_000_000, ge=1024, description="/api/ingest uploads: the largest "
                                        "RFC is ~1 MB; 20 MB allows big manuals, not archives.")
    serve_max_message_chars: int = Field(default=8000, ge=10, description="One user message; 8k chars is ~2k tokens "
                                         "(the retrieval query is cut further by max_query_chars).")
    serve_max_messages: int = Field(default=200, ge=1, description="Messages in one chat-completions request; longer "
                                    "histories are refused rather than silently cut.")
    serve_max_k: int = Field(default=50, ge=1, le=1000, description="/api/search k: beyond 50 the tail is noise "
                                "and the response grows linearly.")
    serve_max_concurrent_per_key: int = Field(default=8, ge=1, description="In-flight requests per API key: one key "
                                              "cannot take every worker thread (fairness between users).")
    serve_threads: int = Field(default=16, ge=1, le=256, description="Worker threads per process for sync turns: "
                               "turns wait on the DB or the model, so more threads than cores pays.")
    serve_learn_after_response: bool = Field(default=False, description="A turn's learning writes (notes, Q&A "
                                             "pair, episodic record) are stored right after its HTTP response is "
                                             "sent instead of before it: 0.8 ms less per gated answer for one user "
                                             "who reads between turns, but 2-9% fewer turns/s with 32 concurrent "
                                             "users (a turn's start flushes every user's queued writes; "
                                             "docs/benchmarks.md). One worker only: `bara serve --workers N` "
                                             "(N > 1) turns it off unless it is set.")
    # faults a server meets
    serve_max_history_message_chars: int = Field(default=16_000, ge=10, description=(
        "One earlier message of a chat-completions history (imported into the conversation): twice a user "
        "message's limit, for a model's long answers; a longer one is refused, not stored."))
    serve_max_history_chars: int = Field(default=200_000, ge=10, description=(
        "All earlier messages of one chat-completions history together: ~50k tokens, more than any "
        "model's window bara prompts with; importing is linear in it (store and full-text index)."))
    serve_health_fault_window_s: float = Field(default=10.0, gt=0, le=3600, description=(
        "How long /api/health reports the store down after a request met a store fault (a full disk shows "
        "only on writes, so a read probe alone would say ok)."))

    # --- gate-rules: topic-aware rewrite, vector cache, social turns ---
    gate_topic_standalone_similarity: float = Field(default=0.25, ge=-1.0, le=1.0, description=(
        "A message naming its own subject, with no follow-up cue, below this cosine to the conversation "
        "topic is standalone (topic switches measured 0.08-0.21; costs <0.01 R@5 on MTRAG-UN dev)."))
    gate_topic_carry_weight: float = Field(default=0.8, ge=0.0, le=4.0, description=(
        "Weight of the previous topic vector in a dependent turn's query vector: 0.8 scored best of "
        "0.6/0.8 on the MTRAG-UN dev half (R@5 0.913 vs 0.920 encoding the rewrite, at no encode)."))
    gate_cache_vectors: bool = Field(default=True, description=(
        "Keep each user message's vector and topic vector in its meta (float16): history vectors "
        "cost a JSON read instead of an encode."))
    gate_small_talk_override_similarity: float = Field(default=0.55, ge=-1.0, le=1.0, description=(
        "A question recognised by form only is small talk when its nearest prototype is chit-chat at "
        "this cosine or more (tuned on CLINC150 train for skip precision >= 0.98)."))
    gate_greeting_rest_max_words: int = Field(default=4, ge=0, le=50, description=(
        "A greeting that no rule or prototype recognised is skipped as small talk only when at most this "
        "many words follow it (past a vocative; 'hello, nice to meet you' has four): on CLINC150 train all five "
        "unrecognised greetings followed by five or more words asked for something, while all 42 small-talk "
        "messages that opened with a greeting were recognised as chit-chat."))
    gate_qa_only_on_repeat: bool = Field(default=True, description=(
        "Search remembered answers only when the question repeats: otherwise the Q&A search is a second "
        "store call per turn that rarely adds anything the documents lack."))
    gate_rag_history_messages: int = Field(default=2, ge=0, description=(
        "Knowledge turns show the last exchange: the query already carries the topic, the hits carry "
        "the facts, and older replies are context tokens the answer rarely needs."))
    gate_note_statements_skip: bool = Field(default=True, description=(
        "A statement carrying a decision or open-question cue and no question is stored as a note, "
        "not searched: the documents cannot confirm our own decisions (hypotheses still search)."))
    gate_kb_relative_gap: float = Field(default=0.3, ge=0.0, le=2.0, description=(
        "Gated knowledge hits more than this cosine below the best hit are dropped (2 = off): 0.3 keeps "
        "R@5 within 0.001 on the MTRAG-UN dev half and saves ~10% of chunks; 0.25 cost 0.01."))
    gate_kb_floor_spare_lexical: int = Field(default=2, ge=0, le=100, description=(
        "Gated knowledge search holds the full-text arm's first N candidates to a lower floor (the route's "
        "minus gate_kb_floor_spare_margin; 0 = off): the cosine floor judges a hit by the dense arm alone, "
        "and a chunk that arm ranks at the top has evidence of its own. Chosen on the MTRAG-UN dev half "
        "(docs/evaluation.md, round 12): final-turn R@5 0.816 -> 0.831 / 0.837 / 0.835 for 1 / 2 / 3 "
        "with no margin; sparing the relative gap too added 0.004 for +3% tokens, not done."))
    gate_kb_floor_spare_margin: float = Field(default=0.1, ge=0.0, le=2.0, description=(
        "How far below the route's floor a spared lexical hit may be: on whole mixed conversations of the "
        "dev half, gated/always tokens 0.585 -> 0.590 / 0.599 / 0.613 and R@5 0.840 -> 0.843 / 0.853 / "
        "0.864 for 0.05 / 0.1 / no margin; 0.1 is the widest that keeps tokens within 0.6x there."))
    gate_social_history_messages: int = Field(default=2, ge=0, description=(
        "Thanks/greetings/acknowledgements see only the last exchange: replying to 'thanks' needs no "
        "four-exchange transcript, and those tokens are most of such a turn's context."))
    # --- hardening: provider faults and deadlines (harden-faults) ---
    llm_deadline_s: float = Field(default=90.0, gt=0, description="Wall-clock budget of ONE model call, retries and "
                                                          "waits included: httpx's timeout is per read, so a "
                                                          "provider trickling bytes would otherwise never stop.")
    gated_deadline_s: float = Field(default=60.0, gt=0, description="Wall-clock budget of the generation step of one "
                                                            "gated turn; past it the offline answer is shown "
                                                            "(same budget as agent_deadline_s).")
    llm_max_json_depth: int = Field(default=64, ge=8, le=500, description="Deepest JSON nesting accepted in a provider "
                                                                  "reply; real replies nest < 10, a nesting bomb "
                                                                  "would exhaust Python's recursion limit.")
    llm_max_response_bytes: int = Field(default=8_000_000, ge=10_000, description="Largest provider reply read; a chat "
                                                                          "reply is KBs, 8 MB bounds memory.")
    tool_args_max_depth: int = Field(default=32, ge=2, le=500, description="Deepest JSON nesting accepted in tool "
                                                                   "arguments; every tool takes flat objects, "
                                                                   "so deeper is an error envelope.")
    xirr_min_annualise_days: int = Field(
        default=90, ge=1, le=3650,
        description="compute_xirr annualises only flows spanning at least this many days; below it, it reports the "
                    "absolute return over the period (reason span_too_short). XIRR raises the period's return to the "
                    "power 365/days: over a few days an ordinary NAV move becomes an absurd rate (a 5% gain over 3 "
                    "days reads as ~37,000% a year; two days can give 1e111%). From a quarter (exponent <= ~4) the "
                    "rate is shown with its under-a-year caution; 365 follows GIPS (never annualise under a year).")
    # --- embedder variants (performance) ---
    model_dir: Path = Field(default=_cache_home() / "models",
                            description="Built MiniLM ONNX files, once per machine, named by weights hash and "
                                        "recipe (not under cache_dir: a fresh cache must not rebuild); safe to delete.")
    # --- document readers: PDF, HTML, Word, Markdown, reStructuredText ---
    ingest_max_file_bytes: int = Field(default=50_000_000, ge=1024, description="Larger files are skipped as "
                                       "'too large' before they are read: 20 MB of text ingests in 351 MB "
                                       "(docs/benchmarks.md); a PDF's bytes are mostly fonts and images.")
    # --- a real model in the loop (bara/llm/local.py, bench/bench_e2e.py) ---
    llm_send_max_tokens: bool = Field(default=False, description="Send llm_max_tokens as max_tokens to OpenAI-"
                                      "compatible servers too: a local server otherwise generates until its "
                                      "context is full; off by default, as some OpenAI models refuse max_tokens.")
    llm_local_n_ctx: int = Field(default=8192, ge=512, description="Context of the local llama.cpp server: "
                                 "SmolLM2's trained window; a 3000-token (estimated) prompt budget plus an answer "
                                 "fits with room for the estimate's error against the real tokeniser.")
    llm_local_threads: int = Field(default=2, ge=0, description="Threads of the local server (0 = llama.cpp's "
                                   "default): the machines bara is tested on have 2 cores.")
    llm_local_seed: int = Field(default=0, ge=0, description="Sampling seed of the local server, so runs repeat.")
    llm_local_ready_s: float = Field(default=120.0, gt=0, description="Wait for the local server to load its "
                                     "model and listen; ~2 s idle, far more on a loaded 2-core machine.")
    # --- hardening: ingest of large files ---
    ingest_embed_batch: int = Field(default=256, ge=1, description="Chunks embedded (and cached) per step of one document: "
                                                           "bounds ingest memory, and an interrupted ingest keeps "
                                                           "the vectors it finished.")
    embed_batch_tokens: int = Field(default=512, ge=8, description="Padded tokens per ONNX call: attention memory grows "
                                                            "with rows x width^2, so 32 rows of 256 tokens peaked "
                                                            "at 1.7 GB; 512 (2 such rows) peaked at 0.3 GB, no slower.")

    # --- understand/decide tuning constants (once module constants, values unchanged) ---
    # Intent confidences: how sure each rule in bara/understand/intent.py is when it fires (shown in the
    # trace and compared with prototype cosines; rules that match a whole message are surest).
    intent_confidence_empty: float = Field(default=0.9, ge=0.0, le=1.0, description="An empty message is a test ping.")
    intent_confidence_privacy: float = Field(default=0.9, ge=0.0, le=1.0, description="Privacy phrases are explicit.")
    intent_confidence_profile_statement: float = Field(default=0.85, ge=0.0, le=1.0,
                                                       description="'my name is' / 'I prefer' name the user.")
    intent_confidence_profile_question: float = Field(default=0.85, ge=0.0, le=1.0,
                                                      description="'what is my name?' asks about the user.")
    intent_confidence_testing: float = Field(default=0.85, ge=0.0, le=1.0, description="'test', 'are you there' pings.")
    intent_confidence_greeting: float = Field(default=0.9, ge=0.0, le=1.0, description="A whole-message greeting.")
    intent_confidence_thanks: float = Field(default=0.9, ge=0.0, le=1.0, description="A whole-message thank-you.")
    intent_confidence_goodbye: float = Field(default=0.9, ge=0.0, le=1.0, description="A whole-message goodbye.")
    intent_confidence_acknowledgement: float = Field(default=0.8, ge=0.0, le=1.0,
                                                     description="'ok', 'got it': short words, some ambiguity.")
    intent_confidence_meta: float = Field(default=0.8, ge=0.0, le=1.0,
                                          description="Questions about the assistant itself.")
    intent_confidence_followup: float = Field(default=0.75, ge=0.0, le=1.0,
                                              description="Follow-up cues past the threshold tie it to the topic.")
    intent_confidence_elaboration: float = Field(default=0.7, ge=0.0, le=1.0,
                                                 description="'tell me more' continues, but may change subject.")
    intent_confidence_short_question: float = Field(default=0.6, ge=0.0, le=1.0,
                                                    description="A few words with a '?': form alone, weakest rule.")
    intent_confidence_knowledge_question: float = Field(default=0.7, ge=0.0, le=1.0,
                                                        description="Opens like a question (what/how/why...).")
    intent_confidence_technical_reference: float = Field(default=0.65, ge=0.0, le=1.0,
                                                         description="Names an RFC/protocol but not as a question.")
    intent_confidence_default: float = Field(default=0.4, ge=0.0, le=1.0,
                                             description="No rule and no prototype: a guess, lowest of all.")
    # Follow-up cue weights (bara/understand/features.py): summed, capped at 1, compared with
    # gate_followup_threshold (0.5), so a starter or elaboration plus any other cue is a follow-up.
    gate_followup_weight_pronoun: float = Field(default=0.3, ge=0.0, le=1.0,
                                                description="'it', 'they' lean on a topic, but also open questions.")
    gate_followup_weight_starter: float = Field(default=0.4, ge=0.0, le=1.0,
                                                description="'and', 'also', 'what about' open a continuation.")
    gate_followup_weight_reference: float = Field(default=0.3, ge=0.0, le=1.0,
                                                  description="'the other one', 'that one' point back.")
    gate_followup_weight_elaboration: float = Field(default=0.4, ge=0.0, le=1.0,
                                                    description="'more details', 'elaborate' ask for more of the same.")
    gate_followup_weight_short_question: float = Field(default=0.3, ge=0.0, le=1.0,
                                                       description="<= 3 words mid-conversation rarely stand alone.")
    gate_topic_recent_vectors: int = Field(default=3, ge=1, le=50, description="User-message vectors averaged as the "
                                           "topic: what the user asked lately, not at the start.")
    # Conversation state (bara/understand/state.py).
    state_history_window: int = Field(default=8, ge=1, le=100, description="Queries and intents kept in the state: "
                                      "enough turns to see a rhythm, small enough to persist per turn.")
    state_topic_window: int = Field(default=3, ge=1, le=100, description="Without vectors, a topic switch shares no "
                                    "content word with any of this many recent queries.")
    state_repeats_mean_frustration: int = Field(default=2, ge=1, le=100, description="Repetitions that set the tone "
                                                "to frustrated: asking a third time is frustration, stated or not.")
    # Query rewrite (bara/understand/rewrite.py RewriteRules; fitted on the dev halves of TREC CAsT
    # 2019/2020/2022 and CANARD by scripts/train_rewrite_scorer.py, docs/rewrite.md).
    rewrite_lookback: int = Field(default=8, ge=0, description="Recent replies read, and user turns read beyond the "
                                  "topic's first one: older turns rarely hold what a follow-up lacks.")
    rewrite_head_messages: int = Field(default=2, ge=0, le=20, description="The conversation's opening messages (its "
                                       "first question and reply) the rewrite reads beside the recent window: "
                                       "65% of the terms CAsT 2019 human rewrites add come from the first turn.")
    rewrite_scan_chars: int = Field(default=1500, ge=1, description="Characters read of each utterance: a long answer "
                                    "names its subject early.")
    rewrite_min_content_words: int = Field(default=1, ge=0, description="A user turn with fewer content words is "
                                           "chit-chat ('thanks!') and is not read.")
    rewrite_term_threshold: float = Field(default=0.2, ge=0.0, le=1.0, description="Probability a candidate word "
                                          "needs to be added: the dev-half threshold of best mean term F1.")
    rewrite_max_terms: int = Field(default=6, ge=0, le=50, description="Words added at most: human rewrites add "
                                   "one to four content words; more drifts the lexical query.")
    rewrite_term_weights: dict[str, float] = Field(default_factory=lambda: dict(_REWRITE_TERM_WEIGHTS), description=(
        "Logistic weights of the rewrite's term scorer per named feature (bara.understand.term_scorer), fitted "
        "on dev halves only (scripts/train_rewrite_scorer.py); printed in each rewrite's reason codes."))
    # Pipeline, memory and retrieval.
    gate_curate_scan_windows: int = Field(default=4, ge=1, le=100, description="Continuations look this many history "
                                          "windows back for older turns similar to the question.")
    memory_topic_fallback_messages: int = Field(default=3, ge=1, le=50, description="Without a stored topic vector, "
                                                "the topic is the last few user messages, not the first ones.")
    memory_notes_max_concepts: int = Field(default=8, ge=1, le=100, description="Concepts kept per note: a note names "
                                           "a handful of things; more is keyword soup.")
    rerank_latency_ema_alpha: float = Field(default=0.3, gt=0.0, le=1.0, description="Weight of the newest measured "
                                            "ms/pair in the reranker's running estimate: follows load in a few "
                                            "calls without jumping on one slow call.")

    # --- observability (bara/observe) ---
    otel_user_id: str = Field(default="hash", pattern=r"^(hash|clear|omit)$",
                              description="How spans carry user.id: a keyed hash by default (identities never "
                                          "leave in clear unless asked), the id itself, or nothing.")
    otel_user_id_key: str = Field(default="", description="Key of the user.id hash (HMAC-SHA256); set one per "
                                                          "deployment so ids cannot be looked up by hashing guesses.")
    otel_queue_turns: int = Field(default=2048, ge=1, le=1_000_000,
                                  description="Turns waiting for their spans before new ones are dropped (counted): "
                                              "telemetry falls behind, never the answers.")

    # --- domain plug-ins' own sections (bara/settings/sections.py) ---
    domains: dict[str, dict[str, Any]] = Field(default_factory=dict, description=(
        "Each domain plug-in's settings section by domain name, checked by the domain's model (funds: "
        "the rule router's router_* thresholds); flat keys such as router_sim_min still load into it."))

    @model_validator(mode="before")
    @classmethod
    def _domain_keys(cls, data: Any) -> Any:
        return gather(data, cls.model_fields)

    @model_serializer(mode="wrap")
    def _flat_sections(self, handler: SerializerFunctionWrapHandler, info: SerializationInfo) -> dict[str, Any]:
        """Each section's values as the flat keys users set them by (as before the domains owned them)."""
        data = handler(self)
        data.pop("domains", None)
        data.update(flat_values(self.domains, info.mode))
        return data

    def section(self, name: str, model: type[M]) -> M:
        """Domain ``name``'s settings section as ``model`` (its plug-in's ``settings_model``)."""
        return section_of(self.domains, name, model)

    def override(self, **changes: Any) -> "Settings":
        """Return a validated copy with ``changes`` applied (never mutates self)."""
        try:
            return Settings.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            raise ConfigError(f"invalid setting override: {_brief(exc)}") from exc


def _brief(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"] for e in exc.errors())


def load_settings(path: str | Path | None = None, environ: dict[str, str] | None = None,
                  **overrides: Any) -> Settings:
    """Build Settings from defaults, an optional TOML file, the environment and overrides.

    The TOML file is ``path``, else ``$BARA_CONFIG``, else ``./bara.toml`` if present.
    Values may sit at the top level or under a ``[bara]`` table.
    """
    environ = dict(os.environ if environ is None else environ)
    values: dict[str, Any] = {}
    toml_path = Path(path) if path else (Path(environ["BARA_CONFIG"]) if "BARA_CONFIG" in environ else None)
    if toml_path is None and Path("bara.toml").is_file():
        toml_path = Path("bara.toml")
    if toml_path is not None:
        values.update(_read_toml(toml_path))
    fields = [*Settings.model_fields, *section_fields()]
    values.update(env_values(environ, fields))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings ({toml_path or 'environment'}): {_brief(exc)}") from exc
    warn_unknown(environ, fields, also=[settings.llm_api_key_env])
    return settings


def _read_toml(path: Path) -> dict[str, Any]:
    """The settings in ``path``: top level or a ``[bara]`` table; a UTF-8 byte-order mark is allowed."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError as exc:
        raise ConfigError(f"settings file {path} does not exist; create it or unset BARA_CONFIG") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"settings file {path} is a folder: point BARA_CONFIG at a TOML file") from exc
    except OSError as exc:
        raise ConfigError(f"settings file {path} cannot be read ({exc.strerror or exc}): make it readable "
                          "or unset BARA_CONFIG") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"settings file {path} is not valid TOML: {exc}") from exc
    table = data.get("bara", data)
    if not isinstance(table, dict):
        raise ConfigError(f"settings file {path}: 'bara' must be a table ([bara] followed by key = value "
                          f"lines), not {type(table).__name__}")
    return dict(table)
