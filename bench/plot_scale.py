"""The curves of docs/scaling.md from ``bench_scale.py``'s kept results (one JSON per backend and size).

    python bench/plot_scale.py [--results /work/scale-stores/results] [--out docs/img/scaling.png]
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def series(results: Path) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for f in sorted(results.glob("*.json")):
        m = re.fullmatch(r"(sqlite|postgres)-(\d+)\.json", f.name)
        if m:
            out.setdefault(m.group(1), []).append(json.loads(f.read_text()))
    return {k: sorted(v, key=lambda r: r["chunks"]) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--results", default="/work/scale-stores/results")
    ap.add_argument("--out", default="docs/img/scaling.png")
    args = ap.parse_args()
    data = series(Path(args.results))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for backend, rows in data.items():
        n = [r["chunks"] for r in rows]
        axes[0].plot(n, [r["search_ms"]["p50"] for r in rows], "o-", label=f"{backend} hybrid search p50")
        for arm in ("lexical", "dense"):
            if all(arm in r.get("arms_ms", {}) for r in rows):
                axes[0].plot(n, [r["arms_ms"][arm]["p50"] for r in rows], "x--", label=f"{backend} {arm} arm p50")
        if all("turn_ms" in r for r in rows):
            axes[1].plot(n, [r["turn_ms"]["p50"] for r in rows], "o-", label=f"{backend} gated turn p50")
        axes[1].plot(n, [r["rss_mb"] for r in rows], "s:", label=f"{backend} bench RSS (MiB)")
        for r in rows:  # a point measured with other settings (bench_scale --set) says so
            if r.get("settings"):
                note = ", ".join(f"{k}={v}" for k, v in r["settings"].items())
                axes[0].annotate(note, (r["chunks"], r["search_ms"]["p50"]), fontsize=6, ha="right",
                                 textcoords="offset points", xytext=(-4, 6))
    for ax, title in zip(axes, ("search, query vector given (ms)", "turn (ms) and memory (MiB)"), strict=True):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("knowledge-base chunks")
        ax.set_title(title)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("bara at scale (2 shared cores, loaded: see docs/benchmarks.md for the load of each point)", fontsize=9)
    fig.tight_layout()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(args.out)


if __name__ == "__main__":
    main()
