"""The study runner: grid expansion, a tiny run, failure recording, resuming, the report."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from benchmarks.paired_stats import paired_stats
from benchmarks.study import runner
from benchmarks.study.cell import cell_id
from benchmarks.study.grid import GRIDS, SETTINGS, expand, other_runner, study_grids, warmup_warnings
from benchmarks.study.results import RESULT_FIELDS, append, conflicts, recorded

ROOT = Path(__file__).resolve().parents[1]


def tiny_grid(csv_path: Path, tmp_path: Path, bad_block: bool = True) -> Path:
    grid = {
        "name": "tiny",
        "out": str(tmp_path / "out"),
        "defaults": {
            "model_args": {"patch_len": 8, "stride": 4, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16,
                           "dropout": 0.0, "attention_backend": "torch"},
            "lr": 0.003, "lr_schedule": "constant", "lookback": 24, "batch_size": 32, "eval_batch_size": 64,
            "max_epochs": 2, "patience": 2,
        },
        "blocks": [{"name": "main", "model": "patchtst", "attention": ["softmax", "continuous"],
                    "pos_encoding": "learned", "dataset": str(csv_path), "horizon": 6,
                    "regime": ["regular", "drop30", "drop30-interp"], "seed": [0, 1]}],
    }
    if bad_block:
        grid["blocks"].append({"name": "broken", "model": "patchtst", "attention": "softmax",
                               "pos_encoding": "learned", "dataset": str(csv_path), "horizon": 6,
                               "regime": "regular", "seed": 9, "overrides": {"model_args": {"d_model": 7}}})
    path = tmp_path / "grid.yaml"
    path.write_text(yaml.safe_dump(grid))
    return path


def rows(out: Path) -> list[dict]:
    with (out / "results.csv").open() as f:
        return list(csv.DictReader(f))


def test_profiles_expand_with_published_settings():
    grid = yaml.safe_load((ROOT / "benchmarks/grids/full.yaml").read_text())
    cells = expand(grid)
    assert len({cell_id(c) for c in cells}) == len(cells)
    etth1 = next(c for c in cells if c["dataset"] == "ETTh1" and c["model"] == "patchtst")
    assert etth1["model_args"]["d_model"] == 16 and etth1["lookback"] == 336 and etth1["lr"] == 1e-4
    ettm1 = next(c for c in cells if c["dataset"] == "ETTm1" and c["model"] == "patchtst")
    assert ettm1["model_args"]["d_model"] == 128 and ettm1["lr_schedule"] == "onecycle"
    # both attentions of a setting run side by side
    assert [c["attention"] for c in cells[:2]] == ["softmax", "continuous"]
    for profile in ("quick", "cpu", "study", "gpu_replicate", "gpu_next"):
        assert expand(yaml.safe_load((ROOT / f"benchmarks/grids/{profile}.yaml").read_text()))


def test_grid_without_settings_is_a_clear_error(tmp_path):
    grid = {"blocks": [{"name": "x", "model": "patchtst", "attention": "softmax", "pos_encoding": "learned",
                        "dataset": "my.csv", "horizon": 6, "regime": "regular", "seed": 0}]}
    with pytest.raises(ValueError, match="lacks"):
        expand(grid)


@pytest.mark.slow
def test_tiny_grid_runs_records_failures_resumes_and_reports(tiny_csv, tmp_path):
    grid = tiny_grid(tiny_csv, tmp_path)
    out = tmp_path / "out"
    runner.main(["--grid", str(grid), "--max-cells", "3"])
    assert len(rows(out)) == 3
    runner.main(["--grid", str(grid)])
    recorded = rows(out)
    assert len(recorded) == 13 and len({r["cell_id"] for r in recorded}) == 13, "resuming must not rerun cells"
    failed = [r for r in recorded if r["status"] == "failed"]
    assert len(failed) == 1 and "divisible" in failed[0]["error"]
    assert (out / "runs" / failed[0]["cell_id"] / "error.txt").exists()
    ok = [r for r in recorded if r["status"] == "ok"]
    assert all(float(r["test_mse"]) > 0 and int(r["epochs"]) >= 1 for r in ok)
    assert (out / "runs" / ok[0]["cell_id"] / "cell.json").exists()
    for r in ok:  # the test MSE after every epoch; the tested checkpoint is the best epoch's
        curve = json.loads(r["test_curve"])
        assert len(curve) == int(r["epochs"]) == len(json.loads(r["val_curve"]))
        assert curve[int(r["best_epoch"]) - 1] == pytest.approx(float(r["test_mse"]), rel=1e-4), r["cell_id"]
    summary = (out / "summary.md").read_text()
    assert "Test MSE after every epoch" in summary
    assert "| horizon | epoch | pairs | Δ test MSE (cont − soft)" in summary, "test curves per horizon"
    assert "Paired differences" in summary and "broken" not in summary.split("## Failed cells")[0]
    assert "## Irregular input against the interpolation baseline" in summary
    assert f"| patchtst | learned | {tiny_csv} | 6 | drop30 |" in summary.split("## Irregular input")[1]
    assert all((out / name).stat().st_size > 0 for name in ("val_curves.png", "val_delta.png", "test_mse_bars.png"))


def test_paired_statistics():
    s = paired_stats([-0.01, -0.02, -0.015, -0.012, -0.018, -0.011])
    assert s["hi"] < 0 and s["p_t"] < 0.01 and s["n"] == 6
    s = paired_stats([0.01, -0.01, 0.02, -0.02, 0.0, 0.001])
    assert s["lo"] < 0 < s["hi"]


@pytest.mark.slow
def test_quick_profile_on_etth1(tmp_path):
    out = tmp_path / "quick"
    runner.main(["--profile", "quick", "--out", str(out)])
    recorded = rows(out)
    assert [r["status"] for r in recorded] == ["ok"] * 4
    assert {r["attention"] for r in recorded} == {"softmax", "continuous"}
    assert all(0.2 < float(r["test_mse"]) < 3.0 for r in recorded)
    assert "patchtst | learned | ETTh1 | 96 | drop60" in (out / "summary.md").read_text()


def test_report_with_one_attention_only(tmp_path):
    from benchmarks.study import report

    row = {k: "" for k in RESULT_FIELDS}
    row.update(model="patchtst", attention="softmax", pos_encoding="learned", dataset="ETTh1", horizon=96,
               regime="regular", seed=0, status="ok", test_mse=0.38, test_mae=0.4, epochs=3, train_s_per_epoch=40,
               threads=2, val_curve="[0.7, 0.69]", cell_id="a")
    append(tmp_path / "results.csv", row)
    text = report.write(tmp_path).read_text()
    assert "0.3800" in text and "Paired differences" not in text
    # the published MSE keeps its three digits, and only the figures drawn are named
    assert "| ETTh1 | 96 | 0.375 | 0.385 |" in text and "| ETTh1 | 96 | 0.375 | 0.385 | 0.3800" in text
    assert "`val_curves.png`" in text and "`val_delta.png`" not in text
    assert (tmp_path / "val_curves.png").exists() and not (tmp_path / "val_delta.png").exists()


def test_pooled_report_counts_each_folder_seed_as_a_pair(tmp_path):
    """Seed 0 on two machines is two pairs; training cost stays with each folder."""
    from benchmarks.study import report

    for folder, delta in (("cpu", 0.001), ("gpu", 0.003)):
        (tmp_path / folder).mkdir()
        for attention, mse in (("softmax", 0.38), ("continuous", 0.38 + delta)):
            row = {k: "" for k in RESULT_FIELDS}
            row.update(model="patchtst", attention=attention, pos_encoding="learned", dataset="ETTh1", horizon=96,
                       regime="regular", seed=0, status="ok", test_mse=mse, test_mae=0.4, epochs=2,
                       train_s_per_epoch=40, threads=2, val_curve="[0.7, 0.69]", cell_id=f"{attention}-0")
            append(tmp_path / folder / "results.csv", row)
    report.main(["--pool", str(tmp_path / "pooled"), str(tmp_path / "cpu"), str(tmp_path / "gpu")])
    text = (tmp_path / "pooled" / "summary.md").read_text()
    assert "| regular | 2 | +0.0020 [" in text, text
    assert "| patchtst | ETTh1 | 96 | 2 | +0.0020 [" in text, text  # per model, dataset and horizon
    assert "Training cost" not in text


def result_row(**kw) -> dict:
    row = {k: "" for k in RESULT_FIELDS}
    row.update(model="patchtst", attention="softmax", pos_encoding="learned", dataset="ETTh1", horizon=96,
               regime="regular", seed=0, status="ok", test_mse=0.38, test_mae=0.4, epochs=2, train_s_per_epoch=40,
               threads=2, val_curve="[0.7, 0.69]")
    row.update(kw)
    return row


def test_report_names_runs_left_out_of_the_pairs(tmp_path):
    """A run without its partner (or without a test metric) is counted and named, not dropped silently."""
    from benchmarks.study import report

    for seed, attention, extra in ((0, "softmax", {}), (0, "continuous", {"test_mse": 0.37}), (1, "softmax", {}),
                                   (2, "softmax", {}), (2, "continuous", {"test_mae": ""})):
        append(tmp_path / "results.csv", result_row(seed=seed, attention=attention,
                                                        cell_id=f"{attention}-{seed}", **extra))
    text = report.write(tmp_path).read_text()
    assert "5 finished cells, 0 failed, 3 without their partner (listed at the end)" in text, text
    left_out = text.split("## Finished cells left out of the paired statistics")[1]
    assert [c for c in ("softmax-0", "continuous-0", "softmax-1", "softmax-2", "continuous-2") if c in left_out] == [
        "softmax-1", "softmax-2", "continuous-2"]
    assert "| regular | 1 | -0.0100" in text, text


def test_pooled_report_names_a_run_whose_partner_is_in_another_folder_only(tmp_path):
    """Cell ids repeat across pooled folders: a partner there must not hide an unpaired run here."""
    from benchmarks.study import report

    for folder, attentions in (("cpu", ("softmax", "continuous")), ("gpu", ("softmax",))):
        (tmp_path / folder).mkdir()
        for attention in attentions:
            append(tmp_path / folder / "results.csv", result_row(attention=attention, cell_id=f"{attention}-0"))
    report.main(["--pool", str(tmp_path / "pooled"), str(tmp_path / "cpu"), str(tmp_path / "gpu")])
    text = (tmp_path / "pooled" / "summary.md").read_text()
    assert "3 finished cells, 0 failed, 1 without their partner" in text and "- gpu:softmax-0" in text, text


def test_report_refuses_runs_it_would_average_into_one_pair(tmp_path, capsys):
    from benchmarks.study import report

    for cell, attention, mse in (("a", "softmax", 0.38), ("b", "softmax", 0.40), ("c", "continuous", 0.39)):
        append(tmp_path / "results.csv", result_row(attention=attention, test_mse=mse, cell_id=cell))
    with pytest.raises(SystemExit):
        report.main([str(tmp_path)])
    err = capsys.readouterr().err
    assert "share a setting, seed and attention" in err and "['a', 'b']" in err, err
    for name in ("one", "two"):
        (tmp_path / name / "study").mkdir(parents=True)
        for cell, attention in (("s", "softmax"), ("c", "continuous")):
            append(tmp_path / name / "study" / "results.csv", result_row(attention=attention, cell_id=cell))
    with pytest.raises(SystemExit):
        report.main(["--pool", str(tmp_path / "pooled"), str(tmp_path / "one" / "study"),
                     str(tmp_path / "two" / "study")])
    assert "several study folders are named ['study']" in capsys.readouterr().err


def test_a_failure_fixed_by_a_retry_is_not_reported_as_failed(tmp_path):
    from benchmarks.study import report

    attempts = (("a", "failed", "OOM"), ("a", "ok", ""), ("b", "failed", "first"), ("b", "failed", "second"))
    for cell, status, error in attempts:
        row = {k: "" for k in RESULT_FIELDS}
        row.update(model="patchtst", attention="softmax", pos_encoding="learned", dataset="ETTh1", horizon=96,
                   regime="regular", seed=0, status=status, test_mse=0.38 if status == "ok" else "", test_mae=0.4,
                   epochs=2, train_s_per_epoch=40, threads=2, val_curve="[0.7, 0.69]", cell_id=cell, error=error)
        append(tmp_path / "results.csv", row)
    failed = report.load_failed(tmp_path)
    assert failed["cell_id"].tolist() == ["b"] and failed["error"].tolist() == ["second"]
    text = report.write(tmp_path).read_text()
    assert "1 finished cells, 1 failed" in text and "- b: second" in text and "- a:" not in text, text


def test_results_written_before_a_new_column_keep_every_row(tmp_path):
    """results.csv from an older runner (fewer columns) is extended, not mixed up or lost."""
    path = tmp_path / "results.csv"
    old_fields = RESULT_FIELDS[:-1]
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=old_fields)
        writer.writeheader()
        writer.writerow({k: f"old-{k}" for k in old_fields})
    append(path, {k: f"new-{k}" for k in RESULT_FIELDS})
    old, new = rows(tmp_path)
    assert old == {**{k: f"old-{k}" for k in old_fields}, RESULT_FIELDS[-1]: ""}
    assert new == {k: f"new-{k}" for k in RESULT_FIELDS}
    assert list(tmp_path.iterdir()) == [path]

    path.write_text("cell_id,status,something_else\n1,ok,x\n")
    with pytest.raises(ValueError, match="new folder"):
        append(path, {k: "" for k in RESULT_FIELDS})
    assert path.read_text() == "cell_id,status,something_else\n1,ok,x\n"


def test_train_cost_configs_name_the_yaml_files_or_fail_clearly():
    from benchmarks.speed.train_cost import config_path

    assert config_path("patchtst/ETTm1").name == "ETTm1.yaml"
    assert yaml.safe_load(config_path("encoder/weather").read_text())["data"]["dataset"] == "weather"
    for bad in ("patchtst", "patchtst/ETTh3", "lstm/ETTh1", "patchtst/ETTh1/x"):
        with pytest.raises(SystemExit, match="unknown configuration.*patchtst/ETTh1"):
            config_path(bad)


def test_early_training_table_pairs_curves_per_regime_and_per_horizon():
    from benchmarks.study import report_tables

    rows = []
    for horizon, regime, seed, soft, cont in ((96, "regular", 0, [0.70, 0.60], [0.68, 0.61]),
                                              (96, "drop60", 0, [0.80, 0.70], [0.78, 0.69]),
                                              (336, "regular", 0, [0.90, 0.80], [0.95, 0.82]),
                                              (336, "regular", 1, [0.90], [0.91])):  # stopped after epoch 1
        for attention, curve in (("softmax", soft), ("continuous", cont)):
            rows.append(dict(model="patchtst", pos_encoding="learned", dataset="ETTh1", horizon=horizon, regime=regime,
                             seed=seed, attention=attention, val_curve=json.dumps(curve)))
    df = pd.DataFrame(rows)
    by_horizon = report_tables.early_table(df, epochs=2, by="horizon")
    assert "| 96 | 1 | 2 | -0.0200 [" in by_horizon and "| 2/2 |" in by_horizon
    assert "| 336 | 1 | 2 | +0.0300 [" in by_horizon and "| 336 | 2 | 1 | +0.0200 [" in by_horizon
    assert "| all | 1 | 4 | +0.0050 [" in by_horizon
    by_regime = report_tables.early_table(df, epochs=2)
    assert "| drop60 | 2 | 1 | -0.0100 [" in by_regime and "| regular | 1 | 3 | +0.0133 [" in by_regime
    # a tie is neither lower nor higher, and the count says so
    tied = pd.concat([df, df.iloc[:2].assign(seed=7, val_curve=json.dumps([0.5, 0.4]))])
    assert "| 96 | 1 | 3 | -0.0133 [" in report_tables.early_table(tied, epochs=1, by="horizon").split("| 336 |")[0]
    assert "| 2/3 (1 level) |" in report_tables.early_table(tied, epochs=1, by="horizon")


def test_curve_agreement_is_relative_to_softmax_at_the_same_epoch():
    from benchmarks.study import report_tables

    rows = []
    for seed, soft, cont in ((0, [0.50, 0.40], [0.51, 0.40]),   # 2 %, 0 %
                             (1, [0.40, 0.50, 0.60], [0.403, 0.50])):  # 0.75 %, 0 %; softmax's epoch 3 unpaired
        for attention, curve in (("softmax", soft), ("continuous", cont)):
            rows.append(dict(model="patchtst", pos_encoding="learned", dataset="ETTh2", horizon=192, regime="regular",
                             seed=seed, attention=attention, test_curve=json.dumps(curve)))
    rows.append(dict(model="patchtst", pos_encoding="learned", dataset="ETTh2", horizon=192, regime="drop60",
                     seed=0, attention="softmax", test_curve="[0.3]"))  # no partner: ignored
    line = report_tables.curve_agreement(pd.DataFrame(rows))
    assert line.startswith("2 pairs, 4 epochs:")
    assert "median 0.4 %" in line and "under 1 % in 75 % of epochs" in line
    assert "the largest: 2.0 % (patchtst learned, ETTh2-192 regular seed 0, epoch 1, continuous higher); " \
           "0.8 % (patchtst learned, ETTh2-192 regular seed 1, epoch 1, continuous higher); 0.0 %" in line
    assert "epoch 2, continuous level" in line  # equal MSE is neither side
    assert report_tables.curve_agreement(pd.DataFrame(rows[-1:])) == ""
    # Pairs that differ only in model or positions are counted apart, not merged by their description.
    rope = [dict(row, pos_encoding="rope") for row in rows[:-1]]
    assert report_tables.curve_agreement(pd.DataFrame(rows + rope)).startswith("4 pairs, 8 epochs:")


def test_lead_persistence_compares_epoch_three_with_the_kept_checkpoint():
    from benchmarks.study import report_tables

    rows = []
    for dataset, seed, soft, cont in (("ETTh1", 0, ([0.5, 0.45, 0.40, 0.38], 0.38), ([0.5, 0.45, 0.36, 0.40], 0.40)),
                                      ("ETTh1", 1, ([0.5, 0.45, 0.40], 0.40), ([0.5, 0.45, 0.42], 0.42)),
                                      ("ETTh1", 2, ([0.5, 0.45], 0.45), ([0.5, 0.44], 0.44)),  # no epoch 3
                                      ("ETTm2", 0, ([0.2, 0.18, 0.16], 0.16), ([0.2, 0.18, 0.15], 0.15))):
        for attention, (curve, kept) in (("softmax", soft), ("continuous", cont)):
            rows.append(dict(model="patchtst", pos_encoding="learned", dataset=dataset, horizon=96, regime="regular",
                             seed=seed, attention=attention, test_curve=json.dumps(curve), test_mse=kept))
    table = report_tables.lead_persistence_table(pd.DataFrame(rows))
    # ETTh1: seed 0 ahead at epoch 3 (-10 %), behind at its kept epoch 4 (+5.26 %); seed 1 behind both (+5 %)
    assert "| patchtst | ETTh1 | 96 | 2 | 1/2 | -2.50 % | 0/2 | +5.13 % |" in table
    assert "| patchtst | ETTm2 | 96 | 1 | 1/1 | -6.25 % | 1/1 | -6.25 % |" in table
    assert report_tables.lead_persistence_table(pd.DataFrame(rows[:2]), epoch=5) == ""


def test_report_cli_names_a_folder_without_results(tmp_path, capsys):
    from benchmarks.study import report

    with pytest.raises(SystemExit):
        report.main([str(tmp_path / "nowhere")])
    assert "no results.csv in" in capsys.readouterr().err
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for folder in ("a", "b"):
        (tmp_path / folder / "results.csv").write_text("")
    with pytest.raises(SystemExit):
        report.main([str(tmp_path / "a"), str(tmp_path / "b")])
    assert "--pool OUT_FOLDER" in capsys.readouterr().err


def test_horizon_span_table_pools_per_model_up_to_336_and_over_all():
    from benchmarks.study import report_tables

    p = pd.DataFrame(dict(model=["patchtst"] * 3, horizon=[96, 336, 720],
                          test_mse_softmax=[0.40, 0.50, 0.50], d_test_mse=[-0.004, 0.010, 0.050]))
    table = report_tables.horizon_span_table(p)
    assert "| patchtst | 96-336 | 2 | +0.0030 [" in table and "| 1/2 | 1.000 | +0.0030 | 1.5 %, 2.0 % |" in table, table
    assert "| patchtst | all | 3 | +0.0187 [" in table and "| 1/3 | 1.000 | +0.0165 | 2.0 %, 10.0 % |" in table, table
    # the first horizon and the longer ones up to 336 get rows of their own, above the pooled ones
    assert table.index("| patchtst | 96 | 1 | -0.0040 [") < table.index("| patchtst | 336 | 1 | +0.0100 [") \
        < table.index("| patchtst | 96-336 |") < table.index("| patchtst | all |"), table
    # one horizon is one row, not the same pairs repeated as "96-336" and "all"
    encoder_only_96 = report_tables.horizon_span_table(p.assign(model="encoder", horizon=96))
    assert "| encoder | 96 | 3 |" in encoder_only_96 and encoder_only_96.count("| encoder |") == 1, encoder_only_96
    # rows are labelled by the horizons they hold: a custom grid's 24 is not called 96
    custom = report_tables.horizon_span_table(p.assign(horizon=[24, 96, 720]))
    assert [line.split(" | ")[1] for line in custom.splitlines()[2:]] == ["24", "96", "24-96", "all"], custom
    up_to_336 = report_tables.horizon_span_table(p.assign(horizon=[96, 192, 336]))
    assert [line.split(" | ")[1] for line in up_to_336.splitlines()[2:]] == ["96", "192-336", "96-336"], up_to_336


def test_pools_per_kind_of_input_and_best_validation_pairs(tmp_path):
    """Regular, irregular (drop*) and interpolated (*-interp) pairs pool apart; best validation MSE
    is paired per model and horizon."""
    from benchmarks.study import report

    deltas = {"regular": -0.002, "drop30": 0.004, "drop60": 0.006, "drop60-interp": 0.010}
    for seed in (0, 1):
        for regime, delta in deltas.items():
            for attention, d in (("softmax", 0.0), ("continuous", delta + seed * 0.001)):
                append(tmp_path / "results.csv", result_row(
                    regime=regime, seed=seed, attention=attention, test_mse=0.4 + d, best_val_mse=0.7 + 2 * d,
                    cell_id=f"{regime}-{attention}-{seed}"))
    text = report.write(tmp_path).read_text()
    assert "| patchtst | regular | 96 | 2 | -0.0015 [" in text, text
    assert "| patchtst | irregular | 96 | 4 | +0.0055 [" in text, text  # 0.004, 0.005, 0.006, 0.007
    assert "| patchtst | interpolated | 96 | 2 | +0.0105 [" in text, text
    best = text.split("Best validation MSE (the epoch early stopping kept)")[1]
    assert "| patchtst | 96 | 8 | +0.0100 [" in best, best  # twice the mean test gap over all 8 pairs


def test_sign_test_and_hodges_lehmann_against_hand_values():
    from benchmarks.paired_stats import hodges_lehmann, sign_test_p

    d = np.array([-3.0, -1.0, 2.0, 4.0, 0.0])
    # Walsh averages of the 5 values (15 of them) have median 0.5; the sign test drops the tie: 2 of 4
    assert hodges_lehmann(d) == 0.5
    assert sign_test_p(d) == 1.0
    assert sign_test_p(np.full(10, -1.0)) == pytest.approx(2 / 2**10)


def test_interpolation_table_pairs_by_seed_and_attention_and_reports_the_share_recovered():
    from benchmarks.study import report_tables

    rows = []
    for regime, seed, soft, cont in (("regular", 0, 0.40, 0.40), ("regular", 1, 0.40, 0.40),
                                     ("drop60", 0, 0.60, 0.62), ("drop60", 1, 0.58, 0.60),
                                     ("drop60-interp", 0, 0.44, 0.45), ("drop60-interp", 1, 0.43, 0.44),
                                     ("drop30", 0, 0.50, 0.50)):  # no interpolated partner: no row
        for attention, mse in (("softmax", soft), ("continuous", cont)):
            rows.append(dict(model="patchtst", pos_encoding="learned", dataset="ETTh1", horizon=96, regime=regime,
                             seed=seed, attention=attention, test_mse=mse))
    table = report_tables.interpolation_table(pd.DataFrame(rows))
    # irregular 0.6000, interpolated 0.4400: Δ −0.16, 80 % of the 0.20 lost by dropping won back; a
    # seed's two attentions share the dropped inputs, so the interval is over the 2 seeds (−0.165,
    # −0.155: mean −0.16, sd 0.00707, t(0.975, 1) = 12.706 -> half-width 0.0635), wins over the 4 runs
    assert "| patchtst | learned | ETTh1 | 96 | drop60 | 0.4000 | 0.6000 | 0.4400 | 2 | -0.1600 [-0.2235, -0.0965] |" \
        in table, table
    assert table.endswith("| 4/4 | 80 % |") and "drop30" not in table
    assert report_tables.interpolation_table(pd.DataFrame(rows[:4])) == ""


def test_sampling_table_groups_pairs_by_sampling_step_and_pools_the_finer_ones():
    from benchmarks.study import report_tables

    p = pd.DataFrame(dict(model="patchtst", horizon=96, dataset=["ETTh1", "ETTm1", "ETTm2", "weather", "weather"],
                          test_mse_softmax=0.3, d_test_mse=[0.001, -0.002, -0.001, 0.003, 0.002]))
    table = report_tables.sampling_table(p)
    assert "| patchtst | 96 | h (ETTh1) | 1 | +0.0010 [" in table, table
    assert "| patchtst | 96 | 15min (ETTm1, ETTm2) | 2 | -0.0015 [" in table and "| 2/2 |" in table, table
    assert "| patchtst | 96 | 10min (weather, weather) |" not in table, table
    assert "| patchtst | 96 | 10min (weather) | 2 | +0.0025 [" in table, table
    assert "| patchtst | 96 | under 1 h (ETTm1, ETTm2, weather) | 4 | +0.0005 [" in table, table
    only_hourly = report_tables.sampling_table(p.iloc[:1])
    assert "under 1 h" not in only_hourly and only_hourly.count("| patchtst |") == 1, only_hourly
    # labels name the datasets of each model's own runs: PatchTST on ETTh1 and ETTh2, the encoder on ETTh1 only
    with_encoder = report_tables.sampling_table(
        pd.concat([p, p.iloc[:1].assign(dataset="ETTh2"), p.iloc[:1].assign(model="encoder")]))
    assert "| patchtst | 96 | h (ETTh1, ETTh2) | 2 |" in with_encoder, with_encoder
    assert "| encoder | 96 | h (ETTh1) | 1 |" in with_encoder and with_encoder.count("| encoder |") == 1, with_encoder


def test_block_table_answers_each_block_of_the_grid_in_grid_order():
    from benchmarks.study import report_tables

    rows = []
    # (block, seed, regime, softmax (test_mse, curve), continuous (test_mse, curve)); a curve of None: not recorded
    for block, seed, regime, soft, cont in (
            ("check", 0, "drop30", (0.30, [0.40, 0.33, 0.30]), (0.29, [0.36, 0.32, 0.29])),
            ("check", 1, "drop30", (0.30, [0.40, 0.30]), (0.31, [0.38, 0.31])),   # stopped after 2 epochs
            ("earlier", 0, "regular", (0.20, None), (0.22, None))):
        for attention, (mse, curve) in (("softmax", soft), ("continuous", cont)):
            rows.append(dict(model="patchtst", pos_encoding="learned", dataset="ETTm1", horizon=96, regime=regime,
                             seed=seed, attention=attention, test_mse=mse, test_mae=mse, block=block,
                             test_curve=json.dumps(curve) if curve else float("nan")))
    rows.append(dict(rows[0], seed=5, attention="continuous"))  # no softmax partner: not a pair
    table = report_tables.block_table(pd.DataFrame(rows)).splitlines()
    assert len(table) == 4 and table[0].startswith("| block | pairs |") and "test gap after epoch 3 |" in table[0]
    # check: Δ −0.01 and +0.01; the gaps at the same epoch: (−0.04 −0.02)/2, (−0.01 +0.01)/2,
    # −0.01 from one pair
    assert table[2].startswith("| check | 2 | +0.0000 [") and table[2].endswith(
        "| 1.000 | — | 1.000 | 1/2 | -0.0300 (2) | +0.0000 (2) | -0.0100 (1) |"), table[2]
    assert table[3] == "| earlier | 1 | +0.0200 [—, —] | — | — | 1.000 | 0/1 | — | — | — |"
    assert report_tables.block_table(pd.DataFrame(rows).drop(columns="block")) == ""


def test_report_names_blocks_as_the_folders_grid_does_now(tmp_path):
    """A block renamed after its cells ran is reported under its current name; a cell the grid no
    longer holds keeps the name it ran under."""
    from benchmarks.study import report

    grid = {"name": "g", "out": str(tmp_path), "blocks": [
        {"name": "renamed", "model": "patchtst", "attention": ["softmax", "continuous"], "pos_encoding": "learned",
         "dataset": "ETTh1", "horizon": 96, "regime": "regular", "seed": [0]}]}
    (tmp_path / "grid.yaml").write_text(yaml.safe_dump(grid))
    ids = [cell_id(c) for c in expand(grid)]
    for cid, attention in ((ids[0], "softmax"), (ids[1], "continuous"), ("gone", "softmax")):
        row = {k: "" for k in RESULT_FIELDS}
        row.update(model="patchtst", attention=attention, pos_encoding="learned", dataset="ETTh1", horizon=96,
                   regime="regular", seed=0, status="ok", test_mse=0.38, cell_id=cid, block="old-name")
        append(tmp_path / "results.csv", row)
    assert report.load(tmp_path)["block"].tolist() == ["renamed", "renamed", "old-name"]


def test_warmup_warning_names_cells_whose_patience_ends_inside_onecycle_warmup():
    base = dict(block="probe", dataset="ETTm2", lr_schedule="onecycle", pct_start=0.4, max_epochs=8)
    lines = warmup_warnings([dict(base, patience=2), dict(base, patience=2, seed=1),  # one line for both
                                 dict(base, patience=8, dataset="ETTm1"),                 # runs the schedule through
                                 dict(base, patience=2, max_epochs=3, dataset="weather"),  # warm-up 1.2 epochs
                                 dict(base, patience=1, lr_schedule="type3", dataset="ETTh1")])
    assert lines == ["warning: block 'probe', ETTm2: early-stopping patience 2 is shorter than OneCycle's 3.2-epoch "
                     "warm-up (of 8 epochs); a run can stop before the learning rate peaks. Give patience >= 3.2 "
                     "to run the schedule through."]


def test_cpu_timings_record_the_machine():
    """CPU figures from different machines do not compare, so each names its CPU and core count."""
    from benchmarks.machine import cpu_facts

    facts = cpu_facts()
    assert facts["cpu"] and facts["cpu"] != "" and isinstance(facts["cores"], int) and facts["cores"] >= 1


def test_peak_rss_is_per_run_after_a_reset():
    """Cells trained one after another in one process each report their own peak, not the process's."""
    import mmap
    import resource
    import sys

    from benchmarks.machine import peak_rss_mb, reset_peak_rss

    if not sys.platform.startswith("linux"):
        pytest.skip("the peak is reset through /proc (Linux)")

    def current_mb() -> float:
        return int(Path("/proc/self/statm").read_text().split()[1]) * resource.getpagesize() / 2**20

    def touched(mb: int) -> mmap.mmap:  # pages of its own, whatever the C heap keeps
        block = mmap.mmap(-1, mb << 20)
        for offset in range(0, mb << 20, mmap.PAGESIZE):
            block[offset] = 1
        return block

    block = touched(200)
    high = peak_rss_mb()
    assert high >= current_mb() - 1
    block.close()  # unmapped: back to the system
    assert reset_peak_rss()
    base = current_mb()
    assert abs(peak_rss_mb() - base) < 5  # the peak starts again from what is resident now
    assert peak_rss_mb() < high - 150  # the freed block no longer counts
    again = touched(300)
    assert peak_rss_mb() >= base + 250  # a new block raises it again
    again.close()


