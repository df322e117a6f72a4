# `make eval`: the full dev evaluation on the shared data; writes docs/eval/report.md and its plots.
# Included by the top-level Makefile (`include eval/eval.mk`); uses its DATA, BIN and STAMP.
# Criteria are pre-registered in eval/preregistered.toml (commit it before running).
# `eval ab` is resumable: rows land in $(EVAL_DIR)/ab_rows.jsonl and a rerun skips finished ones.
EVAL_DIR ?= docs/eval
EVAL_TASKS ?= $(DATA)/mtrag/tasks.dev.jsonl
EVAL_CORPUS ?= $(DATA)/mtrag/corpus.jsonl
EVAL_BFCL ?= $(DATA)/bfcl/BFCL_v4_multiple.jsonl $(DATA)/bfcl/BFCL_v4_irrelevance.jsonl

.PHONY: eval eval-ab eval-gate eval-tools eval-report

eval: eval-ab eval-gate eval-tools eval-report

eval-ab: $(STAMP)
	mkdir -p $(EVAL_DIR)
	$(BIN)/bara eval ab --tasks $(EVAL_TASKS) --corpus $(EVAL_CORPUS) --modes always,gated --k 4 \
		--report $(EVAL_DIR)

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

eval-report: $(STAMP)
	$(BIN)/bara eval report $(EVAL_DIR)
