"""The synthetic control (benchmarks/synthetic_control.py): the sampling it simulates, and a tiny run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks import synthetic_control as sc


@pytest.mark.parametrize("sampling,share,crest_share", [("informative", 0.55, 0.9 / 1.1), ("random", 0.55, 0.5),
                                                         ("complete", 1.0, 0.5)])
def test_sampling_follows_the_cycle_only_when_informative(sampling, share, crest_share):
    """The irregular samplings keep about 55 % of the steps; the informative one mostly on the cycle's
    crests, so the plain average of the observations overstates the level that the time average gives."""
    observed, full = sc.simulate(sampling, seed=0, n_series=4, n_steps=3000)
    assert len(observed) / len(full) == pytest.approx(share, abs=0.02)
    assert full.loc[full["observed"], "crest"].mean() == pytest.approx(crest_share, abs=0.02)
    bias = (observed.groupby("unique_id")["y"].mean() - full.groupby("unique_id")["y"].mean()).mean()
    if sampling == "informative":
        assert bias > 0.25  # E[s | observed] = (0.9 - 0.2) / 1.1 * 2 / pi = 0.41
    else:
        assert abs(bias) < 0.05
    pd.testing.assert_frame_equal(observed, sc.simulate(sampling, seed=0, n_series=4, n_steps=3000)[0])
    signal = sc.simulate("complete", seed=0, n_series=4, n_steps=3000)[1]
    pd.testing.assert_series_equal(full["y"], signal["y"])  # one signal per seed; samplings differ in what is seen


def test_unknown_sampling_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown sampling 'bursty'; choose one of informative, random, complete"):
        sc.simulate("bursty", seed=0)


def test_tiny_run_writes_results_and_resumes(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--series", "2", "--steps", "650", "--max-epochs", "1", "--seeds", "0",
            "--attention-backend", "torch", "--samplings", "informative", "random"]
    assert sc.main(args) == 0
    rows = pd.read_csv(tmp_path / "results.csv")
    assert sorted(zip(rows["sampling"], rows["attention"])) == sorted(
        (s, a) for s in ("informative", "random") for a in sc.ATTENTIONS)
    assert (rows["n_all"] == 2 * sc.N_WINDOWS * sc.HORIZON).all()  # every future step of every window
    assert (rows["n_observed"] < rows["n_all"]).all() and (rows["mse_all"] > 0).all()
    assert [len(json.loads(c)) for c in rows["val_curve"]] == list(rows["epochs"])
    summary = (tmp_path / "summary.md").read_text()
    assert "## Test MSE on every future step (`mse_all`)" in summary and "| informative | 1 |" in summary
    assert "## Validation MSE at the same epoch" in summary
    for plot in ("synthetic_control.png", "validation_curves.png", "validation_gap.png"):
        assert (tmp_path / plot).stat().st_size > 0
    capsys.readouterr()
    assert sc.main(args) == 0
    assert "4 runs recorded, 0 to run" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "results.csv")) == 4
    with pytest.raises(SystemExit, match="settings .*'max_epochs': 1.* not .*'max_epochs': 2"):
        sc.main([*args, "--seeds", "1", "--max-epochs", "2"])


def test_validation_gaps_pair_the_epochs_both_runs_reached():
    rows = pd.DataFrame({"sampling": ["random"] * 3 + ["complete"], "seed": [0, 0, 1, 0],
                         "attention": ["softmax", "continuous", "softmax", "softmax"],
                         "val_curve": ["[0.5, 0.4, 0.2]", "[0.4, 0.5]", "[1.0]", "[1.0]"]})
    gaps = sc.validation_gaps(rows)
    assert list(gaps) == [("random", 0)]  # the other runs have no partner
    assert gaps["random", 0] == pytest.approx([-0.2, 0.25])
    table = "\n".join(sc.gap_table(rows))
    assert "| random | -20.0 % (1) | +25.0 % (1) |" in table and "| complete | " in table


def test_runs_are_not_appended_to_another_versions_table(tmp_path):
    pd.DataFrame({"sampling": ["random"], "attention": ["softmax"], "seed": [0], "mse_all": [0.1]}).to_csv(
        tmp_path / "results.csv", index=False)
    with pytest.raises(SystemExit, match="columns of another version of this script"):
        sc.main(["--out", str(tmp_path), "--seeds", "0"])