def quick_grid(tmp_path: Path, name: str = "changed.yaml", **defaults) -> Path:
    """The quick profile, its defaults changed, as a grid file of its own."""
    grid = yaml.safe_load((ROOT / "benchmarks/grids/quick.yaml").read_text())
    grid["defaults"].update(defaults)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(grid))
    return path


@pytest.fixture
def fake_cells(monkeypatch):
    """The runner with a run_cell that trains nothing, and fails on the drop60 regime."""
    def run_cell(cell, out_dir):
        if cell["regime"] == "drop60":
            raise RuntimeError("out of memory")
        return {"test_mse": 0.5, "wall_s": 0.0, "val_curve": "[0.5]", "test_curve": "[0.5]"}

    monkeypatch.setattr(runner, "run_cell", run_cell)
    monkeypatch.setattr(runner.report, "write", lambda out: None)


def test_the_ray_executor_without_ray_says_how_to_install_it(tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as where Ray is not installed
    out = tmp_path / "out"
    with pytest.raises(SystemExit, match=r"--executor ray needs Ray.*pip install -e \"\.\[cluster\]\""):
        runner.main(["--profile", "quick", "--out", str(out), "--executor", "ray"])
    assert not out.exists(), "refused before anything was written"


def test_ray_options_need_the_ray_executor_and_sensible_values(tmp_path, capsys):
    for args, message in ((["--address", "head:6379"], "--address apply to --executor ray only"),
                          (["--gpus-per-cell", "1", "--cpus-per-cell", "2"],
                           "--cpus-per-cell, --gpus-per-cell apply to --executor ray only"),
                          (["--executor", "ray", "--cpus-per-cell", "0"],
                           "--cpus-per-cell: must be a positive number of CPUs, not '0'"),
                          (["--executor", "ray", "--gpus-per-cell", "-1"],
                           "--gpus-per-cell: must be 0 or a positive number of GPUs, not '-1'"),
                          (["--executor", "dask"], "invalid choice: 'dask'")):
        with pytest.raises(SystemExit):
            runner.main(["--profile", "quick", "--out", str(tmp_path / "out"), *args])
        assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_counts_say_what_is_recorded_what_runs_and_what_max_cells_leaves(tmp_path, capsys, fake_cells):
    out = str(tmp_path / "out")
    runner.main(["--profile", "quick", "--out", out, "--dry-run", "--max-cells", "1"])
    expected = "quick.yaml: 4 cells, 0 already recorded, 1 to run, 3 left for later (--max-cells 1) ->"
    assert expected in capsys.readouterr().out
    runner.main(["--profile", "quick", "--out", out, "--max-cells", "1"])
    capsys.readouterr()
    runner.main(["--profile", "quick", "--out", out, "--dry-run", "--max-cells", "2"])
    assert "4 cells, 1 already recorded, 2 to run, 1 left for later (--max-cells 2) ->" in capsys.readouterr().out
    runner.main(["--profile", "quick", "--out", out, "--dry-run"])
    assert "4 cells, 1 already recorded, 3 to run ->" in capsys.readouterr().out
    for bad in ("0", "-1", "two"):
        with pytest.raises(SystemExit):
            runner.main(["--profile", "quick", "--out", out, "--dry-run", "--max-cells", bad])
        assert f"--max-cells: must be a positive whole number of cells, not '{bad}'" in capsys.readouterr().err


def test_a_recorded_cell_is_not_reused_for_other_settings(tmp_path, capsys, fake_cells):
    """The 2-epoch quick result must not stand for a 50-epoch run, nor its grid.yaml be replaced."""
    out = tmp_path / "out"
    runner.main(["--profile", "quick", "--out", str(out), "--max-cells", "3"])  # 2 finished, 1 failed (drop60)
    saved = {name: (out / name).read_bytes() for name in ("grid.yaml", "results.csv")}
    longer = quick_grid(tmp_path, max_epochs=50)
    for dry in (["--dry-run"], []):
        with pytest.raises(SystemExit) as exc:
            runner.main(["--grid", str(longer), "--out", str(out), *dry])
        message = str(exc.value)
        assert "patchtst_softmax_learned_ETTh1_96_regular_0 (finished): max_epochs 2 recorded, 50 now" in message
        assert "patchtst_softmax_learned_ETTh1_96_drop60_0 (recorded as failed): max_epochs 2 recorded" in message
        assert "another folder (--out)" in message and "--retry-failed" in message
        assert {name: (out / name).read_bytes() for name in saved} == saved, "nothing overwritten"
    # 1 and 1.0 are one batch and every batch to Lightning: a changed type is a changed setting
    with pytest.raises(SystemExit, match="limit_val_batches 1 recorded, 1.0 now"):
        runner.main(["--grid", str(quick_grid(tmp_path, limit_val_batches=1.0)), "--out", str(out), "--dry-run"])
    # a grid that lacks finished cells would leave grid.yaml describing other results
    fewer = yaml.safe_load(longer.read_text())
    fewer["defaults"]["max_epochs"] = 2
    fewer["blocks"][0]["regime"] = ["drop60"]
    (tmp_path / "fewer.yaml").write_text(yaml.safe_dump(fewer))
    with pytest.raises(SystemExit, match="patchtst_softmax_learned_ETTh1_96_regular_0: recorded, but not in this grid"):
        runner.main(["--grid", str(tmp_path / "fewer.yaml"), "--out", str(out), "--dry-run"])
    assert {name: (out / name).read_bytes() for name in saved} == saved
    capsys.readouterr()
    # the same grid resumes, and so does one that only renames the block and writes out a default
    renamed = yaml.safe_load((ROOT / "benchmarks/grids/quick.yaml").read_text())
    renamed["blocks"][0]["name"] = "renamed"
    renamed["defaults"]["accelerator"] = "cpu"
    (tmp_path / "renamed.yaml").write_text(yaml.safe_dump(renamed))
    runner.main(["--grid", str(tmp_path / "renamed.yaml"), "--out", str(out), "--dry-run"])
    assert "4 cells, 3 already recorded, 1 to run" in capsys.readouterr().out
    # a failed cell given other settings is refused too, unless it is to be retried under them
    split = yaml.safe_load((ROOT / "benchmarks/grids/quick.yaml").read_text())
    split["blocks"][0]["regime"] = "regular"
    split["blocks"].append(dict(split["blocks"][0], name="dropped", regime="drop60", overrides={"max_epochs": 3}))
    (tmp_path / "split.yaml").write_text(yaml.safe_dump(split))
    with pytest.raises(SystemExit, match=r"drop60_0 \(recorded as failed\): max_epochs 2 recorded, 3 now"):
        runner.main(["--grid", str(tmp_path / "split.yaml"), "--out", str(out), "--dry-run"])
    capsys.readouterr()
    runner.main(["--grid", str(tmp_path / "split.yaml"), "--out", str(out), "--dry-run", "--retry-failed"])
    assert "4 cells, 2 already recorded, 2 to run" in capsys.readouterr().out


def test_unknown_grid_keys_are_refused_with_a_suggestion(tmp_path, capsys):
    """A key no code reads would silently change nothing: the typo below meant full epochs."""
    cases = [({"limit_train_batch": 4}, "defaults: unknown key 'limit_train_batch', which the runner would ignore; "
                                        "did you mean 'limit_train_batches'?"),
             ({"weight_decay": 0.01}, "defaults: unknown key 'weight_decay'"),
             ({"loss": "mae"}, "defaults: unknown key 'loss'"),
             ({"gradient_clip_val": 1.0}, "allowed here: model_args, lr, lr_schedule"),
             ({"seed": 3}, "defaults: 'seed' is an axis: give it as a key of each block")]
    for defaults, expected in cases:
        with pytest.raises(SystemExit) as exc:
            runner.main(["--grid", str(quick_grid(tmp_path, **defaults)), "--out", str(tmp_path / "out"), "--dry-run"])
        assert expected in str(exc.value)
    grid = yaml.safe_load((ROOT / "benchmarks/grids/quick.yaml").read_text())
    grid["blocks"][0].update(overrides={"max_epoch": 3}, patience=1, horizons=[192])
    grid["default"] = {}
    with pytest.raises(ValueError) as exc:
        expand(grid)
    assert str(exc.value).splitlines() == [
        "grid: unknown key 'default', which the runner would ignore; did you mean 'defaults'?",
        "block 'quick': 'patience' is a setting: put it under the block's 'overrides'",
        "block 'quick': unknown key 'horizons', which the runner would ignore; did you mean 'horizon'?",
        "block 'quick' overrides: unknown key 'max_epoch', which the runner would ignore; did you mean 'max_epochs'?"]
    assert not (tmp_path / "out").exists() and capsys.readouterr().out == ""


def test_run_cell_reads_exactly_the_settings_a_grid_may_give():
    """The runner's list of accepted keys and their defaults must be what run_cell reads."""
    import ast
    import inspect

    from benchmarks.study import cell as study_cell

    tree = ast.parse(inspect.getsource(study_cell.run_cell))
    read = {node.slice.value for node in ast.walk(tree) if isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Name) and node.value.id == "cell" and isinstance(node.slice, ast.Constant)}
    assert read == {*study_cell.KEY_FIELDS, *SETTINGS}
    assert "cell.get(" not in inspect.getsource(study_cell.run_cell), "a default belongs in OPTIONAL"


