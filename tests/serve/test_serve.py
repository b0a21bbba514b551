#!/usr/bin/env python3
"""End-to-end tests of `cnnrt serve` (CTest: serve_*): the real binary on a free loopback port, driven by an
independent client (Python's http.client), on the CPU backend with models/fashion_lenet.onnx.

    test_serve.py --cnnrt BUILD/bin/cnnrt --model models/fashion_lenet.onnx --load-test scripts/load_test.py \\
        [Endpoints|Errors|EngineFailure|Load|Shutdown|Startup ...]

Every answer is checked against `cnnrt run --device cpu` on the same inputs. Each server is started with
--port 0 (the port it prints), on 127.0.0.1 only, and ended with SIGTERM or SIGINT; every wait is bounded.
"""

import argparse
import http.client
import importlib.util
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import unittest

ARGS = None
load_test = None  # scripts/load_test.py, imported in main()
_reference_cache = {}


class Server:
    """A `cnnrt serve` process on 127.0.0.1 and a free port."""

    def __init__(self, *extra, model=None):
        self.command = [ARGS.cnnrt, "serve", model or ARGS.model, "--host", "127.0.0.1", "--port", "0",
                        "--device", "cpu"] + list(extra)
        self.process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines = []
        self.errors = []
        self.port = None
        listening = threading.Event()

        def read_stdout():
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m:
                    self.port = int(m.group(1))
                    listening.set()
            listening.set()  # ended without listening

        def read_stderr():
            for line in self.process.stderr:
                self.errors.append(line.rstrip("\n"))

        self.readers = [threading.Thread(target=read_stdout, daemon=True),
                        threading.Thread(target=read_stderr, daemon=True)]
        for r in self.readers:
            r.start()
        if not listening.wait(120) or self.port is None:
            self.kill()
            raise AssertionError("cnnrt serve did not start: %s\nstdout: %s\nstderr: %s" % (
                " ".join(self.command), "\n".join(self.lines), "\n".join(self.errors)))
        self.url = "http://127.0.0.1:%d" % self.port

    def connection(self, timeout=60):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None, timeout=60):
        conn = self.connection(timeout)
        try:
            conn.request(method, path, body, headers or {})
            r = conn.getresponse()
            return r.status, dict(r.getheaders()), r.read()
        finally:
            conn.close()

    def get_json(self, path):
        status, _, body = self.request("GET", path)
        return status, json.loads(body) if body else None

    def infer(self, body, headers=None, model="fashion_lenet"):
        return self.request("POST", "/v2/models/%s/infer" % model, body, headers)

    def metrics(self):
        status, _, body = self.request("GET", "/metrics")
        assert status == 200
        return load_test.parse_metrics(body.decode())

    def stop(self, sig=signal.SIGTERM, timeout=60):
        """Sends the signal; returns the exit status (fails the test if it does not end in time)."""
        self.process.send_signal(sig)
        try:
            code = self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError("cnnrt serve did not exit within %d s of %s" % (timeout, sig.name))
        for r in self.readers:
            r.join(10)
        self.close_pipes()
        return code

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        self.close_pipes()

    def close_pipes(self):
        for pipe in (self.process.stdout, self.process.stderr):
            try:
                pipe.close()
            except (OSError, ValueError):
                pass


def lenet_inputs(count, seed):
    """`count` single-row inputs for fashion_lenet ([1,1,28,28]) and their CPU reference logits."""
    key = (count, seed)
    if key not in _reference_cache:
        import random
        rng = random.Random(seed)
        sets = [[("input", [1, 1, 28, 28], [rng.random() for _ in range(784)])] for _ in range(count)]
        answers = load_test.cpu_reference(ARGS.cnnrt, ARGS.model, sets)
        _reference_cache[key] = (sets, answers)  # answers[k][i]: output i of input k
    return _reference_cache[key]


def json_request(data, shape=(1, 1, 28, 28), **extra):
    doc = {"inputs": [{"name": "input", "shape": list(shape), "datatype": "FP32", "data": data}]}
    doc.update(extra)
    return json.dumps(doc)


