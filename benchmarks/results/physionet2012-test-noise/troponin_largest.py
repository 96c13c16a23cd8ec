"""TroponinI's largest test errors of the best model: each query with its stay's TroponinI history
((hours before the origin, scaled value) pairs), the truth, the forecast, the squared error and the
stay's TroponinT observations (troponin_largest.txt).

    PYTHONPATH=. python benchmarks/results/physionet2012-test-noise/troponin_largest.py > benchmarks/results/physionet2012-test-noise/troponin_largest.txt
"""

import numpy as np
import pandas as pd
import torch
from best_model import load_best

from ts_continuum.data.physionet import VARIABLES

torch.set_num_threads(2)
module, dm, _ = load_best()
tni, tnt = VARIABLES.index("TroponinI"), VARIABLES.index("TroponinT")
test = dm.datasets["test"]
stays = np.flatnonzero(test.queries.counts()[:, tni] > 0)
batch = test.collate(list(stays))
with torch.no_grad():
    pred = module(batch)
rows = []
for b, s in enumerate(stays):
    n, m = int(batch["lengths"][b, tni]), int(batch["query_lengths"][b, tni])
    history = [(round(float(t), 1), round(float(v), 3)) for t, v in zip(batch["times"][b, tni, :n],
                                                                        batch["values"][b, tni, :n])]
    for j in range(m):
        y, p = float(batch["query_values"][b, tni, j]), float(pred[b, tni, j])
        rows.append((int(test.history.ids[s]), history, round(float(batch["query_times"][b, tni, j]), 1), round(y, 3),
                     round(p, 3), (y - p) ** 2, int(batch["lengths"][b, tnt])))
df = pd.DataFrame(rows, columns=["record_id", "TroponinI history", "query hour", "truth", "forecast", "squared error",
                                 "TroponinT observed"]).sort_values("squared error", ascending=False)
pd.set_option("display.width", 250)
pd.set_option("display.max_colwidth", 90)
print(df.head(15).to_string(index=False))
none = df["TroponinI history"].str.len() == 0
print(f"\n{len(df)} TroponinI test queries in {len(stays)} stays; queries of stays without TroponinI history: "
      f"{int(none.sum())}, {df['squared error'][none].sum() / df['squared error'].sum():.0%} of its squared error")