def test_committed_grids_load_and_results_folders_resume_with_their_own_grid():
    """Every committed grid passes the key check, and no recorded config (some written by older code)
    conflicts with its folder's grid.yaml."""
    for path in [*study_grids(), *(ROOT / "benchmarks/results").glob("*/grid.yaml")]:
        if other_runner(yaml.safe_load(path.read_text()).get("name")):
            continue  # another study's grid, checked by its own runner
        cells = expand(yaml.safe_load(path.read_text()))
        assert cells, path
        results = path.parent / "results.csv"
        if results.exists():
            done = recorded(results, retry_failed=False)
            assert done and conflicts(cells, done) == [], path


def test_a_grid_named_after_another_study_belongs_to_it():
    assert other_runner("physionet2012-budget") == other_runner("physionet2012") == "python -m benchmarks.physionet.run"
    assert other_runner("physionet2012x") is None and other_runner("etth1") is None and other_runner(None) is None


def test_another_studys_grid_is_refused_with_its_runner(capsys):
    """The PhysioNet grid lies beside this runner's grids but is another runner's: its keys would be
    reported as typos."""
    assert "physionet2012" not in [p.stem for p in study_grids()]
    with pytest.raises(SystemExit, match="grid 'physionet2012' belongs to another study: run it with python -m "
                                         "benchmarks.physionet.run"):
        runner.main(["--grid", str(GRIDS / "physionet2012.yaml"), "--dry-run"])


