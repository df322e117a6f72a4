"""The first sections of :class:`bara.settings.Settings`: where things live, chunking, embeddings,
retrieval, reranking, route floors, the gate, memory and pipeline, agent and LLM, and PostgreSQL.

Split out only to keep modules small; import ``Settings`` from :mod:`bara.settings`. Field order
(these first) is the order of ``Settings().model_dump()``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator


def _data_home() -> Path:
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "bara"


def _cache_home() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bara"


class CoreSettings(BaseModel):
    """The settings sections that come first; :class:`bara.settings.Settings` adds the rest."""

    # allow_inf_nan: no threshold, weight, budget or timeout means anything as NaN or infinity (a NaN floor
    # silently drops every hit, an infinite weight makes every fused score Infinity, which is not JSON)
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    # --- where things live -------------------------------------------------
    db: str = Field(default=str(_data_home() / "bara.db"),
                    description="Store location: a SQLite file path (embedded default).")

    @field_validator("db")
    @classmethod
    def _db_named(cls, value: str) -> str:
        """A blank location is a mistake (an unset variable in a script), not a file name: it was called
        a damaged database, and a blank of spaces became a store file named by the spaces."""
        if not value.strip():
            raise ValueError("is blank: pass a SQLite file path or a postgresql:// URL (--db or BARA_DB)")
        return value

    cache_dir: Path = Field(default=_cache_home(),
                            description="Embedding cache and eval index cache; safe to delete.")
    data_dir: Path = Field(default=Path("../shared/data"),
                           description="Test/demo datasets; never needed by the library at run time.")

    # --- chunking ----------------------------------------------------------
    chunk_size_chars: int = Field(default=1000, ge=200,
                                  description="~250 MiniLM tokens: fits the 256-token window whole.")
    chunk_overlap_chars: int = Field(default=150, ge=0,
                                     description="One sentence or so of overlap keeps boundary facts findable.")
    min_chunk_chars: int = Field(default=40, ge=1,
                                 description="Shorter fragments (page debris) carry no retrievable meaning.")

    # --- embeddings --------------------------------------------------------
    embedder: str = Field(default="minilm-q8",
                          description="'minilm-q8': MiniLM on int8 kernels, 2.3x round 1's speed at equal SciFact "
                                      "nDCG (docs/benchmarks.md); 'minilm-fp32', 'minilm-int8' (round 1's file), or "
                                      "any sentence-transformers name/path.")
    embed_batch_size: int = Field(default=32, ge=1,
                                  description="Big enough to amortise ONNX call overhead, small enough for padding waste "
                                              "(minilm-q8 ignores it: one text per call keeps vectors batch-independent).")
    embed_threads: int = Field(default=0, ge=0,
                               description="ONNX intra-op threads; 0 = all cores (1 can win on a busy machine).")
    embed_spin_in_call: bool = Field(default=True, description=(
        "ONNX worker threads spin between the parallel sections of one encoding and stop when it returns: "
        "a query encodes ~28% faster on 2 cores. Off, single encodings are that much slower, but no "
        "thread spins for a peer when several processes share the cores: `bara serve --workers N` turns it off "
        "unless set."))
    embed_max_tokens: int = Field(default=256, ge=8, le=512,
                                  description="all-MiniLM-L6-v2 was trained with a 256-token window.")

    # --- hybrid retrieval --------------------------------------------------
    k: int = Field(default=4, ge=1, le=100, description="Chunks returned per search; 4 fits the context budget.")
    candidate_multiplier: int = Field(default=3, ge=1, le=50,
                                      description="Each arm fetches multiplier*k so fusion has overlap to work with.")
    rrf_k: int = Field(default=60, ge=1, description="Cormack et al. (2009) found k=60 robust across collections.")
    weight_lexical: float = Field(default=1.0, ge=0.0, description="RRF weight of the full-text arm.")
    weight_dense: float = Field(default=1.0, ge=0.0, description="RRF weight of the dense arm.")
    lexical_title_weight: float = Field(default=2.0, ge=0.0,
                                        description="BM25 column weight of titles/sections vs body (body = 1).")
    retrieval_prefetch_lexical: bool = Field(default=True, description=(
        "SQLite: a turn starts the full-text arm on a second, read-only connection before it encodes the "
        "query, so the two overlap (about 0.6 ms of a 4 ms turn on 2 cores). Same rows either way."))
    lexical_skip_scope_test: bool = Field(default=True, description=(
        "SQLite: when the searched scopes hold every row of their full-text table (a knowledge base that is "
        "the only shared collection; users' memory has its own table), the full-text arm ranks without FTS5's "
        "scope test, which reads one posting per chunk: the same rows and "
        "scores, 0.3-0.7 ms less per query on the 56-RFC store."))
    lexical_in_memory: bool = Field(default=True, description=(
        "SQLite: once a process has searched a shared knowledge base often enough (below), its full-text "
        "arm is scored in memory (bara.store.sqlite_bm25), with FTS5's own formula, tokens and table-wide "
        "statistics: the same scores and order, 3-7x faster per query on knowledge bases of 1,000-8,000 "
        "chunks."))
    lexical_in_memory_min_chunks: int = Field(default=1000, ge=0, description=(
        "Only knowledge bases of at least this many chunks are scored in memory: FTS5 costs ~0.7 us per "
        "matching row, the in-memory arm ~0.1 ms a query and holds the interpreter lock while it scores, so "
        "on a small knowledge base FTS5 is as fast and leaves the lock to concurrent requests (156 chunks: "
        "-5% turns/s at 32 users in memory)."))
    lexical_in_memory_after_searches: int = Field(default=20, ge=1, description=(
        "A knowledge base's in-memory full-text index is built (on a background thread, ~0.1-0.4 s of CPU) "
        "once a process has searched it this many times: a short script or one-off command never pays for "
        "it; `bara serve` and interactive `bara chat` build it while warming up."))
    lexical_topk_min_chunks: int = Field(default=50_000, ge=0, description=(
        "SQLite: a knowledge base of at least this many chunks keeps its in-memory full-text index compact and "
        "persisted beside the file (<db>.lex/, labelled with the scope's write generations, so a restart maps "
        "it instead of rebuilding it) and ranks by MaxScore, an exact top-k that skips rows which cannot reach "
        "the best results: the same rows, scores and order as scoring every match (bara.store.lexical_topk). "
        "Smaller knowledge bases, every default evaluation among them, score every match. 0 turns it off."))
    lexical_memory_cache_scopes: int = Field(default=1024, ge=1, description=(
        "SQLite: how many users' memory scopes (a user's Q&A pairs, notes or episodes, as searched) keep their "
        "full-text lexicon in memory between searches, least recently searched dropped first. A memory search "
        "is scored over its own scope's statistics (bara.store.sqlite_scope_bm25), so that one user's rows "
        "never move another's ranking; a dropped scope is read again on its next search (~11 ms at 1,000 rows "
        "of 20-60 words, docs/benchmarks.md). The same default as the scopes' cached vectors "
        "(store_matrix_cache_scopes), whose scopes these are."))
    store_matrix_cache_scopes: int = Field(default=1024, ge=1, description=(
        "SQLite: how many search scopes' vectors a process keeps in memory between searches (the knowledge "
        "base is one scope; each user's Q&A, notes and episodes are one each), least recently searched "
        "dropped first: a server's memory no longer grows with every user it has served. A dropped "
        "scope is read again on its next search (~0.3 ms at 100 rows, ~2 ms at 1,000)."))
    store_integrity_check: str = Field(default="changed", pattern="^(changed|always)$", description=(
        "SQLite: when a writer runs quick_check (every page read once: ~minutes for a 5 GB store) before it "
        "writes. 'changed': unless the file and its WAL are exactly as a writer that passed the check left "
        "them at a clean close (size and nanosecond mtime in <db>.clean; a crash, an outside write or any "
        "other change checks again); 'always': on every open."))
    store_busy_timeout_s: float = Field(default=30.0, gt=0, le=3600, description=(
        "SQLite: how long a write waits for another process's write lock (a running ingest, chat or serve on "
        "the same file) before the command stops with 'busy' and says to retry; a document's transaction "
        "takes well under a second, so 30 s only runs out when another writer is stuck or long-running."))
    store_matrix_cache_mb: float = Field(default=512.0, gt=0, description=(
        "SQLite: at most this many MiB of cached scope vectors (each row ~1.6 KB at 384 dimensions, with "
        "its id and row index), least recently searched dropped first, whatever the scope count: a few "
        "thousand users with large tiers fit `store_matrix_cache_scopes` but not the memory. A single "
        "scope larger than the budget is still cached, alone (a 100,000-chunk knowledge base is ~160 MiB)."))
    # --- approximate dense search (SQLite; bara.store.sqlite_ann) ---
    store_ann_min_chunks: int = Field(default=100_000, ge=0, description=(
        "SQLite: a search scope of at least this many chunks is searched through an HNSW graph (usearch, "
        "int8, persisted beside the file) and its candidates scored exactly; smaller scopes, every default "
        "evaluation among them, stay exact float32 numpy, where one query over 100,000 rows is ~tens of ms. "
        "0 turns the graph off."))
    store_ann_min_user_chunks: int = Field(default=20_000, ge=0, description=(
        "SQLite: the same for a search of users' memory alone (a user's Q&A, notes or episodes): a tier this "
        "large gets its own persisted graph, so its first search in a process loads the graph instead of reading "
        "every vector (~180 ms at 20,000 rows before); smaller tiers, nearly all, stay exact. 0 turns it off."))
    store_ann_dtype: str = Field(default="i8", pattern="^(i8|f16|f32)$", description=(
        "How the graph stores vectors: int8 is 384 bytes a chunk (10^6 chunks ~0.6 GB with the graph) and only "
        "picks candidates, which are rescored from the stored float32 vectors (recall@10 in docs/scaling.md)."))
    store_ann_connectivity: int = Field(default=16, ge=4, le=64, description=(
        "HNSW neighbours per node (M): 16 is the usual balance of recall, memory and build time."))
    store_ann_expansion_add: int = Field(default=128, ge=16, description=(
        "HNSW candidate list while building (efConstruction): higher builds slower, a better graph."))
    store_ann_expansion_search: int = Field(default=2048, ge=8, description=(
        "HNSW candidate list while searching (ef), at least the candidates asked for. Graph-vs-exact recall@10 "
        "at 10^6 chunks (M 16): 0.925 at 256, 0.974 at 1,024, 0.98+ at 2,048 for a few ms a search "
        "(docs/scaling.md); only scopes past store_ann_min_chunks / store_ann_min_user_chunks use it."))
    store_ann_oversample: float = Field(default=2.0, ge=1.0, le=20.0, description=(
        "The graph returns this many times the dense arm's limit, rescored exactly, so that int8 rounding "
        "and graph misses at the boundary do not change the top of the ranking."))
    max_query_chars: int = Field(default=2000, ge=10,
                                 description="Longer queries are cut for retrieval (reason code query_truncated).")
    search_floor: float = Field(default=0.30, ge=-1.0, le=1.0,
                                description="Cosine floor for plain `bara search`; same as the KB route floor.")

    # --- reranking ---------------------------------------------------------
    rerank: bool = Field(default=False, description="Off by default: no cross-encoder weights ship with bara.")
    rerank_model: str = Field(default="cross-encoder/ms-marco-MiniLM-L-6-v2",
                              description="sentence-transformers CrossEncoder name or local path.")
    rerank_budget_ms: float = Field(default=60.0, gt=0,
                                    description="Latency cap; ~5 ms/pair on CPU means about 12 pairs.")
    rerank_ms_per_pair_estimate: float = Field(default=5.0, gt=0,
                                               description="Prior per-pair cost until one call is measured.")

    # --- route floors (gated pipeline) -------------------------------------
    # Ceiling: eval/floors.toml (`bara eval calibrate`, highest floor dropping <=5% of a route's relevant
    # hits on the MTRAG-UN dev tune half): kb 0.32, continuation 0.31, general 0.27. 0.28 is the lowest
    # floor that meets the pre-registered token target (<= 0.6x always on mixed whole conversations) on
    # the dev half (sha256-even conversations; q8 embedder): 0.15 -> 0.654x, 0.25 -> 0.618x, 0.28 -> 0.584x,
    # at Recall@5 0.842 -> 0.816 (always 0.764, last2 0.776). Report half at 0.28: 0.546x, R@5 0.809
    # (always 0.777, last2 0.781). docs/evaluation.md, round 2, has the sweep.
    floor_kb: float = Field(default=0.28, ge=-1.0, le=1.0, description="MiniLM cosine floor for knowledge-base hits: see the sweep "
                                              "above (what it costs in recall, what it saves in tokens).")
    floor_continuation: float = Field(default=0.28, ge=-1.0, le=1.0, description="Same embedder, same sweep as floor_kb: the topic "
                                                        "vector already carries the conversation.")
    floor_general: float = Field(default=0.28, ge=-1.0, le=1.0, description="Was 0.45 (copied from another embedder): it dropped "
                                                   "standalone turns' relevant hits (R@5 0.700 -> 0.510).")
    floor_qa: float = Field(default=0.65, ge=-1.0, le=1.0, description="Old answers are reused only when the question nearly repeats.")

    # --- gate: understand & decide (add gate thresholds below this line) ---
    gate_followup_threshold: float = Field(default=0.5, ge=0.0, le=1.0,
                                           description="Two weak structural cues (or one strong) mark a follow-up.")
    gate_prototype_min_similarity: float = Field(default=0.35, ge=-1.0, le=1.0,
                                                 description="Below this a prototype match is a guess (0.35 scored best on CLINC val).")
    gate_reduce_k_delta: int = Field(default=2, ge=0,
                                     description="Reduced turns (rapid fire) need a fact or two, not a survey.")
    gate_reduce_floor_delta: float = Field(default=0.10, ge=0.0, le=1.0,
                                           description="Reduced turns admit only clearly relevant chunks.")
    gate_boost_k_delta: int = Field(default=2, ge=0,
                                    description="Exploring or recovering from a miss deserves wider evidence.")
    gate_boost_floor_delta: float = Field(default=0.05, ge=0.0, le=1.0,
                                          description="Small: a lower floor past ~0.25 mostly admits noise.")
    gate_short_query_words: int = Field(default=4, ge=1,
                                        description="Queries this short carry little retrievable content.")
    gate_rapid_fire_streak: int = Field(default=3, ge=2,
                                        description="Three short queries in a row is a quick-lookup rhythm, not chance.")
    gate_repetition_similarity: float = Field(default=0.8, ge=0.0, le=1.0,
                                              description="Word-set Jaccard at which a query counts as asked again.")
    gate_topic_switch_similarity: float = Field(default=0.25, ge=-1.0, le=1.0,
                                                description="Cosine to the conversation topic below which a fresh question switches topic "
                                                            "(same calibration as gate_topic_standalone_similarity).")
    gate_exploratory_switches: int = Field(default=2, ge=1,
                                           description="Repeated topic switches mean browsing: widen retrieval.")
    gate_rewrite_in_conversation: bool = Field(default=True, description=(
        "Rewrite every searched message that has history: on MTRAG-UN dev the rewrite lifts Recall@5 "
        "0.815 -> 0.922, and most dependent questions carry no pronoun the follow-up score could see."))
    # Follow-ups whose earlier answers are themselves passages of the knowledge base (TREC CAsT 2022 dev half):
    gate_followup_reply_weight: float = Field(default=0.5, ge=0.0, le=4.0, description=(
        "Weight of the previous reply's vector in a dependent turn's search vector (beside the message and "
        "gate_followup_topic_weight x the topic) when the conversation's answers are knowledge hits verbatim "
        "(a searched turn of the window was answered with one of its hits): what the last answer was about is "
        "what a follow-up asks more of, and no user turn says it (CAsT 2022 dev half: 0.3 0.887, 0.4 0.907, "
        "0.5 0.907, 0.7 0.897, 1.0 0.881; on MTRAG-UN, whose answers are written, it cost 0.010). 0 = the "
        "user turns alone."))
    gate_followup_topic_weight: float = Field(default=0.1, ge=0.0, le=4.0, description=(
        "Weight of the user turns' topic vector in that same search vector (the one with the last reply; "
        "gate_topic_carry_weight elsewhere): the passage the user has just read says what the conversation is "
        "about now, the user turns' topic leans towards where it started. CAsT 2022 dev half, lexical 0.05: "
        "0.8 0.892, 0.4 0.902, 0.2 0.897, 0.1 0.907, 0 0.907; 0.1 is the best 3x3 neighbourhood mean."))
    gate_followup_weight_lexical: float = Field(default=0.05, ge=0.0, description=(
        "RRF weight of the full-text arm for that same follow-up: a tie-breaker. Its query is the rewrite, whose "
        "carried words name the topic every passage of the conversation shares, so it ranks what was already "
        "said and other branches of the topic; the dense arm reads the message and that passage (CAsT 2022 dev "
        "half, topic 0.1: 0.5 0.835, 0.2 0.876, 0.1 0.897, 0.05 0.907, 0 0.897; weight_lexical applies to "
        "every other search)."))
    gate_followup_identifier_lexical: bool = Field(default=True, description=(
        "A follow-up that names an identifier of its own (a token of letters and digits such as E1234 or IPv6, "
        "or a number of 3+ digits such as RFC 7231) keeps the full-text arm's usual weight even when the "
        "answers are passages: only that arm matches such a token exactly, and the reply's vector knows "
        "nothing of it (reason topic:names_identifier). False = gate_followup_weight_lexical always."))
    gate_kb_said_containment: float = Field(default=0.8, gt=0.0, le=1.0, description=(
        "A knowledge hit that shares at least this share of its distinct terms, and of the reply's, with one "
        "earlier reply of the window is that reply: it is dropped from a follow-up's hits, since the "
        "conversation already holds it and the follow-up asks for more (CAsT 2022 dev half: 0.8 dropped the "
        "earlier replies' own passages and nothing else; MTRAG-UN dev: no hit)."))
    gate_kb_said_spare: int = Field(default=4, ge=0, le=20, description=(
        "At most this many knowledge hits searched beyond k, one per earlier reply of the window that could "
        "repeat one, so that k remain after they are dropped (0 = never drop what the conversation said). 4: "
        "the replies pipeline_history_messages (8) holds; at 3 a follow-up after four passages kept 4 hits."))
    # How many knowledge passages a gated turn shows (bara.retrieval.agreement; MTRAG-UN dev tune half,
    # mixed whole conversations, docs/evaluation.md "An adaptive passage count"):
    gate_kb_agreement_ratio: float = Field(default=0.6, ge=0.0, le=1.0, description=(
        "Gated knowledge hits past the first gate_kb_agreement_keep whose fused RRF score is below this share of "
        "the best hit's are dropped (0 = off): with the best hit found by both arms, a hit only one arm returned "
        "scores at most ~0.5 of it. Tune half: 307 of 3,207 shown passages cut (-8.7% passage tokens), 2 of the "
        "49 cut on judged turns relevant, R@5 unchanged; 0.55-0.8 cut nearly the same hits (-7.7% to -8.9%), "
        "0.9 starts on hits both arms found (-12.7%)."))
    gate_kb_agreement_keep: int = Field(default=2, ge=1, le=100, description=(
        "The agreement cut never shows fewer than this many hits: keeping one cost 0.003 R@5 on the tune half "
        "(a second passage only one arm found is still often relevant), two cost nothing."))
    gate_kb_agreement_spare_lexical: int = Field(default=2, ge=0, le=100, description=(
        "The full-text arm's first N hits survive the agreement cut, as they survive the cosine floor "
        "(gate_kb_floor_spare_lexical): a chunk that arm ranks at the top has evidence of its own; without the "
        "spare the cut cost 0.003 R@5 on the tune half, with 2 nothing."))
    # What a gated turn's passages show (bara.text.compact; issue 35, docs/benchmarks.md "Passage markup"):
    gate_kb_compact_markup: bool = Field(default=True, description=(
        "Gated passages are shown without markdown image embeds, link targets (the visible text stays), "
        "blank-line runs and an opening line that repeats the heading: none of it is read by an answer, and "
        "URLs and hashes are dense in tokens (4.7% of the passages' characters on the MTRAG-UN e2e sample)."))
    gate_kb_overlap_min_chars: int = Field(default=80, ge=0, le=10_000, description=(
        "A gated passage loses an edge of at least this many characters that a passage shown before it in the "
        "same prompt also has (an overlapping chunker's repeat; 0 = off). Not tuned: 80 characters is more "
        "than a heading or a boilerplate phrase, and a longer exact repeat is repeated text whatever its source."))
    gate_lean_system_without_context: bool = Field(default=True, description=(
        "A gated turn that shows no context (no passages, memory or privacy listing: small talk, a skipped "
        "question) gets the short system text: the lines on citing passages and on data inside the context "
        "speak of frames it does not have (~60 of its ~125 fixed tokens)."))
    gate_notes_k: int = Field(default=3, ge=1,
                              description="Decisions/open questions are few; three notes cover a recap.")

    # --- memory & pipeline (add memory/pipeline settings below this line) ---
    memory_floor_notes: float = Field(default=0.30, ge=-1.0, le=1.0,
                                      description="Notes are one-sentence paraphrases: a recap query rarely "
                                                  "scores above 0.5 against the note it means.")
    memory_notes_concept_boost: float = Field(default=0.05, ge=0.0, le=1.0,
                                              description="Small nudge for a note naming a concept the query "
                                                          "names (TCP, 'retry budget'); similarity still rules.")
    memory_notes_kind_boost: float = Field(default=0.05, ge=0.0, le=1.0,
                                           description="Small nudge for the asked kind: 'what did we decide' "
                                                       "prefers decisions over hypotheses.")
    memory_qa_recency_half_life_s: float = Field(default=7 * 86400.0, gt=0,
                                                 description="A week: last week's answer is half as fresh; "
                                                             "facts in chats age in days, not hours.")
    memory_qa_recency_weight: float = Field(default=0.05, ge=0.0, le=1.0,
                                            description="Max recency bonus; below the similarity spread of "
                                                        "near-repeats, so it only breaks near-ties.")
    memory_qa_same_conversation_bonus: float = Field(default=0.05, ge=0.0, le=1.0,
                                                     description="An answer given in this conversation fits "
                                                                 "its context better than one from another.")

    # pipeline (bara/turn/gated.py)
    pipeline_history_messages: int = Field(default=8, ge=0,
                                           description="Last N messages shown to the generator (4 exchanges); "
                                                       "the always-mode baseline keeps the same window.")
    pipeline_context_budget_tokens: int = Field(default=3000, ge=200,
                                                description="Prompt budget (estimated tokens); history gives way "
                                                            "first. Leaves room for an answer in a 4k window.")

    # --- agent & llm (add agent/provider settings below this line) ---
    agent_gate_tools: bool = Field(default=True, description="Let bara's gate choose the tools offered per agent turn: "
                                                     "none for chit-chat, another user's data or off-topic "
                                                     "requests, so no model can call them there.")
    model: str = Field(default="", description="LLM as 'provider:name' (e.g. 'openai:gpt-4o-mini'); empty = no LLM, "
                                       "callers fall back to offline models. Env: BARA_MODEL.")
    llm_provider: str = Field(default="", pattern=r"^(|openai|anthropic)$",
                              description="'openai' (any Chat Completions server) or 'anthropic'; empty = "
                                          "the model's prefix, else claude-* means anthropic.")
    llm_base_url: str = Field(default="", description="Empty = the provider's public API; set it for vLLM, Ollama or "
                                              "llama.cpp (e.g. http://127.0.0.1:11434/v1).")
    llm_api_key_env: str = Field(default="", description="Name of the env variable holding the API key (default "
                                                 "OPENAI_API_KEY / ANTHROPIC_API_KEY); keys never live in settings.")
    llm_timeout_s: float = Field(default=60.0, gt=0, description="One HTTP attempt; a tool-call turn on a slow "
                                                         "local model can take tens of seconds.")
    llm_max_retries: int = Field(default=3, ge=0, le=10, description="Retries on 429/5xx/connection errors: rides out "
                                                             "brief rate limits without hiding an outage.")
    llm_backoff_s: float = Field(default=0.5, ge=0, description="First retry delay; doubles per retry with jitter "
                                                        "(unless the provider sends Retry-After).")
    llm_backoff_max_s: float = Field(default=8.0, ge=0, description="Cap on one computed retry delay.")
    llm_max_tokens: int = Field(default=1024, ge=1, description="Answer cap Anthropic requires; ~750 words is ample "
                                                        "for a chat turn. Sent to OpenAI-compatible servers only with llm_send_max_tokens.")
    agent_max_iterations: int = Field(default=6, ge=1, le=50, description="Model calls offered tools per agent run; "
                                                                 "bounds search spirals, then one tool-less wrap-up.")
    agent_max_tool_calls: int = Field(default=30, ge=1, le=500, description="Tool calls one agent run executes "
                                      "across all rounds: one reply listing hundreds of (identical) parallel calls "
                                      "cannot flood the transcript; 6 tools x 5 leaves room for real work.")
    agent_deadline_s: float = Field(default=60.0, gt=0, description="Wall-clock budget of one agent run, shared by "
                                                            "model calls and tools.")

    # --- postgres ---
    pg_embedding_dim: int = Field(default=384, ge=1, le=2000,
                                  description="vector(d) column size, fixed when the schema is created: "
                                              "384 = MiniLM. HNSW indexes at most 2000 dimensions.")
    pg_schema: str = Field(default="", description="Schema holding bara's tables; empty = the role's search_path "
                                          "(public). One schema per bara deployment sharing a database.")
    pg_admin_url: str = Field(default="", description="URL of the role that owns the tables, used only to migrate; "
                                             "empty = migrate with --db itself (single-role setups).")
    pg_app_role: str = Field(default="", description="Role granted row access after migrating (no ownership, so "
                                            "row-level security binds it); empty = grant nothing.")
    pg_pool_size: int = Field(default=8, ge=1, le=200, description="Connections per process; a turn uses one at a time.")
    pg_pool_timeout_s: float = Field(default=5.0, gt=0, le=600, description=(
        "How long a request waits for a pooled PostgreSQL connection (all in use, or the server down) before "
        "it is refused as store_busy / store_unavailable (503 with Retry-After) instead of hanging."))
    pg_local_shared_buffers_mb: int = Field(default=0, ge=0, le=2**20, description=(
        "shared_buffers (MiB) of the server `bara db start` runs; 0 = pg_local_ram_fraction of this machine's "
        "memory (its cgroup limit if lower), within 128 (PostgreSQL's default) .. pg_local_shared_buffers_max_mb. "
        "A search at 10^6 chunks reads up to 5,000 candidate rows of a 1.8 GB heap; bara/store/pg_tuning.py."))
    pg_local_ram_fraction: float = Field(default=0.25, gt=0, le=0.8, description=(
        "Share of memory the automatic shared_buffers takes: PostgreSQL's documented starting value for a "
        "machine of 1 GB or more is 25 %; the rest stays with the OS cache and bara's own process."))
    pg_local_shared_buffers_max_mb: int = Field(default=8192, ge=128, le=2**20, description=(
        "Cap of the automatic shared_buffers: 8 GiB holds a 10^6-chunk store's heap and indexes (4.2 GB) "
        "with room, without taking a large machine's memory from everything else."))
    pg_local_prewarm: bool = Field(default=True, description=(
        "Load pg_prewarm in the server `bara db start` runs: its autoprewarm worker saves the buffered block "
        "list every 300 s and at shutdown and reads it back after a start, so a restart keeps the warm buffers."))
    pg_local_prewarm_wait_s: float = Field(default=60.0, ge=0, le=3600, description=(
        "How long `bara db start` waits, after it started the server, for the saved blocks to load (4.2 GB "
        "from the OS cache took ~3 s); after that the loading goes on in the background."))
    pg_lexical_rank: str = Field(default="ts_rank_log", pattern="^(ts_rank|ts_rank_cd|ts_rank_log)$", description=(
        "Rank function of the PostgreSQL full-text arm: ts_rank_log (ts_rank divided by 1 + log(length), chosen "
        "on SciFact's dev half), ts_rank (lexeme weights and counts; a few us a matching row, like ts_rank_log) "
        "or ts_rank_cd (cover density, the first choice: several times the cost and ranks SciFact worse); "
        "docs/postgres.md."))
    pg_lexical_bounded_min_rows: int = Field(default=20_000, ge=0, le=10**12, description=(
        "Rows in a search's scope (its collections, every owner in it) from which the PostgreSQL full-text arm "
        "ranks only the rows of the query's rarest terms (pg_lexical_candidates) instead of every matching row; "
        "0 = always exact. Every evaluation tier is below it (SciFact 5,183, RFC 8,243); bara/store/pg_lexical.py."))
    pg_lexical_candidates: int = Field(default=5000, ge=1, le=10_000_000, description=(
        "The bounded full-text arm's candidate budget: the rarest query terms whose document frequencies add "
        "up to at most this many rows (and at least the rarest term) are matched, and those rows ranked by "
        "pg_lexical_rank over the whole query. 5,000: of the budgets measured at 10^5 chunks (500-5,000), the "
        "only one whose fused top 10 kept >= 0.90 of the exact arm's; docs/benchmarks.md."))
    pg_lexical_terms_min_rows: int = Field(default=1000, ge=0, le=10**12, description=(
        "Rows of a scope (one owner's collection) from which PostgreSQL keeps its per-term document frequencies "
        "for the bounded full-text arm; a smaller scope keeps its row count only (a turn's Q&A or episodic write "
        "is then one upsert, not one per lexeme) and a bounded search counts its terms from its rows. The write "
        "that crosses it counts the scope's terms once. 0 = every scope; bara/store/pg_lexical.py. A user's scope below "
        "it also keeps its vectors out of the HNSW graph (exact distance; bara/store/pg_flat.py)."))
    pg_private_exact_max: int = Field(default=2000, ge=1, le=10_000_000, description=(
        "A user's rows (in the searched collections) up to which the PostgreSQL dense arm ranks them by exact "
        "distance; from this size on it uses the HNSW index (iterative scan, exact pass if it returns too few)."))
    pg_ef_search: int = Field(default=100, ge=10, le=1000,
                              description="HNSW candidate list; pgvector's 40 loses recall at k*3 = 12+ "
                                          "candidates, 100 keeps p50 ~1 ms at 100k chunks.")
