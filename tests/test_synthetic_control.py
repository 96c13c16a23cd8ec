"""The synthetic control (benchmarks/synthetic/): the sampling it simulates, and a tiny run."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from benchmarks.synthetic.cli import main
from benchmarks.synthetic.runs import ATTENTIONS, MODELS, forecasts_from_grid
from benchmarks.synthetic.simulation import (HELD_OUT, HORIZON, N_WINDOWS, frame_on_grid, grid_error, simulate,
                                             window_origins)
from benchmarks.synthetic.summary import gap_table, validation_gaps


@pytest.mark.parametrize("sampling,share,crest_share", [("informative", 0.55, 0.9 / 1.1), ("random", 0.55, 0.5),
                                                         ("complete", 1.0, 0.5)])
def test_sampling_follows_the_cycle_only_when_informative(sampling, share, crest_share):
    """The irregular samplings keep about 55 % of the steps; the informative one mostly on the cycle's
    crests, so the plain average of the observations overstates the level that the time average gives."""
    observed, full = simulate(sampling, seed=0, n_series=4, n_steps=3000)
    assert len(observed) / len(full) == pytest.approx(share, abs=0.02)
    assert full.loc[full["observed"], "crest"].mean() == pytest.approx(crest_share, abs=0.02)
    bias = (observed.groupby("unique_id")["y"].mean() - full.groupby("unique_id")["y"].mean()).mean()
    if sampling == "informative":
        assert bias > 0.25  # E[s | observed] = (0.9 - 0.2) / 1.1 * 2 / pi = 0.41
    else:
        assert abs(bias) < 0.05
    pd.testing.assert_frame_equal(observed, simulate(sampling, seed=0, n_series=4, n_steps=3000)[0])
    signal = simulate("complete", seed=0, n_series=4, n_steps=3000)[1]
    pd.testing.assert_series_equal(full["y"], signal["y"])  # one signal per seed; samplings differ in what is seen


def test_unknown_sampling_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown sampling 'bursty'; choose one of informative, random, complete"):
        simulate("bursty", seed=0)


def test_tiny_run_writes_results_and_resumes(tmp_path, capsys):
    args = ["--out", str(tmp_path), "--series", "2", "--steps", "650", "--max-epochs", "1", "--seeds", "0",
            "--attention-backend", "torch", "--samplings", "informative", "random"]
    assert main(args) == 0
    rows = pd.read_csv(tmp_path / "results.csv")
    assert sorted(zip(rows["sampling"], rows["attention"])) == sorted(
        (s, a) for s in ("informative", "random") for a in ATTENTIONS)
    assert (rows["n_all"] == 2 * N_WINDOWS * HORIZON).all()  # every future step of every window
    assert (rows["n_observed"] < rows["n_all"]).all() and (rows["mse_all"] > 0).all()
    assert [len(json.loads(c)) for c in rows["val_curve"]] == list(rows["epochs"])
    summary = (tmp_path / "summary.md").read_text()
    assert "## Test MSE on every future step (`mse_all`)" in summary and "| informative | 1 |" in summary
    assert "## Validation MSE at the same epoch" in summary
    for plot in ("synthetic_control.png", "validation_curves.png", "validation_gap.png"):
        assert (tmp_path / plot).stat().st_size > 0
    capsys.readouterr()
    assert main(args) == 0
    assert "4 runs recorded, 0 to run" in capsys.readouterr().out
    assert len(pd.read_csv(tmp_path / "results.csv")) == 4
    with pytest.raises(SystemExit, match="settings .*'max_epochs': 1.* not .*'max_epochs': 2"):
        main([*args, "--seeds", "1", "--max-epochs", "2"])
    with pytest.raises(SystemExit, match="another model, input"):
        main([*args, "--seeds", "1", "--model", "patchtst"])

    grid_out = tmp_path / "interpolated"
    grid_args = ["--out", str(grid_out), "--series", "2", "--steps", "650", "--max-epochs", "1", "--seeds", "0",
                 "--attention-backend", "torch", "--input", "interpolated"]
    with pytest.raises(SystemExit, match="its runs have the settings .*'max_epochs': 1.* not .*'max_epochs': 2"):
        main([*grid_args, "--max-epochs", "2", "--compare-with", str(tmp_path)])
    assert main([*grid_args, "--compare-with", str(tmp_path)]) == 0
    rows = pd.read_csv(grid_out / "results.csv")
    assert sorted(rows["sampling"].unique()) == ["informative", "random"]  # complete: nothing to interpolate
    assert set(rows["input"]) == {"interpolated"} and set(rows["model"]) == {"encoder"}
    assert (rows["n_all"] == 2 * N_WINDOWS * HORIZON).all()
    summary = (grid_out / "summary.md").read_text()
    assert "(encoder-only Transformer, input interpolated onto every step)" in summary
    assert (grid_out / "against_observed.png").stat().st_size > 0
    assert "## How far the interpolated grid is from the series" in summary and "| random | 0 | " in summary
    theirs = pd.read_csv(tmp_path / "results.csv").set_index(["sampling", "attention"])["mse_all"]
    mine = rows.set_index(["sampling", "attention"])["mse_all"]
    delta = theirs["random", "continuous"] - mine["random", "softmax"]
    assert f"| random | continuous on the observations vs softmax interpolated | 1 | {mine['random', 'softmax']:.4f} " \
           f"| {theirs['random', 'continuous']:.4f} | {delta:+.4f} " in summary
    (grid_out / "summary.md").unlink()
    assert main(["--out", str(grid_out), "--input", "interpolated", "--seeds", "0", "--compare-with",
                    str(tmp_path)]) == 0
    assert (grid_out / "summary.md").read_text() == summary  # rewritten from the recorded settings alone

    inputs_out = tmp_path / "inputs"
    assert main(["--out", str(inputs_out), "--series", "2", "--steps", "650", "--max-epochs", "1", "--seeds", "0",
                    "--attention-backend", "torch", "--input", "inputs_interpolated", "--samplings", "random",
                    "--compare-with", str(tmp_path)]) == 0
    filled = pd.read_csv(inputs_out / "results.csv").set_index("attention")
    assert set(filled["input"]) == {"inputs_interpolated"} and (filled["n_all"] == 2 * N_WINDOWS * HORIZON).all()
    for attention in ATTENTIONS:  # same seed and data as the observed run: only the inputs differ
        assert filled.loc[attention, "mse_all"] != pytest.approx(theirs["random", attention], rel=1e-6)
    summary = (inputs_out / "summary.md").read_text()
    assert "| random | continuous on the observations vs softmax inputs interpolated | 1 |" in summary
    assert "targets observed)" in summary and "their targets are the observations" in summary


def test_interpolating_complete_sampling_or_comparing_observed_runs_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--input", "interpolated", "--samplings", "complete"])
    assert "complete sampling has nothing to interpolate" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--out", str(tmp_path), "--compare-with", str(tmp_path)])
    assert "add --input interpolated" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no results.csv and meta.json there"):
        main(["--out", str(tmp_path / "a"), "--input", "interpolated", "--compare-with", str(tmp_path / "b")])


def test_a_tiny_patchtst_run(tmp_path):
    """PatchTST (amendment 4) on irregular and complete input: patches of observations, then of steps."""
    assert main(["--out", str(tmp_path), "--series", "2", "--steps", "650", "--max-epochs", "1", "--seeds", "0",
                    "--attention-backend", "torch", "--model", "patchtst", "--samplings", "random", "complete"]) == 0
    rows = pd.read_csv(tmp_path / "results.csv")
    assert len(rows) == 4 and set(rows["model"]) == {"patchtst"} and (rows["mse_all"] > 0).all()
    assert "(PatchTST, the observations as input)" in (tmp_path / "summary.md").read_text()


def test_frame_on_grid_interpolates_each_series_between_its_own_observations():
    observed = pd.DataFrame({"unique_id": [0, 0, 0, 1, 1], "ds": [2.0, 4.0, 5.0, 0.0, 3.0],
                             "y": [1.0, 3.0, -1.0, 0.0, 6.0]})
    grid = frame_on_grid(observed)
    assert grid["unique_id"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert grid["ds"].tolist() == [2, 3, 4, 5, 0, 1, 2, 3]
    assert grid["y"].tolist() == pytest.approx([1, 2, 3, -1, 0, 2, 4, 6])


def test_the_grid_errs_in_the_sparse_troughs_of_informative_sampling():
    """Linear interpolation cuts across the sparsely observed troughs, so it fills them too high; under
    random sampling the gaps are short and the grid is close to the series everywhere."""
    informative = grid_error("informative", seed=0, n_series=4, n_steps=1500)
    uniform = grid_error("random", seed=0, n_series=4, n_steps=1500)
    assert informative["filled"] == pytest.approx(0.45, abs=0.02) == uniform["filled"]
    assert informative["trough_filled"] == pytest.approx(0.8, abs=0.03)
    assert informative["trough_bias"] > 0.2 and abs(informative["crest_bias"]) < 0.05
    assert informative["mse"] > 3 * uniform["mse"]


@pytest.fixture(scope="module")
def tiny_fit():
    """A one-epoch encoder on 2 series of an informative draw, and the draw's observations."""
    from ts_continuum import Forecaster

    observed, _ = simulate("informative", seed=1, n_series=2, n_steps=650)
    last = observed.groupby("unique_id")["ds"].transform("max")
    f = Forecaster(attention="softmax", max_epochs=1, attention_backend="torch", **MODELS["encoder"])
    f.fit(observed[observed["ds"] <= last - HELD_OUT], val_size=HELD_OUT)
    return f, observed


