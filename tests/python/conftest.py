"""Shared fixtures of the Python package's tests (run by CTest: tests/python/CMakeLists.txt).

Environment: PYTHONPATH holds the built package (build/<preset>/python); CNNRT_CLI is the built `cnnrt`
tool (tests that compare with it skip without it).
"""

import os
import subprocess
import sys

import pytest

REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # onnx_writer


def repo_path(*parts):
    return os.path.join(REPO, *parts)


LENET = repo_path("models", "fashion_lenet.onnx")
EDGES = repo_path("models", "edges.onnx")


@pytest.fixture(scope="session")
def cli():
    """Runs the cnnrt tool: cli(args...) -> CompletedProcess (text, stdout and stderr captured)."""
    path = os.environ.get("CNNRT_CLI", "")
    if not path or not os.path.exists(path):
        pytest.skip("the cnnrt tool is not built (CNNRT_CLI is not set): no comparison with it")

    def run(*args, **kwargs):
        return subprocess.run([path, *map(str, args)], capture_output=True, text=True, **kwargs)

    return run


@pytest.fixture(scope="session")
def lenet_cpu():
    import cnnrt
    return cnnrt.Model(LENET, device="cpu")


@pytest.fixture(scope="session")
def has_gpu():
    """True when this build runs models on a GPU here."""
    import cnnrt
    return cnnrt.with_cuda and cnnrt.Model(LENET, device="auto", log_level="error").device == "gpu"


def pytest_sessionfinish(session, exitstatus):
    """A run whose every test skipped exits 77, which CTest shows as skipped (SKIP_RETURN_CODE)."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or exitstatus not in (0, 5):  # 5: nothing collected (a module skipped as a whole)
        return
    stats = reporter.stats
    if stats.get("skipped") and not stats.get("passed") and not stats.get("failed") and not stats.get("error"):
        session.exitstatus = 77
