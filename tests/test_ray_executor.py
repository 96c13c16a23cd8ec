"""The study runner on Ray (``--executor ray``), through a local Ray instance of 2 CPUs: the serial
executor's rows, failures and dead workers recorded, and a folder that resumes after the driver is killed."""

from __future__ import annotations

import csv
import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from benchmarks.study import ray_executor, runner

pytestmark = [pytest.mark.ray, pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                                                  reason='needs Ray: pip install -e ".[cluster]"')]
ROOT = Path(__file__).resolve().parents[1]
METRICS = ("test_mse", "test_mae", "best_val_mse", "epochs", "best_epoch", "val_curve", "test_curve", "n_params")


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray instance for the module, limited to the CI machine's 2 CPUs; the runner reuses it."""
    import ray

    ray_executor.connect(None, num_cpus=2)
    yield
    ray.shutdown()


@pytest.fixture
def no_report(monkeypatch):
    """Cells that train nothing leave too little for a summary."""
    monkeypatch.setattr(runner.report, "write", lambda out: None)


def rows(out: Path) -> list[dict]:
    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f))


def files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


def test_ray_gives_the_serial_rows_and_files(tiny_csv, tmp_path, local_ray):
    """Same cells, same metrics, same per-cell files; the cell that raises is recorded as failed."""
    import torch

    grid = {"name": "tiny", "defaults": {
        "model_args": {"patch_len": 8, "stride": 4, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16,
                       "dropout": 0.0, "attention_backend": "torch"},
        "lr": 0.003, "lr_schedule": "constant", "lookback": 24, "batch_size": 32, "eval_batch_size": 64,
        "max_epochs": 2, "patience": 2},
        "blocks": [{"name": "main", "model": "patchtst", "attention": ["softmax", "continuous"],
                    "pos_encoding": "learned", "dataset": str(tiny_csv), "horizon": 6, "regime": ["regular", "drop30"],
                    "seed": 0},
                   {"name": "broken", "model": "patchtst", "attention": "softmax", "pos_encoding": "learned",
                    "dataset": str(tiny_csv), "horizon": 6, "regime": "regular", "seed": 9,
                    "overrides": {"model_args": {"d_model": 7}}}]}
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as a Ray cell of 1 CPU: float sums then agree
    try:
        runner.main(["--grid", str(path), "--out", str(tmp_path / "serial")])
    finally:
        torch.set_num_threads(threads)
    runner.main(["--grid", str(path), "--out", str(tmp_path / "ray"), "--executor", "ray", "--cpus-per-cell", "1"])
    serial = {r["cell_id"]: r for r in rows(tmp_path / "serial")}
    on_ray = {r["cell_id"]: r for r in rows(tmp_path / "ray")}
    assert sorted(on_ray) == sorted(serial) and len(on_ray) == 5
    for cid, row in on_ray.items():
        assert row["status"] == serial[cid]["status"] and row["error"] == serial[cid]["error"], cid
        assert row["config"] == serial[cid]["config"], cid
        for m in METRICS if row["status"] == "ok" else ():
            mine, theirs = (json.loads(r[m]) if m.endswith("curve") else float(r[m]) for r in (row, serial[cid]))
            assert mine == pytest.approx(theirs, rel=1e-5), (cid, m)
        assert files(tmp_path / "ray" / "runs" / cid) == files(tmp_path / "serial" / "runs" / cid), cid
    failed = [cid for cid, row in on_ray.items() if row["status"] == "failed"]
    assert len(failed) == 1 and "divisible" in on_ray[failed[0]]["error"]
    assert "d_model" in (tmp_path / "ray" / "runs" / failed[0] / "error.txt").read_text()
    assert {r["threads"] for r in on_ray.values() if r["status"] == "ok"} == {"1"}
    assert "Paired differences" in (tmp_path / "ray" / "summary.md").read_text()


