#!/usr/bin/python3
"""Per-layer (or per-step) bars from `cnnrt bench --json`: our time beside cuDNN's, log scale.

    scripts/plot_bench.py BENCH.json OUT.png

Needs Debian's python3-matplotlib (scripts/install-deps.sh --dev).
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows_of(doc):
    """(label, ours, cuDNN's) a bar pair; a model's step drawn alone (back to back, as cuDNN) where timed so."""
    if "layers" in doc:
        return [(r["label"], r["ours_us"], r.get("cudnn_us")) for r in doc["layers"]]
    return [(r["label"], r.get("alone_us") or r["ours_us"], r.get("cudnn_us")) for r in doc["model"]["steps"]]


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_bench.py BENCH.json OUT.png")
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    rows = rows_of(doc)
    labels = [r[0] for r in rows]
    ours = [r[1] for r in rows]
    cudnn = [r[2] if r[2] is not None else 0 for r in rows]
    env = doc["environment"]
    fig, ax = plt.subplots(figsize=(max(8, 0.42 * len(rows) + 3), 5.5))
    x = range(len(rows))
    ax.bar([i - 0.2 for i in x], cudnn, 0.4, label="cuDNN " + env["cudnn"], color="#999999")
    ax.bar([i + 0.2 for i in x], ours, 0.4, label="cnnrt " + env["cnnrt"], color="#2b6cb0")
    for i, (o, c) in enumerate(zip(ours, cudnn)):
        if c:
            ax.annotate(f"{c / o:.1f}x", (i + 0.2, o), ha="center", va="bottom", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("GPU time per run (us, log scale)")
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, rotation=70, ha="right", fontsize=7)
    ax.set_title(f"{env['gpu']}, FP32: cnnrt vs cuDNN (labels: speedup)", fontsize=10)
    ax.legend()
    fig.text(0.01, 0.01, doc.get("command", ""), fontsize=6, family="monospace")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    fig.savefig(sys.argv[2], dpi=130)


if __name__ == "__main__":
    main()
