#!/usr/bin/env python3
"""Times every model of the zoo (models/zoo/) with cnnrt and with PyTorch on the same GPU, weights and input.

    scripts/zoo_bench.py [--models a,b] [--batches 1,16,256] [--out DIR] [--cnnrt PATH] [--quick] [--repeats N]
    scripts/zoo_bench.py --dry-run ...           # print what would run; needs neither a GPU nor torch
    scripts/zoo_bench.py --table A.json [B.json ...] --out DIR   # the table again, from earlier results

For each model at each batch size (image-to-image models at 1x1x256x256 and 4x1x512x512 instead), one after
the other in this one call:
  1. check: PyTorch (the module of models/zoo/zoo_models.py with the weights read from the ONNX file) computes
     the float64 answer on the GPU for a seeded input; `cnnrt run --device gpu` must match it within the
     zoo's tolerance (rtol 1e-4, atol 1e-4), and PyTorch's own float32 error is recorded beside ours;
  2. PyTorch in float32 (TF32 off, cudnn.benchmark on): eager, then CUDA-graph replay; latency is the median
     of single runs between two CUDA events (500, or as many as fit in 2 s, at least 20), throughput comes
     from back-to-back runs (2 s of them, at least 10);
  3. `cnnrt bench MODEL --batch N --iterations I --json FILE` (`--shape NAME=NxCxHxW` for image-to-image
     models; I = 1000, or as many of PyTorch's graph replays as fit in 2 s, at least 20): our latency,
     throughput and per-step times beside cuDNN's (docs/bench-json.md).
--quick: 100 single runs, 200 iterations, 0.5 s instead of 2 s.
--repeats N (default 1): steps 2 and 3 N times each, alternating, PyTorch each time in a process of its own (its
cuDNN algorithm search and its host's pace change from process to process by up to a quarter of its time). Each
side's figures are then its best over the N: the lowest median latency and the lowest time per run of back-to-back
runs; the table shows the slowest too, and the JSON keeps every repeat.
It writes DIR/zoo_bench.json (after every case, so a run cut short keeps what finished; --resume skips the
cases already there) and DIR/zoo_bench.md, a Markdown table: per model and input, our latency and
throughput, PyTorch's (eager and CUDA graphs), the speedups against PyTorch + CUDA graphs (PyTorch's time
over ours: above 1 we are faster), and our slowest step with its kernel and cuDNN's time for that step, then the
geometric mean and the least of the latency ratios per input size; and
DIR/zoo_bench_steps.md: every convolution step of every case beside cuDNN's time for the same layer, with
geometric means per model and per kernel family and the steps below 0.8x listed first.

A case that fails (cnnrt cannot load or run it, the outputs differ, a command fails) is reported in the
table and the JSON, the others go on, and the exit status is 1. Needs on the GPU host: PyTorch with CUDA,
the onnx package, and cnnrt (on PATH or --cnnrt).
"""
import argparse
import json
import math
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_ZOO = os.path.join(REPO, "models", "zoo")
DEFAULT_BATCHES = [1, 16, 256]
IMAGE_SHAPES = [(1, 256, 256), (4, 512, 512)]  # (batch, height, width) of the image-to-image models
SCHEMA = "cnnrt-zoo-bench/1"


# --- Planning: which cases, which commands (no torch, no GPU) ---------------------------------------------

def load_index(zoo_dir):
    path = os.path.join(zoo_dir, "zoo.json")
    with open(path) as f:
        index = json.load(f)
    if index.get("schema") != "cnnrt-zoo/1":
        raise SystemExit(f"zoo_bench: {path} is not a zoo index (schema {index.get('schema')!r})")
    return index


def shape_text(shape):
    return "x".join(str(d) for d in shape)


def plan_cases(index, models=None, batches=None):
    """One case per model and input shape, in the zoo's order. Classifiers at each batch size with their
    test input's sample shape; image-to-image models at IMAGE_SHAPES."""
    by_name = {m["name"]: m for m in index["models"]}
    names = models or [m["name"] for m in index["models"]]
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"zoo_bench: unknown model(s) {', '.join(unknown)}; the zoo has {', '.join(by_name)}")
    cases = []
    for name in names:
        m = by_name[name]
        sample = m["test_input_shape"][1:]
        if m["image_to_image"]:
            shapes = [[n, sample[0], h, w] for n, h, w in IMAGE_SHAPES]
        else:
            shapes = [[b] + sample for b in (batches or DEFAULT_BATCHES)]
        for shape in shapes:
            cases.append({"model": name, "input_name": m["input"], "input_shape": shape,
                          "image_to_image": m["image_to_image"], "input_kind": m["input_kind"],
                          "key": f"{name}@{shape_text(shape)}"})
    return cases


