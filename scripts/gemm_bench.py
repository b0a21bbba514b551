#!/usr/bin/env python3
"""Times the fully connected layers of small CNNs on the GPU: our Gemm kernel against cuBLASLt's algorithms.

    scripts/gemm_bench.py [--batches 1,16,256,4096] [--shapes 3136x128,512x1000,...] [--out DIR] [--cnnrt PATH]

For each batch M and layer K x N (inputs x outputs; weights [N, K] as PyTorch's Linear exports them, a bias, and
a ReLU after the layer unless the shape is followed by ":linear") it writes a one-node ONNX model
(Gemm, transB = 1) and runs `cnnrt plan MODEL --batch M --explain` with an empty tuning cache: the planner
times every candidate on the real shape (median of CUDA-graph replays, each candidate checked against our
kernel first) and lists the times. The table has per shape our time, cuBLASLt's best, the ratio (cuBLASLt's
time over ours: above 1 we are faster) and which kernel the planner kept; DIR/gemm_bench.md and .json.
Needs the onnx package and cnnrt (on PATH or --cnnrt) on a machine with a GPU.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# The fully connected layers of the zoo's classifiers (K inputs x N outputs).
DEFAULT_SHAPES = "400x120,84x10:linear,3136x128,128x12:linear,2048x128,256x1000:linear,1024x1000:linear"


def write_model(path, k, n, relu):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(k * 7919 + n)
    w = numpy_helper.from_array((rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32) * 0.1, "b")
    nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["h" if relu else "y"], transB=1, name="fc")]
    if relu:
        nodes.append(helper.make_node("Relu", ["h"], ["y"], name="relu"))
    graph = helper.make_graph(nodes, "fc", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", n])], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batches", default="1,16,256,4096")
    ap.add_argument("--shapes", default=DEFAULT_SHAPES)
    ap.add_argument("--out", default="gemm-bench")
    ap.add_argument("--cnnrt", default="cnnrt")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rows = []
    step = re.compile(r"^\s+\d+\s+\S+\s+(\S+)\s")
    timing = re.compile(r"^\s{9}(\S+)\s+([0-9.]+) us$")
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, CNNRT_CACHE_DIR=tmp)
        for spec in args.shapes.split(","):
            dims, _, kind = spec.partition(":")
            k, n = (int(v) for v in dims.split("x"))
            model = os.path.join(tmp, f"fc_{k}x{n}.onnx")
            write_model(model, k, n, kind != "linear")
            for m in (int(v) for v in args.batches.split(",")):
                cmd = [args.cnnrt, "plan", model, "--batch", str(m), "--explain"]
                out = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if out.returncode != 0:
                    print(out.stderr, file=sys.stderr)
                    sys.exit(f"gemm_bench: {' '.join(cmd)} failed")
                kept, times = None, {}
                for line in out.stdout.splitlines():
                    if kept is None and (s := step.match(line)) and ("gemm" in s.group(1) or "cublaslt" in s.group(1)):
                        kept = s.group(1)
                    elif kept is not None and (t := timing.match(line)):
                        times[t.group(1)] = float(t.group(2))
                ours = min((v for key, v in times.items() if key.startswith("gemm")), default=None)
                lt = min((v for key, v in times.items() if key.startswith("cublaslt")), default=None)
                rows.append({"m": m, "k": k, "n": n, "relu": kind != "linear", "kept": kept, "ours_us": ours,
                             "cublaslt_us": lt, "times": times, "command": " ".join(cmd[1:2] + ["fc.onnx"] + cmd[3:])})
                print(f"{m}x{k} -> {n}: ours {ours} us, cuBLASLt {lt} us, kept {kept}", flush=True)
    with open(os.path.join(args.out, "gemm_bench.json"), "w") as f:
        json.dump(rows, f, indent=1)
    lines = ["| M (batch) | K -> N | ours (us) | cuBLASLt best (us) | cuBLASLt / ours | kept |", "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['cublaslt_us'] / r['ours_us']:.2f}x" if r["ours_us"] and r["cublaslt_us"] else "-"
        fmt = lambda v: f"{v:.2f}" if v is not None else "-"
        lines.append(f"| {r['m']} | {r['k']} -> {r['n']}{'' if r['relu'] else ' (linear)'} | {fmt(r['ours_us'])} | "
                     f"{fmt(r['cublaslt_us'])} | {ratio} | `{r['kept']}` |")
    with open(os.path.join(args.out, "gemm_bench.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
