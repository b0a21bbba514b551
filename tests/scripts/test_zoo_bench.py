"""scripts/zoo_bench.py without a GPU: the cases it plans for the committed zoo, the commands of --dry-run,
the figures it takes from a recorded `cnnrt bench --json` document, the Markdown table (with failures and
mismatches), the per-step report against cuDNN, merging runs with --table, and its reports of a missing program
or a timeout. Plain python3 (unittest): no torch, no onnx. CTest runs it as `zoo_bench_script`.
"""
import contextlib
import copy
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import zoo_bench  # noqa: E402

ZOO = os.path.join(REPO, "models", "zoo")
RECORDED_BENCH = os.path.join(HERE, "fixtures", "cnnrt_bench_fashion_lenet_b4096.json")


def run_main(argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = zoo_bench.main(argv)
    return status, out.getvalue(), err.getvalue()


def recorded_case(model="lenet5", shape=(4096, 1, 32, 32), status="ok"):
    """A case as Runner.run_case writes it, with our figures from the recorded cnnrt bench JSON."""
    with open(RECORDED_BENCH) as f:
        bench = json.load(f)
    case = {"model": model, "input_name": "image", "input_shape": list(shape), "image_to_image": False,
            "input_kind": "normal", "key": f"{model}@{zoo_bench.shape_text(shape)}", "status": status,
            "check": {"cnnrt_run_status": 0, "ours_max_abs": 2e-7, "ours_of_tolerance": 0.01,
                      "torch_fp32_max_abs": 3e-7, "torch_fp32_of_tolerance": 0.02},
            "torch": {"eager": {"latency_median_us": 900.0, "per_run_us": 880.0, "throughput_images_per_s": 4096e6 / 880},
                      "graph": {"latency_median_us": 557.9, "per_run_us": 550.4, "throughput_images_per_s": 4096e6 / 550.4}},
            "cnnrt": zoo_bench.summarize_bench(bench)}
    return case


class PlanTest(unittest.TestCase):
    def setUp(self):
        self.index = zoo_bench.load_index(ZOO)

    def test_every_zoo_model_is_planned_at_its_sizes(self):
        cases = zoo_bench.plan_cases(self.index)
        models = [m["name"] for m in self.index["models"]]
        self.assertGreaterEqual(len(models), 15)
        self.assertEqual(sorted({c["model"] for c in cases}), sorted(models))
        for m in self.index["models"]:
            shapes = [c["input_shape"] for c in cases if c["model"] == m["name"]]
            if m["image_to_image"]:
                self.assertEqual(shapes, [[1, 1, 256, 256], [4, 1, 512, 512]], m["name"])
            else:
                sample = m["test_input_shape"][1:]
                self.assertEqual(shapes, [[1] + sample, [16] + sample, [256] + sample], m["name"])

    def test_the_four_image_to_image_models(self):
        names = sorted(m["name"] for m in self.index["models"] if m["image_to_image"])
        self.assertEqual(names, ["conv_autoencoder", "dncnn", "espcn", "unet_small"])

    def test_models_and_batches_select(self):
        cases = zoo_bench.plan_cases(self.index, ["resnet20", "dncnn"], [2, 8])
        self.assertEqual([c["key"] for c in cases],
                         ["resnet20@2x3x32x32", "resnet20@8x3x32x32", "dncnn@1x1x256x256", "dncnn@4x1x512x512"])

    def test_unknown_model_is_refused_by_name(self):
        with self.assertRaises(SystemExit) as e:
            zoo_bench.plan_cases(self.index, ["resnet20", "alexnet"])
        self.assertIn("alexnet", str(e.exception))
        self.assertIn("resnet20", str(e.exception))  # the list of models it has


class DryRunTest(unittest.TestCase):
    def test_commands(self):
        status, out, _ = run_main(["--dry-run", "--models", "resnet20,dncnn", "--cnnrt", "/opt/bin/cnnrt",
                                   "--out", "/tmp/zb"])
        self.assertEqual(status, 0)
        zoo = os.path.abspath(ZOO)
        self.assertIn(f"/opt/bin/cnnrt bench {zoo}/resnet20/model.onnx --batch 16 --iterations 1000 "
                      "--json /tmp/zb/work/resnet20_16x3x32x32/cnnrt_bench.json", out)
        self.assertIn(f"/opt/bin/cnnrt bench {zoo}/dncnn/model.onnx --shape image=4x1x512x512 --iterations 1000", out)
        self.assertIn(f"/opt/bin/cnnrt run {zoo}/dncnn/model.onnx --test-data /tmp/zb/work/dncnn_1x1x256x256/data "
                      "--device gpu --rtol 0.0001 --atol 0.0001 --output-dir /tmp/zb/work/dncnn_1x1x256x256/data/ours", out)
        self.assertNotIn("--batch", out.split("dncnn 1x1x256x256:")[1])
        self.assertTrue(out.rstrip().endswith("5 cases"))

    def test_quick_runs_fewer_iterations(self):
        _, out, _ = run_main(["--dry-run", "--models", "lenet5", "--batches", "1", "--quick"])
        self.assertIn("--batch 1 --iterations 200", out)

    def test_bad_batches_are_a_usage_error(self):
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
            zoo_bench.main(["--dry-run", "--batches", "1,x"])
        self.assertEqual(e.exception.code, 2)

    def test_script_runs_as_a_program(self):
        proc = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "zoo_bench.py"), "--dry-run",
                               "--models", "espcn"], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("--shape image=1x1x256x256", proc.stdout)


