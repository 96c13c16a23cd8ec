"""Re-score the library's saved best model (physionet2012-weighting/wide/best/model.ckpt, seed 0 of the
wide recipe) and leave its per-stay error sums where its cell would have (runs/<cell>/errors.npz), so the
bootstrap can pair it with later runs. Refuses to write if the test MSE differs from its results row.

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/rescore_best.py
"""

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.physionet.cell import SETTINGS, build_model, data_module, evaluate
from ts_continuum.training.query_module import QueryForecastingModule

FOLDER = Path("benchmarks/results/physionet2012-weighting/wide")
row = pd.read_csv(FOLDER / "results.csv").set_index("cell_id").loc["async_softmax_rope_1.0_none_0"]
cell = {**SETTINGS, **json.loads(row["config"])}
dm = data_module(cell)
module = QueryForecastingModule(build_model(cell, dm))
module.load_state_dict(torch.load(FOLDER / "best" / "model.ckpt", map_location="cpu", weights_only=True)["state_dict"])
test = evaluate(module, dm.test_dataloader(), dm.n_variables)
if not np.isclose(test["mse"], row["test_mse"], rtol=1e-6):
    raise SystemExit(f"re-scored test MSE {test['mse']!r} differs from the row's {row['test_mse']!r}")
out = FOLDER / "runs" / "async_softmax_rope_1.0_none_0"
out.mkdir(parents=True, exist_ok=True)
history = dm.datasets["test"].history
np.savez_compressed(out / "errors.npz", ids=history.ids[test["rows"]], sq=test["sq"], abs=test["abs"],
                    count=test["count"], history_obs=np.diff(history.offsets)[test["rows"]])
print(f"test MSE {test['mse']!r} (row: {row['test_mse']!r}); wrote {out / 'errors.npz'}")
