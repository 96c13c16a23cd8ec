"""kernel_bench's report writers, run on the CPU: a crash there would cost GPU minutes.

The rows are synthetic (made-up timings in the benchmark's row format), not measurements.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.speed import kernel_bench


def synthetic_rows():
    rows = []
    for group, Tq, T in (("long", 256, 256), ("long", 1024, 1024), ("cross", 24, 1024)):
        shape = dict(group=group, B=4, H=16, T=T, Tq=Tq, D=64, causal=False)
        rows += [
            dict(shape, method="kernel", fwd_ms=2.0, bwd_ms=6.0, fwd_bwd_ms=8.0, fwd_ratio=0.3, bwd_ratio=0.2,
                 fwd_bwd_ratio=0.25, fwd_bwd_tflops=50.0, peak_mib=100.0),
            dict(shape, method="kernel_deterministic_dq", bwd_ms=4.0, fwd_bwd_ms=6.0, bwd_ratio=0.3,
                 fwd_bwd_ratio=0.33, peak_mib=120.0, bwd_speedup_vs_pass=1.5),
            dict(shape, method="kernel_dq_pass", bwd_ms=6.0, fwd_bwd_ms=8.0, bwd_ratio=0.2, fwd_bwd_ratio=0.25,
                 peak_mib=100.0),
            dict(shape, method="sdpa", fwd_ms=0.5, bwd_ms=1.2, fwd_bwd_ms=2.0, peak_mib=90.0),
            dict(shape, method="exact", skipped="B·H·T² above --exact-cap 1e+09"),
        ]
    return rows


def test_markdown_and_plot_take_every_method(tmp_path):
    env = dict(date="2026-11-30T00:00:00+00:00", device="synthetic", command="python -m benchmarks.speed.kernel_bench")
    rows = synthetic_rows()
    assert {r["method"] for r in rows} == set(kernel_bench.METHODS)
    kernel_bench.write_markdown(tmp_path / "k.md", env, rows)
    kernel_bench.write_plot(tmp_path / "k.png", env, rows)
    table = [line for line in (tmp_path / "k.md").read_text().splitlines() if line.startswith("|")]
    widths = {line.count("|") for line in table}
    assert len(widths) == 1, f"rows of different widths: {widths}"
    assert any("kernel_deterministic_dq" in line and "| 1.50 |" in line for line in table)
    assert any(line.startswith("| cross | 4 | 16 | 24 | 1024 |") for line in table)
    assert (tmp_path / "k.png").stat().st_size > 10_000


def test_cross_group_times_forecast_queries_over_long_keys():
    """Tq in 1, 24, 96 over keys up to 4096, non-causal (the op refuses causal with Tq != T), in
    the quick run that gpu_check.sh makes; softmax FLOPs count Tq x T scores."""
    cross = [s for s in kernel_bench.shapes(quick=True) if s["group"] == "cross"]
    assert {s["Tq"] for s in cross} == {1, 24, 96} and max(s["T"] for s in cross) == 4096
    assert not any(s["causal"] for s in cross)
    s = cross[0]
    assert kernel_bench.softmax_flops(s)["fwd_ms"] == 4 * s["B"] * s["H"] * s["Tq"] * s["T"] * s["D"]


def test_results_are_replaced_whole_or_not_at_all(tmp_path):
    """gpu_check.sh stops the benchmark at a time limit, possibly while it rewrites its files."""
    path = tmp_path / "kernel_bench.json"
    path.write_text("previous shape")

    def interrupted(p, text):
        p.write_text(text)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        kernel_bench.replace_atomically(path, interrupted, "half")
    assert path.read_text() == "previous shape" and [p.name for p in tmp_path.iterdir()] == [path.name]
    kernel_bench.replace_atomically(path, Path.write_text, "next shape")
    assert path.read_text() == "next shape" and [p.name for p in tmp_path.iterdir()] == [path.name]
