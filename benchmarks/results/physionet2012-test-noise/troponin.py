"""How much of the best model's test MSE one variable and a few stays carry (the README's second table).

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/troponin.py   # after rescore_best.py
"""

from pathlib import Path

import numpy as np

from benchmarks.physionet import bootstrap
from ts_continuum.data.physionet import VARIABLES

run = bootstrap.load(Path("benchmarks/results/physionet2012-weighting/wide/runs/async_softmax_rope_1.0_none_0/errors.npz"))
sq, count = run["sq"], run["count"]
t = VARIABLES.index("TroponinI")
held = count[:, t] > 0
largest = np.sort(sq[held, t])[::-1]
print(f"TroponinI: {int(count[:, t].sum())} test queries in {int(held.sum())} stays; the largest stay's share of its "
      f"squared error {largest[0] / largest.sum():.1%}, the five largest {largest[:5].sum() / largest.sum():.1%}")
weights = bootstrap.resample_weights(len(run["ids"]), 2000, 0)
without_sq, without_count = sq.copy(), count.copy()
without_sq[:, t] = 0.0
without_count[:, t] = 0.0
for name, s, c in (("all variables", sq, count), ("without TroponinI", without_sq, without_count)):
    full = bootstrap.metric(s.sum(0), c.sum(0))
    lo, hi = np.percentile(bootstrap.metric(weights @ s, weights @ c), [2.5, 97.5])
    print(f"{name}: test MSE {full * 1e3:.3f}e-3, 95 % bootstrap interval over stays [{lo * 1e3:.3f}, {hi * 1e3:.3f}]"
          f" ({(lo / full - 1):+.0%}, {(hi / full - 1):+.0%})")