def model_path(zoo_dir, case):
    return os.path.join(zoo_dir, case["model"], "model.onnx")


def run_command(cnnrt, zoo_dir, case, data_dir, rtol, atol):
    return [cnnrt, "run", model_path(zoo_dir, case), "--test-data", data_dir, "--device", "gpu",
            "--rtol", repr(rtol), "--atol", repr(atol), "--output-dir", os.path.join(data_dir, "ours")]


def bench_command(cnnrt, zoo_dir, case, json_path, iterations):
    cmd = [cnnrt, "bench", model_path(zoo_dir, case)]
    if case["image_to_image"]:
        cmd += ["--shape", f"{case['input_name']}={shape_text(case['input_shape'])}"]
    else:
        cmd += ["--batch", str(case["input_shape"][0])]
    return cmd + ["--iterations", str(iterations), "--json", json_path]


def case_dir_name(case):
    return f"{case['model']}_{shape_text(case['input_shape'])}"


# --- Reading cnnrt bench's JSON ---------------------------------------------------------------------------

def summarize_bench(doc):
    """Our figures from a `cnnrt bench --json` document (docs/bench-json.md): latency, throughput, and the
    slowest step with its kernel and cuDNN's time for it (cuDNN's only on convolution steps)."""
    model = doc["model"]
    out = {"latency_median_us": model["latency"]["median_us"], "latency_p90_us": model["latency"]["p90_us"],
           "latency_samples": model["latency"]["samples"], "per_run_us": model["per_run_us"],
           "throughput_images_per_s": model["throughput_images_per_s"],
           "steps": len(model.get("steps", [])), "steps_total_us": model.get("steps_total_us")}
    steps = model.get("steps") or []
    # Every step cuDNN ran beside ours (the convolutions it can run as cnnrt does): the per-layer ruler.
    # ours_us: the step in the profiled run; alone_us: the step alone, back to back, as cuDNN's time is taken.
    out["conv_steps"] = [{"step": i, "kernel": st["kernel"], "output_shape": st.get("output_shape"),
                          "ours_us": st["ours_us"], "alone_us": st.get("alone_us"), "cudnn_us": st["cudnn_us"],
                          "cudnn_algo": st.get("cudnn_algo")}
                         for i, st in enumerate(steps) if st.get("cudnn_us") and st.get("ours_us")]
    if steps:
        slow = max(steps, key=lambda s: s["ours_us"])
        out["slowest_step"] = {"label": slow["label"], "kernel": slow["kernel"], "ours_us": slow["ours_us"],
                               "alone_us": slow.get("alone_us"),
                               "share": slow.get("share"), "output_shape": slow.get("output_shape"),
                               "cudnn_us": slow.get("cudnn_us"), "cudnn_algo": slow.get("cudnn_algo")}
    return out


def best_of_runs(runs, batch):
    """One side's figures over repeated timings of the same case (each a dict with latency_median_us and per_run_us,
    as time_fn or summarize_bench return them): the run of the lowest median latency with every field it has, the
    lowest time per run of all (and its throughput), and each run's two figures under "repeats"."""
    if len(runs) == 1:
        return runs[0]
    best = dict(min(runs, key=lambda r: r["latency_median_us"]))
    best["per_run_us"] = min(r["per_run_us"] for r in runs)
    best["throughput_images_per_s"] = batch * 1e6 / best["per_run_us"]
    best["repeats"] = [{"latency_median_us": r["latency_median_us"], "per_run_us": r["per_run_us"]} for r in runs]
    return best


# --- The table --------------------------------------------------------------------------------------------

def fmt_us(v):
    if v is None:
        return "-"
    return f"{v:.1f}" if v < 1000 else f"{v:,.0f}"


def fmt_rate(v):
    if v is None:
        return "-"
    if v >= 1e6:
        return f"{v / 1e6:.2f}M"
    if v >= 1e3:
        return f"{v / 1e3:.1f}k"
    return f"{v:.0f}"


def fmt_ratio(v):
    return "-" if v is None else f"{v:.2f}x"


def speedups(case):
    """PyTorch + CUDA graphs' time over ours, for latency and for back-to-back throughput."""
    ours, graph = case.get("cnnrt") or {}, (case.get("torch") or {}).get("graph") or {}
    lat = per_run = None
    if ours.get("latency_median_us") and graph.get("latency_median_us"):
        lat = graph["latency_median_us"] / ours["latency_median_us"]
    if ours.get("per_run_us") and graph.get("per_run_us"):
        per_run = graph["per_run_us"] / ours["per_run_us"]
    return lat, per_run


