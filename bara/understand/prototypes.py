"""Labelled prototype vectors for the embedding fallback of intent classification.

The index ships as package data (``bara/understand/data/prototypes.npz``) so the
gate never needs the training data at run time. It is built offline by
``scripts/build_prototypes.py``; the vectors are only meaningful for messages
embedded with the same embedder, whose name the file records.
"""

from __future__ import annotations

import io
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from bara.errors import BaraError, ConfigError
from bara.text.vecmath import as_f32

PACKAGED_NAME = "prototypes.npz"
FORMAT_VERSION = 1


@dataclass(frozen=True, eq=False)
class PrototypeIndex:
    """Unit vectors with one label each; ``nearest`` is a cosine 1-NN lookup."""

    vectors: np.ndarray  # (n, d) float32, rows L2-normalised
    labels: tuple[str, ...]
    embedder: str = ""
    method: str = ""

    def __post_init__(self) -> None:
        if self.vectors.ndim != 2 or self.vectors.shape[0] != len(self.labels) or not self.labels:
            raise ConfigError("prototype index needs one label per vector and at least one vector")

    @classmethod
    def from_arrays(cls, vectors: np.ndarray, labels: tuple[str, ...] | list[str],
                    embedder: str = "", method: str = "") -> "PrototypeIndex":
        """Normalise a copy of ``vectors`` (never the caller's array) and wrap it."""
        vecs = np.array(vectors, dtype=np.float32, copy=True)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs /= np.where(norms == 0.0, 1.0, norms)
        vecs.setflags(write=False)
        return cls(vecs, tuple(labels), embedder, method)

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    @property
    def label_set(self) -> frozenset[str]:
        return frozenset(self.labels)

    def accepts(self, vector: np.ndarray | None) -> bool:
        """True when ``vector`` is a finite, non-zero vector of this index's dimension."""
        if vector is None:
            return False
        vec = np.asarray(vector).ravel()
        return vec.shape[0] == self.dim and bool(np.all(np.isfinite(vec))) and bool(np.any(vec))

    def nearest(self, vector: np.ndarray) -> tuple[str, float]:
        """Label and cosine similarity of the closest prototype."""
        vec = np.asarray(vector, dtype=np.float32).ravel()
        if vec.shape[0] != self.dim:
            raise ValueError(f"vector has {vec.shape[0]} dims, prototypes have {self.dim}")
        sims = self.vectors @ (vec / (np.linalg.norm(vec) or 1.0))
        best = int(np.argmax(sims))
        return self.labels[best], float(sims[best])

    def nearest_accepted(self, vector: np.ndarray | None) -> tuple[str, float] | None:
        """``nearest(vector)`` when ``accepts(vector)``, else None, in four numpy calls instead of a
        dozen (it runs on most searching turns right after the encoding). A finite, non-zero
        vector has a finite, positive dot with itself; only when that dot is not (an overflow, an
        underflow) are the two methods asked, so the answer is theirs in every case (tested)."""
        if vector is None:
            return None
        vec = as_f32(vector)
        if vec.shape[0] != self.dim:
            return None
        square = vec.dot(vec)
        if not 0.0 < square < math.inf:
            return self.nearest(vec) if self.accepts(vector) else None
        sims = self.vectors @ (vec / np.sqrt(square))  # nearest's own division: np.linalg.norm is this root
        best = int(sims.argmax())
        return self.labels[best], float(sims[best])

    def to_bytes(self) -> bytes:
        """Compressed npz (float16 vectors) small enough to ship inside the wheel."""
        meta = json.dumps({"version": FORMAT_VERSION, "embedder": self.embedder, "method": self.method})
        buf = io.BytesIO()
        np.savez_compressed(buf, vectors=self.vectors.astype(np.float16),
                            labels=np.array(self.labels, dtype=str), meta=np.array(meta))
        return buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> "PrototypeIndex":
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                meta = json.loads(str(npz["meta"]))
                return cls.from_arrays(npz["vectors"], [str(x) for x in npz["labels"]],
                                       meta.get("embedder", ""), meta.get("method", ""))
        except (OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"prototype file is unreadable ({exc}); rebuild it with "
                              "scripts/build_prototypes.py") from exc


def load_prototypes(path: str | Path | None = None) -> PrototypeIndex:
    """Load the packaged index, or the npz at ``path`` (e.g. a freshly built one)."""
    try:
        if path is not None:
            data = Path(path).read_bytes()
        else:
            data = (resources.files("bara.understand") / "data" / PACKAGED_NAME).read_bytes()
    except OSError as exc:
        raise ConfigError(f"no prototype file ({exc}); build it with scripts/build_prototypes.py") from exc
    return PrototypeIndex.from_bytes(data)


def prototypes_for(embedder: object) -> tuple[PrototypeIndex | None, str]:
    """The one loader every gate uses: the shipped index when it was built with ``embedder``.

    Otherwise ``None`` and the reason code the pipeline records (the gate then runs on rules alone):
    ``gate:prototypes_unavailable`` (no file, or no embedder) or ``gate:prototypes_off_embedder_mismatch``.
    """
    if embedder is None:
        return None, "gate:prototypes_unavailable"
    try:
        index = load_prototypes()
    except BaraError:
        return None, "gate:prototypes_unavailable"
    if index.embedder != getattr(embedder, "model_id", ""):
        return None, "gate:prototypes_off_embedder_mismatch"
    return index, ""
