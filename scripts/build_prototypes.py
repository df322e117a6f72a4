"""Build bara/understand/data/prototypes.npz, the gate's embedding fallback.

Sources: CLINC150 *train* split (small_talk and meta domains become chit-chat
labels, a per-intent sample of the other eight domains becomes "general") plus
a few dozen hand-written knowledge, profile, privacy and testing examples.
CLINC150 *val* is used only to compare prototype layouts and report accuracy;
nothing is fitted on it.

Usage:  python scripts/build_prototypes.py [--data ../shared/data] [--method auto] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bara.settings import Settings
from bara.understand.prototypes import PrototypeIndex

OUT = Path(__file__).resolve().parent.parent / "bara" / "understand" / "data" / "prototypes.npz"
MAX_BYTES = 2_000_000
SEED = 7
GENERAL_PER_INTENT = 40  # sample of task intents: enough to cover phrasing, not to swamp chit-chat
MEDOIDS_PER_LABEL = 3
SAMPLE_PER_LABEL = 8
LAYOUTS = ("label_centroid", "intent_centroid", "medoids", "sample")

#: CLINC intent -> gate label for the chit-chat domains (everything else -> "general").
CLINC_LABELS = {
    "greeting": "chitchat:greeting", "thank_you": "chitchat:thanks", "goodbye": "chitchat:goodbye",
    "yes": "chitchat:acknowledgement", "no": "chitchat:acknowledgement",
    "maybe": "chitchat:acknowledgement", "cancel": "chitchat:acknowledgement",
    "user_name": "profile", "change_user_name": "profile",
}
CHITCHAT_DOMAINS = ("small_talk", "meta")

HAND_WRITTEN = {
    "knowledge_base": [
        "what is the difference between tcp and udp", "how does the tls handshake work",
        "explain how dns resolution works", "what does http status code 404 mean",
        "which rfc defines http/2", "how are jwt tokens signed", "what is a cidr block",
        "describe the oauth 2.0 authorization code flow", "what port does smtp use",
        "how does bgp choose a route", "what is the purpose of the ttl field in an ip header",
        "according to the spec, how long can a uri be", "define idempotent method in http",
        "how do websockets upgrade from http", "what is forward secrecy",
        "what fields are in a uuid", "how does base64 encoding work",
        "what is the maximum size of a udp datagram", "how does ntp synchronise clocks",
        "what does the hsts header do", "what are the phases of dhcp",
        "how does sctp differ from tcp", "what is a certificate chain",
        "why does tcp use a three way handshake", "what is head of line blocking",
        "explain cookie same site attributes", "what does the documentation say about retries",
        "what are the main causes of inflation", "how do vaccines train the immune system",
        "what is a mutual fund expense ratio", "who wrote the declaration of independence",
        "how does photosynthesis work", "summarize the key points of the report",
        "what is the capital gains tax rate on index funds",
    ],
    "profile": [
        "call me sam", "my name is priya", "i prefer short answers", "i'm a backend developer",
        "i work at a bank", "i like detailed explanations with examples", "i live in berlin",
        "please remember that i use python", "my role is site reliability engineer",
        "i am a beginner at networking", "i'd rather you answer in bullet points",
        "my favourite language is rust", "what's my name", "do you remember my name",
        "what do i prefer", "what are my preferences", "who am i", "what is my job",
        "do you know what i do for a living", "what did i tell you about myself",
        "i'm a student studying computer science", "i hate long answers",
    ],
    "privacy": [
        "what do you know about me", "what have you stored about me", "forget everything about me",
        "delete my data", "please erase my profile", "remove my personal information",
        "don't remember this conversation", "wipe my history", "what data do you keep on me",
        "i want you to forget my name", "clear all my details", "can you delete what you know about me",
        "stop storing my information", "show me the data you have about me",
        "how do you use my personal data", "forget what i told you earlier",
        "i want my information removed", "do you keep records of our chats",
    ],
    "chitchat:testing": [
        "test", "testing", "testing 123", "is this thing on", "are you there", "are you working",
        "can you hear me", "ping", "asdf", "just testing", "hello? anyone there",
        "this is a test message", "check check", "test test test",
    ],
}


def data_dir(arg: str | None) -> Path:
    return Path(arg or os.environ.get("BARA_DATA") or Settings().data_dir)


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def chitchat_intents(root: Path) -> set[str]:
    domains = json.loads((root / "clinc150" / "domains.json").read_text(encoding="utf-8"))
    return {intent for d in CHITCHAT_DOMAINS for intent in domains[d]}


def gate_label(intent: str, chitchat: set[str]) -> str:
    if intent in CLINC_LABELS:
        return CLINC_LABELS[intent]
    return "chitchat:meta" if intent in chitchat else "general"


def training_rows(root: Path, chitchat: set[str]) -> list[tuple[str, str, str]]:
    """(text, fine label, gate label): all chit-chat, a sample of each task intent, hand-written."""
    rng = np.random.default_rng(SEED)
    by_intent: dict[str, list[str]] = {}
    for row in read_jsonl(root / "clinc150" / "train.jsonl"):
        by_intent.setdefault(row["intent"], []).append(row["text"])
    rows = []
    for intent in sorted(by_intent):
        texts = by_intent[intent]
        if intent not in chitchat:
            keep = rng.choice(len(texts), size=min(GENERAL_PER_INTENT, len(texts)), replace=False)
            texts = [texts[i] for i in sorted(keep)]
        rows += [(t, intent, gate_label(intent, chitchat)) for t in texts]
    rows += [(t, f"hand:{label}", label) for label, texts in HAND_WRITTEN.items() for t in texts]
    return rows


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def kmeans_medoids(vecs: np.ndarray, m: int, rng: np.random.Generator) -> np.ndarray:
    """Indices of ``m`` medoid-like rows: spherical k-means, then the row nearest each centre."""
    if len(vecs) <= m:
        return np.arange(len(vecs))
    centres = vecs[rng.choice(len(vecs), size=m, replace=False)]
    for _ in range(20):
        assign = np.argmax(vecs @ centres.T, axis=1)
        centres = np.stack([_unit(vecs[assign == j].mean(0)) if np.any(assign == j) else centres[j]
                            for j in range(m)])
    return np.unique(np.argmax(vecs @ centres.T, axis=0))


def layout(method: str, vecs: np.ndarray, fine: list[str], gate: list[str]) -> tuple[np.ndarray, list[str]]:
    """Prototype vectors and gate labels for one of the candidate layouts."""
    rng = np.random.default_rng(SEED)
    keys = gate if method == "label_centroid" else fine
    out_v, out_l = [], []
    for key in sorted(set(keys)):
        idx = np.array([i for i, k in enumerate(keys) if k == key])
        label = gate[idx[0]]
        if method in ("label_centroid", "intent_centroid"):
            out_v.append(_unit(vecs[idx].mean(0)))
            out_l.append(label)
            continue
        m = MEDOIDS_PER_LABEL if method == "medoids" else SAMPLE_PER_LABEL
        pick = kmeans_medoids(vecs[idx], m, rng) if method == "medoids" else \
            rng.choice(len(idx), size=min(m, len(idx)), replace=False)
        out_v += list(vecs[idx[pick]])
        out_l += [label] * len(pick)
    return np.stack(out_v).astype(np.float32), out_l


def evaluate(index: PrototypeIndex, vecs: np.ndarray, truth_chitchat: list[bool],
             floor: float) -> dict[str, float]:
    """Chit-chat-vs-not accuracy of the prototype alone (below ``floor`` -> not chit-chat)."""
    sims = vecs @ index.vectors.T
    best = sims.argmax(1)
    pred = [index.labels[b].startswith("chitchat:") or index.labels[b] == "profile" for b in best]
    pred = [p and sims[i, best[i]] >= floor for i, p in enumerate(pred)]
    tp = sum(p and t for p, t in zip(pred, truth_chitchat))
    return {"accuracy": float(np.mean([p == t for p, t in zip(pred, truth_chitchat)])),
            "precision": tp / max(1, sum(pred)), "recall": tp / max(1, sum(truth_chitchat))}


def gate_accuracy(val: list[dict], truth: list[bool], index: PrototypeIndex,
                  vecs: np.ndarray, settings: Settings) -> float:
    """Chit-chat-vs-not accuracy of the full gate (rules, then prototypes) on single messages."""
    from bara.decide import decide
    hits = 0
    for row, t, v in zip(val, truth, vecs):
        r = decide(row["text"], (), None, {}, settings, prototypes=index, message_vector=v)
        no_kb = r.intent.intent in ("chitchat", "profile")
        hits += no_kb == t
    return hits / len(val)


def compare_layouts(methods: list[str], rows: list[tuple[str, str, str]], vecs: np.ndarray,
                    val_vecs: np.ndarray, truth: list[bool], model_id: str,
                    floor: float) -> tuple[str, PrototypeIndex]:
    """Score each layout on val chit-chat accuracy; best wins, ties go to fewer prototypes."""
    scored = []
    for method in methods:
        v, labels = layout(method, vecs, [r[1] for r in rows], [r[2] for r in rows])
        index = PrototypeIndex.from_arrays(v, labels, model_id, method)
        m, m0 = evaluate(index, val_vecs, truth, floor), evaluate(index, val_vecs, truth, -1.0)
        print(f"{method:16} n={len(labels):4}  val chit-chat acc {m['accuracy']:.4f} "
              f"(P {m['precision']:.3f} R {m['recall']:.3f}; no floor {m0['accuracy']:.4f})")
        scored.append((m["accuracy"], -len(labels), method, index))
    _, _, method, index = max(scored, key=lambda s: (s[0], s[1]))
    return method, index


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="shared data root (default $BARA_DATA or Settings.data_dir)")
    ap.add_argument("--method", default="auto", choices=["auto", *LAYOUTS])
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    from bara.retrieval.embedders import build_embedder
    settings, root = Settings(), data_dir(args.data)
    chitchat = chitchat_intents(root)
    rows = training_rows(root, chitchat)
    val = read_jsonl(root / "clinc150" / "val.jsonl")
    embedder = build_embedder(settings, cache=True)
    vecs, val_vecs = embedder.embed([r[0] for r in rows]), embedder.embed([r["text"] for r in val])
    truth = [r["intent"] in chitchat for r in val]
    print(f"train rows {len(rows)}: {dict(Counter(r[2] for r in rows))}")
    methods = list(LAYOUTS) if args.method == "auto" else [args.method]
    method, index = compare_layouts(methods, rows, vecs, val_vecs, truth, embedder.model_id,
                                    settings.gate_prototype_min_similarity)
    blob = index.to_bytes()
    if len(blob) > MAX_BYTES:
        print(f"{method} index is {len(blob)} bytes, over {MAX_BYTES}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_bytes(blob)
    print(f"chose {method}: {len(index.labels)} prototypes, {len(blob)} bytes -> {args.out}")
    print(f"full gate (rules then prototypes) val chit-chat acc "
          f"{gate_accuracy(val, truth, index, val_vecs, settings):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
