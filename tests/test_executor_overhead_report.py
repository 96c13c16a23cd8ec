"""The executor measurement's report writer, on made-up timings: a crash there would waste its runs."""

from __future__ import annotations

from benchmarks.speed import executor_overhead


def test_the_report_names_both_executors_their_ratio_and_the_cost_per_cell():
    meta = dict(date="2026-12-04 21:00", command="python -m benchmarks.speed.executor_overhead", commit="abc",
                cpu="synthetic", cores=2, ray="2.60.0", torch="2.13.0")
    cell = dict(cell_id="c", status="ok", wall_s="30.0", threads="2", test_mse="0.5")
    quick = {"serial": dict(command="python -m benchmarks.run --profile quick", wall_s=200.0, load_before=1.0,
                            load_after=1.5, cells=[cell] * 4),
             "ray": dict(command="python -m benchmarks.run --profile quick --executor ray", wall_s=100.0,
                         load_before=1.5, load_after=2.0, cells=[dict(cell, threads="1")] * 4),
             "ratio": 2.0}
    seconds = {"ray start": 8.0}
    for name, value in (("serial 4 cold", 0.02), ("serial 4", 0.01), ("serial 40", 0.05), ("ray 4 cold", 20.0),
                        ("ray 4", 0.04), ("ray 40", 0.22)):
        seconds[name], seconds[f"{name} load"] = value, [1.0, 1.0]
    alone = dict(seconds=seconds, per_cell_s={"serial": 0.04 / 36, "ray": 0.18 / 36}, workers=2, counts=[4, 40])
    text = executor_overhead.markdown(meta, quick, alone)
    assert "Serial / Ray wall time: **2.00**" in text
    assert "serial 1.1 ms, Ray 5.0 ms" in text and "20.0 s more in the first run" in text
    tables = [line for line in text.splitlines() if line.startswith("|")]
    assert len(tables) == 2 + 2 + 2 + 6 and "| ray | 40 cells | 0.22 | 1.0, 1.0 |" in tables
    assert "| 30 (1), 30 (1), 30 (1), 30 (1) |" in tables[3]
