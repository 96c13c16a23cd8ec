"""A benchmark run beside the wide recipe's saved softmax model and the simple baselines, variable by variable,
on the validation and test stays of split 0: which variables a change moved.

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/compare_per_variable.py \
        <run folder> <cell id> > <run folder>/per_variable.txt

The run's checkpoint is ``<run folder>/runs/<cell id>/best.ckpt`` (the runner's best validation epoch).
"""

import sys
from pathlib import Path

import numpy as np
import torch
from best_model import load_best, load_run

from benchmarks.physionet.cell import evaluate
from ts_continuum.data.physionet import VARIABLES
from ts_continuum.models import HistoryMean, LastObservation
from ts_continuum.training.query_module import QueryForecastingModule

if len(sys.argv) != 3:
    sys.exit(__doc__)
folder, cell_id = Path(sys.argv[1]), sys.argv[2]
checkpoint = folder / "runs" / cell_id / "best.ckpt"
if not checkpoint.is_file():
    sys.exit(f"no checkpoint at {checkpoint}: run the grid first")
torch.set_num_threads(2)
best, dm, _ = load_best()
run, run_dm, _ = load_run(folder, cell_id, checkpoint)
if not (np.array_equal(run_dm.scale_min, dm.scale_min) and all(
        np.array_equal(run_dm.split_ids[s], dm.split_ids[s]) for s in dm.split_ids)):
    sys.exit("the run was trained on another split or scaling than the best model: not comparable variable by variable")
fallback = dm.train_means()
forecasters = {"run": run, "best": best, "last": QueryForecastingModule(LastObservation(dm.n_variables, fallback)),
               "mean": QueryForecastingModule(HistoryMean(dm.n_variables, fallback))}
print(f"{folder.name}/{cell_id} against the softmax recipe's saved model (physionet2012-weighting/wide/best) and the baselines")
for split, loader in (("validation", dm.val_dataloader()), ("test", dm.test_dataloader())):
    scored = {name: evaluate(f, loader, dm.n_variables) for name, f in forecasters.items()}
    count = scored["run"]["count"].sum(0)
    per = {name: r["sq"].sum(0) / np.maximum(count, 1) for name, r in scored.items()}
    has = count > 0
    metric = " / ".join(f"{scored[n]['mse'] * 1e3:.3f}" for n in forecasters)
    print(f"\n{split} stays: MSE x1e-3 per variable, run / best model / last observation / history mean "
          f"(metric: {metric})")
    print("| variable | queries | run | best | last | mean | run - best |")
    print("|---|---|---|---|---|---|---|")
    for i in np.argsort(-per["best"])[:has.sum()]:
        print(f"| {VARIABLES[i]} | {count[i]} | {per['run'][i] * 1e3:.3f} | {per['best'][i] * 1e3:.3f} | "
              f"{per['last'][i] * 1e3:.3f} | {per['mean'][i] * 1e3:.3f} | "
              f"{(per['run'][i] - per['best'][i]) * 1e3:+.3f} |")