def binary_request(floats, shape=(1, 1, 28, 28), outputs_binary=True, datatype="FP32", raw=None):
    raw = raw if raw is not None else struct.pack("<%df" % len(floats), *floats)
    doc = {"inputs": [{"name": "input", "shape": list(shape), "datatype": datatype,
                       "parameters": {"binary_data_size": len(raw)}}]}
    if outputs_binary:
        doc["outputs"] = [{"name": "logits", "parameters": {"binary_data": True}}]
    header = json.dumps(doc).encode()
    return header + raw, {"Inference-Header-Content-Length": str(len(header)),
                          "Content-Type": "application/octet-stream"}


class ServeCase(unittest.TestCase):
    def assertClose(self, got, want, what=""):
        bad = load_test.mismatch(got, want, 1e-4, 1e-5)
        self.assertIsNone(bad, what)

    def assertError(self, response, status, text):
        code, headers, body = response
        self.assertEqual(code, status, body[:500])
        self.assertIn("application/json", headers.get("Content-Type", ""))
        message = json.loads(body)["error"]
        self.assertIn(text, message)
        return message


class Endpoints(ServeCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-batch", "8")

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, "exit status %d: %s" % (code, "\n".join(cls.server.errors))

    def test_health_and_metadata(self):
        s = self.server
        self.assertEqual(s.get_json("/v2/health/live"), (200, {"live": True}))
        self.assertEqual(s.get_json("/v2/health/ready"), (200, {"ready": True}))
        status, meta = s.get_json("/v2")
        self.assertEqual(status, 200)
        self.assertEqual(meta["name"], "cnnrt")
        self.assertIn("binary_tensor_data", meta["extensions"])
        self.assertTrue(meta["version"])
        status, model = s.get_json("/v2/models/fashion_lenet")
        self.assertEqual(status, 200)
        self.assertEqual(model["name"], "fashion_lenet")
        self.assertEqual(model["versions"], ["1"])
        self.assertEqual(model["inputs"], [{"name": "input", "datatype": "FP32", "shape": [-1, 1, 28, 28]}])
        self.assertEqual(model["outputs"], [{"name": "logits", "datatype": "FP32", "shape": [-1, 10]}])
        self.assertEqual(s.get_json("/v2/models/fashion_lenet/versions/1")[1], model)
        self.assertEqual(s.get_json("/v2/models/fashion_lenet/ready"), (200, {"name": "fashion_lenet", "ready": True}))
        self.assertEqual(s.get_json("/v2/models/fashion_lenet/versions/1/ready")[0], 200)

    def test_unknown_model_and_route(self):
        s = self.server
        for method, path in (("GET", "/v2/models/resnet"), ("GET", "/v2/models/resnet/ready"),
                             ("POST", "/v2/models/resnet/infer")):
            msg = self.assertError(s.request(method, path, "{}" if method == "POST" else None), 404,
                                   "unknown model 'resnet'")
            self.assertIn("'fashion_lenet'", msg)
        self.assertError(s.request("GET", "/v2/models/fashion_lenet/versions/2"), 404, "has no version '2'")
        self.assertError(s.request("GET", "/v3/health"), 404, "no endpoint GET /v3/health")
        self.assertError(s.request("GET", "/v2/models/fashion_lenet/infer"), 404, "no endpoint GET")
        self.assertError(s.request("DELETE", "/v2/models/fashion_lenet"), 404, "no endpoint DELETE")

    def test_json_tensors_flat_and_nested(self):
        sets, refs = lenet_inputs(4, seed=11)
        s = self.server
        for k in range(4):
            floats = sets[k][0][2]
            if k % 2:
                data = [[[floats[r * 28:(r + 1) * 28] for r in range(28)]]]  # nested [1][1][28][28]
            else:
                data = floats
            status, headers, body = s.infer(json_request(data, id="req-%d" % k))
            self.assertEqual(status, 200, body)
            self.assertEqual(headers["Content-Type"], "application/json")
            doc = json.loads(body)
            self.assertEqual(doc["model_name"], "fashion_lenet")
            self.assertEqual(doc["model_version"], "1")
            self.assertEqual(doc["id"], "req-%d" % k)
            self.assertEqual(len(doc["outputs"]), 1)
            out = doc["outputs"][0]
            self.assertEqual((out["name"], out["datatype"], out["shape"]), ("logits", "FP32", [1, 10]))
            self.assertClose(out["data"], refs[k][0], "input %d" % k)

    def test_several_rows_in_one_request(self):
        sets, refs = lenet_inputs(4, seed=11)
        floats = [v for st in sets[:3] for v in st[0][2]]
        status, _, body = self.server.infer(json_request(floats, shape=(3, 1, 28, 28)))
        self.assertEqual(status, 200, body)
        out = json.loads(body)["outputs"][0]
        self.assertEqual(out["shape"], [3, 10])
        self.assertClose(out["data"], refs[0][0] + refs[1][0] + refs[2][0])

    def test_binary_tensors(self):
        sets, refs = lenet_inputs(4, seed=11)
        floats = sets[2][0][2]
        body, headers = binary_request(floats)
        status, rheaders, rbody = self.server.infer(body, headers)
        self.assertEqual(status, 200, rbody)
        self.assertEqual(rheaders["Content-Type"], "application/octet-stream")
        length = int(rheaders["Inference-Header-Content-Length"])
        doc = json.loads(rbody[:length])
        out = doc["outputs"][0]
        self.assertEqual(out["parameters"]["binary_data_size"], 40)
        self.assertNotIn("data", out)
        self.assertEqual(len(rbody), length + 40)
        self.assertClose(list(struct.unpack("<10f", rbody[length:])), refs[2][0])
        # Binary in, JSON out; and JSON in, every output binary (binary_data_output).
        body, headers = binary_request(floats, outputs_binary=False)
        status, rheaders, rbody = self.server.infer(body, headers)
        self.assertEqual(status, 200, rbody)
        self.assertNotIn("Inference-Header-Content-Length", rheaders)
        self.assertClose(json.loads(rbody)["outputs"][0]["data"], refs[2][0])
        status, rheaders, rbody = self.server.infer(json_request(floats, parameters={"binary_data_output": True}))
        self.assertEqual(status, 200, rbody)
        length = int(rheaders["Inference-Header-Content-Length"])
        self.assertClose(list(struct.unpack("<10f", rbody[length:])), refs[2][0])
        # Exact conversions: UINT8 pixels and FP16 binary data.
        pixels = [int(v * 255) for v in floats]
        status, _, rbody = self.server.infer(json_request(pixels, outputs=[{"name": "logits"}]).replace(
            '"FP32"', '"UINT8"'))
        self.assertEqual(status, 200, rbody)
        body, headers = binary_request(None, datatype="FP16", raw=struct.pack("<784e", *floats))
        status, _, rbody = self.server.infer(body, headers)
        self.assertEqual(status, 200, rbody)

    def test_metrics(self):
        sets, _ = lenet_inputs(4, seed=11)
        # One connection: the server counts each response before it reads the next request.
        conn = self.server.connection()
        try:
            for body in (json_request(sets[0][0][2]), json_request([1, 2])):  # a success, a failure
                conn.request("POST", "/v2/models/fashion_lenet/infer", body)
                conn.getresponse().read()
            conn.request("GET", "/metrics")
            r = conn.getresponse()
            status, content_type, text = r.status, r.getheader("Content-Type"), r.read().decode()
        finally:
            conn.close()
        self.assertEqual(status, 200)
        self.assertTrue(content_type.startswith("text/plain; version=0.0.4"))
        for name, kind in (("cnnrt_inference_requests_total", "counter"),
                           ("cnnrt_request_duration_seconds", "histogram"),
                           ("cnnrt_queue_duration_seconds", "histogram"),
                           ("cnnrt_compute_duration_seconds", "histogram"), ("cnnrt_batch_size", "histogram"),
                           ("cnnrt_instance_batches_total", "counter"), ("cnnrt_queue_requests", "gauge"),
                           ("cnnrt_http_responses_total", "counter")):
            self.assertIn("# TYPE %s %s\n" % (name, kind), text)
        m = load_test.parse_metrics(text)
        model = frozenset({("model", "fashion_lenet")})
        self.assertGreaterEqual(m[("cnnrt_inference_requests_total", model | {("status", "success")})], 1)
        self.assertGreaterEqual(m[("cnnrt_inference_requests_total", model | {("status", "failure")})], 1)
        self.assertGreaterEqual(m[("cnnrt_batch_size_count", model)], 1)
        self.assertEqual(m[("cnnrt_batch_size_bucket", model | {("le", "+Inf")})], m[("cnnrt_batch_size_count", model)])
        self.assertGreaterEqual(m[("cnnrt_instance_batches_total", model | {("instance", "cpu/0")})], 1)
        self.assertGreaterEqual(m[("cnnrt_http_responses_total", frozenset({("code", "400")}))], 1)


class Errors(ServeCase):
    """Every malformed request gets a 4xx naming the problem, and the server keeps serving."""

    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-body-bytes", "100000", "--max-batch", "4")

    @classmethod
    def tearDownClass(cls):
        code = cls.server.stop()
        assert code == 0, "exit status %d" % code

    def tearDown(self):
        # After each refusal the server still answers correctly.
        sets, refs = lenet_inputs(4, seed=11)
        status, _, body = self.server.infer(json_request(sets[1][0][2]))
        self.assertEqual(status, 200, body)
        self.assertClose(json.loads(body)["outputs"][0]["data"], refs[1][0])

    def test_malformed_json(self):
        for body in ('{"inputs": [', "not json", "", '{"inputs": [{"name": "input", "shape": [1,1,28,28]'):
            self.assertError(self.server.infer(body), 400, "malformed JSON")
        self.assertError(self.server.infer("[]"), 400, "must be a JSON object")
        self.assertError(self.server.infer(b'{"inputs": "\xff\xfe"}'), 400, "malformed JSON")

    def test_wrong_names_shapes_datatypes_counts(self):
        s = self.server
        zeros = [0.0] * 784
        cases = [
            (json_request(zeros).replace('"name": "input"', '"name": "image"'), "has no input 'image'"),
            (json.dumps({"inputs": []}), "input 'input' is missing"),
            (json_request(zeros[:700]), "'data' holds 700 values, but shape [1,1,28,28] needs 784"),
            (json_request(zeros, shape=(1, 28, 28)), "the model takes rank 4"),
            (json_request(zeros, shape=(1, 1, 28, 27)), "dimension 3 must be 28"),
            (json_request([0] * 784 * 5, shape=(5, 1, 28, 28)), "its 5 rows are more than this server runs at once "
                                                                 "(4, --max-batch)"),
            (json_request(zeros).replace('"FP32"', '"BYTES"'), "datatype BYTES cannot be converted"),
            (json_request(zeros).replace('"FP32"', '"FP99"'), 'unknown datatype "FP99"'),
            (json_request([0.1] * 784).replace('"FP32"', '"FP64"'), "is not exactly a float32"),
            (json_request(["a"] * 784), "element 0 (\"a\") is not a number"),
            (json_request(zeros, outputs=[{"name": "probabilities"}]), "has no output 'probabilities'"),
        ]
        for body, text in cases:
            with self.subTest(text=text):
                self.assertError(s.infer(body), 400, text)

    def test_binary_byte_counts(self):
        s = self.server
        floats = [0.5] * 784
        body, headers = binary_request(floats)
        self.assertError(s.infer(body[:-4], headers), 400, "are not all there")
        self.assertError(s.infer(body + b"\0\0\0\0", headers), 400, "4 bytes of binary data follow")
        headers_bad = dict(headers, **{"Inference-Header-Content-Length": "12x"})
        self.assertError(s.infer(body, headers_bad), 400, "not a byte count")
        headers_long = dict(headers, **{"Inference-Header-Content-Length": str(len(body) + 10)})
        self.assertError(s.infer(body, headers_long), 400, "but the body has only")
        short, h = binary_request(floats[:700])  # 2800 bytes declared for a [1,1,28,28] FP32 tensor
        self.assertError(s.infer(short, h), 400, "binary_data_size is 2800 bytes, but FP32 [1,1,28,28] needs 3136")

    def test_body_over_the_limit(self):
        status, headers, body = self.server.infer(b"x" * 200000, {"Content-Type": "application/json"})
        self.assertEqual(status, 413, body)
        self.assertIn("over this server's limit of 100000 bytes (--max-body-bytes)", json.loads(body)["error"])

    def chunked(self, path, body, chunk=1000):
        conn = self.server.connection()
        try:
            conn.putrequest("POST", path)
            conn.putheader("Transfer-Encoding", "chunked")
            conn.putheader("Content-Type", "application/json")
            conn.endheaders()
            for i in range(0, len(body), chunk):
                part = body[i:i + chunk]
                conn.send(b"%x\r\n" % len(part) + part + b"\r\n")
            conn.send(b"0\r\n\r\n")
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def test_chunked_and_form_encoded_bodies(self):
        sets, refs = lenet_inputs(4, seed=11)
        body = json_request(sets[2][0][2]).encode()
        status, answer = self.chunked("/v2/models/fashion_lenet/infer", body)
        self.assertEqual(status, 200, answer)
        self.assertClose(json.loads(answer)["outputs"][0]["data"], refs[2][0])
        status, answer = self.chunked("/v2/models/fashion_lenet/infer", b" " * 150000 + body)
        self.assertEqual(status, 413, answer)
        self.assertIn("--max-body-bytes", json.loads(answer)["error"])
        status, answer = self.chunked("/v2/repository/index", b"{}")
        self.assertEqual(status, 411, answer)
        # curl -d sends Content-Type application/x-www-form-urlencoded: still JSON to us, of any size.
        self.assertGreater(len(body), 8192)
        status, _, answer = self.server.infer(body, {"Content-Type": "application/x-www-form-urlencoded"})
        self.assertEqual(status, 200, answer)
        self.assertClose(json.loads(answer)["outputs"][0]["data"], refs[2][0])
        form = (b"--xyz\r\nContent-Disposition: form-data; name=\"request\"\r\n\r\n" + body +
                b"\r\n--xyz--\r\n")
        self.assertError(self.server.infer(form, {"Content-Type": "multipart/form-data; boundary=xyz"}), 415,
                         "multipart/form-data body is not an inference request")

    def test_garbage_and_hang_ups(self):
        # Not HTTP at all, a request cut off mid-body, a client gone before the answer: the server stays up.
        for payload in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\0" * 64, b"GET / HTTP/1.1\r\n\r\n",
                        b"POST /v2/models/fashion_lenet/infer HTTP/1.1\r\nContent-Length: 5000\r\n\r\n{\"inputs\""):
            with socket.create_connection(("127.0.0.1", self.server.port), timeout=30) as sock:
                sock.sendall(payload)
                sock.shutdown(socket.SHUT_WR)
                try:
                    while sock.recv(65536):
                        pass
                except OSError:
                    pass
        sets, _ = lenet_inputs(4, seed=11)
        with socket.create_connection(("127.0.0.1", self.server.port), timeout=30) as sock:
            body = json_request(sets[0][0][2]).encode()
            sock.sendall(b"POST /v2/models/fashion_lenet/infer HTTP/1.1\r\nContent-Length: %d\r\n\r\n" % len(body)
                         + body)
        # (closed before reading the answer)


