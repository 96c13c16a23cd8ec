"""How hard the test stays of a random split are: the simple baselines' per-variable MSE on the
validation and test stays of split seeds 0..N-1 (the published protocol's 60/20/20 % split drawn
with other seeds; seed 0 is the study's). Usage:
PYTHONPATH=. python benchmarks/results/physionet2012-splits/split_difficulty.py [N]  (writes splits.csv beside it)"""
import csv
import sys
import time
from pathlib import Path

import torch

from benchmarks.physionet.cell import evaluate
from ts_continuum.data import PhysioNetDataModule
from ts_continuum.models import HistoryMean, LastObservation
from ts_continuum.training.query_module import QueryForecastingModule

torch.set_num_threads(2)
n_splits = int(sys.argv[1]) if len(sys.argv) > 1 else 10
out = Path(__file__).with_name("splits.csv")
rows = []
for seed in range(n_splits):
    t0 = time.perf_counter()
    dm = PhysioNetDataModule(split_seed=seed, batch_size=32, eval_batch_size=128)
    dm.setup("fit")
    row = {"split_seed": seed}
    for name, cls in (("last", LastObservation), ("mean", HistoryMean)):
        module = QueryForecastingModule(cls(dm.n_variables, fallback=dm.train_means()))
        for part, loader in (("val", dm.val_dataloader()), ("test", dm.test_dataloader())):
            row[f"{name}_{part}_mse"] = evaluate(module, loader, dm.n_variables)["mse"]
    rows.append(row)
    print({k: (f"{v * 1e3:.3f}e-3" if isinstance(v, float) else v) for k, v in row.items()},
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
