"""Re-score the wide recipe's saved softmax model (physionet2012-weighting/wide/best/model.ckpt, seed 0)
and leave its per-stay error sums where its cell would have (runs/<cell>/errors.npz), so the
bootstrap can pair it with later runs. Refuses to write if the test MSE differs from its results row.

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/rescore_best.py
"""

import numpy as np
from best_model import CELL, FOLDER, load_best

from benchmarks.physionet.cell import evaluate

module, dm, row = load_best()
test = evaluate(module, dm.test_dataloader(), dm.n_variables)
if not np.isclose(test["mse"], row["test_mse"], rtol=1e-6):
    raise SystemExit(f"re-scored test MSE {test['mse']!r} differs from the row's {row['test_mse']!r}")
out = FOLDER / "runs" / CELL
out.mkdir(parents=True, exist_ok=True)
history = dm.datasets["test"].history
np.savez_compressed(out / "errors.npz", ids=history.ids[test["rows"]], sq=test["sq"], abs=test["abs"],
                    count=test["count"], history_obs=np.diff(history.offsets)[test["rows"]])
print(f"test MSE {test['mse']!r} (row: {row['test_mse']!r}); wrote {out / 'errors.npz'}")
