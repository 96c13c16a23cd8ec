"""Static checks of the kernels' sm_90 machine code (benchmarks/speed/sass_report.py), no GPU needed.

The kernel is bound by its per-element arithmetic, so a block config whose layout has two threads
compute every score element runs at about half speed; the autotuner would only notice on a GPU,
after compiling it. Each kernel needs three special-function instructions (two exp, one
reciprocal) per score element: measurably more means replicated work. The main loops must also
stay software-pipelined.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

triton = pytest.importorskip("triton")

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(triton.__file__).parent / "backends" / "nvidia" / "bin"
pytestmark = pytest.mark.skipif(not (BIN / "ptxas").exists() or not (BIN / "cuobjdump").exists(),
                                reason="this Triton build ships no ptxas/cuobjdump")

# Compiles outside the test session's Triton interpreter mode, on every core.
PROFILE = """
import json, os
from concurrent.futures import ProcessPoolExecutor
from benchmarks.speed import sass_report
from ts_continuum.kernels import tuning

if __name__ == "__main__":
    jobs = [(k, "bf16", d, b) for k, table in
            (("forward", tuning.FORWARD), ("dq", tuning.QUERY_MAJOR), ("dkdv", tuning.KEY_MAJOR),
             ("dkdv+dq", tuning.KEY_MAJOR_ATOMIC_DQ))
            for d, cands in table.items() for b in cands]
    # the deterministic dQ mode's turn-taking must not stop the pipelining: one config per head dim
    jobs += [("dkdv+dq-det", "bf16", d, cands[0]) for d, cands in tuning.KEY_MAJOR_ATOMIC_DQ.items()]
    jobs.append(("forward", "bf16", 128, (64, 32, 8, 2)))  # known to replicate
    with ProcessPoolExecutor(os.cpu_count()) as pool:
        *rows, bad = pool.map(sass_report.loop_profile, *zip(*jobs))
    print(json.dumps({"rows": rows, "replicating": bad}))
"""


def test_no_autotune_candidate_replicates_the_per_element_work():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", PROFILE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    special = lambda r: r["per_element_by_class"]["special"]  # noqa: E731
    assert special(report["replicating"]) > 5.5, "the check no longer detects replication: revisit it"
    offenders = [(r["kernel"], r["head_dim"], r["blocks"], special(r)) for r in report["rows"] if special(r) > 3.5]
    assert not offenders, f"block configs computing each score element more than once: {offenders}"
    assert report["rows"], "no candidates profiled"
    # The main loops stream K/V (forward, dQ) or Q/dO tiles (dK/dV); Triton prefetches them with
    # cp.async (LDGSTS) only when the loop body is straight-line (continuous_fwd.block_ranges).
    unpipelined = [(r["kernel"], r["head_dim"], r["blocks"]) for r in report["rows"] if "LDGSTS" not in r["opcodes"]]
    assert not unpipelined, f"main loops that load K/V without software pipelining: {unpipelined}"
