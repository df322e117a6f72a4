"""Every threshold and default bara uses, typed, in one place.

Load order (later wins): built-in defaults < TOML file < ``BARA_*`` environment
variables < per-call overrides (:meth:`Settings.override`).

Environment variables use the field name upper-cased with a ``BARA_`` prefix,
e.g. ``BARA_K=6`` or ``BARA_DB=/tmp/x.db``.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bara.errors import ConfigError


def _data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "bara"


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bara"


class Settings(BaseModel):
    """One typed object for every tunable; each field says why it has its default."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # --- where things live -------------------------------------------------
    db: str = Field(str(_data_home() / "bara.db"),
                    description="Store location: a SQLite file path (embedded default).")
    cache_dir: Path = Field(_cache_home(),
                            description="Embedding cache and eval index cache; safe to delete.")
    data_dir: Path = Field(Path("../shared/data"),
                           description="Test/demo datasets; never needed by the library at run time.")

    # --- chunking ----------------------------------------------------------
    chunk_size_chars: int = Field(1000, ge=200,
                                  description="~250 MiniLM tokens: fits the 256-token window whole.")
    chunk_overlap_chars: int = Field(150, ge=0,
                                     description="One sentence or so of overlap keeps boundary facts findable.")
    min_chunk_chars: int = Field(40, ge=1,
                                 description="Shorter fragments (page debris) carry no retrievable meaning.")

    # --- embeddings --------------------------------------------------------
    embedder: str = Field("minilm-q8",
                          description="'minilm-q8': MiniLM on int8 kernels, 2.3x round 1's speed at equal SciFact "
                                      "nDCG (docs/benchmarks.md); 'minilm-fp32', 'minilm-int8' (round 1's file), or "
                                      "any sentence-transformers name/path.")
    embed_batch_size: int = Field(32, ge=1,
                                  description="Big enough to amortise ONNX call overhead, small enough for padding waste "
                                              "(minilm-q8 ignores it: one text per call keeps vectors batch-independent).")
    embed_threads: int = Field(0, ge=0,
                               description="ONNX intra-op threads; 0 = all cores (1 can win on a busy machine).")
    embed_max_tokens: int = Field(256, ge=8, le=512,
                                  description="all-MiniLM-L6-v2 was trained with a 256-token window.")

    # --- hybrid retrieval --------------------------------------------------
    k: int = Field(4, ge=1, le=100, description="Chunks returned per search; 4 fits the context budget.")
    candidate_multiplier: int = Field(3, ge=1, le=50,
                                      description="Each arm fetches multiplier*k so fusion has overlap to work with.")
    rrf_k: int = Field(60, ge=1, description="Cormack et al. (2009) found k=60 robust across collections.")
    weight_lexical: float = Field(1.0, ge=0.0, description="RRF weight of the full-text arm.")
    weight_dense: float = Field(1.0, ge=0.0, description="RRF weight of the dense arm.")
    lexical_title_weight: float = Field(2.0, ge=0.0,
                                        description="BM25 column weight of titles/sections vs body (body = 1).")
    max_query_chars: int = Field(2000, ge=10,
                                 description="Longer queries are cut for retrieval (reason code query_truncated).")
    search_floor: float = Field(0.30, ge=-1.0, le=1.0,
                                description="Cosine floor for plain `bara search`; same as the KB route floor.")

    # --- reranking ---------------------------------------------------------
    rerank: bool = Field(False, description="Off by default: no cross-encoder weights ship with bara.")
    rerank_model: str = Field("cross-encoder/ms-marco-MiniLM-L-6-v2",
                              description="sentence-transformers CrossEncoder name or local path.")
    rerank_budget_ms: float = Field(60.0, gt=0,
                                    description="Latency cap; ~5 ms/pair on CPU means about 12 pairs.")
    rerank_ms_per_pair_estimate: float = Field(5.0, gt=0,
                                               description="Prior per-pair cost until one call is measured.")

    # --- route floors (gated pipeline) -------------------------------------
    # Ceiling: eval/floors.toml (`bara eval calibrate`, highest floor dropping <=5% of a route's relevant
    # hits on the MTRAG-UN dev tune half): kb 0.32, continuation 0.31, general 0.27. 0.28 is the lowest
    # floor that meets the pre-registered token target (<= 0.6x always on mixed whole conversations) on
    # the dev half (sha256-even conversations; q8 embedder): 0.15 -> 0.654x, 0.25 -> 0.618x, 0.28 -> 0.584x,
    # at Recall@5 0.842 -> 0.816 (always 0.764, last2 0.776). Report half at 0.28: 0.546x, R@5 0.809
    # (always 0.777, last2 0.781). docs/evaluation.md, round 2, has the sweep.
    floor_kb: float = Field(0.28, description="MiniLM cosine floor for knowledge-base hits: see the sweep "
                                              "above (what it costs in recall, what it saves in tokens).")
    floor_continuation: float = Field(0.28, description="Same embedder, same sweep as floor_kb: the topic "
                                                        "vector already carries the conversation.")
    floor_general: float = Field(0.28, description="Was 0.45 (copied from another embedder): it dropped "
                                                   "standalone turns' relevant hits (R@5 0.700 -> 0.510).")
    floor_qa: float = Field(0.65, description="Old answers are reused only when the question nearly repeats.")

    # --- gate: understand & decide (add gate thresholds below this line) ---
    gate_followup_threshold: float = Field(0.5, ge=0.0, le=1.0,
                                           description="Two weak structural cues (or one strong) mark a follow-up.")
    gate_prototype_min_similarity: float = Field(0.35, ge=-1.0, le=1.0,
                                                 description="Below this a prototype match is a guess (0.35 scored best on CLINC val).")
    gate_reduce_k_delta: int = Field(2, ge=0,
                                     description="Reduced turns (rapid fire) need a fact or two, not a survey.")
    gate_reduce_floor_delta: float = Field(0.10, ge=0.0, le=1.0,
                                           description="Reduced turns admit only clearly relevant chunks.")
    gate_boost_k_delta: int = Field(2, ge=0,
                                    description="Exploring or recovering from a miss deserves wider evidence.")
    gate_boost_floor_delta: float = Field(0.05, ge=0.0, le=1.0,
                                          description="Small: a lower floor past ~0.25 mostly admits noise.")
    gate_short_query_words: int = Field(4, ge=1,
                                        description="Queries this short carry little retrievable content.")
    gate_rapid_fire_streak: int = Field(3, ge=2,
                                        description="Three short queries in a row is a quick-lookup rhythm, not chance.")
    gate_repetition_similarity: float = Field(0.8, ge=0.0, le=1.0,
                                              description="Word-set Jaccard at which a query counts as asked again.")
    gate_topic_switch_similarity: float = Field(0.25, ge=-1.0, le=1.0,
                                                description="Cosine to the conversation topic below which a fresh question switches topic "
                                                            "(same calibration as gate_topic_standalone_similarity).")
    gate_exploratory_switches: int = Field(2, ge=1,
                                           description="Repeated topic switches mean browsing: widen retrieval.")
    gate_rewrite_in_conversation: bool = Field(True, description=(
        "Rewrite every searched message that has history: on MTRAG-UN dev the rewrite lifts Recall@5 "
        "0.815 -> 0.922, and most dependent questions carry no pronoun the follow-up score could see."))
    gate_notes_k: int = Field(3, ge=1,
                              description="Decisions/open questions are few; three notes cover a recap.")

    # --- memory & pipeline (add memory/pipeline settings below this line) ---
    memory_floor_notes: float = Field(0.30, ge=-1.0, le=1.0,
                                      description="Notes are one-sentence paraphrases: a recap query rarely "
                                                  "scores above 0.5 against the note it means.")
    memory_notes_concept_boost: float = Field(0.05, ge=0.0, le=1.0,
                                              description="Small nudge for a note naming a concept the query "
                                                          "names (TCP, 'retry budget'); similarity still rules.")
    memory_notes_kind_boost: float = Field(0.05, ge=0.0, le=1.0,
                                           description="Small nudge for the asked kind: 'what did we decide' "
                                                       "prefers decisions over hypotheses.")
    memory_qa_recency_half_life_s: float = Field(7 * 86400.0, gt=0,
                                                 description="A week: last week's answer is half as fresh; "
                                                             "facts in chats age in days, not hours.")
    memory_qa_recency_weight: float = Field(0.05, ge=0.0, le=1.0,
                                            description="Max recency bonus; below the similarity spread of "
                                                        "near-repeats, so it only breaks near-ties.")
    memory_qa_same_conversation_bonus: float = Field(0.05, ge=0.0, le=1.0,
                                                     description="An answer given in this conversation fits "
                                                                 "its context better than one from another.")

    # pipeline (bara/pipeline.py)
    pipeline_history_messages: int = Field(8, ge=0,
                                           description="Last N messages shown to the generator (4 exchanges); "
                                                       "the always-mode baseline keeps the same window.")
    pipeline_context_budget_tokens: int = Field(3000, ge=200,
                                                description="Prompt budget (estimated tokens); history gives way "
                                                            "first. Leaves room for an answer in a 4k window.")

    # --- agent & llm (add agent/provider settings below this line) ---
    agent_gate_tools: bool = Field(True, description="Let bara's gate choose the tools offered per agent turn: "
                                                     "none for chit-chat, another user's data or off-topic "
                                                     "requests, so no model can call them there.")
    model: str = Field("", description="LLM as 'provider:name' (e.g. 'openai:gpt-4o-mini'); empty = no LLM, "
                                       "callers fall back to offline models. Env: BARA_MODEL.")
    llm_provider: str = Field("", pattern=r"^(|openai|anthropic)$",
                              description="'openai' (any Chat Completions server) or 'anthropic'; empty = "
                                          "the model's prefix, else claude-* means anthropic.")
    llm_base_url: str = Field("", description="Empty = the provider's public API; set it for vLLM, Ollama or "
                                              "llama.cpp (e.g. http://127.0.0.1:11434/v1).")
    llm_api_key_env: str = Field("", description="Name of the env variable holding the API key (default "
                                                 "OPENAI_API_KEY / ANTHROPIC_API_KEY); keys never live in settings.")
    llm_timeout_s: float = Field(60.0, gt=0, description="One HTTP attempt; a tool-call turn on a slow "
                                                         "local model can take tens of seconds.")
    llm_max_retries: int = Field(3, ge=0, le=10, description="Retries on 429/5xx/connection errors: rides out "
                                                             "brief rate limits without hiding an outage.")
    llm_backoff_s: float = Field(0.5, ge=0, description="First retry delay; doubles per retry with jitter "
                                                        "(unless the provider sends Retry-After).")
    llm_backoff_max_s: float = Field(8.0, ge=0, description="Cap on one computed retry delay.")
    llm_max_tokens: int = Field(1024, ge=1, description="Answer cap Anthropic requires; ~750 words is ample "
                                                        "for a chat turn. Not sent to OpenAI-compatible servers.")
    agent_max_iterations: int = Field(6, ge=1, le=50, description="Model calls offered tools per agent run; "
                                                                 "bounds search spirals, then one tool-less wrap-up.")
    agent_deadline_s: float = Field(60.0, gt=0, description="Wall-clock budget of one agent run, shared by "
                                                            "model calls and tools.")

    # --- postgres ---
    pg_embedding_dim: int = Field(384, ge=1, le=2000,
                                  description="vector(d) column size, fixed when the schema is created: "
                                              "384 = MiniLM. HNSW indexes at most 2000 dimensions.")
    pg_schema: str = Field("", description="Schema holding bara's tables; empty = the role's search_path "
                                          "(public). One schema per bara deployment sharing a database.")
    pg_admin_url: str = Field("", description="URL of the role that owns the tables, used only to migrate; "
                                             "empty = migrate with --db itself (single-role setups).")
    pg_app_role: str = Field("", description="Role granted row access after migrating (no ownership, so "
                                            "row-level security binds it); empty = grant nothing.")
    pg_pool_size: int = Field(8, ge=1, le=200, description="Connections per process; a turn uses one at a time.")
    pg_ef_search: int = Field(100, ge=10, le=1000,
                              description="HNSW candidate list; pgvector's 40 loses recall at k*3 = 12+ "
                                          "candidates, 100 keeps p50 ~1 ms at 100k chunks.")

    # --- episodic memory & LoCoMo (issue 14; bara/memory/episodic.py) ---
    memory_episodic_k: int = Field(10, ge=1, le=100,
                                   description="Episodes shown for a personal question: LoCoMo evidence spans "
                                               "1-4 turns, 10 one-line turns cost ~400 tokens.")
    memory_floor_episodic: float = Field(0.30, ge=-1.0, le=1.0,
                                         description="Cosine floor for episodes: drops turns that only share a name "
                                                     "with the question (tuned on LoCoMo dev: 0.15 loses 6 points).")
    memory_episodic_context_weight: float = Field(0.3, ge=0.0, le=2.0,
                                                  description="How far a stored turn's vector leans to its "
                                                              "neighbours' (context_vectors); +4 points R@10 on dev.")
    memory_episodic_window: int = Field(1, ge=0, le=4,
                                        description="Turns after each hit shown with it (the reply that confirms "
                                                    "or dates it); a window is one prompt item.")
    memory_episodic_candidates: int = Field(1, ge=1, le=50,
                                            description="Candidates per kept episode before the speaker boost "
                                                        "reorders them (k * this).")
    memory_episodic_speaker_boost: float = Field(0.25, ge=0.0, le=5.0,
                                                 description="Relative lift of a turn said by the person the "
                                                             "question names (fused * (1 + boost)).")
    memory_episodic_hop_queries: int = Field(3, ge=0, le=10,
                                             description="Cap on second-round (multi-hop) searches per question; "
                                                         "0 turns multi-hop off.")
    memory_episodic_hop_seed_hits: int = Field(3, ge=1, le=20,
                                               description="Round-1 hits whose mentions seed round 2.")
    memory_episodic_hop_weight: float = Field(0.5, ge=0.0, le=2.0,
                                              description="RRF weight of each round-2 list against round 1's 1.0: "
                                                          "the seeds are guesses, the question is not.")
    gate_episodic_min_signals: int = Field(1, ge=1, le=5,
                                           description="Personal-memory signals (a known person named, a when/what-"
                                                       "did/remember cue, a first-person past statement) needed to "
                                                       "open the episodic tier.")
    memory_episodic_record_turns: bool = Field(True, description="Chat turns are remembered as episodes (the "
                                                                 "user's words with the turn's date).")
    memory_write_behind: bool = Field(True, description="A turn's notes, Q&A pair and episodic record are stored "
                                                        "after its answer (bara.memory.writebehind): off the answer "
                                                        "path; lost only if the process dies before the next turn.")
    # --- serve (HTTP service: bara serve) -----------------------------------
    serve_max_body_bytes: int = Field(1_000_000, ge=1024, description="1 MB holds a long chat history; "
                                      "bigger bodies are refused before parsing (memory safety).")
    serve_max_upload_bytes: int = Field(20_000_000, ge=1024, description="/api/ingest uploads: the largest "
                                        "RFC is ~1 MB; 20 MB allows big manuals, not archives.")
    serve_max_message_chars: int = Field(8000, ge=10, description="One user message; 8k chars is ~2k tokens "
                                         "(the retrieval query is cut further by max_query_chars).")
    serve_max_messages: int = Field(200, ge=1, description="Messages in one chat-completions request; longer "
                                    "histories are refused rather than silently cut.")
    serve_max_k: int = Field(50, ge=1, le=1000, description="/api/search k: beyond 50 the tail is noise "
                                "and the response grows linearly.")
    serve_max_concurrent_per_key: int = Field(8, ge=1, description="In-flight requests per API key: one key "
                                              "cannot take every worker thread (fairness between users).")
    serve_threads: int = Field(16, ge=1, le=256, description="Worker threads per process for sync turns: "
                               "turns wait on the DB or the model, so more threads than cores pays.")

    # --- agent router (offline tool selection; bara/domains/funds/router*.py) ----------
    router_scheme_min_score: float = Field(85.0, ge=0.0, le=100.0, description="rapidfuzz ratio a message "
                                           "window needs against a scheme's short name: one typo or a missing "
                                           "'fund' passes, a different scheme of the same house does not.")
    router_scheme_token_score: float = Field(85.0, ge=0.0, le=100.0, description="Per-word ratio for a held "
                                             "scheme named without its fund house ('my flexi cap'): one typo in "
                                             "a 7+ letter word.")
    router_keyword_score: float = Field(85.0, ge=0.0, le=100.0, description="Per-word ratio at which a "
                                        "misspelt keyword is read as the keyword ('transcations').")
    router_sim_min: float = Field(0.4, ge=-1.0, le=1.0, description="With no rule firing, the best "
                                  "cosine(message, tool's 'use for' text) that calls the tool on its own; "
                                  "below, no tool fits (tuned on the BFCL dev half: 0.25 called a tool for "
                                  "most near-miss requests).")
    router_sim_floor: float = Field(0.3, ge=-1.0, le=1.0, description="Lowest cosine at which a tool whose "
                                    "name the message mentions (router_name_cover_min) is still called.")
    router_name_cover_min: float = Field(0.34, ge=0.0, le=1.0, description="Share of a tool name's content "
                                         "words the message must mention to accept a cosine in [floor, min): "
                                         "one of its (up to three) task words.")
    router_name_weight: float = Field(0.2, ge=0.0, le=1.0, description="Weight of the name coverage when "
                                      "ranking tools by cosine: breaks near ties towards the tool named for "
                                      "the task ('search_book' over 'reserve_book').")
    router_sim_weight: float = Field(1.0, ge=0.0, le=4.0, description="Weight of cosine(message, tool's 'use "
                                     "for' text) added to a tool's rule score: a perfect match counts as one "
                                     "keyword rule (weight 1.0).")
    router_thin_min_hits: int = Field(2, ge=0, description="A document search with fewer hits is thin and is "
                                      "reformulated once: one passage rarely answers a question.")
    router_thin_rank: float = Field(40.0, gt=0.0, description="A search is also thin when its best fused score "
                                    "is below that of a hit both arms rank here: router_thin_score = (weight_lexical "
                                    "+ weight_dense) / (rrf_k + 40) = 0.02 at the defaults, above the 1/(rrf_k + 1) "
                                    "~ 0.0164 a hit only one arm found can reach.")
    # --- gate-rules: topic-aware rewrite, vector cache, social turns (issue 10) ---
    gate_topic_standalone_similarity: float = Field(0.25, ge=-1.0, le=1.0, description=(
        "A message naming its own subject, with no follow-up cue, below this cosine to the conversation "
        "topic is standalone (topic switches measured 0.08-0.21; costs <0.01 R@5 on MTRAG-UN dev)."))
    gate_topic_carry_weight: float = Field(0.8, ge=0.0, le=4.0, description=(
        "Weight of the previous topic vector in a dependent turn's query vector: 0.8 scored best of "
        "0.6/0.8 on the MTRAG-UN dev half (R@5 0.913 vs 0.920 encoding the rewrite, at no encode)."))
    gate_cache_vectors: bool = Field(True, description=(
        "Keep each user message's vector and topic vector in its meta (float16): history vectors "
        "cost a JSON read instead of an encode."))
    gate_small_talk_override_similarity: float = Field(0.55, ge=-1.0, le=1.0, description=(
        "A question recognised by form only is small talk when its nearest prototype is chit-chat at "
        "this cosine or more (tuned on CLINC150 train for skip precision >= 0.98)."))
    gate_qa_only_on_repeat: bool = Field(True, description=(
        "Search remembered answers only when the question repeats: otherwise the Q&A search is a second "
        "store call per turn that rarely adds anything the documents lack."))
    gate_rag_history_messages: int = Field(2, ge=0, description=(
        "Knowledge turns show the last exchange: the query already carries the topic, the hits carry "
        "the facts, and older replies are context tokens the answer rarely needs."))
    gate_note_statements_skip: bool = Field(True, description=(
        "A statement carrying a decision or open-question cue and no question is stored as a note, "
        "not searched: the documents cannot confirm our own decisions (hypotheses still search)."))
    gate_kb_relative_gap: float = Field(0.3, ge=0.0, le=2.0, description=(
        "Gated knowledge hits more than this cosine below the best hit are dropped (2 = off): 0.3 keeps "
        "R@5 within 0.001 on the MTRAG-UN dev half and saves ~10% of chunks; 0.25 cost 0.01."))
    gate_social_history_messages: int = Field(2, ge=0, description=(
        "Thanks/greetings/acknowledgements see only the last exchange: replying to 'thanks' needs no "
        "four-exchange transcript, and those tokens are most of such a turn's context."))
    # --- hardening: provider faults and deadlines (harden-faults) ---
    llm_deadline_s: float = Field(90.0, gt=0, description="Wall-clock budget of ONE model call, retries and "
                                                          "waits included: httpx's timeout is per read, so a "
                                                          "provider trickling bytes would otherwise never stop.")
    gated_deadline_s: float = Field(60.0, gt=0, description="Wall-clock budget of the generation step of one "
                                                            "gated turn; past it the offline answer is shown "
                                                            "(same budget as agent_deadline_s).")
    llm_max_json_depth: int = Field(64, ge=8, le=500, description="Deepest JSON nesting accepted in a provider "
                                                                  "reply; real replies nest < 10, a nesting bomb "
                                                                  "would exhaust Python's recursion limit.")
    llm_max_response_bytes: int = Field(8_000_000, ge=10_000, description="Largest provider reply read; a chat "
                                                                          "reply is KBs, 8 MB bounds memory.")
    tool_args_max_depth: int = Field(32, ge=2, le=500, description="Deepest JSON nesting accepted in tool "
                                                                   "arguments; every tool takes flat objects, "
                                                                   "so deeper is an error envelope.")
    # --- embedder variants (performance) ---
    model_dir: Path = Field(_cache_home() / "models",
                            description="Built MiniLM ONNX files, once per machine, named by weights hash and "
                                        "recipe (not under cache_dir: a fresh cache must not rebuild); safe to delete.")
    # --- hardening: ingest of large files (issue 15, harden-input) ---
    ingest_embed_batch: int = Field(256, ge=1, description="Chunks embedded (and cached) per step of one document: "
                                                           "bounds ingest memory, and an interrupted ingest keeps "
                                                           "the vectors it finished.")
    embed_batch_tokens: int = Field(512, ge=8, description="Padded tokens per ONNX call: attention memory grows "
                                                            "with rows x width^2, so 32 rows of 256 tokens peaked "
                                                            "at 1.7 GB; 512 (2 such rows) peaked at 0.3 GB, no slower.")

    # --- understand/decide tuning constants (issue 9: once module constants, values unchanged) ---
    # Intent confidences: how sure each rule in bara/understand/intent.py is when it fires (shown in the
    # trace and compared with prototype cosines; rules that match a whole message are surest).
    intent_confidence_empty: float = Field(0.9, ge=0.0, le=1.0, description="An empty message is a test ping.")
    intent_confidence_privacy: float = Field(0.9, ge=0.0, le=1.0, description="Privacy phrases are explicit.")
    intent_confidence_profile_statement: float = Field(0.85, ge=0.0, le=1.0,
                                                       description="'my name is' / 'I prefer' name the user.")
    intent_confidence_profile_question: float = Field(0.85, ge=0.0, le=1.0,
                                                      description="'what is my name?' asks about the user.")
    intent_confidence_testing: float = Field(0.85, ge=0.0, le=1.0, description="'test', 'are you there' pings.")
    intent_confidence_greeting: float = Field(0.9, ge=0.0, le=1.0, description="A whole-message greeting.")
    intent_confidence_thanks: float = Field(0.9, ge=0.0, le=1.0, description="A whole-message thank-you.")
    intent_confidence_goodbye: float = Field(0.9, ge=0.0, le=1.0, description="A whole-message goodbye.")
    intent_confidence_acknowledgement: float = Field(0.8, ge=0.0, le=1.0,
                                                     description="'ok', 'got it': short words, some ambiguity.")
    intent_confidence_meta: float = Field(0.8, ge=0.0, le=1.0,
                                          description="Questions about the assistant itself.")
    intent_confidence_followup: float = Field(0.75, ge=0.0, le=1.0,
                                              description="Follow-up cues past the threshold tie it to the topic.")
    intent_confidence_elaboration: float = Field(0.7, ge=0.0, le=1.0,
                                                 description="'tell me more' continues, but may change subject.")
    intent_confidence_short_question: float = Field(0.6, ge=0.0, le=1.0,
                                                    description="A few words with a '?': form alone, weakest rule.")
    intent_confidence_knowledge_question: float = Field(0.7, ge=0.0, le=1.0,
                                                        description="Opens like a question (what/how/why...).")
    intent_confidence_technical_reference: float = Field(0.65, ge=0.0, le=1.0,
                                                         description="Names an RFC/protocol but not as a question.")
    intent_confidence_default: float = Field(0.4, ge=0.0, le=1.0,
                                             description="No rule and no prototype: a guess, lowest of all.")
    # Follow-up cue weights (bara/understand/features.py): summed, capped at 1, compared with
    # gate_followup_threshold (0.5), so a starter or elaboration plus any other cue is a follow-up.
    gate_followup_weight_pronoun: float = Field(0.3, ge=0.0, le=1.0,
                                                description="'it', 'they' lean on a topic, but also open questions.")
    gate_followup_weight_starter: float = Field(0.4, ge=0.0, le=1.0,
                                                description="'and', 'also', 'what about' open a continuation.")
    gate_followup_weight_reference: float = Field(0.3, ge=0.0, le=1.0,
                                                  description="'the other one', 'that one' point back.")
    gate_followup_weight_elaboration: float = Field(0.4, ge=0.0, le=1.0,
                                                    description="'more details', 'elaborate' ask for more of the same.")
    gate_followup_weight_short_question: float = Field(0.3, ge=0.0, le=1.0,
                                                       description="<= 3 words mid-conversation rarely stand alone.")
    gate_topic_recent_vectors: int = Field(3, ge=1, le=50, description="User-message vectors averaged as the "
                                           "topic: what the user asked lately, not at the start.")
    # Conversation state (bara/understand/state.py).
    state_history_window: int = Field(8, ge=1, le=100, description="Queries and intents kept in the state: "
                                      "enough turns to see a rhythm, small enough to persist per turn.")
    state_topic_window: int = Field(3, ge=1, le=100, description="Without vectors, a topic switch shares no "
                                    "content word with any of this many recent queries.")
    state_repeats_mean_frustration: int = Field(2, ge=1, le=100, description="Repetitions that set the tone "
                                                "to frustrated: asking a third time is frustration, stated or not.")
    # Query rewrite (bara/understand/rewrite.py RewriteRules; tuned on MTRAG-UN dev Recall@5, docs/rewrite.md).
    rewrite_user_weight: float = Field(1.0, ge=0.0, description="The user's own words define the topic.")
    rewrite_agent_weight: float = Field(0.5, ge=0.0, description="Answers name entities but also wander.")
    rewrite_decay: float = Field(0.6, ge=0.0, le=1.0, description="Weight kept per user turn further back.")
    rewrite_entity_bonus: float = Field(1.5, ge=0.0, description="Names retrieve better than loose words.")
    rewrite_lookback: int = Field(8, ge=0, description="Utterances scanned, most recent first.")
    rewrite_scan_chars: int = Field(1500, ge=1, description="Characters read of each utterance: a long answer "
                                    "names its subject early.")
    rewrite_previous_turns: int = Field(1, ge=0, description="Content-bearing earlier user turns quoted verbatim.")
    rewrite_min_content_words: int = Field(1, ge=0, description="A user turn with fewer content words is "
                                           "chit-chat ('thanks!') and is not quoted.")
    rewrite_resolve_references: bool = Field(True, description="Append the referent of 'it', 'they', "
                                             "'the other one'.")
    rewrite_max_carried: int = Field(2, ge=0, description="Salient names appended after the quoted turn.")
    rewrite_min_salience: float = Field(1.0, ge=0.0, description="A name is carried only if the user just "
                                        "said it or it recurs.")
    # Pipeline, memory and retrieval.
    gate_curate_scan_windows: int = Field(4, ge=1, le=100, description="Continuations look this many history "
                                          "windows back for older turns similar to the question.")
    memory_topic_fallback_messages: int = Field(3, ge=1, le=50, description="Without a stored topic vector, "
                                                "the topic is the last few user messages, not the first ones.")
    memory_notes_max_concepts: int = Field(8, ge=1, le=100, description="Concepts kept per note: a note names "
                                           "a handful of things; more is keyword soup.")
    rerank_latency_ema_alpha: float = Field(0.3, gt=0.0, le=1.0, description="Weight of the newest measured "
                                            "ms/pair in the reranker's running estimate: follows load in a few "
                                            "calls without jumping on one slow call.")

    @property
    def router_thin_score(self) -> float:
        """Best fused (RRF) score below which a search is thin; derived from rrf_k and the arm weights so it
        follows them (0.02 at rrf_k=60, weights 1 and 1)."""
        return (self.weight_lexical + self.weight_dense) / (self.rrf_k + self.router_thin_rank)

    def override(self, **changes: Any) -> "Settings":
        """Return a validated copy with ``changes`` applied (never mutates self)."""
        try:
            return Settings.model_validate({**self.model_dump(), **changes})
        except ValidationError as exc:
            raise ConfigError(f"invalid setting override: {_brief(exc)}") from exc


def _brief(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())


def _env_values(environ: dict[str, str]) -> dict[str, str]:
    out = {}
    for name in Settings.model_fields:
        key = f"BARA_{name.upper()}"
        if key in environ:
            out[name] = environ[key]
    if "BARA_DATABASE_URL" in environ and "db" not in out:
        out["db"] = environ["BARA_DATABASE_URL"]
    return out


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
    values.update(_env_values(environ))
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return Settings.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(f"invalid settings ({toml_path or 'environment'}): {_brief(exc)}") from exc


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"settings file {path} does not exist; create it or unset BARA_CONFIG") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"settings file {path} is not valid TOML: {exc}") from exc
    return dict(data.get("bara", data))