def test_docstring_examples_name_grids_that_exist():
    for grid in re.findall(r"--grid (\S+)", runner.__doc__):
        assert (ROOT / grid).exists(), grid
    for profile in re.findall(r"--profile (\S+)", runner.__doc__):
        assert (GRIDS / f"{profile}.yaml").exists(), profile


def test_runs_of_one_setting_pair_only_when_run_alike(tmp_path):
    """A block at another budget gave a continuous run that paired with the first block's softmax
    run: its 'win' came from the extra epochs. Pairs now share the whole recorded config."""
    import json

    from benchmarks.study import report
    from benchmarks.study.paired_comparison import pairs, unpaired

    def config(attention, max_epochs, block):
        return json.dumps({"attention": attention, "block": block, "max_epochs": max_epochs, "lr": 0.001})

    for seed, soft, cont in ((0, 1, 3), (1, 1, 1)):  # seed 0: other budgets; seed 1: alike
        append(tmp_path / "results.csv", result_row(seed=seed, attention="softmax", cell_id=f"s{seed}",
                                                        config=config("softmax", soft, "first")))
        append(tmp_path / "results.csv", result_row(seed=seed, attention="continuous", cell_id=f"c{seed}",
                                                        test_mse=0.30, config=config("continuous", cont, "later")))
    df = report.load(tmp_path)
    assert pairs(df)["seed"].tolist() == [1] and unpaired(df) == ["c0", "s0"]
    # a setting left out of one config and written out at its default in the other is the same recipe
    written_out = json.dumps({**json.loads(config("continuous", 1, "later")), "limit_train_batches": 1.0})
    alike = df.assign(config=np.where(df["cell_id"] == "c1", written_out, df["config"]))
    assert pairs(alike)["seed"].tolist() == [1]
    text = report.write(tmp_path).read_text()
    assert "1 | -0.0800" in text
    assert "the seeds of 1 rows above were run with configs that differ" in text  # continuous: 3 and 1 epochs
    assert "regular continuous (max_epochs)" in text


