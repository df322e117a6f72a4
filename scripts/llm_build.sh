#!/usr/bin/env bash
# Build llama-cpp-python from its PyPI sdist once per machine (CPU) and Python into a cache folder.
# GGML_NATIVE=ON compiles for THIS CPU's instruction set (e.g. AVX-512), so the cache key holds the
# CPU model and flags: a machine with another CPU (an AVX2-only CI runner) gets its own build.
# Prints the path of the wheel. Usage: scripts/llm_build.sh PYTHON VERSION [CACHE_DIR]
set -euo pipefail
PY=${1:?python}
VER=${2:?llama-cpp-python version}
CACHE=${3:-${XDG_CACHE_HOME:-$HOME/.cache}/bara/llm}
CPU_ID=$( (grep -m1 '^model name' /proc/cpuinfo; grep -m1 '^flags' /proc/cpuinfo; uname -m) 2>/dev/null | sha256sum | cut -c1-12)
PY_TAG=$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')
DEST="$CACHE/wheels/$VER-$PY_TAG-$CPU_ID"
shopt -s nullglob
found=("$DEST"/llama_cpp_python-"$VER"-*.whl)
if [ ${#found[@]} -gt 0 ]; then echo "${found[0]}"; exit 0; fi
mkdir -p "$DEST" "$CACHE/sdist"
# A name without wildcards is not a glob: nullglob leaves it in place even when the file is absent,
# so the test is on the file itself.
sdist="$CACHE/sdist/llama_cpp_python-$VER.tar.gz"
if [ ! -s "$sdist" ]; then
  "$PY" -m pip download -q --disable-pip-version-check --no-deps --no-binary :all: \
    "llama-cpp-python==$VER" -d "$CACHE/sdist" >&2
fi
echo "building llama-cpp-python $VER for this CPU ($CPU_ID) into $DEST (~10+ min on 2 cores)" >&2
CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF" \
CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
  "$PY" -m pip wheel -q --disable-pip-version-check --no-deps "$sdist" -w "$DEST.tmp" >&2
mv "$DEST.tmp"/llama_cpp_python-*.whl "$DEST"/ && rmdir "$DEST.tmp"
found=("$DEST"/llama_cpp_python-"$VER"-*.whl)
echo "${found[0]}"