class EngineFailure(ServeCase):
    """A request that fails inside the engine fails alone; its batch neighbours get their answers."""

    def test_one_request_fails_alone(self):
        # The CPU activation bytes of one row: a server with a 1-byte limit refuses to start and says.
        result = subprocess.run([ARGS.cnnrt, "serve", ARGS.model, "--port", "0", "--device", "cpu",
                                 "--max-activation-bytes", "1"], capture_output=True, text=True, timeout=120)
        self.assertEqual(result.returncode, 6, result.stderr)  # LimitExceeded
        per_row = int(re.search(r"needs (\d+) bytes of activations", result.stderr).group(1))
        # Room for 2 rows: a merged batch of 8 rows fails, and so does a request of 3 rows on its own.
        server = Server("--max-activation-bytes", str(2 * per_row + per_row // 2), "--max-batch", "8",
                        "--max-queue-delay-us", "10000000")  # a full batch of 8 rows starts at once
        try:
            sets, refs = lenet_inputs(8, seed=5)
            rows = [1, 1, 3, 1, 2]
            results = [None] * len(rows)
            first = 0
            jobs = []
            for i, r in enumerate(rows):
                floats = [v for st in sets[first:first + r] for v in st[0][2]]
                want = [v for ref in refs[first:first + r] for v in ref[0]]
                first += r

                def send(i=i, r=r, floats=floats):
                    results[i] = server.infer(json_request(floats, shape=(r, 1, 28, 28)))
                jobs.append((threading.Thread(target=send), want))
            for t, _ in jobs:
                t.start()
            for t, _ in jobs:
                t.join(120)
            for i, (status, _, body) in enumerate(results):
                if rows[i] == 3:
                    self.assertEqual(status, 413, body)
                    self.assertIn("max_activation_bytes", json.loads(body)["error"])
                else:
                    self.assertEqual(status, 200, body)
                    self.assertClose(json.loads(body)["outputs"][0]["data"], jobs[i][1])
        finally:
            code = server.stop()
        self.assertEqual(code, 0)
        self.assertTrue(any("running them one by one" in line for line in server.errors), server.errors)


class Load(ServeCase):
    def test_16_clients_200_requests_each(self):
        server = Server("--max-queue-delay-us", "2000", "--max-batch", "16")
        try:
            summary = load_test.run_load(server.url, "fashion_lenet", ARGS.model, clients=16, requests=200,
                                         encoding="mixed", distinct=32, processes=2, cnnrt=ARGS.cnnrt,
                                         log=lambda *a: None)
            load_test.report(summary)
            self.assertEqual(summary["sent"], 3200)
            self.assertEqual((summary["ok"], summary["wrong"], summary["failed"], summary["lost"]), (3200, 0, 0, 0),
                             summary["errors"])
            self.assertGreater(summary["batches_over_1"], 0, summary["batch_histogram"])
            m = server.metrics()
            model = frozenset({("model", "fashion_lenet")})
            self.assertEqual(m[("cnnrt_inference_requests_total", model | {("status", "failure")})], 0)
            self.assertEqual(m[("cnnrt_batch_size_sum", model)], 3200 + 16)  # every row once (+ warm-ups)
        finally:
            code = server.stop(signal.SIGTERM)
        self.assertEqual(code, 0)


class Shutdown(ServeCase):
    def test_signal_finishes_requests_in_flight(self):
        # The queue delay keeps four requests waiting; SIGINT must answer them at once, then exit 0.
        server = Server("--max-queue-delay-us", "30000000", "--max-batch", "64")
        sets, refs = lenet_inputs(4, seed=11)
        results = [None] * 4

        def send(i):
            results[i] = server.infer(json_request(sets[i][0][2]))
        threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        queued = frozenset({("model", "fashion_lenet")})
        deadline = time.monotonic() + 60
        while server.metrics().get(("cnnrt_queue_requests", queued), 0) < 4:
            self.assertLess(time.monotonic(), deadline, "the requests never queued")
            time.sleep(0.05)
        start = time.monotonic()
        code = server.stop(signal.SIGINT)
        self.assertEqual(code, 0, server.errors)
        self.assertLess(time.monotonic() - start, 20)  # not the 30 s queue delay
        for t in threads:
            t.join(30)
        for i in range(4):
            status, _, body = results[i]
            self.assertEqual(status, 200, body)
            self.assertClose(json.loads(body)["outputs"][0]["data"], refs[i][0])
        self.assertTrue(any("finishing the requests in flight" in line for line in server.lines))
        self.assertTrue(any("stopped: 4 inference requests answered" in line for line in server.lines), server.lines)
        with self.assertRaises(OSError):  # no longer listening
            socket.create_connection(("127.0.0.1", server.port), timeout=5).close()

    def test_full_queue_gets_503(self):
        server = Server("--max-queue", "1", "--max-queue-delay-us", "30000000")
        sets, refs = lenet_inputs(4, seed=11)
        first = {}
        t = threading.Thread(target=lambda: first.setdefault("r", server.infer(json_request(sets[0][0][2]))))
        t.start()
        try:
            model = frozenset({("model", "fashion_lenet")})
            deadline = time.monotonic() + 60
            while server.metrics().get(("cnnrt_queue_requests", model), 0) < 1:
                self.assertLess(time.monotonic(), deadline)
                time.sleep(0.05)
            status, headers, body = server.infer(json_request(sets[1][0][2]))
            self.assertEqual(status, 503, body)
            self.assertEqual(headers.get("Retry-After"), "1")
            self.assertIn("its limit (--max-queue)", json.loads(body)["error"])
        finally:
            code = server.stop()
            t.join(60)
        self.assertEqual(code, 0)
        self.assertEqual(first["r"][0], 200)
        self.assertClose(json.loads(first["r"][2])["outputs"][0]["data"], refs[0][0])


class Startup(ServeCase):
    def run_serve(self, *args):
        return subprocess.run([ARGS.cnnrt, "serve"] + list(args), capture_output=True, text=True, timeout=120)

    def test_refusals(self):
        cases = [
            (("missing.onnx", "--port", "0"), None, "missing.onnx"),
            ((ARGS.model, "--port", "70000"), 2, "--port 70000"),
            ((ARGS.model, "--port", "0", "--device", "cpu", "--gpus", "0"), 2, "--gpus names GPUs, but --device is cpu"),
            ((ARGS.model, "--port", "0", "--device", "cpu", "--batch-sizes", "1,2"), 2, "is below --max-batch 64"),
            ((ARGS.model, "--port", "0", "--device", "cpu", "--batch-sizes", "1,x"), 2, "'x' is not a batch size"),
            ((ARGS.model, ARGS.model, "--port", "0", "--device", "cpu"), 2, "two models are called 'fashion_lenet'"),
            ((ARGS.model, "--port", "0", "--device", "cpu", "--name", "a/b"), 2, "model name 'a/b'"),
            ((ARGS.model, "--port", "0", "--device", "cpu", "--max-batch", "0"), 2, "--max-batch must be at least 1"),
        ]
        for args, code, text in cases:
            with self.subTest(args=args):
                r = self.run_serve(*args)
                self.assertNotEqual(r.returncode, 0)
                if code is not None:
                    self.assertEqual(r.returncode, code, r.stderr)
                self.assertIn(text, r.stderr)

    def test_port_in_use_and_two_models(self):
        server = Server(ARGS.model, "--name", "lenet_a", "--name", "lenet_b")
        try:
            for name in ("lenet_a", "lenet_b"):
                self.assertEqual(server.get_json("/v2/models/%s/ready" % name)[0], 200)
            sets, refs = lenet_inputs(4, seed=11)
            status, _, body = server.infer(json_request(sets[3][0][2]), model="lenet_b")
            self.assertEqual(status, 200, body)
            self.assertClose(json.loads(body)["outputs"][0]["data"], refs[3][0])
            r = self.run_serve(ARGS.model, "--host", "127.0.0.1", "--port", str(server.port), "--device", "cpu")
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("cannot listen on 127.0.0.1:%d" % server.port, r.stderr)
        finally:
            self.assertEqual(server.stop(), 0)


def main():
    global ARGS, load_test
    p = argparse.ArgumentParser()
    p.add_argument("--cnnrt", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--load-test", required=True, help="scripts/load_test.py")
    ARGS, rest = p.parse_known_args()
    spec = importlib.util.spec_from_file_location("load_test", ARGS.load_test)
    load_test = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(load_test)
    unittest.main(argv=[sys.argv[0], "-v"] + rest)


if __name__ == "__main__":
    main()
