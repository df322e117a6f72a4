"""Norms and cosines of one or two small vectors (a query's 384 floats) in as few numpy calls as
possible, with the same values as the usual spelling.

A gated turn computes a handful of them right after its query is encoded, when the interpreter's and
numpy's own code have just been pushed out of the CPU caches by the encoder, and each numpy call
costs 5-10 µs instead of 1. For a 1-D real vector ``np.linalg.norm`` is
``sqrt(x.dot(x))`` (numpy's own fast path for that case); :func:`norm` computes exactly that
without the argument handling around it, so results are equal bit for bit (tested).
"""

from __future__ import annotations

from typing import Any

import numpy as np


def as_f32(vector: Any) -> np.ndarray:
    """``np.asarray(vector, dtype=np.float32).ravel()``: the vector itself when it is one already."""
    if type(vector) is np.ndarray and vector.ndim == 1 and vector.dtype == np.float32:
        return vector
    return np.asarray(vector, dtype=np.float32).ravel()


def norm(vec: np.ndarray) -> np.floating:
    """``np.linalg.norm(vec)`` of a 1-D real vector, the same value: the root of its dot with itself."""
    return np.sqrt(vec.dot(vec))
