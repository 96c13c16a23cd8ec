"""Test-session settings that must be in place before torch/triton are imported.

- Without a GPU, Triton kernels run in the interpreter (TRITON_INTERPRET=1 must precede the
  first ``import triton``), which is how CI tests them.
- Inductor compilation of the CPU path costs tens of seconds per shape: tests use the eager
  path unless a test turns compilation on explicitly (tests/test_op_compiled.py).
"""

import os
import shutil

if not (shutil.which("nvidia-smi") and os.environ.get("TS_CONTINUUM_GPU_TESTS") == "1"):
    os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("TS_CONTINUUM_COMPILE", "0")
