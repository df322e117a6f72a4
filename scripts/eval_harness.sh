#!/usr/bin/env bash
# The evaluation harness of the checkout in $PWD, written to folder $1: golden, gate (CLINC150, MTRAG),
# tools (BFCL and its tuning files), A/B final and mixed (with every row file), SciFact, LoCoMo and
# every rewrite set, one JSON per figure set. Run it on two commits and compare the folders with
# scripts/eval_compare.py (or `make eval-same BASE=<commit>`): a refactor must give SAME everywhere.
# Usage: scripts/eval_harness.sh OUT   (PYTHON: the interpreter, default .venv/bin/python;
#        BARA_DATA: the shared data, default ../shared/data). A step that fails is reported and the
#        rest still run; its JSON is then missing or empty, which the comparison reports.
set -euo pipefail
OUT=$1; mkdir -p "$OUT"
D=${BARA_DATA:-$PWD/../shared/data}
PY=${PYTHON:-$PWD/.venv/bin/python}
B="env PYTHONPATH=$PWD BARA_DATA=$D HF_HUB_OFFLINE=1 $PY -m bara"
T=$D/mtrag/tasks.dev.jsonl; C=$D/mtrag/corpus.jsonl
t() { local name=$1; shift; local s=$(date +%s); "$@" > "$OUT/$name.json" 2> "$OUT/$name.err" || { echo "FAIL $name"; return 0; }; echo "$name $(( $(date +%s)-s ))s"; }
[ -f "$OUT/funds.db" ] || $B funds load --db "$OUT/funds.db" --json > "$OUT/funds_load.json" 2> "$OUT/funds_load.err"
t golden $B eval golden --db "$OUT/funds.db" --json || true
t gate_clinc $B eval gate --data $D/clinc150/val.jsonl --json
t gate_mtrag $B eval gate --data $T --json
t tools $B eval tools --bfcl $D/bfcl/BFCL_v4_multiple.jsonl --bfcl $D/bfcl/BFCL_v4_irrelevance.jsonl --json
t tools_tuning $B eval tools --bfcl $D/bfcl/BFCL_v4_simple_python.jsonl --bfcl $D/bfcl/BFCL_v4_parallel_multiple.jsonl --json
t ab_final $B eval ab --tasks $T --corpus $C --modes always,gated,last2 --k 4 --report $OUT/ab_final --json
t ab_mixed $B eval ab --tasks $T --corpus $C --modes always,gated,last2 --k 4 --turns all --mix-smalltalk $D/clinc150/val.jsonl --mix-domains $D/clinc150/domains.json --mix-rate 0.3 --seed 20261130 --prereg eval/preregistered_round2.toml --report $OUT/ab_mixed --json
t scifact $B eval retrieval --corpus $D/scifact/corpus.jsonl.gz --queries $D/scifact/queries.train.jsonl --qrels $D/scifact/qrels/train.tsv --arms bm25,dense,hybrid --json
t locomo $B eval memory --locomo $D/locomo/conv-*.json --json
for s in cast2019 cast2020 cast2022 canard_dev; do
  c=""; [ -f $D/rewrite/$s.corpus.jsonl ] && c="--corpus $D/rewrite/$s.corpus.jsonl"
  t rewrite_$s $B eval rewrite --conversations $D/rewrite/$s.jsonl $c --k 5 --json
done
