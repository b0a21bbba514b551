#!/usr/bin/env python3
"""Load test for `cnnrt serve`: N concurrent clients send M inference requests each, every answer is checked
against the CPU reference, and the run reports latency (p50/p90/p99), throughput and the server's batch-size
histogram (from /metrics, the difference over the run).

    scripts/load_test.py --url http://127.0.0.1:8000 --onnx models/fashion_lenet.onnx \\
        --clients 64 --requests 200 --encoding binary

The reference: `cnnrt run --device cpu` on the same inputs (--cnnrt, default build/release/bin/cnnrt or
build/cpu/bin/cnnrt), `--distinct` different inputs in all (random, seeded), compared with --rtol/--atol as
`cnnrt run` compares. Clients are threads spread over --processes processes (Python's GIL would otherwise be
the bottleneck); each keeps one HTTP/1.1 connection open. Requests are encoded once, before the clock starts,
and sent and read by a lean client of its own (KeepAliveClient). Exit status: 0 when every answer arrived and
matched (and, with --expect-batching, the server ran batches of more than one row), 1 otherwise, 2 for bad
arguments.

Only the Python standard library is used. tests/serve/test_serve.py imports this file for its load case.
"""

import argparse
import hashlib
import http.client
import json
import math
import multiprocessing
import os
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

# ---------------------------------------------------------------------------------------------------------
# ONNX TensorProto files (the `cnnrt run --test-data` layout), written and read without the onnx package.


def _varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def write_tensor_pb(path, name, shape, floats):
    """A float32 TensorProto: dims (1), data_type FLOAT (2), name (8), raw_data (9)."""
    body = bytearray()
    for d in shape:
        body += _varint(1 << 3 | 0) + _varint(d)
    body += _varint(2 << 3 | 0) + _varint(1)
    encoded = name.encode()
    body += _varint(8 << 3 | 2) + _varint(len(encoded)) + encoded
    raw = struct.pack("<%df" % len(floats), *floats)
    body += _varint(9 << 3 | 2) + _varint(len(raw)) + raw
    with open(path, "wb") as f:
        f.write(bytes(body))