def step_cells(case):
    step = (case.get("cnnrt") or {}).get("slowest_step")
    if not step:
        return ["-", "-", "-"]
    share = f" ({100 * step['share']:.0f}%)" if step.get("share") is not None else ""
    what = f"`{step['label']}`{share}"
    if step.get("cudnn_us"):
        cudnn = f"{fmt_us(step['cudnn_us'])} ({step['cudnn_algo']})"
    elif step.get("cudnn_algo"):
        cudnn = step["cudnn_algo"]  # "n/a: why cuDNN cannot run it"
    else:
        cudnn = "-"
    alone = f" (alone {fmt_us(step['alone_us'])})" if step.get("alone_us") else ""  # as cuDNN's time is taken
    return [what, f"`{step['kernel']}` {fmt_us(step['ours_us'])}{alone}", cudnn]


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def latency_cell(side):
    """A side's median latency; over several repeats its best, then the slowest repeat's."""
    text = fmt_us(side.get("latency_median_us"))
    repeats = side.get("repeats") or []
    if len(repeats) > 1:
        text += f" (of {len(repeats)}; slowest {fmt_us(max(r['latency_median_us'] for r in repeats))})"
    return text


def table_rows(cases):
    rows = []
    for c in cases:
        head = [c["model"], shape_text(c["input_shape"])]
        if c.get("status") == "failed":
            rows.append(head + [f"**failed**: {cell(c.get('error', '?'))}"] + [""] * (len(HEADER) - 3))
            continue
        ours = c.get("cnnrt") or {}
        torch_ = c.get("torch") or {}
        eager, graph = torch_.get("eager") or {}, torch_.get("graph") or {}
        lat, thr = speedups(c)
        check = c.get("check") or {}
        ours_lat = latency_cell(ours)
        if c.get("status") == "mismatch":
            ours_lat += f" **MISMATCH** ({check.get('ours_max_abs', 0):.1e} off)"
        rows.append(head + [ours_lat, fmt_rate(ours.get("throughput_images_per_s")),
                            fmt_us(eager.get("latency_median_us")), fmt_rate(eager.get("throughput_images_per_s")),
                            latency_cell(graph), fmt_rate(graph.get("throughput_images_per_s")),
                            fmt_ratio(lat), fmt_ratio(thr)] + step_cells(c))
    return rows


def ratio_summary(cases):
    """Per input size (a classifier's batch; an image-to-image model's batch and map): the geometric mean and the
    least of the passing cases' latency ratios against PyTorch + CUDA graphs, as lines of text."""
    groups = {}
    for c in cases:
        lat = speedups(c)[0] if c.get("status") == "ok" else None
        if lat is None:
            continue
        n, shape = c["input_shape"][0], c["input_shape"]
        key = (bool(c["image_to_image"]), n, tuple(shape[2:]) if c["image_to_image"] else ())
        groups.setdefault(key, []).append((lat, c["model"]))
    lines = []
    for (image, n, hw), ratios in sorted(groups.items()):
        label = f"{n}x{'x'.join(map(str, hw))} images" if image else f"batch {n}"
        least = min(ratios)
        lines.append(f"- {label}: geometric mean {geomean(r for r, _ in ratios):.2f}x over {len(ratios)} model"
                     f"{'s' if len(ratios) != 1 else ''}, the least {least[1]} {least[0]:.2f}x")
    return lines


HEADER = ["model", "input", "cnnrt us", "cnnrt img/s", "PyTorch eager us", "eager img/s", "PyTorch graph us",
          "graph img/s", "latency vs graph", "throughput vs graph", "our slowest step (share)",
          "its kernel, us", "cuDNN us for it (algorithm)"]


