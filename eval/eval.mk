# `make eval`: the full dev evaluation on the shared data; writes docs/eval/report.md and its plots.
# Included by the top-level Makefile (`include eval/eval.mk`); uses its DATA, BIN and STAMP.
# Criteria are pre-registered in eval/preregistered.toml (round 1) and eval/preregistered_round2.toml
# (round 2: whole conversations with mixed small talk); commit a registration before running.
# `eval ab` is resumable: rows land in $(EVAL_DIR)/ab_rows.jsonl and a rerun skips finished ones.
EVAL_DIR ?= docs/eval
EVAL_TASKS ?= $(DATA)/mtrag/tasks.dev.jsonl
EVAL_CORPUS ?= $(DATA)/mtrag/corpus.jsonl
EVAL_BFCL ?= $(DATA)/bfcl/BFCL_v4_multiple.jsonl $(DATA)/bfcl/BFCL_v4_irrelevance.jsonl
# Tuning data for the router's tool fit (issue 13), reported apart: every abstention is a false one.
EVAL_BFCL_TUNING ?= $(DATA)/bfcl/BFCL_v4_simple_python.jsonl $(DATA)/bfcl/BFCL_v4_parallel_multiple.jsonl
# Round 2: small talk inserted into whole conversations (dev: CLINC150 val), seed and rate as registered.
EVAL_SMALLTALK ?= $(DATA)/clinc150/val.jsonl
EVAL_DOMAINS ?= $(DATA)/clinc150/domains.json
EVAL_MIX_RATE ?= 0.3
EVAL_MIX_SEED ?= 20261130

# Issue 31: follow-up rewrites against human rewrites (TREC CAsT 2019/2020/2022, CANARD dev).
EVAL_REWRITE ?= $(DATA)/rewrite
EVAL_REWRITE_SETS ?= cast2019 cast2020 cast2022 canard_dev

.PHONY: eval eval-ab eval-mixed eval-gate eval-tools eval-calibrate eval-report eval-rewrite eval-same

# Runtime on 2 shared cores (corpus index and embedding cache warm): see docs/evaluation.md, round 2.
eval: eval-ab eval-mixed eval-gate eval-tools eval-calibrate eval-rewrite eval-report

eval-ab: $(STAMP)
	mkdir -p $(EVAL_DIR)
	$(BIN)/bara eval ab --tasks $(EVAL_TASKS) --corpus $(EVAL_CORPUS) --modes always,gated,last2 --k 4 \
		--report $(EVAL_DIR)

# Every user turn of every conversation, 30% of them inserted small talk; judged by the round-2 registration.
eval-mixed: $(STAMP)
	mkdir -p $(EVAL_DIR)/mixed
	$(BIN)/bara eval ab --tasks $(EVAL_TASKS) --corpus $(EVAL_CORPUS) --modes always,gated,last2 --k 4 \
		--turns all --mix-smalltalk $(EVAL_SMALLTALK) --mix-domains $(EVAL_DOMAINS) \
		--mix-rate $(EVAL_MIX_RATE) --seed $(EVAL_MIX_SEED) --prereg eval/preregistered_round2.toml \
		--report $(EVAL_DIR)/mixed

# Per-route floors from dev data (tuned on half the conversations, reported on the other half).
eval-calibrate: $(STAMP)
	mkdir -p $(EVAL_DIR)
	$(BIN)/bara eval calibrate --tasks $(EVAL_TASKS) --corpus $(EVAL_CORPUS) --k 4 --out eval/floors.toml \
		--json > $(EVAL_DIR)/calibrate.json.tmp
	mv $(EVAL_DIR)/calibrate.json.tmp $(EVAL_DIR)/calibrate.json

