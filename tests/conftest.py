"""Test-session settings that must be in place before torch/triton are imported.

- Without a GPU, Triton kernels run in the interpreter (TRITON_INTERPRET=1 must precede the
  first ``import triton``), which is how CI tests them.
- Inductor compilation of the CPU path costs tens of seconds per shape: tests use the eager
  path unless a test turns compilation on explicitly (tests/test_op_compiled.py).
- Hypothesis runs derandomized by default (see below).
"""

import os
import shutil

if not (shutil.which("nvidia-smi") and os.environ.get("TS_CONTINUUM_GPU_TESTS") == "1"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TS_CONTINUUM_COMPILE", "0")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# CI must not pass or fail by luck: the fuzz tests draw the same cases on every run. Set
# HYPOTHESIS_PROFILE=explore to search new random cases locally; add what it finds as an @example.
settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session")
def tiny_csv(tmp_path_factory):
    """400 hourly rows of three noisy seasonal channels: small enough for end-to-end tests."""
    rng = np.random.default_rng(0)
    t = np.arange(400)
    df = pd.DataFrame(
        {
            "date": pd.date_range("2021-01-01", periods=400, freq="h"),
            "a": np.sin(2 * np.pi * t / 24) + 0.1 * rng.standard_normal(400),
            "b": np.cos(2 * np.pi * t / 12) + 0.1 * rng.standard_normal(400),
            "c": 0.01 * t + 0.1 * rng.standard_normal(400),
        }
    )
    path = tmp_path_factory.mktemp("data") / "tiny.csv"
    df.to_csv(path, index=False)
    return path