class BenchJsonTest(unittest.TestCase):
    def test_slowest_step_and_figures(self):
        with open(RECORDED_BENCH) as f:
            s = zoo_bench.summarize_bench(json.load(f))
        self.assertAlmostEqual(s["latency_median_us"], 278.944, places=2)
        self.assertAlmostEqual(s["per_run_us"], 275.223, places=2)
        self.assertAlmostEqual(s["throughput_images_per_s"], 14882484.5, places=0)
        self.assertEqual(s["steps"], 3)
        step = s["slowest_step"]
        self.assertEqual(step["label"], "/conv2/Conv+/Relu_1+/MaxPool_1")
        self.assertEqual(step["kernel"], "gen_k5s1_4x4_f16_t12x12_c8_relu_pool")
        self.assertAlmostEqual(step["cudnn_us"], 508.917, places=2)
        self.assertEqual(step["cudnn_algo"], "IMPLICIT_GEMM +bias+relu +maxpool")

    def test_convolution_steps_are_the_steps_with_a_cudnn_time(self):
        with open(RECORDED_BENCH) as f:
            steps = zoo_bench.summarize_bench(json.load(f))["conv_steps"]
        self.assertEqual([st["step"] for st in steps], [0, 1])  # step 2, the Gemm, has no cuDNN time
        self.assertEqual(steps[1]["kernel"], "gen_k5s1_4x4_f16_t12x12_c8_relu_pool")
        self.assertEqual(steps[1]["output_shape"], [4096, 16, 4, 4])
        self.assertAlmostEqual(steps[0]["cudnn_us"] / steps[0]["ours_us"], 273.641 / 113.920, places=3)

    def test_a_slowest_step_that_is_not_a_convolution_has_no_cudnn_time(self):
        with open(RECORDED_BENCH) as f:
            doc = json.load(f)
        doc["model"]["steps"][2]["ours_us"] = 999.0
        step = zoo_bench.summarize_bench(doc)["slowest_step"]
        self.assertEqual(step["kernel"], "gemm")
        self.assertIsNone(step["cudnn_us"])


