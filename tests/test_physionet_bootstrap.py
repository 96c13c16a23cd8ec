"""The bootstrap over test stays: the metric from error sums, paired resamples, refusing other stays."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.physionet import bootstrap, report


def errors_file(path, ids, sq, count):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, ids=ids, sq=sq, abs=np.sqrt(sq), count=count, history_obs=np.ones(len(ids)))
    return path


def fake_run(seed, n_stays=300, n_variables=41):
    rng = np.random.default_rng(seed)
    count = rng.integers(0, 5, (n_stays, n_variables)).astype(float)
    count[:, 40] = 0  # a variable never asked
    count[:, 39] = 0
    count[:3, 39] = 1  # a rare one: three stays only
    sq = count * rng.gamma(2.0, 0.002, (n_stays, n_variables))
    return np.arange(n_stays)[::-1].copy(), sq, count


def test_the_full_sample_metric_is_the_reports_and_intervals_hold_it(tmp_path):
    ids, sq, count = fake_run(0)
    base = bootstrap.load(errors_file(tmp_path / "a" / "runs" / "c" / "errors.npz", ids, sq, count))
    result = bootstrap.bootstrap([base], resamples=500, seed=1)
    assert result["full"][0] == pytest.approx(report._metric({"sq": sq, "count": count}, np.ones(len(ids), bool)))
    lo, hi = np.percentile(result["resampled"][0], [2.5, 97.5])
    assert lo < result["full"][0] < hi and hi - lo > 0
    # the rare variable is in some resamples and not in others: the metric averages over those present
    assert len(np.unique(result["resampled"][0])) == 500


def test_paired_differences_see_a_uniform_change_that_single_intervals_hide(tmp_path, capsys):
    ids, sq, count = fake_run(0)
    a = errors_file(tmp_path / "base" / "runs" / "c" / "errors.npz", ids, sq, count)
    b = errors_file(tmp_path / "other" / "runs" / "c" / "errors.npz", ids, sq * 1.005, count)  # 0.5 % worse everywhere
    same = errors_file(tmp_path / "same" / "runs" / "c" / "errors.npz", ids, sq, count)
    result = bootstrap.bootstrap([bootstrap.load(p) for p in (a, b, same)], resamples=300)
    diff = result["resampled"][1] - result["resampled"][0]
    assert (diff > 0).all()  # every resample sees it, though the runs' own intervals overlap
    lo_b = np.percentile(result["resampled"][1], 2.5)
    assert lo_b < result["full"][0]
    assert np.array_equal(result["resampled"][2], result["resampled"][0])
    bootstrap.main([str(a), str(b), "--resamples", "200"])
    out = capsys.readouterr().out
    assert "| other/c |" in out and "| 0% |" in out and "of the metric" in out
    image = tmp_path / "intervals.png"
    bootstrap.main([str(a), str(b), str(same), "--resamples", "100", "--plot", str(image), "--target", "0.004"])
    assert image.stat().st_size > 5000 and f"wrote {image}" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="exists"):  # a saved figure is never overwritten
        bootstrap.main([str(a), str(b), "--plot", str(image)])


def test_runs_on_other_stays_and_missing_files_are_refused(tmp_path):
    ids, sq, count = fake_run(0)
    a = bootstrap.load(errors_file(tmp_path / "a.npz", ids, sq, count))
    b = bootstrap.load(errors_file(tmp_path / "b.npz", ids + 1000, sq, count))
    with pytest.raises(ValueError, match="different test stays"):
        bootstrap.bootstrap([a, b], resamples=10)
    with pytest.raises(SystemExit, match="no such file"):
        bootstrap.main([str(tmp_path / "missing.npz")])
