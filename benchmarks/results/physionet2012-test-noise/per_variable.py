"""The library's best model beside the simple baselines, variable by variable, on the validation and
test stays of split 0 (per_variable.txt): where the per-variable metric's weight lies and where the
model is no better than the last observation.

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/per_variable.py > benchmarks/results/physionet2012-test-noise/per_variable.txt
"""

import numpy as np
import torch
from best_model import load_best

from benchmarks.physionet.cell import evaluate
from ts_continuum.data.physionet import VARIABLES
from ts_continuum.models import HistoryMean, LastObservation
from ts_continuum.training.query_module import QueryForecastingModule

torch.set_num_threads(2)
model, dm, _ = load_best()
fallback = dm.train_means()
forecasters = {"model": model, "last": QueryForecastingModule(LastObservation(dm.n_variables, fallback)),
               "mean": QueryForecastingModule(HistoryMean(dm.n_variables, fallback))}
for split, loader in (("validation", dm.val_dataloader()), ("test", dm.test_dataloader())):
    scored = {name: evaluate(f, loader, dm.n_variables) for name, f in forecasters.items()}
    count = scored["model"]["count"].sum(0)
    per = {name: r["sq"].sum(0) / np.maximum(count, 1) for name, r in scored.items()}
    has = count > 0
    print(f"\n{split} stays: MSE x1e-3 per variable, best model / last observation / history mean "
          f"(metric: {scored['model']['mse'] * 1e3:.3f} / {scored['last']['mse'] * 1e3:.3f} / {scored['mean']['mse'] * 1e3:.3f})")
    print("| variable | queries | model | last | mean | share of the model's metric |")
    print("|---|---|---|---|---|---|")
    for i in np.argsort(-per["model"])[:has.sum()]:
        print(f"| {VARIABLES[i]} | {count[i]} | {per['model'][i] * 1e3:.3f} | {per['last'][i] * 1e3:.3f} | "
              f"{per['mean'][i] * 1e3:.3f} | {per['model'][i] / per['model'][has].sum():.1%} |")
