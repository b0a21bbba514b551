"""Threads: contexts of one model run side by side with the GIL released, and give the results of a single
thread, bit for bit."""

import threading
import time

import numpy as np

import cnnrt
from conftest import EDGES, LENET


def test_contexts_in_threads_match_one_thread():
    model = cnnrt.Model(LENET, device="cpu")
    rng = np.random.default_rng(0)
    # Each thread its own inputs and batch sizes, so that a mixed-up buffer would show.
    work = [[rng.standard_normal((1 + (t + k) % 5, 1, 28, 28), dtype=np.float32) for k in range(6)] for t in range(4)]
    single = cnnrt.Context(model)
    expected = [[single.run({"input": x})[0] for x in inputs] for inputs in work]
    failures = []

    def worker(t):
        context = cnnrt.Context(model)
        for _ in range(8):
            for x, want in zip(work[t], expected[t]):
                got = context.run({"input": x})[0]
                if not np.array_equal(got, want):
                    failures.append((t, x.shape))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures


def test_shared_model_and_context_are_serialized_not_corrupted():
    """Model.run, and one Context, called from several threads at once: one run at a time, right answers."""
    model = cnnrt.Model(LENET, device="cpu")
    shared = cnnrt.Context(model)
    rng = np.random.default_rng(1)
    inputs = [rng.standard_normal((2, 1, 28, 28), dtype=np.float32) for _ in range(4)]
    expected = [model.run(x)[0] for x in inputs]
    failures = []

    def worker(t):
        for _ in range(20):
            for run in (model.run, shared.run):
                if not np.array_equal(run(inputs[t])[0], expected[t]):
                    failures.append(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not failures


def test_the_gil_is_released_while_the_engine_runs():
    """While one thread is inside run(), another keeps executing Python. With the GIL held through the run,
    the main thread could not take a single step in the middle of it."""
    model = cnnrt.Model(EDGES, device="cpu")
    x = np.random.default_rng(2).random((1, 1, 1024, 1024), dtype=np.float32)
    model.run(x)  # plan this shape first: the timed run is the engine's work alone
    span = {}
    inside = threading.Event()

    def worker():
        inside.set()
        span["start"] = time.perf_counter()
        model.run(x)
        span["end"] = time.perf_counter()

    thread = threading.Thread(target=worker)
    thread.start()
    inside.wait()
    ticks = []
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    start, end = span["start"], span["end"]
    margin = 0.2 * (end - start)
    middle = [t for t in ticks if start + margin < t < end - margin]
    assert end - start > 0.01, "the run is too short to tell"
    assert len(middle) > 10, f"{len(middle)} steps of the main thread during a {1e3 * (end - start):.0f} ms run"
