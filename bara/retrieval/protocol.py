"""The Embedder protocol: what the store, the retriever and the embedding cache need from a model.

Its own module so the cache (embed_cache) and the concrete embedders (embedders) both depend on it
without depending on each other.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    """What the store and retriever need: a model id, a width, and unit vectors."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim) with L2-normalised rows."""
        ...