class TableTest(unittest.TestCase):
    def document(self):
        ok = recorded_case()
        mismatch = recorded_case("resnet20", (16, 3, 32, 32), status="mismatch")
        mismatch["check"]["ours_max_abs"] = 3.2e-3
        failed = {"model": "unet_small", "input_shape": [1, 1, 256, 256], "key": "unet_small@1x1x256x256",
                  "status": "failed", "error": "error: op ConvTranspose (opset 13) | not supported"}
        return {"schema": zoo_bench.SCHEMA, "commands": ["scripts/zoo_bench.py --quick"],
                "environment": {"gpu": "NVIDIA H100 80GB HBM3", "driver": "13.0", "cuda_runtime": "13.0",
                                "cudnn": "9.19.0", "torch": "2.11.0", "torch_cudnn": 91900},
                "cases": [ok, mismatch, failed]}

    def test_rows(self):
        table = zoo_bench.write_table(self.document())
        rows = [l for l in table.splitlines() if l.startswith("| ")]
        self.assertEqual(len(rows), 4)  # header + 3 cases
        self.assertEqual(rows[0].count("|"), len(zoo_bench.HEADER) + 1)
        ok = [c.strip() for c in rows[1].strip("|").split("|")]
        self.assertEqual(ok[:4], ["lenet5", "4096x1x32x32", "278.9", "14.88M"])
        self.assertEqual(ok[4:8], ["900.0", "4.65M", "557.9", "7.44M"])
        self.assertEqual(ok[8], "2.00x")   # 557.9 / 278.9: PyTorch + graphs' latency over ours
        self.assertEqual(ok[9], "2.00x")   # 550.4 / 275.2 per back-to-back run
        self.assertEqual(ok[10], "`/conv2/Conv+/Relu_1+/MaxPool_1` (49%)")
        self.assertEqual(ok[11], "`gen_k5s1_4x4_f16_t12x12_c8_relu_pool` 138.0")
        self.assertEqual(ok[12], "508.9 (IMPLICIT_GEMM +bias+relu +maxpool)")
        self.assertIn("**MISMATCH** (3.2e-03 off)", rows[2])
        self.assertIn("**failed**: error: op ConvTranspose (opset 13) \\| not supported |", rows[3])
        self.assertEqual(rows[3].replace("\\|", "").count("|"), len(zoo_bench.HEADER) + 1)  # \| is in a cell
        self.assertIn("GPU NVIDIA H100 80GB HBM3", table)
        self.assertIn("    scripts/zoo_bench.py --quick", table)
        self.assertIn("- unet_small 1x1x256x256: failed:", table)
        self.assertIn("- resnet20 16x3x32x32: mismatch:", table)

    def test_steps_report(self):
        doc = self.document()
        slow = recorded_case("vgg_small", (256, 1, 64, 64))
        slow["cnnrt"]["conv_steps"][1]["ours_us"] = 1000.0  # 508.9 / 1000: below 0.8x
        doc["cases"].append(slow)
        report = zoo_bench.write_steps(doc)
        # The mismatching and failed cases are left out: lenet5's two steps and vgg_small's two.
        ratios = [273.641 / 113.920, 508.917 / 138.016, 273.641 / 113.920, 508.917 / 1000.0]
        want = math.exp(sum(math.log(r) for r in ratios) / 4)
        self.assertIn(f"4 steps of 2 models, geometric mean {want:.2f}x, 1 below 0.8x.", report)
        lenet = math.sqrt(ratios[0] * ratios[1])
        self.assertIn(f"| lenet5 | 4096x1x32x32 | 2 | {lenet:.2f}x | 2.40x |", report)
        self.assertIn("| `c1` | 2 | 2.40x | 2.40-2.40x |", report)
        low = report.split("Below 0.8x:")[1].split("Every step:")[0]
        self.assertEqual(low.count("| vgg_small |"), 1)
        self.assertIn("| vgg_small | 1 | 4096x16x4x4 | `gen_k5s1_4x4_f16_t12x12_c8_relu_pool` | 1,000 | 1,000 | "
                      "508.9 | IMPLICIT_GEMM +bias+relu +maxpool | 0.51x |", low)
        every = report.split("Every step:")[1]
        self.assertEqual(len([l for l in every.splitlines() if l.startswith("| ") and "---" not in l]), 5)
        self.assertNotIn("Below", zoo_bench.write_steps(self.document()))
        self.assertIn("No convolution step", zoo_bench.write_steps({"cases": []}))

    def test_steps_compare_the_step_alone_where_it_was_timed_alone(self):
        doc = self.document()
        alone = recorded_case("vgg_small", (256, 1, 64, 64))
        alone["cnnrt"]["conv_steps"][1]["ours_us"] = 1000.0  # in the profiled run
        alone["cnnrt"]["conv_steps"][1]["alone_us"] = 254.5   # back to back, as cuDNN's 508.9: 2.00x
        doc["cases"] = [alone]
        report = zoo_bench.write_steps(doc)
        self.assertNotIn("Below", report)
        self.assertIn("| vgg_small | 1 | 4096x16x4x4 | `gen_k5s1_4x4_f16_t12x12_c8_relu_pool` | 254.5 | 1,000 | "
                      "508.9 | IMPLICIT_GEMM +bias+relu +maxpool | 2.00x |", report)
        # Its step 0 was not timed alone (the recorded document predates it): named as compared in the run.
        self.assertIn("Runs that did not time their steps alone (vgg_small 256x1x64x64)", report)

    def test_table_option_merges_runs_later_wins_and_fails_on_failures(self):
        first = self.document()
        second = {"schema": zoo_bench.SCHEMA, "commands": ["scripts/zoo_bench.py --models unet_small"],
                  "environment": {}, "cases": [recorded_case("unet_small", (1, 1, 256, 256))]}
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            for i, doc in enumerate((first, second)):
                paths.append(os.path.join(tmp, f"run{i}.json"))
                with open(paths[-1], "w") as f:
                    json.dump(doc, f)
            status, out, _ = run_main(["--table"] + paths + ["--out", os.path.join(tmp, "merged")])
            self.assertEqual(status, 1)  # resnet20 still mismatches
            self.assertNotIn("**failed**", out)
            self.assertIn("| unet_small | 1x1x256x256 | 278.9 |", out)
            with open(os.path.join(tmp, "merged", "zoo_bench.json")) as f:
                merged = json.load(f)
            self.assertEqual([c["key"] for c in merged["cases"]],
                             ["lenet5@4096x1x32x32", "resnet20@16x3x32x32", "unet_small@1x1x256x256"])
            self.assertEqual(len(merged["commands"]), 2)
            with open(os.path.join(tmp, "merged", "zoo_bench.md")) as f:
                self.assertEqual(f.read(), out)
            with open(os.path.join(tmp, "merged", "zoo_bench_steps.md")) as f:
                self.assertIn("4 steps of 2 models", f.read())  # lenet5 and unet_small; resnet20 mismatches
            only_ok = copy.deepcopy(second)
            with open(paths[1], "w") as f:
                json.dump(only_ok, f)
            self.assertEqual(run_main(["--table", paths[1], "--out", os.path.join(tmp, "ok")])[0], 0)

    def test_table_refuses_other_json(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "x.json")
            shutil.copy(RECORDED_BENCH, path)
            with self.assertRaises(SystemExit) as e:
                run_main(["--table", path, "--out", tmp])
            self.assertIn("not a zoo_bench result", str(e.exception))