def read_tensor_pb(path):
    """(shape, floats) of a float32 TensorProto with raw_data or float_data."""
    with open(path, "rb") as f:
        data = f.read()
    pos, shape, floats = 0, [], None

    def varint():
        nonlocal pos
        result, shift = 0, 0
        while True:
            byte = data[pos]
            pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result
            shift += 7

    while pos < len(data):
        key = varint()
        field, wire = key >> 3, key & 7
        if wire == 0:
            value = varint()
            if field == 1:
                shape.append(value)
        elif wire == 2:
            length = varint()
            chunk = data[pos:pos + length]
            pos += length
            if field == 1:  # packed dims
                inner, ipos = [], 0
                while ipos < len(chunk):
                    v, s = 0, 0
                    while True:
                        b = chunk[ipos]
                        ipos += 1
                        v |= (b & 0x7F) << s
                        if not b & 0x80:
                            break
                        s += 7
                    inner.append(v)
                shape.extend(inner)
            elif field == 9:
                floats = list(struct.unpack("<%df" % (len(chunk) // 4), chunk))
            elif field == 4:  # packed float_data
                floats = list(struct.unpack("<%df" % (len(chunk) // 4), chunk))
        elif wire == 5:
            value = struct.unpack("<f", data[pos:pos + 4])[0]
            pos += 4
            if field == 4:
                floats = (floats or []) + [value]
        elif wire == 1:
            pos += 8
        else:
            raise ValueError("%s: unexpected protobuf wire type %d" % (path, wire))
    if floats is None:
        raise ValueError("%s: no float data" % path)
    return shape, floats


def default_cnnrt():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for build in ("release", "cpu"):
        path = os.path.join(here, "build", build, "bin", "cnnrt")
        if os.path.exists(path):
            return path
    return "cnnrt"


def cpu_reference(cnnrt, onnx_path, inputs, rows_per_set=8):
    """Runs `cnnrt run --device cpu` on the inputs; returns, per input set, the outputs (lists of rows).

    inputs: a list of sets; each set is a list (one per model input) of (name, shape, floats), all with the
    same dimension 0. Sets are grouped into test_data_set folders of up to rows_per_set rows each.
    """
    with tempfile.TemporaryDirectory(prefix="cnnrt-serve-ref-") as tmp:
        data_dir = os.path.join(tmp, "data")
        out_dir = os.path.join(tmp, "out")
        groups = [inputs[i:i + rows_per_set] for i in range(0, len(inputs), rows_per_set)]
        for g, group in enumerate(groups):
            set_dir = os.path.join(data_dir, "test_data_set_%d" % g)
            os.makedirs(set_dir)
            for k, (name, shape, _) in enumerate(group[0]):
                rows = sum(s[k][1][0] for s in group)
                floats = [v for s in group for v in s[k][2]]
                write_tensor_pb(os.path.join(set_dir, "input_%d.pb" % k), name, [rows] + list(shape[1:]), floats)
        result = subprocess.run([cnnrt, "run", onnx_path, "--test-data", data_dir, "--output-dir", out_dir,
                                 "--device", "cpu"], capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError("the CPU reference (cnnrt run) failed:\n%s%s" % (result.stdout, result.stderr))
        answers = []
        for g, group in enumerate(groups):
            set_out = os.path.join(out_dir, "test_data_set_%d" % g) if len(groups) > 1 else out_dir
            outputs = []
            k = 0
            while os.path.exists(os.path.join(set_out, "output_%d.pb" % k)):
                outputs.append(read_tensor_pb(os.path.join(set_out, "output_%d.pb" % k)))
                k += 1
            row = 0
            for s in group:
                rows = s[0][1][0]
                per_output = []
                for shape, floats in outputs:
                    width = len(floats) // shape[0]
                    per_output.append(floats[row * width:(row + rows) * width])
                answers.append(per_output)
                row += rows
        return answers


# ---------------------------------------------------------------------------------------------------------
# Requests and answers.


def encode_request(inputs, encoding, request_id=None):
    """(body bytes, headers) of an inference request; encoding 'json' or 'binary' (inputs and outputs)."""
    if encoding == "json":
        doc = {"inputs": [{"name": n, "shape": list(s), "datatype": "FP32", "data": d} for n, s, d in inputs]}
        if request_id is not None:
            doc["id"] = request_id
        return json.dumps(doc).encode(), {"Content-Type": "application/json"}
    doc = {"inputs": [{"name": n, "shape": list(s), "datatype": "FP32",
                       "parameters": {"binary_data_size": 4 * len(d)}} for n, s, d in inputs],
           "parameters": {"binary_data_output": True}}
    if request_id is not None:
        doc["id"] = request_id
    header = json.dumps(doc).encode()
    binary = b"".join(struct.pack("<%df" % len(d), *d) for _, _, d in inputs)
    return header + binary, {"Content-Type": "application/octet-stream",
                             "Inference-Header-Content-Length": str(len(header))}


def decode_response(body, headers):
    """(doc, {output name: list of floats}) of an inference response, JSON or binary. headers: a mapping of
    the response's headers (names in any case)."""
    length = next((v for k, v in headers.items() if k.lower() == "inference-header-content-length"), None)
    if length is None:
        doc = json.loads(body)
        return doc, {o["name"]: o["data"] for o in doc["outputs"]}
    length = int(length)
    doc = json.loads(body[:length])
    values, pos = {}, length
    for o in doc["outputs"]:
        size = o.get("parameters", {}).get("binary_data_size")
        if size is None:
            values[o["name"]] = o["data"]
        else:
            values[o["name"]] = list(struct.unpack("<%df" % (size // 4), body[pos:pos + size]))
            pos += size
    if pos != len(body):
        raise ValueError("binary response: %d bytes after the last output" % (len(body) - pos))
    return doc, values


def mismatch(got, want, rtol, atol):
    """None when every value is within atol + rtol * |want| (None/NaN only where want is NaN), else a text."""
    if len(got) != len(want):
        return "%d values, expected %d" % (len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        if isinstance(w, float) and math.isnan(w):
            if g is None or (isinstance(g, float) and math.isnan(g)):
                continue
            return "value %d: %r, expected NaN" % (i, g)
        if g is None or abs(g - w) > atol + rtol * abs(w):
            return "value %d: %r, expected %r" % (i, g, w)
    return None


def parse_metrics(text):
    """{(name, frozenset of label items): value} from Prometheus text."""
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$', line)
        if not m:
            raise ValueError("not a Prometheus sample line: %r" % line)
        labels = frozenset(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def batch_histogram(samples, model):
    """{upper bound: cumulative count} of cnnrt_batch_size for a model."""
    hist = {}
    for (name, labels), value in samples.items():
        d = dict(labels)
        if name == "cnnrt_batch_size_bucket" and d.get("model") == model:
            hist[float("inf") if d["le"] == "+Inf" else float(d["le"])] = value
    return hist


def get(url, path, timeout=30):
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


# ---------------------------------------------------------------------------------------------------------
# Clients.


class KeepAliveClient:
    """A lean HTTP/1.1 client on one keep-alive connection, so that the load generator spends its time on the
    server's answers rather than in http.client's header parsing. Requests are sent as prepared bytes."""

    def __init__(self, host, port, timeout):
        self.address, self.timeout = (host, port), timeout
        self.sock, self.buffer = None, b""

    def connect(self):
        self.close()
        self.sock = socket.create_connection(self.address, timeout=self.timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buffer = b""

    def close(self):
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def _fill(self):
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buffer += chunk

    def request(self, payload):
        """(status, {header name lowercased: value}, body) of one request."""
        if self.sock is None:
            self.connect()
        self.sock.sendall(payload)
        while b"\r\n\r\n" not in self.buffer:
            self._fill()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "0"))
        while len(self.buffer) < length:
            self._fill()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        if headers.get("connection", "").lower() == "close":
            self.close()  # (the server ends a connection after many requests: the next one reconnects)
        return status, headers, body


def prepare_request(host, port, model, body, headers):
    """The bytes of a POST /v2/models/MODEL/infer request."""
    lines = ["POST /v2/models/%s/infer HTTP/1.1" % model, "Host: %s:%d" % (host, port),
             "Content-Length: %d" % len(body)] + ["%s: %s" % kv for kv in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def _client_process_to(queue, index, args):
    try:
        queue.put((index, _client_process(args)))
    except BaseException as e:  # noqa: BLE001 (the parent reports it)
        queue.put((index, e))


def _client_process(args):
    """One process: `threads` clients. Returns latencies (s), outcome counts, first errors, start/end times."""
    (url, model, bodies, references, threads, requests, first_client, rtol, atol, timeout) = args
    parts = urllib.parse.urlsplit(url)
    payloads = [prepare_request(parts.hostname, parts.port, model, body, headers) for body, headers in bodies]
    lock = threading.Lock()
    result = {"latencies": [], "ok": 0, "wrong": 0, "failed": 0, "lost": 0, "errors": [], "start": None, "end": 0.0}
    barrier = threading.Barrier(threads)

    def note_error(kind, text):
        with lock:
            result[kind] += 1
            if len(result["errors"]) < 5:
                result["errors"].append("%s: %s" % (kind, text))

    def client(c):
        conn = KeepAliveClient(parts.hostname, parts.port, timeout)
        latencies = []
        try:
            conn.request(payloads[c % len(payloads)])  # warm-up: opens the connection; not counted
        except Exception as e:  # noqa: BLE001 (reported, not raised: the other clients go on)
            note_error("lost", "client %d could not connect: %s" % (c, e))
            conn.close()
        barrier.wait()
        start = time.monotonic()
        for j in range(requests):
            k = (c * requests + j) % len(payloads)
            t0 = time.monotonic()
            try:
                status, headers, payload = conn.request(payloads[k])
                latencies.append(time.monotonic() - t0)
                if status != 200:
                    note_error("failed", "HTTP %d: %s" % (status, payload[:300]))
                    continue
                _, values = decode_response(payload, headers)
                bad = None
                for name, want in references[k].items():
                    bad = mismatch(values.get(name, []), want, rtol, atol)
                    if bad:
                        bad = "input %d, output %s: %s" % (k, name, bad)
                        break
                if bad:
                    note_error("wrong", bad)
                else:
                    with lock:
                        result["ok"] += 1
            except Exception as e:  # noqa: BLE001
                note_error("lost", "client %d request %d: %s: %s" % (c, j, type(e).__name__, e))
                conn.close()
        end = time.monotonic()
        conn.close()
        with lock:
            result["latencies"].extend(latencies)
            result["start"] = start if result["start"] is None else min(result["start"], start)
            result["end"] = max(result["end"], end)

    workers = [threading.Thread(target=client, args=(first_client + t,)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return result


def percentile(sorted_values, p):
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, int(math.ceil(p / 100.0 * len(sorted_values))) - 1))
    return sorted_values[index]


def cached_reference(cache_dir, cnnrt, onnx_path, sets, meta, seed, log):
    """cpu_reference, kept in cache_dir (when given) under a key of the model file and the inputs' recipe."""
    key = None
    if cache_dir:
        st = os.stat(onnx_path)
        recipe = json.dumps([os.path.abspath(onnx_path), st.st_size, st.st_mtime_ns, seed, len(sets),
                             [[n, s] for n, s, _ in sets[0]], meta["outputs"]])
        key = os.path.join(cache_dir, "reference-%s.json" % hashlib.sha1(recipe.encode()).hexdigest()[:16])
        if os.path.exists(key):
            with open(key) as f:
                return json.load(f)
    log("reference: cnnrt run --device cpu on %d inputs (%s)" % (len(sets), onnx_path))
    answers = cpu_reference(cnnrt or default_cnnrt(), onnx_path, sets)
    if key:
        os.makedirs(cache_dir, exist_ok=True)
        with open(key + ".part", "w") as f:
            json.dump(answers, f)
        os.replace(key + ".part", key)
    return answers


def run_load(url, model, onnx_path, clients, requests, encoding="binary", distinct=64, processes=None,
             cnnrt=None, rtol=1e-4, atol=1e-4, rows=1, seed=1, timeout=60, log=print, reference_cache=None):
    """Runs the load and returns a summary dict (see main for what it prints)."""
    status, body = get(url, "/v2/models/%s" % model)
    if status != 200:
        raise RuntimeError("GET /v2/models/%s: HTTP %d %s" % (model, status, body[:200]))
    meta = json.loads(body)
    rng = random.Random(seed)
    sets = []
    for _ in range(distinct):
        inputs = []
        for spec in meta["inputs"]:
            shape = [rows if (i == 0 and d < 0) else d for i, d in enumerate(spec["shape"])]
            count = 1
            for d in shape:
                count *= d
            inputs.append((spec["name"], shape, [rng.random() for _ in range(count)]))
        sets.append(inputs)
    answers = cached_reference(reference_cache, cnnrt, onnx_path, sets, meta, seed, log)
    output_names = [o["name"] for o in meta["outputs"]]
    references = [dict(zip(output_names, a)) for a in answers]
    bodies = []
    for k, inputs in enumerate(sets):
        enc = encoding if encoding != "mixed" else ("json" if k % 2 else "binary")
        bodies.append(encode_request(inputs, enc))

    before = parse_metrics(get(url, "/metrics")[1].decode())
    processes = processes or max(1, min(clients, (os.cpu_count() or 2) // 2))
    per_process = [clients // processes + (1 if p < clients % processes else 0) for p in range(processes)]
    jobs, first = [], 0
    for n in per_process:
        if n:
            jobs.append((url, model, bodies, references, n, requests, first, rtol, atol, timeout))
            first += n
    # Forked processes (not a Pool): the client function need not be importable by name.
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_client_process_to, args=(queue, i, job), daemon=True)
               for i, job in enumerate(jobs)]
    for w in workers:
        w.start()
    results = [None] * len(jobs)
    for _ in jobs:
        index, result = queue.get(timeout=max(600, 10 * requests))
        if isinstance(result, BaseException):
            raise RuntimeError("a client process failed: %r" % result)
        results[index] = result
    for w in workers:
        w.join(60)
    after = parse_metrics(get(url, "/metrics")[1].decode())

    latencies = sorted(l for r in results for l in r["latencies"])
    start = min(r["start"] for r in results if r["start"] is not None)
    end = max(r["end"] for r in results)
    summary = {
        "model": model, "url": url, "clients": clients, "requests_per_client": requests, "encoding": encoding,
        "rows_per_request": rows, "sent": clients * requests,
        "ok": sum(r["ok"] for r in results), "wrong": sum(r["wrong"] for r in results),
        "failed": sum(r["failed"] for r in results), "lost": sum(r["lost"] for r in results),
        "errors": [e for r in results for e in r["errors"]][:10],
        "seconds": end - start,
        "p50_ms": 1e3 * percentile(latencies, 50), "p90_ms": 1e3 * percentile(latencies, 90),
        "p99_ms": 1e3 * percentile(latencies, 99), "max_ms": 1e3 * (latencies[-1] if latencies else float("nan")),
    }
    summary["requests_per_s"] = summary["ok"] / summary["seconds"] if summary["seconds"] > 0 else 0.0
    summary["rows_per_s"] = summary["requests_per_s"] * rows
    hb, ha = batch_histogram(before, model), batch_histogram(after, model)
    cumulative = {le: ha[le] - hb.get(le, 0) for le in sorted(ha)}
    buckets, previous = {}, 0.0
    for le, count in cumulative.items():
        buckets[le] = count - previous
        previous = count
    summary["batches"] = int(cumulative.get(float("inf"), 0))
    key = lambda name: (name, frozenset({("model", model)}))  # noqa: E731
    rows_run = after.get(key("cnnrt_batch_size_sum"), 0) - before.get(key("cnnrt_batch_size_sum"), 0)
    summary["mean_batch"] = rows_run / summary["batches"] if summary["batches"] else 0.0
    summary["batch_histogram"] = {("+Inf" if math.isinf(le) else "%g" % le): int(n) for le, n in buckets.items()}
    summary["batches_over_1"] = int(summary["batches"] - cumulative.get(1.0, 0))
    summary["instance_batches"] = {
        dict(labels)["instance"]: int(value - before.get((name, labels), 0))
        for (name, labels), value in sorted(after.items(), key=lambda kv: sorted(kv[0][1]))
        if name == "cnnrt_instance_batches_total" and dict(labels).get("model") == model}
    for metric, label in (("cnnrt_queue_duration_seconds", "queue_ms"), ("cnnrt_compute_duration_seconds",
                                                                          "compute_ms")):
        n = after.get(key(metric + "_count"), 0) - before.get(key(metric + "_count"), 0)
        s = after.get(key(metric + "_sum"), 0) - before.get(key(metric + "_sum"), 0)
        summary["mean_" + label] = 1e3 * s / n if n else 0.0
    return summary


def report(s, log=print):
    log("load test: model %s at %s, %d clients x %d requests (%s, %d row%s each)" % (
        s["model"], s["url"], s["clients"], s["requests_per_client"], s["encoding"], s["rows_per_request"],
        "" if s["rows_per_request"] == 1 else "s"))
    log("answers: %d ok, %d wrong, %d failed, %d lost (of %d)" % (s["ok"], s["wrong"], s["failed"], s["lost"],
                                                                 s["sent"]))
    for e in s["errors"]:
        log("  " + e)
    log("latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, max %.3f ms" % (s["p50_ms"], s["p90_ms"], s["p99_ms"],
                                                                          s["max_ms"]))
    log("throughput: %.0f requests/s, %.0f rows/s (%.2f s)" % (s["requests_per_s"], s["rows_per_s"], s["seconds"]))
    log("server: %d batches, mean %.1f rows, %d of more than one row; mean queue %.3f ms, mean compute %.3f ms" % (
        s["batches"], s["mean_batch"], s["batches_over_1"], s["mean_queue_ms"], s["mean_compute_ms"]))
    log("batch sizes (rows <= bound: batches): " + ", ".join("%s: %d" % kv for kv in s["batch_histogram"].items()))
    log("batches per instance: " + ", ".join("%s: %d" % kv for kv in s["instance_batches"].items()))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8000", help="the server (default http://127.0.0.1:8000)")
    p.add_argument("--model", help="model name (default: the stem of --onnx)")
    p.add_argument("--onnx", required=True, help="the model file, for the CPU reference")
    p.add_argument("--cnnrt", help="the cnnrt binary for the reference (default: build/release or build/cpu)")
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--requests", type=int, default=200, help="requests per client")
    p.add_argument("--encoding", choices=("json", "binary", "mixed"), default="binary")
    p.add_argument("--rows", type=int, default=1, help="rows (batch) per request")
    p.add_argument("--distinct", type=int, default=64, help="different inputs (each checked against the CPU)")
    p.add_argument("--processes", type=int, help="client processes (default: half the cores)")
    p.add_argument("--rtol", type=float, default=1e-4)
    # 1e-4: the model zoo's tolerance. A deep network's FP32 outputs on the GPU differ from the CPU reference's by
    # rounding that grows with depth and with the batch a request was merged into (another batch size may run
    # other kernels): seen 1.2e-5 on a logit of ResNet-18 (narrow) in a batch of 16.
    p.add_argument("--atol", type=float, default=1e-4)
    p.add_argument("--expect-batching", action="store_true", help="fail unless some batch had more than one row")
    p.add_argument("--json", help="also write the summary here as JSON")
    p.add_argument("--reference-cache", help="keep the CPU reference in this folder, for later runs")
    a = p.parse_args()
    if a.clients < 1 or a.requests < 1 or a.distinct < 1 or a.rows < 1:
        p.error("--clients, --requests, --distinct and --rows must be at least 1")
    model = a.model or os.path.splitext(os.path.basename(a.onnx))[0]
    s = run_load(a.url, model, a.onnx, a.clients, a.requests, a.encoding, a.distinct, a.processes, a.cnnrt,
                 a.rtol, a.atol, a.rows, reference_cache=a.reference_cache)
    report(s)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(s, f, indent=2)
    good = s["ok"] == s["sent"] and (s["batches_over_1"] > 0 or not a.expect_batching)
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
