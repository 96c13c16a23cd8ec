"""Wall time of the study runner's executors on this machine: serial against Ray workers of 1 CPU.

    python -m benchmarks.speed.executor_overhead [--out benchmarks/results/ray_executor] [--cells 4 40]

1. The quick profile (4 real cells, ETTh1) as a user runs it: ``python -m benchmarks.run --profile
   quick`` (serial, torch's default threads) and the same with ``--executor ray --cpus-per-cell 1``
   (a local Ray instance of this machine's CPUs: on 2 cores, 2 workers of 1 CPU), each a fresh
   process timed from start to exit (imports, Ray's start and the report included), one run each.
2. The executors alone, in this process, on cells that train nothing (they return at once): the
   serial executor and Ray workers of 1 CPU (a local instance of ``--workers`` CPUs, whose start is
   timed apart), each on the smaller then the larger ``--cells`` count, Ray first with cold
   workers, then warm. Cost per cell = (time of the larger - time of the smaller) / the difference
   in cells; what is left of the cold run is fixed cost (workers starting, importing torch and
   Lightning).

One run of each on a shared machine: the load average before and after each step is recorded with
the times, and no figure is a timed test. Writes ``executor_overhead.json`` and ``.md`` under ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.machine import command, cpu_facts
from benchmarks.study.execute import serial
from benchmarks.study.grid import GRIDS, expand
from benchmarks.study.provenance import commit
from benchmarks.study.ray_executor import RayOptions, connect, run_cells

ROOT = Path(__file__).resolve().parents[2]


def nothing(cell: dict, out_dir: Path) -> dict:
    """A cell that trains nothing: what is left of its time is the executor's."""
    return {"test_mse": 0.0, "wall_s": 0.0}


def load() -> float:
    return round(os.getloadavg()[0], 2)


def timed_command(args: list[str]) -> dict:
    """Wall seconds of a command in a fresh process, and the load average around it."""
    before, start = load(), time.perf_counter()
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return {"command": " ".join(["python", *args[1:]]), "wall_s": seconds, "load_before": before,
            "load_after": load()}


def quick_profile(tmp: Path) -> dict:
    """Part 1: the quick profile serial and on Ray, with each cell's own time from its row."""
    runs = {}
    for name, extra in (("serial", []), ("ray", ["--executor", "ray", "--cpus-per-cell", "1"])):
        out = tmp / f"quick-{name}"
        runs[name] = timed_command([sys.executable, "-m", "benchmarks.run", "--profile", "quick", "--out", str(out),
                                    *extra])
        runs[name]["cells"] = [{k: r[k] for k in ("cell_id", "status", "wall_s", "threads", "test_mse")}
                               for r in _rows(out)]
        runs[name]["command"] = runs[name]["command"].replace(str(out), f"<tmp>/quick-{name}")
    runs["ratio"] = runs["serial"]["wall_s"] / runs["ray"]["wall_s"]
    return runs


def _rows(out: Path) -> list[dict]:
    import csv

    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f))