class RepeatsTest(unittest.TestCase):
    RUNS = [{"latency_median_us": 40.0, "per_run_us": 30.0, "samples": 1},
            {"latency_median_us": 36.0, "per_run_us": 33.0, "samples": 2},
            {"latency_median_us": 50.0, "per_run_us": 29.0, "samples": 3}]

    def test_best_latency_run_and_least_time_per_run(self):
        best = zoo_bench.best_of_runs(copy.deepcopy(self.RUNS), 16)
        self.assertEqual(best["latency_median_us"], 36.0)
        self.assertEqual(best["samples"], 2)  # the rest of the fields come from that run
        self.assertEqual(best["per_run_us"], 29.0)  # from another run
        self.assertAlmostEqual(best["throughput_images_per_s"], 16e6 / 29.0)
        self.assertEqual([r["latency_median_us"] for r in best["repeats"]], [40.0, 36.0, 50.0])
        one = {"latency_median_us": 40.0, "per_run_us": 30.0}
        self.assertIs(zoo_bench.best_of_runs([one], 16), one)  # a single run as it was: no "repeats"

    def test_table_shows_the_best_then_the_slowest_and_the_means(self):
        ours = [recorded_case("lenet5", (1, 1, 32, 32)), recorded_case("resnet20", (1, 3, 32, 32)),
                recorded_case("resnet20", (16, 3, 32, 32)), recorded_case("dncnn", (1, 1, 256, 256))]
        ours[3]["image_to_image"] = True
        graph = ours[0]["torch"]["graph"]
        runs = [dict(graph, latency_median_us=v) for v in (600.0, graph["latency_median_us"], 700.0)]
        ours[0]["torch"]["graph"] = zoo_bench.best_of_runs(runs, 1)
        ours[1]["torch"]["graph"]["latency_median_us"] = 278.944 * 8  # 8x
        ours[2]["status"] = "failed"  # left out of the means
        doc = {"schema": zoo_bench.SCHEMA, "cases": ours}
        table = zoo_bench.write_table(doc)
        line = next(l for l in table.splitlines() if l.startswith("| lenet5 |"))
        row = [c.strip() for c in line.strip("|").split("|")]
        self.assertEqual(row[6], "557.9 (of 3; slowest 700.0)")
        self.assertEqual(row[2], "278.9")  # ours ran once
        self.assertIn("each side ran N times", table)
        self.assertIn("- batch 1: geometric mean 4.00x over 2 models, the least lenet5 2.00x", table)  # sqrt(2 * 8)
        self.assertIn("- 1x256x256 images: geometric mean 2.00x over 1 model, the least dncnn 2.00x", table)
        self.assertNotIn("batch 16:", table)
        self.assertNotIn("each side ran N times", zoo_bench.write_table(TableTest().document()))

    def test_dry_run_and_usage(self):
        _, out, _ = run_main(["--dry-run", "--models", "lenet5", "--batches", "1", "--repeats", "3"])
        self.assertIn("3 times, alternating: PyTorch's timings in a process of its own", out)
        self.assertIn("--torch-worker", out)
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
            zoo_bench.main(["--dry-run", "--repeats", "0"])
        self.assertEqual(e.exception.code, 2)

    def test_worker_command(self):
        args = zoo_bench.parse_args(["--quick", "--zoo", ZOO])
        case = zoo_bench.plan_cases(zoo_bench.load_index(ZOO), ["lenet5"], [1])[0]
        cmd = zoo_bench.torch_worker_command(args, case)
        self.assertEqual(cmd[:3], [sys.executable, os.path.join(REPO, "scripts", "zoo_bench.py"), "--torch-worker"])
        self.assertEqual(json.loads(cmd[3]), case)
        self.assertEqual(cmd[4:], ["--zoo", os.path.abspath(ZOO), "--quick"])
        self.assertEqual(zoo_bench.parse_args(["--torch-worker", cmd[3]]).torch_worker, cmd[3])

    def test_a_timing_process_gives_its_last_line_or_fails_the_case(self):
        runner = zoo_bench.Runner.__new__(zoo_bench.Runner)  # no torch here: only the process handling
        runner.args = zoo_bench.parse_args(["--timeout", "20"])
        saved = zoo_bench.torch_worker_command
        try:
            with tempfile.TemporaryDirectory() as tmp:
                zoo_bench.torch_worker_command = lambda args, case: [
                    sys.executable, "-c", "print('warming up'); print('{\"eager\": {\"x\": 1}, \"graph\": {}}')"]
                self.assertEqual(runner.time_torch_process({}, tmp, 0), {"eager": {"x": 1}, "graph": {}})
                zoo_bench.torch_worker_command = lambda args, case: [
                    sys.executable, "-c", "import sys; print('RuntimeError: CUDA out of memory'); sys.exit(1)"]
                with self.assertRaises(zoo_bench.CaseFailure) as e:
                    runner.time_torch_process({}, tmp, 1)
                self.assertIn("exited with 1: RuntimeError: CUDA out of memory", str(e.exception))
                self.assertTrue(os.path.exists(os.path.join(tmp, "torch_timing_1.log")))
        finally:
            zoo_bench.torch_worker_command = saved