def test_a_block_repeating_a_cell_with_other_settings_is_refused():
    grid = {"name": "g", "defaults": {"lr": 0.001, "max_epochs": 1, "patience": 1},
            "blocks": [{"name": "first", "model": "patchtst", "attention": "softmax", "pos_encoding": "learned",
                        "dataset": "ETTh1", "horizon": 96, "regime": "regular", "seed": 0},
                       {"name": "longer", "model": "patchtst", "attention": ["softmax", "continuous"],
                        "pos_encoding": "learned", "dataset": "ETTh1", "horizon": 96, "regime": "regular",
                        "seed": 0, "overrides": {"max_epochs": 3}}]}
    with pytest.raises(ValueError, match=r"block 'longer' repeats cell .* of block 'first' with other settings: "
                                         r"max_epochs 3 \(block 'first': 1\).*another --out"):
        expand(grid)
    grid["blocks"][1]["overrides"] = {}
    assert len(expand(grid)) == 2  # repeated alike: runs once
    grid["blocks"][1]["overrides"] = {"limit_train_batches": 1.0}  # the default, written out
    assert len(expand(grid)) == 2


@pytest.mark.parametrize("axis,value,match", [
    ("attention", "continous", "attention 'continous' is not one the runner knows; did you mean 'continuous'"),
    ("regime", "drop_30", "regime 'drop_30' is not one the runner knows; did you mean 'drop30'"),
    ("model", "patchTST", "model 'patchTST' is not one the runner knows; did you mean 'patchtst'"),
    ("pos_encoding", "rotary", "pos_encoding 'rotary' is not one the runner knows"),
    ("dataset", "ETTH1", "dataset 'ETTH1' is spelled 'ETTh1' in the study"),
])
def test_misspelled_axis_values_are_refused_before_anything_runs(axis, value, match):
    """A near spelling failed cell by cell, or (names read in any case) trained as a setting of its
    own that paired with nothing and missed the published row."""
    block = {"name": "b", "model": "patchtst", "attention": ["softmax", "continuous"], "pos_encoding": "learned",
             "dataset": "ETTh1", "horizon": 96, "regime": "regular", "seed": 0}
    grid = {"name": "g", "defaults": {"lr": 0.001, "max_epochs": 1, "patience": 1},
            "blocks": [{**block, axis: [block[axis], value] if axis == "attention" else value}]}
    with pytest.raises(ValueError, match=match):
        expand(grid)