def write_table(doc):
    """The Markdown report of a zoo_bench document: environment, command, table, failures."""
    env = doc.get("environment") or {}
    lines = ["# cnnrt against PyTorch on the model zoo", ""]
    if env:
        lines.append(f"GPU {env.get('gpu', '?')}, driver {env.get('driver', '?')}, CUDA {env.get('cuda_runtime', '?')}, "
                     f"cuDNN {env.get('cudnn', '?')}; PyTorch {env.get('torch', '?')} (cuDNN {env.get('torch_cudnn', '?')}), "
                     "FP32 (TF32 off), cudnn.benchmark on.")
    if doc.get("commands"):
        lines.append("")
        lines += [f"    {c}" for c in doc["commands"]]
    lines += ["", "Times are medians of single runs between two CUDA events (us); img/s from back-to-back runs. "
              "\"vs graph\": PyTorch + CUDA graphs' time over ours (above 1: cnnrt is faster). The slowest step is "
              "cnnrt's, with cuDNN's fastest algorithm on the same convolution (`cnnrt bench`)."]
    if any(len(((c.get("torch") or {}).get("graph") or {}).get("repeats") or []) > 1 for c in doc.get("cases", [])):
        lines[-1] += (" Where a time says \"of N\", each side ran N times (PyTorch in a process of its own each time): "
                      "the figures are each side's best, then its slowest median.")
    lines.append("")
    lines.append("| " + " | ".join(HEADER) + " |")
    lines.append("|" + "---|" * len(HEADER))
    for row in table_rows(doc.get("cases", [])):
        lines.append("| " + " | ".join(row) + " |")
    summary = ratio_summary(doc.get("cases", []))
    if summary:
        lines += ["", "Latency against PyTorch + CUDA graphs:"] + summary
    failed = [c for c in doc.get("cases", []) if c.get("status") != "ok"]
    if failed:
        lines += ["", "Failed:"]
        lines += [f"- {c['model']} {shape_text(c['input_shape'])}: {c.get('status')}: {c.get('error', '')}" for c in failed]
    return "\n".join(lines) + "\n"


LOW_STEP = 0.8  # a convolution step below this share of cuDNN's speed is listed first


def compared_us(step):
    """Our time of a convolution step as cuDNN's is taken (alone, back to back); older documents: the profiled run's."""
    return step.get("alone_us") or step["ours_us"]


def step_ratios(doc):
    """(case, step, cuDNN's time over ours) for every convolution step of the document's passing cases."""
    out = []
    for c in doc.get("cases", []):
        if c.get("status") != "ok":
            continue
        for st in (c.get("cnnrt") or {}).get("conv_steps") or []:
            out.append((c, st, st["cudnn_us"] / compared_us(st)))
    return out


