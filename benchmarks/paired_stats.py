"""Statistics of paired differences (continuous - softmax, or any B - A of one draw and seed): a
mean with its 95 % t-interval, a paired t-test, a Wilcoxon signed-rank test, the sign test and the
Hodges-Lehmann shift. The study's report and the synthetic control read every paired figure from here.
"""

from __future__ import annotations

import numpy as np
from scipy import stats


def paired_stats(d: np.ndarray) -> dict:
    """Count, mean, 95 % t-interval (lo, hi), paired t-test and Wilcoxon p-values (p_t, p_w) of the
    differences ``d``; NaN where there are too few, or too uniform, differences to say."""
    n = len(d)
    mean = float(np.mean(d)) if n else float("nan")
    if n < 2:
        return {"n": n, "mean": mean, "lo": float("nan"), "hi": float("nan"), "p_t": float("nan"), "p_w": float("nan")}
    half = stats.t.ppf(0.975, n - 1) * np.std(d, ddof=1) / np.sqrt(n)
    p_t = float(stats.ttest_1samp(d, 0.0).pvalue) if np.std(d) > 0 else float("nan")
    p_w = float(stats.wilcoxon(d).pvalue) if n >= 6 and np.any(d != 0) else float("nan")
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half, "p_t": p_t, "p_w": p_w}


def hodges_lehmann(d: np.ndarray) -> float:
    """Median of the Walsh averages (d_i + d_j) / 2, i <= j: the shift the signed-rank test sees."""
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2)) if len(d) else float("nan")


def sign_test_p(d: np.ndarray) -> float:
    """Two-sided sign test on the nonzero differences (ties dropped)."""
    d = np.asarray(d, dtype=float)
    n = int(np.count_nonzero(d))
    return float(stats.binomtest(int((d < 0).sum()), n, 0.5).pvalue) if n else float("nan")
