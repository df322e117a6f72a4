"""Compare two folders written by scripts/eval_harness.sh: every JSON figure and every row file.

    python scripts/eval_compare.py BASE_DIR HEAD_DIR      # exit 0 when every file is SAME

Keys that time something (ms, seconds, latency, wall, p50/p95) or name a place or a fingerprint (path, cache, settings hash) are left
out: they differ between any two runs. Everything else (scores, verdicts, counts, tokens, every
row's query and hits) must be equal, floats included, to print SAME.
"""
import json, re, sys
from pathlib import Path
TIMING = re.compile(r"(^|_)(ms|s|latency|seconds|time|wall|elapsed|p50|p95|p99|mean_ms|cpu)($|_)|latency|_ms$|_ms_|duration|timing|started|finished|sha|hash|created|path|cache", re.I)

def load(p: Path):
    txt = p.read_text()
    if p.suffix == ".jsonl":
        return [json.loads(l) for l in txt.splitlines() if l.strip()]
    try:
        return json.loads(txt)
    except json.JSONDecodeError:
        return None

def diff(a, b, path, out):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if TIMING.search(str(k)):
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: only in {'base' if k in a else 'head'}")
                continue
            diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: len {len(a)} != {len(b)}")
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {str(a)[:80]} != {str(b)[:80]}")

base, head = Path(sys.argv[1]), Path(sys.argv[2])
bad = 0
for p in sorted(base.rglob("*.json*")):
    if "funds" in p.name:
        continue
    q = head / p.relative_to(base)
    if not q.exists():
        print(f"MISSING {p.relative_to(base)}"); bad += 1; continue
    a, b = load(p), load(q)
    if a is None or b is None:
        print(f"UNREADABLE {p.relative_to(base)}"); bad += 1; continue
    out = []
    diff(a, b, "", out)
    print(f"{'SAME' if not out else 'DIFF'} {p.relative_to(base)}" + (f" ({len(out)} differences)" if out else ""))
    for line in out[:8]:
        print("   ", line)
    bad += bool(out)
sys.exit(1 if bad else 0)