def test_one_runner_per_results_folder(tmp_path):
    """Two runners on one folder each ran every pending cell and appended both rows."""
    import os
    import subprocess

    from benchmarks.study.lock import LOCK, run_lock

    with run_lock(tmp_path):
        assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()
        with pytest.raises(SystemExit, match=rf"another runner \(process {os.getpid()}\) is writing to"):
            with run_lock(tmp_path):
                pass
    assert not (tmp_path / LOCK).exists()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (tmp_path / LOCK).write_text(str(gone.pid))  # left by a killed runner
    with run_lock(tmp_path):
        assert json.loads((tmp_path / LOCK).read_text())["pid"] == os.getpid()


def test_the_runner_lock_tells_a_reused_process_id_and_another_host_apart(tmp_path):
    """A process id reused after a crash kept the folder locked for good; a runner on another host
    sharing the folder cannot be checked, so its lock is never taken over."""
    import os
    import socket

    from benchmarks.study.lock import LOCK, _start_time, run_lock

    lock = tmp_path / LOCK
    if _start_time(os.getpid()) is not None:  # Linux: a live id with another start time is a reused id
        lock.write_text(json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                    "started": _start_time(os.getpid()) - 1}))
        with run_lock(tmp_path):
            assert json.loads(lock.read_text())["started"] == _start_time(os.getpid())
    lock.write_text(str(os.getpid()))  # a lock written before the host was recorded still holds
    with pytest.raises(SystemExit, match="another runner"):
        with run_lock(tmp_path):
            pass
    lock.write_text("")  # cannot be a runner starting up (the lock is created whole), so not taken over
    with pytest.raises(SystemExit, match=r"cannot be read as a runner's lock; delete it"):
        with run_lock(tmp_path):
            pass
    lock.write_text(json.dumps({"pid": 1, "host": "elsewhere", "started": 5}))
    with pytest.raises(SystemExit, match=r"a runner on host elsewhere \(process 1\) is writing to .* delete"):
        with run_lock(tmp_path):
            pass
    assert lock.exists()


def test_a_hand_edited_grid_that_no_longer_expands_leaves_the_recorded_block_names(tmp_path, capsys):
    from benchmarks.study import report

    for attention in ("softmax", "continuous"):
        append(tmp_path / "results.csv", result_row(attention=attention, cell_id=attention, block="first"))
    (tmp_path / "grid.yaml").write_text("name: g\nblocks: [{name: b, limit_train_batch: 1}]\n")
    text = report.write(tmp_path).read_text()
    assert "| regular | 1 |" in text and "first" in text
    assert "does not expand" in capsys.readouterr().err


def test_rows_record_the_code_and_libraries_they_ran_with():
    import lightning
    import torch

    from benchmarks.study.provenance import software

    text = software()
    assert text.startswith("commit ") and f"torch {torch.__version__}" in text
    assert f"lightning {lightning.__version__}" in text and "software" in RESULT_FIELDS