def test_a_worker_that_dies_is_retried_once_then_recorded(tmp_path, local_ray, no_report):
    marker = tmp_path / "died-once"

    def cell_fn(cell: dict, out_dir: Path) -> dict:
        if cell["regime"] == "drop60":  # its worker dies on every try
            os._exit(1)
        if cell["attention"] == "continuous" and not marker.exists():  # dies on the first try only
            marker.touch()
            os._exit(1)
        (out_dir / "where.txt").write_text(str(out_dir))
        return {"test_mse": 0.5, "wall_s": 0.0}

    out = tmp_path / "out"
    runner.main(["--profile", "quick", "--out", str(out), "--executor", "ray", "--max-cells", "3"], cell_fn=cell_fn)
    recorded = {r["cell_id"]: r for r in rows(out)}
    assert [r["status"] for r in recorded.values()].count("ok") == 2 and marker.exists()
    [dead] = [r for r in recorded.values() if r["status"] == "failed"]
    assert dead["regime"] == "drop60" and "died on the first try and on the retry" in dead["error"]
    assert dead["host"] == "" and all(r["host"] for r in recorded.values() if r["status"] == "ok")
    assert (out / "runs" / dead["cell_id"] / "error.txt").exists()
    for cid, row in recorded.items():  # the files were written elsewhere and sent back
        if row["status"] == "ok":
            where = Path((out / "runs" / cid / "where.txt").read_text())
            assert not where.is_relative_to(out) and not where.exists()


def test_a_worker_with_other_library_code_refuses_its_cells(tmp_path, local_ray, no_report, monkeypatch):
    """A node installed from another commit would run other code than the rows' commit names."""
    monkeypatch.setattr(ray_executor, "library_digest", lambda: "another")  # the driver's side only
    out = tmp_path / "out"
    runner.main(["--profile", "quick", "--out", str(out), "--executor", "ray", "--max-cells", "1"],
                cell_fn=lambda cell, out_dir: {"test_mse": 0.5})
    [row] = rows(out)
    assert row["status"] == "failed" and "is not the driver's code" in row["error"] and "[cluster]" in row["error"]


def test_a_killed_driver_leaves_a_folder_that_resumes(tmp_path, capsys, no_report):
    """The driver (and its local Ray instance) killed with cells running: the rows it appended stand,
    and the next run, of either executor, runs only the missing cells."""
    out = tmp_path / "out"
    driver = textwrap.dedent(f"""
        import time
        from benchmarks.study import runner

        def cell(cell, out_dir):  # the regular cells finish, the others are still running when it is killed
            time.sleep(2 if cell["regime"] == "regular" else 120)
            return {{"test_mse": 0.5, "wall_s": 2.0}}

        runner.main(["--profile", "quick", "--out", {str(out)!r}, "--executor", "ray"], cell_fn=cell)
    """)
    proc = subprocess.Popen([sys.executable, "-c", driver], cwd=ROOT, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 100
        while not ((out / "results.csv").exists() and len(rows(out)) >= 1):
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "no cell finished"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and the Ray processes it started
        proc.wait()
    before = rows(out)
    assert 1 <= len(before) <= 2 and {r["regime"] for r in before} == {"regular"}
    capsys.readouterr()
    ran = []

    def fast(cell: dict, out_dir: Path) -> dict:
        ran.append(cell)
        return {"test_mse": 0.5}

    runner.main(["--profile", "quick", "--out", str(out)], cell_fn=fast)  # serial
    assert f"4 cells, {len(before)} already recorded, {4 - len(before)} to run" in capsys.readouterr().out
    after = rows(out)
    assert after[:len(before)] == before and len({r["cell_id"] for r in after}) == len(after) == 4
    assert len(ran) == 4 - len(before)


def test_gpus_and_the_cells_device_must_agree(tmp_path):
    with pytest.raises(SystemExit, match="reserves GPUs, but cells train with accelerator 'cpu'"):
        runner.main(["--profile", "quick", "--out", str(tmp_path), "--executor", "ray", "--gpus-per-cell", "1",
                     "--dry-run"])
    with pytest.raises(SystemExit, match="Ray hides GPUs from tasks that reserve none: give --gpus-per-cell"):
        runner.main(["--profile", "gpu_replicate", "--out", str(tmp_path), "--executor", "ray", "--dry-run"])
    with pytest.raises(SystemExit, match="--gpus-per-cell 2: a cell trains on one device"):
        runner.main(["--profile", "gpu_replicate", "--out", str(tmp_path), "--executor", "ray", "--gpus-per-cell",
                     "2", "--dry-run"])
    runner.main(["--profile", "gpu_replicate", "--out", str(tmp_path), "--executor", "ray", "--gpus-per-cell", "0.5",
                 "--dry-run"])  # two cells share a GPU
