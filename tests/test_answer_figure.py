"""RESULTS.md's one-screen figure (benchmarks/answer_figure.py): what it computes, and that
the committed figure is the one the committed results give."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from benchmarks import answer_figure as af

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
DATASETS = ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather")


def study_rows(seeds: range, ratio: dict[str, float], interp: float) -> pd.DataFrame:
    """Finished PatchTST runs whose continuous run is ``ratio[regime]`` times its softmax run, and
    whose interpolated inputs score ``interp`` times the dropped ones, seed by seed."""
    rows = []
    for dataset in DATASETS:
        for seed in seeds:
            softmax = {"regular": 0.3 + 0.01 * seed, "drop60": 0.5 + 0.01 * seed}
            for attention in ("softmax", "continuous"):
                mse = {r: m * (ratio[r] if attention == "continuous" else 1.0) for r, m in softmax.items()}
                mse["drop60-interp"] = mse["drop60"] * interp
                for regime, value in mse.items():
                    rows.append(dict(model="patchtst", attention=attention, pos_encoding="learned", dataset=dataset,
                                     horizon=96, regime=regime, seed=seed, status="ok", test_mse=value,
                                     test_mae=value, cell_id=f"{dataset}_{regime}_{attention}_{seed}"))
    return pd.DataFrame(rows)


def synthetic_rows(ratio: float, interp: float) -> tuple[pd.DataFrame, pd.DataFrame]:
    observed, interpolated = [], []
    for sampling in ("informative", "random", "complete"):
        for seed in range(3):
            for attention in ("softmax", "continuous"):
                mse = 0.05 + 0.01 * seed
                mse *= ratio if attention == "continuous" and sampling != "complete" else 1.0
                observed.append(dict(sampling=sampling, attention=attention, seed=seed, mse_all=mse))
                if sampling != "complete":
                    interpolated.append(dict(sampling=sampling, attention=attention, seed=seed, mse_all=mse * interp))
    return pd.DataFrame(observed), pd.DataFrame(interpolated)


def physionet_rows() -> pd.DataFrame:
    """AsyncTransformer with RoPE, continuous 3 % above softmax in three seeds; the hourly-grid PatchTST
    at twice the error of the same attention and seed; runs the row must leave out (no positions,
    thinned histories, a switch, a failed cell) at other ratios."""
    rows = []
    for seed in range(3):
        for attention, ratio in (("softmax", 1.0), ("continuous", 1.03)):
            mse = (0.006 + 0.0002 * seed) * ratio
            base = dict(attention=attention, seed=seed, status="ok", switch="none", history_keep=1.0)
            rows.append(dict(base, model="async", pos_encoding="rope", test_mse=mse))
            rows.append(dict(base, model="async", pos_encoding="none", test_mse=mse * (1.5 if ratio > 1 else 1)))
            rows.append(dict(base, model="async", pos_encoding="rope", history_keep=0.5, test_mse=mse * ratio))
            rows.append(dict(base, model="async", pos_encoding="rope", switch="at3", test_mse=mse * ratio))
            if seed < 2:
                rows.append(dict(base, model="grid-patchtst", pos_encoding="learned", test_mse=2 * mse))
    rows.append(dict(model="async", attention="continuous", seed=3, status="failed", switch="none", history_keep=1.0,
                     pos_encoding="rope", test_mse=float("nan")))
    return pd.DataFrame(rows)


def drawn(md: str) -> dict[tuple[str, str], tuple[int, float]]:
    """(data, comparison) -> (units, mean %) from answer_figure.md's table."""
    out = {}
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[3].endswith("%"):
            out[cells[0], cells[1]] = int(cells[2]), float(cells[3].rstrip(" %"))
    return out


@pytest.mark.filterwarnings("ignore:Precision loss occurred")  # equal differences: the t-test has nothing to say
def test_relative_differences_pair_seeds_and_average_attentions(tmp_path):
    """Continuous 2 % above softmax on regular inputs and 1 % below on dropped ones, interpolated inputs
    10 % below the dropped ones: the figure draws exactly those shares, over the CPU and GPU seeds."""
    results = tmp_path / "results"
    for name, seeds in (("study", range(3)), ("study_gpu", range(2))):
        (results / name).mkdir(parents=True)
        study_rows(seeds, {"regular": 1.02, "drop60": 0.99}, 0.9).to_csv(results / name / "results.csv", index=False)
    (results / "physionet2012").mkdir()
    physionet_rows().to_csv(results / "physionet2012" / "results.csv", index=False)
    observed, interpolated = synthetic_rows(0.8, 1.05)
    for name, frame in (("synthetic_control_long", observed), ("synthetic_control_inputs_interpolated", interpolated)):
        (results / name).mkdir()
        frame.to_csv(results / name / "results.csv", index=False)

    assert af.main(["--results", str(results), "--out", str(tmp_path / "out")]) == 0
    table = drawn((tmp_path / "out" / "answer_figure.md").read_text())
    regular, dropped = (f"continuous − softmax, {name}" for name, *_ in af.REGIMES)
    interp = "interpolated − dropped inputs (per seed)"
    for label in ("ETTh1", "Weather"):
        assert table[label, regular] == (5, pytest.approx(2.0))
        assert table[label, dropped] == (5, pytest.approx(-1.0))
        assert table[label, interp] == (5, pytest.approx(-10.0))
    assert table["Synthetic (encoder)", regular] == (3, pytest.approx(0.0))  # complete series
    assert table["Synthetic (encoder)", dropped] == (6, pytest.approx(-20.0))  # both irregular samplings
    assert table["Synthetic (encoder)", interp] == (6, pytest.approx(5.0))
    assert table["PhysioNet 2012", dropped] == (3, pytest.approx(3.0))  # RoPE, complete histories only
    assert table["PhysioNet 2012", af.ALTERNATIVE["PhysioNet 2012"]] == (2, pytest.approx(100.0))
    assert ("PhysioNet 2012", regular) not in table  # no regular inputs to compare
    assert (tmp_path / "out" / "answer.png").stat().st_size > 10_000


def test_the_committed_figure_is_drawn_from_the_committed_results(tmp_path):
    """RESULTS.md's figure and its numbers must not fall behind the results.csv files they come from."""
    assert af.main(["--out", str(tmp_path)]) == 0
    assert (tmp_path / "answer_figure.md").read_text() == (RESULTS / "answer_figure.md").read_text(), \
        "rerun python -m benchmarks.answer_figure and commit answer.png and answer_figure.md"


def test_a_folder_without_the_results_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        af.main(["--results", str(tmp_path)])
    err = capsys.readouterr().err
    assert re.search(r"no .*study/results\.csv.*: pass --results the benchmarks/results folder", err)