class CommandTest(unittest.TestCase):
    def test_missing_program_and_timeout_are_reported(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = os.path.join(tmp, "log")
            proc = zoo_bench.run_logged(["/nonexistent/cnnrt", "bench"], log, 10)
            self.assertEqual(proc.returncode, 127)
            self.assertIn("--cnnrt PATH", zoo_bench.last_line(proc))
            proc = zoo_bench.run_logged([sys.executable, "-c", "import time; print('started'); time.sleep(30)"], log, 1)
            self.assertEqual(proc.returncode, 124)
            self.assertIn("timed out after 1 s", zoo_bench.last_line(proc))
            with open(log) as f:
                self.assertTrue(f.read().startswith("$ " + sys.executable))

    def test_last_line_is_the_error_with_its_details(self):
        proc = subprocess.CompletedProcess([], 3, stdout="model: x\nerror: 'm.onnx' uses 2 things cnnrt cannot run:\n"
                                           "  Foo node 'a': op Foo (opset 13) is not supported\n"
                                           "  Bar node 'b': op Bar (opset 13) is not supported\nbye\n")
        self.assertEqual(zoo_bench.last_line(proc), "error: 'm.onnx' uses 2 things cnnrt cannot run: Foo node 'a': op Foo "
                                                    "(opset 13) is not supported Bar node 'b': op Bar (opset 13) is not supported")
        self.assertEqual(zoo_bench.last_line(subprocess.CompletedProcess([], 1, stdout="a\nb\n\n")), "b")


if __name__ == "__main__":
    unittest.main()