eval-gate: $(STAMP)
	mkdir -p $(EVAL_DIR)
	$(BIN)/bara eval gate --data $(DATA)/clinc150/val.jsonl --json > $(EVAL_DIR)/gate_clinc150.json.tmp
	mv $(EVAL_DIR)/gate_clinc150.json.tmp $(EVAL_DIR)/gate_clinc150.json
	$(BIN)/bara eval gate --data $(EVAL_TASKS) --json > $(EVAL_DIR)/gate_mtrag.json.tmp
	mv $(EVAL_DIR)/gate_mtrag.json.tmp $(EVAL_DIR)/gate_mtrag.json

eval-tools: $(STAMP)
	mkdir -p $(EVAL_DIR)
	$(BIN)/bara eval tools $(addprefix --bfcl ,$(EVAL_BFCL)) --json > $(EVAL_DIR)/tools_bfcl.json.tmp
	mv $(EVAL_DIR)/tools_bfcl.json.tmp $(EVAL_DIR)/tools_bfcl.json
	$(BIN)/bara eval tools $(addprefix --bfcl ,$(EVAL_BFCL_TUNING)) --json > $(EVAL_DIR)/tools_bfcl_tuning.json.tmp
	mv $(EVAL_DIR)/tools_bfcl_tuning.json.tmp $(EVAL_DIR)/tools_bfcl_tuning.json

eval-report: $(STAMP)
	$(BIN)/bara eval report $(EVAL_DIR)

# Each shared rewrite set replayed through the gated pipeline (both halves); a set with a pooled corpus
# (<set>.corpus.jsonl) also gets Recall@5. One JSON object per set, without the per-turn rows.
eval-rewrite: $(STAMP)
	mkdir -p $(EVAL_DIR)/rewrite
	for set in $(EVAL_REWRITE_SETS); do \
		corpus=""; [ -f $(EVAL_REWRITE)/$$set.corpus.jsonl ] && corpus="--corpus $(EVAL_REWRITE)/$$set.corpus.jsonl"; \
		$(BIN)/bara eval rewrite --conversations $(EVAL_REWRITE)/$$set.jsonl $$corpus --k 5 --json \
			> $(EVAL_DIR)/rewrite/$$set.json.tmp || exit 1; \
	done
	$(BIN)/python -c 'import json, sys; d, sets = sys.argv[1], sys.argv[2:]; \
		out = {s: {k: v for k, v in json.load(open(f"{d}/rewrite/{s}.json.tmp")).items() if k != "turns"} for s in sets}; \
		json.dump(out, open(f"{d}/rewrite.json", "w"), indent=1, sort_keys=True)' $(EVAL_DIR) $(EVAL_REWRITE_SETS)
	rm -rf $(EVAL_DIR)/rewrite

# The harness on BASE (a commit, in a temporary worktree) and on this checkout, compared figure by
# figure: a change meant to keep behaviour (a refactor, a move) must print SAME for every file.
# `make eval-same BASE=main~1` (the folders stay under $(EVAL_SAME_DIR) for a second look).
EVAL_SAME_DIR ?= .eval-same
eval-same: $(STAMP)
	@test -n "$(BASE)" || { echo "error: set BASE=<commit> (e.g. make eval-same BASE=main~1)"; exit 2; }
	rm -rf $(EVAL_SAME_DIR)/base-tree && git worktree add -q --detach $(EVAL_SAME_DIR)/base-tree $(BASE)
	cd $(EVAL_SAME_DIR)/base-tree && PYTHON=$(CURDIR)/$(BIN)/python BARA_DATA=$(abspath $(DATA)) \
		bash $(CURDIR)/scripts/eval_harness.sh $(CURDIR)/$(EVAL_SAME_DIR)/base
	PYTHON=$(CURDIR)/$(BIN)/python BARA_DATA=$(abspath $(DATA)) bash scripts/eval_harness.sh $(EVAL_SAME_DIR)/head
	git worktree remove --force $(EVAL_SAME_DIR)/base-tree
	$(BIN)/python scripts/eval_compare.py $(EVAL_SAME_DIR)/base $(EVAL_SAME_DIR)/head