def test_the_baseline_forecasts_the_steps_the_backtest_scores(tiny_fit):
    """Same origins (the last observation at or before each cutoff), same steps, same actuals: the two
    inputs are scored on the same targets from the same information."""
    f, observed = tiny_fit
    bt = f.backtest(observed, n_windows=N_WINDOWS, step=HORIZON).forecasts
    origins = window_origins(observed)
    pd.testing.assert_frame_equal(origins[["unique_id", "cutoff"]],
                                  bt[["unique_id", "cutoff"]].drop_duplicates().reset_index(drop=True))
    assert origins.groupby("unique_id")["rank"].max().tolist() == [N_WINDOWS - 1] * 2
    grid = forecasts_from_grid(f, observed)
    pd.testing.assert_frame_equal(grid[["unique_id", "cutoff", "ds", "y"]], bt[["unique_id", "cutoff", "ds", "y"]])


def test_the_baseline_does_not_look_past_the_forecast_origin(tiny_fit):
    """Interpolating a window's history with the whole series would fill the steps just before its
    origin from later observations; changing everything after the last origin must change nothing
    but the actuals, and changing one window's future must leave its forecast alone."""
    f, observed = tiny_fit
    before = forecasts_from_grid(f, observed)
    origins = window_origins(observed)
    first = origins[origins["rank"] == 0].set_index("unique_id")["cutoff"]
    changed = observed.copy()
    later = changed["ds"] > changed["unique_id"].map(first)
    changed.loc[later, "y"] += 50.0
    after = forecasts_from_grid(f, changed)
    at_first = (after["cutoff"] == after["unique_id"].map(first)).to_numpy()
    assert at_first.sum() == 2 * HORIZON
    pd.testing.assert_series_equal(after.loc[at_first, "y_forecast"], before.loc[at_first, "y_forecast"])
    assert (after.loc[~at_first, "y_forecast"] - before.loc[~at_first, "y_forecast"]).abs().min() > 1.0


def test_validation_gaps_pair_the_epochs_both_runs_reached():
    rows = pd.DataFrame({"sampling": ["random"] * 3 + ["complete"], "seed": [0, 0, 1, 0],
                         "attention": ["softmax", "continuous", "softmax", "softmax"],
                         "val_curve": ["[0.5, 0.4, 0.2]", "[0.4, 0.5]", "[1.0]", "[1.0]"]})
    gaps = validation_gaps(rows)
    assert list(gaps) == [("random", 0)]  # the other runs have no partner
    assert gaps["random", 0] == pytest.approx([-0.2, 0.25])
    table = "\n".join(gap_table(rows))
    assert "| random | -20.0 % (1) | +25.0 % (1) |" in table and "| complete | " in table


def test_runs_are_not_appended_to_another_versions_table(tmp_path):
    pd.DataFrame({"sampling": ["random"], "attention": ["softmax"], "seed": [0], "mse_all": [0.1]}).to_csv(
        tmp_path / "results.csv", index=False)
    with pytest.raises(SystemExit, match="columns of another version of this script"):
        main(["--out", str(tmp_path), "--seeds", "0"])