def cells_of(n: int) -> list[dict]:
    """n cells of the quick profile's block (4 per seed)."""
    grid = yaml.safe_load((GRIDS / "quick.yaml").read_text())
    grid["blocks"][0]["seed"] = list(range((n + 3) // 4))
    return expand(grid)[:n]


def executors_alone(tmp: Path, counts: tuple[int, int], workers: int) -> dict:
    """Part 2: seconds to run cells that train nothing, per executor and cell count."""
    import ray

    small, large = counts
    times: dict[str, float] = {}

    def timed(name: str, rows) -> None:
        before, start = load(), time.perf_counter()
        n = len(list(rows))
        times[name] = time.perf_counter() - start
        times[f"{name} load"] = [before, load()]
        assert n == int(name.split()[1]), name

    def runs(name: str, execute) -> None:
        """The smaller count twice (the first run cold), then the larger."""
        timed(f"{name} {small} cold", execute(cells_of(small), tmp / f"{name}-cold"))
        for n in counts:
            timed(f"{name} {n}", execute(cells_of(n), tmp / f"{name}-{n}"))

    runs("serial", lambda cells, out: serial(cells, out, nothing))
    start = time.perf_counter()
    connect(None, num_cpus=workers)
    times["ray start"] = time.perf_counter() - start
    try:
        runs("ray", lambda cells, out: run_cells(cells, out, nothing, RayOptions(cpus_per_cell=1)))
    finally:
        ray.shutdown()
    per_cell = {name: (times[f"{name} {large}"] - times[f"{name} {small}"]) / (large - small)
                for name in ("serial", "ray")}
    return {"seconds": times, "per_cell_s": per_cell, "workers": workers, "counts": list(counts)}


def markdown(meta: dict, quick: dict, alone: dict) -> str:
    small, large = alone["counts"]
    s = alone["seconds"]
    lines = [f"# The study runner's executors: serial against Ray ({meta['date']})", "",
             f"`{meta['command']}` at commit {meta['commit']}; {meta['cpu']} ({meta['cores']} cores), Ray "
             f"{meta['ray']}, torch {meta['torch']}. One run of each on a shared machine: load averages (1 min) "
             "before and after each step are given beside it.", "",
             "## The quick profile (4 cells), as a user runs it", "",
             "| executor | command | wall s | load before, after | cells: s each (threads) |", "|---|---|---|---|---|"]
    for name in ("serial", "ray"):
        r = quick[name]
        cells = ", ".join(f"{float(c['wall_s']):.0f} ({c['threads']})" for c in r["cells"])
        lines.append(f"| {name} | `{r['command']}` | {r['wall_s']:.0f} | {r['load_before']}, {r['load_after']} "
                     f"| {cells} |")
    lines += ["", f"Serial / Ray wall time: **{quick['ratio']:.2f}**.", "",
              f"## The executors alone: cells that train nothing, {small} then {large}", "",
              f"Ray: a local instance of {alone['workers']} CPUs, cells of 1 CPU, started in "
              f"{s['ray start']:.1f} s (load {s['ray ' + str(small) + ' cold load'][0]} before the cold run).", "",
              "| executor | run | seconds | load before, after |", "|---|---|---|---|"]
    for name in (f"serial {small} cold", f"serial {small}", f"serial {large}", f"ray {small} cold", f"ray {small}",
                 f"ray {large}"):
        executor, _, run = name.partition(" ")
        lines.append(f"| {executor} | {run} cells | {s[name]:.2f} | {', '.join(map(str, s[name + ' load']))} |")
    per = alone["per_cell_s"]
    lines += ["", f"Cost per cell ((time of {large} - time of {small}) / {large - small}, warm): serial "
                  f"{1000 * per['serial']:.1f} ms, Ray {1000 * per['ray']:.1f} ms. Ray's fixed cost: its start and "
                  f"{s[f'ray {small} cold'] - s[f'ray {small}']:.1f} s more in the first run (worker processes "
                  "starting and importing torch and Lightning).", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/ray_executor")
    p.add_argument("--cells", type=int, nargs=2, default=[4, 40], metavar=("SMALL", "LARGE"))
    p.add_argument("--workers", type=int, default=2, help="CPUs of the local Ray instance in part 2")
    args = p.parse_args(argv)
    if not 0 < args.cells[0] < args.cells[1]:
        p.error(f"--cells: two counts, the first smaller, not {args.cells}")
    import ray
    import torch

    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": commit(), "ray": ray.__version__,
            "torch": torch.__version__, "command": command(__spec__.name, sys.argv[1:] if argv is None else argv),
            **cpu_facts()}
    with tempfile.TemporaryDirectory(prefix="executor-overhead-") as tmp:
        quick = quick_profile(Path(tmp))
        alone = executors_alone(Path(tmp), tuple(args.cells), args.workers)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "executor_overhead.json").write_text(json.dumps({"meta": meta, "quick": quick, "alone": alone},
                                                                indent=1))
    (args.out / "executor_overhead.md").write_text(markdown(meta, quick, alone))
    print(markdown(meta, quick, alone))
    return 0


if __name__ == "__main__":
    sys.exit(main())