def geomean(values):
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def write_steps(doc):
    """The Markdown report of every convolution step against cuDNN's fastest FP32 algorithm on the same layer
    (`cnnrt bench`'s per-step column): counts, geometric means overall, per model and per kernel family, the steps
    below LOW_STEP, then every step."""
    ratios = step_ratios(doc)
    lines = ["# Convolution steps against cuDNN", ""]
    if doc.get("commands"):
        lines += [f"    {c}" for c in doc["commands"]] + [""]
    lines += ["Each convolution step of each `cnnrt bench` run alone, its launches back to back, beside cuDNN's "
              "fastest FP32 algorithm on the same layer timed the same way in the same process; the ratio is cuDNN's "
              "time over ours (above 1: cnnrt is faster). \"in the run\": the step's time in the profiled run (one "
              "launch between two events).", ""]
    if not ratios:
        return "\n".join(lines + ["No convolution step with a cuDNN time."]) + "\n"
    low = [r for r in ratios if r[2] < LOW_STEP]
    models = sorted({c["model"] for c, _, _ in ratios})
    in_run = sorted({f"{c['model']} {shape_text(c['input_shape'])}" for c, st, _ in ratios if not st.get("alone_us")})
    if in_run:
        lines += [f"Runs that did not time their steps alone ({', '.join(in_run)}): the ratio compares the time in the "
                  "run, which includes a launch's latency.", ""]
    lines.append(f"{len(ratios)} steps of {len(models)} models, geometric mean {geomean(r[2] for r in ratios):.2f}x, "
                 f"{len(low)} below {LOW_STEP}x.")
    lines += ["", "| model | input | steps | geometric mean | lowest |", "|---|---|---|---|---|"]
    for c in doc["cases"]:
        mine = [r[2] for r in ratios if r[0] is c]
        if mine:
            lines.append(f"| {c['model']} | {shape_text(c['input_shape'])} | {len(mine)} | {geomean(mine):.2f}x | "
                         f"{min(mine):.2f}x |")
    families = {}
    for _, st, r in ratios:
        families.setdefault(st["kernel"].split("_")[0], []).append(r)
    lines += ["", "| kernel family | steps | geometric mean | range |", "|---|---|---|---|"]
    for fam, rs in sorted(families.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        lines.append(f"| `{fam}` | {len(rs)} | {geomean(rs):.2f}x | {min(rs):.2f}-{max(rs):.2f}x |")

    def row(c, st, r):
        shape = shape_text(st.get("output_shape") or [])
        return (f"| {c['model']} | {st['step']} | {shape} | `{st['kernel']}` | {fmt_us(compared_us(st))} | "
                f"{fmt_us(st['ours_us'])} | {fmt_us(st['cudnn_us'])} | {cell(st.get('cudnn_algo') or '')} | {r:.2f}x |")

    head = ["| model | step | output | our kernel | ours us | in the run | cuDNN us | cuDNN algorithm | ratio |",
            "|---|---|---|---|---|---|---|---|---|"]
    if low:
        lines += ["", f"Below {LOW_STEP}x:", ""] + head + [row(*x) for x in sorted(low, key=lambda x: x[2])]
    lines += ["", "Every step:", ""] + head + [row(*x) for x in ratios]
    return "\n".join(lines) + "\n"


def merge_documents(docs):
    """Cases of several runs (later runs win for the same model and input), the first environment."""
    merged = {"schema": SCHEMA, "environment": {}, "commands": [], "cases": []}
    by_key = {}
    for d in docs:
        if d.get("schema") != SCHEMA:
            raise SystemExit(f"zoo_bench: not a zoo_bench result (schema {d.get('schema')!r})")
        merged["environment"] = merged["environment"] or d.get("environment", {})
        merged["commands"] += [c for c in d.get("commands", []) if c not in merged["commands"]]
        for c in d.get("cases", []):
            by_key[c["key"]] = c
    merged["cases"] = list(by_key.values())
    return merged


# --- Running (GPU host) -----------------------------------------------------------------------------------

class Runner:
    """PyTorch's side of every case, and the two cnnrt commands."""

    def __init__(self, args, index, worker=False):
        import torch  # noqa: F401 (imported here: planning and tables need no torch)
        import onnx

        sys.path.insert(0, args.zoo)
        import zoo_models

        self.torch, self.onnx, self.zoo_models = torch, onnx, zoo_models
        self.args, self.index = args, index
        if not worker and shutil.which(args.cnnrt) is None:
            raise SystemExit(f"zoo_bench: cannot find the cnnrt program {args.cnnrt!r} (put it on PATH or give --cnnrt PATH)")
        if not torch.cuda.is_available():
            raise SystemExit("zoo_bench: PyTorch sees no CUDA device")
        torch.backends.cudnn.benchmark = True
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
        self.device = torch.device("cuda")
        self.rtol, self.atol = index["rtol"], index["atol"]
        # Seconds of single runs (and of back-to-back runs) per measurement; at most `single_runs` of them.
        self.budget_s = 0.5 if args.quick else 2.0
        self.single_runs = 100 if args.quick else 500
        self.cnnrt_iterations = 200 if args.quick else 1000

    def environment(self):
        t = self.torch
        return {"torch": t.__version__, "torch_cuda": t.version.cuda, "torch_cudnn": t.backends.cudnn.version(),
                "torch_gpu": t.cuda.get_device_name(0)}

    def module(self, case):
        spec = self.zoo_models.BY_NAME[case["model"]]
        proto = self.onnx.load(model_path(self.args.zoo, case))
        return self.zoo_models.load_onnx_weights(spec.build(), proto).to(self.device).eval()

    def sample(self, case):
        t = self.torch
        gen = t.Generator().manual_seed(1234)
        shape = case["input_shape"]
        x = t.rand(shape, generator=gen) if case["input_kind"] == "image" else t.randn(shape, generator=gen)
        return x.to(self.device)

    def check(self, case, work):
        """The float64 answer, PyTorch's float32 output and ours (cnnrt run) compared."""
        t = self.torch
        from onnx import numpy_helper

        module, x = self.module(case), self.sample(case)
        with t.no_grad():
            y32 = module(x)
            exact = module.double()(x.double())
        data = os.path.join(work, "data")
        os.makedirs(data, exist_ok=True)
        spec = self.zoo_models.BY_NAME[case["model"]]
        for fname, tensor, name in (("input_0.pb", x, spec.input_name), ("output_0.pb", exact.float(), spec.output_name)):
            with open(os.path.join(data, fname), "wb") as f:
                f.write(numpy_helper.from_array(tensor.cpu().numpy(), name).SerializeToString())
        del module
        t.cuda.empty_cache()
        cmd = run_command(self.args.cnnrt, self.args.zoo, case, data, self.rtol, self.atol)
        proc = run_logged(cmd, os.path.join(work, "cnnrt_run.log"), self.args.timeout)
        result = {"command": shlex.join(cmd), "cnnrt_run_status": proc.returncode}
        tolerance = self.atol + self.rtol * exact.abs()
        result["torch_fp32_max_abs"] = float((y32.double() - exact).abs().max())
        result["torch_fp32_of_tolerance"] = float(((y32.double() - exact).abs() / tolerance).max())
        ours_file = os.path.join(data, "ours", "output_0.pb")
        if proc.returncode in (0, 1) and os.path.exists(ours_file):
            ours = t.from_numpy(numpy_helper.to_array(self.onnx.load_tensor(ours_file)).copy()).to(self.device)
            diff = (ours.double().reshape(exact.shape) - exact).abs()
            result["ours_max_abs"] = float(diff.max())
            result["ours_of_tolerance"] = float((diff / tolerance).max())
        else:
            result["error"] = last_line(proc) or f"cnnrt run exited with {proc.returncode}"
        return result

    def time_fn(self, fn, batch):
        """Median of single runs between two events, and the time per run of back-to-back runs."""
        t = self.torch
        start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
        for _ in range(3):
            fn()
        t.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(5):
            fn()
        t.cuda.synchronize()
        estimate_s = max((time.perf_counter() - t0) / 5, 1e-6)
        runs = max(20, min(self.single_runs, int(self.budget_s / estimate_s)))
        single = []
        for _ in range(runs):
            start.record()
            fn()
            end.record()
            end.synchronize()
            single.append(start.elapsed_time(end) * 1000.0)
        back_to_back = max(10, min(5000, int(self.budget_s / estimate_s)))
        start.record()
        for _ in range(back_to_back):
            fn()
        end.record()
        end.synchronize()
        per_run = start.elapsed_time(end) * 1000.0 / back_to_back
        single.sort()
        return {"latency_median_us": statistics.median(single), "latency_p90_us": single[int(0.9 * (len(single) - 1))],
                "latency_samples": len(single), "per_run_us": per_run, "back_to_back_runs": back_to_back,
                "throughput_images_per_s": batch * 1e6 / per_run}

    def time_torch(self, case):
        t = self.torch
        module, x = self.module(case), self.sample(case)
        batch = case["input_shape"][0]
        out = {}
        with t.no_grad():
            out["eager"] = self.time_fn(lambda: module(x), batch)
            side = t.cuda.Stream()
            side.wait_stream(t.cuda.current_stream())
            with t.cuda.stream(side):
                for _ in range(3):
                    module(x)
            t.cuda.current_stream().wait_stream(side)
            graph = t.cuda.CUDAGraph()
            with t.cuda.graph(graph):
                module(x)
            out["graph"] = self.time_fn(graph.replay, batch)
        del graph, module, x
        t.cuda.empty_cache()
        return out

    def time_torch_process(self, case, work, repeat):
        """time_torch in a Python process of its own (--torch-worker): its own cuDNN algorithm search and CUDA graph."""
        cmd = torch_worker_command(self.args, case)
        proc = run_logged(cmd, os.path.join(work, f"torch_timing_{repeat}.log"), self.args.timeout)
        lines = (proc.stdout or "").strip().splitlines()
        if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
            raise CaseFailure(f"the PyTorch timing process exited with {proc.returncode}: {last_line(proc)}",
                              shlex.join(cmd))
        return json.loads(lines[-1])

    def bench_cnnrt(self, case, work, estimate_us):
        json_path = os.path.join(work, "cnnrt_bench.json")
        iterations = max(20, min(self.cnnrt_iterations, int(self.budget_s * 1e6 / max(estimate_us, 1.0))))
        cmd = bench_command(self.args.cnnrt, self.args.zoo, case, json_path, iterations)
        proc = run_logged(cmd, os.path.join(work, "cnnrt_bench.log"), self.args.timeout)
        if proc.returncode != 0 or not os.path.exists(json_path):
            raise CaseFailure(f"cnnrt bench exited with {proc.returncode}: {last_line(proc)}", shlex.join(cmd))
        with open(json_path) as f:
            doc = json.load(f)
        return doc, shlex.join(cmd)

    def run_case(self, case):
        work = os.path.join(self.args.out, "work", case_dir_name(case))
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        result = dict(case)
        result["status"] = "ok"
        try:
            check = self.check(case, work)
            result["check"] = check
            if check.get("error"):
                raise CaseFailure(check["error"], check["command"])
            if check["cnnrt_run_status"] != 0:
                result["status"] = "mismatch"
                result["error"] = (f"cnnrt's output is {check.get('ours_of_tolerance', float('nan')):.2f}x the tolerance "
                                   f"from the float64 answer (PyTorch float32: {check['torch_fp32_of_tolerance']:.2f}x)")
            # Each repeat PyTorch, then ours; over several, PyTorch each time in a process of its own.
            batch, repeats = case["input_shape"][0], self.args.repeats
            torch_runs, ours_runs = [], []
            for r in range(repeats):
                torch_runs.append(self.time_torch(case) if repeats == 1 else self.time_torch_process(case, work, r))
                doc, cmd = self.bench_cnnrt(case, work, torch_runs[0]["graph"]["latency_median_us"])
                ours_runs.append(summarize_bench(doc))
                if r == 0:
                    result["cnnrt_environment"] = doc.get("environment", {})
            result["torch"] = {mode: best_of_runs([t[mode] for t in torch_runs], batch) for mode in ("eager", "graph")}
            result["cnnrt"] = best_of_runs(ours_runs, batch)
            result["cnnrt"]["command"] = cmd
        except CaseFailure as e:
            result["status"], result["error"], result["failed_command"] = "failed", str(e), e.command
        except Exception as e:  # a PyTorch or I/O error: this case fails, the others go on
            result["status"], result["error"] = "failed", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        finally:
            # The inputs of the check can be large (batch 256 at 224x224 is 150 MB): keep only the logs.
            shutil.rmtree(os.path.join(work, "data"), ignore_errors=True)
            self.torch.cuda.empty_cache()
        return result


class CaseFailure(Exception):
    def __init__(self, message, command):
        super().__init__(message)
        self.command = command


def torch_worker_command(args, case):
    """This script timing PyTorch on one case in a process of its own; it prints time_torch's result as JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-worker", json.dumps(case, separators=(",", ":")),
           "--zoo", args.zoo]
    return cmd + (["--quick"] if args.quick else [])


def run_logged(cmd, log_path, timeout):
    """Runs cmd with its output to log_path; returns the CompletedProcess (stdout and stderr joined)."""
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        proc = subprocess.CompletedProcess(cmd, 124, stdout=(e.stdout or b"").decode(errors="replace")
                                           + f"\nzoo_bench: timed out after {timeout} s\n")
    except FileNotFoundError:
        proc = subprocess.CompletedProcess(cmd, 127, stdout=f"zoo_bench: cannot run {cmd[0]} (not found; --cnnrt PATH)\n")
    with open(log_path, "w") as f:
        f.write("$ " + shlex.join(cmd) + "\n" + (proc.stdout or ""))
    return proc


def last_line(proc):
    """What went wrong, in one line: cnnrt's error with the indented lines under it (the unsupported nodes),
    else the last line of the output."""
    lines = [l.rstrip() for l in (proc.stdout or "").splitlines() if l.strip()]
    for i, line in enumerate(lines):
        if line.startswith("error"):
            detail = [line.strip()]
            for more in lines[i + 1:]:
                if not more.startswith(" "):
                    break
                detail.append(more.strip())
            text = " ".join(detail)
            return text if len(text) <= 400 else text[:397] + "..."
    return lines[-1].strip() if lines else ""


def save(out_dir, doc):
    path = os.path.join(out_dir, "zoo_bench.json")
    with open(path + ".part", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".part", path)
    with open(os.path.join(out_dir, "zoo_bench.md"), "w") as f:
        f.write(write_table(doc))
    with open(os.path.join(out_dir, "zoo_bench_steps.md"), "w") as f:
        f.write(write_steps(doc))


# --- Command line -----------------------------------------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--models", help="comma-separated zoo models (default: all)")
    ap.add_argument("--batches", default=",".join(map(str, DEFAULT_BATCHES)),
                    help="batch sizes of the classifiers (default 1,16,256); image-to-image models run at "
                         + " and ".join(f"{n}xCx{h}x{w}" for n, h, w in IMAGE_SHAPES))
    ap.add_argument("--out", default="zoo_bench_out", help="folder for zoo_bench.json, zoo_bench.md, logs")
    ap.add_argument("--cnnrt", default="cnnrt", help="the cnnrt program (default: cnnrt on PATH)")
    ap.add_argument("--zoo", default=DEFAULT_ZOO, help="the zoo folder (default: models/zoo of this repository)")
    ap.add_argument("--quick", action="store_true", help="fewer runs per measurement (a quarter of the time)")
    ap.add_argument("--resume", action="store_true", help="keep the cases DIR/zoo_bench.json has as ok; run the rest")
    ap.add_argument("--repeats", type=int, default=1,
                    help="time each case N times, PyTorch each time in a process of its own; each side's best counts "
                         "(default 1: once, PyTorch in this process)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds allowed to each cnnrt command (default 900)")
    ap.add_argument("--torch-worker", metavar="CASE_JSON", help=argparse.SUPPRESS)  # --repeats' PyTorch processes
    ap.add_argument("--dry-run", action="store_true", help="print the cases and commands, run nothing")
    ap.add_argument("--table", nargs="+", metavar="JSON", help="write the table from these zoo_bench.json files")
    args = ap.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batches.split(",") if b]
        if not args.batches or min(args.batches) < 1:
            raise ValueError
    except ValueError:
        ap.error(f"--batches: positive integers separated by commas, not {args.batches!r}")
    if args.repeats < 1:
        ap.error(f"--repeats: at least 1, not {args.repeats}")
    args.models = [m for m in args.models.split(",") if m] if args.models else None
    args.zoo = os.path.abspath(args.zoo)
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.torch_worker:
        runner = Runner(args, load_index(args.zoo), worker=True)
        print(json.dumps(runner.time_torch(json.loads(args.torch_worker))), flush=True)
        return 0
    if args.table:
        docs = []
        for path in args.table:
            with open(path) as f:
                docs.append(json.load(f))
        os.makedirs(args.out, exist_ok=True)
        doc = merge_documents(docs)
        save(args.out, doc)
        print(write_table(doc), end="")
        return 0 if all(c.get("status") == "ok" for c in doc["cases"]) else 1

    index = load_index(args.zoo)
    cases = plan_cases(index, args.models, args.batches)
    if args.dry_run:
        for case in cases:
            work = os.path.join(args.out, "work", case_dir_name(case))
            print(f"{case['model']} {shape_text(case['input_shape'])}:")
            print("  " + shlex.join(run_command(args.cnnrt, args.zoo, case, os.path.join(work, "data"),
                                                index["rtol"], index["atol"])))
            print(f"  PyTorch: zoo_models.BY_NAME[{case['model']!r}] with the weights of model.onnx; float64 answer "
                  "for the check, then float32 eager and CUDA-graph timings")
            if args.repeats > 1:
                print(f"  {args.repeats} times, alternating: PyTorch's timings in a process of its own "
                      f"({shlex.join(torch_worker_command(args, case)[:3])} ...), then")
            print("  " + shlex.join(bench_command(args.cnnrt, args.zoo, case, os.path.join(work, "cnnrt_bench.json"),
                                                  200 if args.quick else 1000)))
        print(f"{len(cases)} cases")
        return 0

    os.makedirs(args.out, exist_ok=True)
    runner = Runner(args, index)
    command = "scripts/zoo_bench.py " + shlex.join(sys.argv[1:] if argv is None else argv)
    doc = {"schema": SCHEMA, "environment": {}, "commands": [command], "cases": []}
    previous = {}
    result_path = os.path.join(args.out, "zoo_bench.json")
    if args.resume and os.path.exists(result_path):
        with open(result_path) as f:
            old = json.load(f)
        previous = {c["key"]: c for c in old.get("cases", []) if c.get("status") == "ok"}
        doc["commands"] = old.get("commands", []) + doc["commands"]
        doc["environment"] = old.get("environment", {})
    for i, case in enumerate(cases):
        label = f"[{i + 1}/{len(cases)}] {case['model']} {shape_text(case['input_shape'])}"
        if case["key"] in previous:
            print(f"{label}: kept from {result_path}", flush=True)
            doc["cases"].append(previous[case["key"]])
            continue
        started = time.time()
        result = runner.run_case(case)
        result["seconds"] = round(time.time() - started, 1)
        doc["cases"].append(result)
        if not doc["environment"] and result.get("cnnrt_environment"):
            doc["environment"] = dict(result["cnnrt_environment"], **runner.environment())
        save(args.out, doc)
        if result["status"] == "ok":
            lat, thr = speedups(result)
            print(f"{label}: cnnrt {fmt_us(result['cnnrt']['latency_median_us'])} us, PyTorch graph "
                  f"{fmt_us(result['torch']['graph']['latency_median_us'])} us (latency {fmt_ratio(lat)}, "
                  f"throughput {fmt_ratio(thr)}) in {result['seconds']} s", flush=True)
        else:
            print(f"{label}: {result['status'].upper()}: {result.get('error')}", file=sys.stderr, flush=True)
    if not doc["environment"]:
        doc["environment"] = runner.environment()
    save(args.out, doc)
    print(write_table(doc), end="")
    bad = [c for c in doc["cases"] if c.get("status") != "ok"]
    if bad:
        print(f"zoo_bench: {len(bad)} of {len(doc['cases'])} cases failed: "
              + ", ".join(f"{c['model']} {shape_text(c['input_shape'])} ({c['status']})" for c in bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
