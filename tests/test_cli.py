"""The ``ts-continuum`` CLI: run folders, resuming, linked arguments, checkpoints, options, help
and the prediction file. Tiny runs: PatchTST with d_model 8, one layer, two batches per split."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from lightning.pytorch.utilities import rank_zero_only
from torch.utils.data import default_collate

from ts_continuum.data import ForecastDataModule
from ts_continuum.training import ForecastingModule
from ts_continuum.training.cli import ForecastCLI, main
from ts_continuum.training.errors import CLIError

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "configs").rglob("*.yaml"))


@pytest.fixture
def config(tiny_csv, tmp_path, monkeypatch) -> Path:
    """A tiny fit config whose CSVLogger writes under ``tmp_path/runs/tiny``."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    return write_tiny_config(tmp_path, tiny_csv)


def write_tiny_config(tmp_path: Path, tiny_csv: Path) -> Path:
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu", "max_epochs": 1, "limit_train_batches": 2, "limit_val_batches": 2,
            "limit_test_batches": 2, "enable_progress_bar": False, "enable_model_summary": False,
            "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                       "init_args": {"save_dir": str(tmp_path / "runs"), "name": "tiny"}},
            "callbacks": [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                           "init_args": {"monitor": "val_mse", "mode": "min", "save_top_k": 1, "save_last": True,
                                         "filename": "best-{epoch}-{val_mse:.4f}"}}],
        },
        "model": {"model": {"class_path": "ts_continuum.models.PatchTST",
                            "init_args": {"patch_len": 8, "stride": 4, "d_model": 8, "n_heads": 2, "n_layers": 1,
                                          "d_ff": 16, "attention_backend": "torch"}},
                  "lr": 0.001},
        "data": {"dataset": str(tiny_csv), "lookback": 24, "horizon": 6, "batch_size": 16},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def refused(*args: str) -> str:
    """The message ``ts-continuum`` exits with (no traceback)."""
    with pytest.raises(SystemExit) as info:
        main(list(args))
    assert info.value.code not in (0, None)
    return str(info.value.code)


def files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def fit(config: Path, *args: str) -> ForecastCLI:
    return ForecastCLI(ForecastingModule, ForecastDataModule, args=["fit", "--config", str(config), *args])


# --- 1. an earlier run's folder is never reused ------------------------------------------------
def test_a_rerun_into_an_earlier_runs_version_folder_stops_before_touching_it(config, tmp_path):
    fit(config, "--trainer.logger.init_args.version", "0")
    folder = tmp_path / "runs" / "tiny" / "version_0"
    before = files(folder)
    assert {"metrics.csv", "config.yaml"} <= set(before) and any(k.startswith("checkpoints") for k in before)
    message = refused("fit", "--config", str(config), "--trainer.logger.init_args.version", "0")
    assert str(folder) in message and "metrics.csv" in message and "version" in message
    assert "LightningCLI" not in message and "save_config" not in message
    assert files(folder) == before  # metrics.csv included: CSVLogger used to delete it
    assert sorted(p.name for p in folder.parent.iterdir()) == ["version_0"]


def test_a_runs_config_is_reused_for_test_even_when_the_run_pinned_its_version(config, tmp_path):
    """The README's workflow (test --config <run>/config.yaml) was refused for a run started with
    --trainer.logger.init_args.version 0: the saved config kept the version, so the test went for the
    run's own folder, and the message said to leave unset an option the user never set."""
    fit(config, "--trainer.logger.init_args.version", "0")
    run = tmp_path / "runs" / "tiny" / "version_0"
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["trainer"]["logger"]["init_args"]["version"] is None and saved["ckpt_path"] is None
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    ForecastCLI(ForecastingModule, ForecastDataModule,
                args=["test", "--config", str(run / "config.yaml"), "--ckpt_path", str(best)])
    assert (tmp_path / "runs" / "tiny" / "version_1" / "metrics.csv").is_file()
    pinned = tmp_path / "pinned.yaml"  # a config that sets the version, as those saved before did
    pinned.write_text(yaml.safe_dump({**saved, "trainer": {**saved["trainer"], "logger": {
        **saved["trainer"]["logger"], "init_args": {**saved["trainer"]["logger"]["init_args"], "version": 0}}}}))
    message = refused("test", "--config", str(pinned), "--ckpt_path", str(best))
    assert "add --trainer.logger.init_args.version null where a config file sets it" in message
    main(["test", "--config", str(pinned), "--ckpt_path", str(best), "--trainer.logger.init_args.version", "null"])
    assert (tmp_path / "runs" / "tiny" / "version_2" / "metrics.csv").is_file()


def test_a_rerun_without_a_logger_stops_before_touching_the_root_folder(config, tmp_path):
    root = tmp_path / "out"
    args = ("--trainer.logger", "false", "--trainer.default_root_dir", str(root))
    fit(config, *args)
    before = files(root)
    assert "config.yaml" in before and any(k.startswith("checkpoints") for k in before)
    assert {"learning_curve.csv", "learning_curve.png"} <= set(before)
    message = refused("fit", "--config", str(config), *args)
    assert str(root) in message and "default_root_dir" in message and "LightningCLI" not in message
    assert "learning_curve.csv" in message
    assert files(root) == before


def test_fit_writes_its_learning_curve_into_the_run_folder(config, tmp_path):
    """learning_curve.csv agrees with the logger's metrics.csv epoch by epoch; the figure is beside it."""
    fit(config, "--trainer.max_epochs", "3")
    folder = tmp_path / "runs" / "tiny" / "version_0"
    curve = pd.read_csv(folder / "learning_curve.csv")
    logged = pd.read_csv(folder / "metrics.csv")
    assert list(curve.columns) == ["epoch", "train_loss", "val_mse", "val_mae", "lr", "seconds"]
    assert curve["epoch"].tolist() == [0, 1, 2]
    val = logged.dropna(subset=["val_mse"]).set_index("epoch")
    train = logged.dropna(subset=["train_loss_epoch"]).set_index("epoch")
    np.testing.assert_allclose(curve["val_mse"], val.loc[curve["epoch"], "val_mse"], rtol=1e-6)
    np.testing.assert_allclose(curve["train_loss"], train.loc[curve["epoch"], "train_loss_epoch"], rtol=1e-6)
    assert (curve["lr"] > 0).all() and (curve["seconds"] > 0).all()
    assert (folder / "learning_curve.png").read_bytes().startswith(b"\x89PNG")


def test_a_learning_curve_that_cannot_be_drawn_warns_without_ending_the_fit(config, tmp_path, monkeypatch):
    from ts_continuum.training import learning_curve

    def broken(*args, **kwargs):
        raise RuntimeError("no fonts")
    monkeypatch.setattr(learning_curve, "plot_learning_curve", broken)
    with pytest.warns(UserWarning, match="could not write the learning curve into .*: no fonts"):
        fit(config, "--test_after_fit", "true")
    folder = tmp_path / "runs" / "tiny" / "version_0"
    assert (folder / "learning_curve.csv").is_file() and not (folder / "learning_curve.png").exists()


def test_a_fit_that_diverges_stops_and_exits_with_an_error_instead_of_testing_nan_weights(config, tmp_path):
    with pytest.warns(UserWarning, match="training diverged: the mean training loss of epoch 0 is (nan|inf)"):
        message = refused("fit", "--config", str(config), "--model.lr", "1e12", "--trainer.max_epochs", "3",
                          "--test_after_fit", "true")
    folder = tmp_path / "runs" / "tiny" / "version_0"
    assert "training diverged" in message and "Lower --model.lr (now 1e+12)" in message and str(folder) in message
    assert "Traceback" not in message
    assert pd.read_csv(folder / "learning_curve.csv")["epoch"].tolist() == [0]  # stopped, not 3 epochs
    assert not pd.read_csv(folder / "metrics.csv").filter(like="test_").size  # nothing was tested


def test_automatic_versions_give_each_run_its_own_folder(config, tmp_path):
    fit(config)
    fit(config)
    runs = tmp_path / "runs" / "tiny"
    assert sorted(p.name for p in runs.iterdir()) == ["version_0", "version_1"]
    assert all((runs / v / "metrics.csv").is_file() for v in ("version_0", "version_1"))


# --- 2. resuming: the after-fit test keeps the better of both runs' best checkpoints ---------
def _set_best_score(path: Path, score: float) -> None:
    ckpt = torch.load(path, weights_only=False)
    (key,) = [k for k in ckpt["callbacks"] if k.startswith("ModelCheckpoint")]
    ckpt["callbacks"][key]["best_model_score"] = torch.tensor(score)
    torch.save(ckpt, path)


@pytest.mark.parametrize("earlier_score,tests_earlier", [(0.0, True), (1e9, False)])
def test_after_fit_tests_the_better_of_the_resumed_runs_best_and_this_runs(config, earlier_score, tests_earlier):
    first = fit(config)
    best = Path(first.trainer.checkpoint_callback.best_model_path)
    _set_best_score(best, earlier_score)  # 0.0: better than any score the resumed run can reach
    second = fit(config, "--ckpt_path", str(best), "--trainer.max_epochs", "2", "--test_after_fit", "true")
    resumed = pd.read_csv(best.parents[2] / "version_1" / "learning_curve.csv")  # the epochs it trained
    assert resumed["epoch"].tolist() == [1] and resumed["seconds"].notna().all()
    if not tests_earlier:
        (own_best,) = (best.parents[2] / "version_1" / "checkpoints").glob("best-*.ckpt")  # the resumed run's own
        assert Path(second.trainer.ckpt_path) == own_best
        return
    assert Path(second.trainer.ckpt_path) == best
    # resumed again, from the second run's last.ckpt: the first run's best is still the one to beat
    last = best.parents[2] / "version_1" / "checkpoints" / "last.ckpt"
    third = fit(config, "--ckpt_path", str(last), "--trainer.max_epochs", "3", "--test_after_fit", "true")
    assert Path(third.trainer.ckpt_path) == best and best.is_file()


def test_a_pct_start_the_schedule_ignores_is_refused_without_a_traceback(config):
    message = refused("fit", "--config", str(config), "--model.pct_start", "0.4", "--model.lr_schedule", "cosine")
    assert "pct_start=0.4 has no effect with lr_schedule='cosine'" in message and "--model.pct_start 0.3" in message


def test_every_config_saves_a_last_checkpoint_to_resume_from():
    for path in CONFIGS:
        cfg = yaml.safe_load(path.read_text())
        (ckpt,) = [c for c in cfg["trainer"]["callbacks"] if c["class_path"].endswith("ModelCheckpoint")]
        assert ckpt["init_args"].get("save_last") is True, path


# --- 3. model arguments linked from the data are not silently overwritten --------------------
@pytest.mark.parametrize("args,name,how", [
    (["--model.model.init_args.lookback", "96"], "lookback", "set it under data instead (--data.lookback 96"),
    (["--model.model.horizon", "12"], "horizon", "set it under data instead (--data.horizon 12"),
    (["--model.model.init_args.n_channels", "7"], "n_channels", "--data.columns"),
])
def test_a_model_value_that_differs_from_the_data_is_refused(config, args, name, how):
    message = refused("fit", "--config", str(config), *args)
    assert f"model's {name}" in message and f"remove model.model.init_args.{name}" in message and how in message


def test_linked_values_in_a_yaml_are_refused_too(config, tmp_path):
    extra = tmp_path / "link.yaml"
    extra.write_text(yaml.safe_dump({"model": {"model": {"init_args": {"horizon": 192}}}}))
    assert "model's horizon (192) differs from the data's (6)" in refused(
        "fit", "--config", str(config), "--config", str(extra))


def test_model_values_equal_to_the_data_are_accepted(config):
    cli = ForecastCLI(ForecastingModule, ForecastDataModule, run=False, args=[
        "--config", str(config), "--model.model.init_args.lookback", "24", "--model.model.init_args.n_channels", "3"])
    assert (cli.model.model.lookback, cli.model.model.n_channels) == (24, 3)


# --- 4. evaluating needs a checkpoint ---------------------------------------------------------
@pytest.mark.parametrize("subcommand", ["validate", "test", "predict"])
def test_evaluating_without_a_checkpoint_is_refused(config, subcommand):
    message = refused(subcommand, "--config", str(config))
    assert f"{subcommand} needs --ckpt_path" in message and "untrained" in message


def test_only_the_first_process_prints_a_refusal(config, monkeypatch):
    """Each process of a multi-process fit refuses a resume alike; the others exit without repeating it."""
    monkeypatch.setattr(rank_zero_only, "rank", 1)
    with pytest.raises(SystemExit) as info:
        main(["validate", "--config", str(config)])
    assert info.value.code == 1


@pytest.mark.parametrize("subcommand,ckpt,match", [
    ("test", "best", "pass the checkpoint file"), ("fit", "last", "pass the checkpoint file"),
    ("test", "missing.ckpt", "no such file"),
])
def test_checkpoints_that_would_load_nothing_are_refused(config, subcommand, ckpt, match):
    assert match in refused(subcommand, "--config", str(config), "--ckpt_path", ckpt)


# --- 5. the module's optimiser options are the only ones -------------------------------------
@pytest.mark.parametrize("option", ["--optimizer", "--lr_scheduler"])
def test_lightnings_optimizer_options_are_not_offered(config, option, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(config), option, "SGD" if option == "--optimizer" else "StepLR"])
    assert option in capsys.readouterr().err


def test_no_config_sets_pct_start_for_a_schedule_that_ignores_it():
    for path in CONFIGS:
        model = yaml.safe_load(path.read_text())["model"]
        assert "pct_start" not in model or model["lr_schedule"] == "onecycle", path


@pytest.mark.parametrize("name,d_model,n_heads,schedule,pct_start,patience", [
    ("ETTh1", 16, 4, "type3", None, 100), ("ETTh2", 16, 4, "type3", None, 100),
    ("ETTm1", 128, 16, "onecycle", 0.4, 20), ("ETTm2", 128, 16, "onecycle", 0.4, 20),
    ("weather", 128, 16, "type3", None, 20),
])
def test_patchtst_configs_keep_the_published_settings(name, d_model, n_heads, schedule, pct_start, patience):
    cfg = yaml.safe_load((ROOT / "configs" / "patchtst" / f"{name}.yaml").read_text())
    init = cfg["model"]["model"]["init_args"]
    (stop,) = [c for c in cfg["trainer"]["callbacks"] if c["class_path"].endswith("EarlyStopping")]
    assert (init["d_model"], init["n_heads"], cfg["model"]["lr_schedule"], cfg["model"].get("pct_start"),
            stop["init_args"]["patience"]) == (d_model, n_heads, schedule, pct_start, patience)


# --- 6. help text and choices ----------------------------------------------------------------
def test_help_describes_the_training_and_data_options_and_lists_choices(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    lines: dict[str, str] = {}  # option -> its help entry (a long option's text starts on the next line)
    for line in capsys.readouterr().out.splitlines():
        if line.startswith("  --"):
            option = line.split()[0]
            lines[option] = line
        elif line.startswith("    ") and lines:
            lines[option] += " " + line.strip()
    assert "Adam learning rate" in lines["--model.lr"]
    assert "{mse,mae,huber}" in lines["--model.loss"] and "training loss" in lines["--model.loss"]
    assert "{type3,onecycle,constant,cosine}" in lines["--model.lr_schedule"]
    assert "onecycle" in lines["--model.pct_start"] and "weight decay" in lines["--model.weight_decay"]
    assert "input length" in lines["--data.lookback"] and "forecast length" in lines["--data.horizon"]
    assert '"step"' in lines["--data.drop_mode"]
    assert "--optimizer" not in lines


def test_a_choice_outside_the_list_is_refused_when_parsing(config, capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--config", str(config), "--model.lr_schedule", "step"])
    err = capsys.readouterr().err
    assert "model.lr_schedule" in err and "cosine" in err


# --- 7. predict writes its forecasts ----------------------------------------------------------
def test_predict_writes_forecasts_in_original_units_with_their_windows_and_times(config, monkeypatch):
    from ts_continuum.training import prediction_writer

    drawn, draw = [], prediction_writer.plot_window

    def spy(window, forecast, inverse, names, title, observed=None):
        drawn.append((window, forecast, title, observed))
        return draw(window, forecast, inverse, names, title, observed)
    best = fit(config).trainer.checkpoint_callback.best_model_path
    monkeypatch.setattr(prediction_writer, "plot_window", spy)
    cli = ForecastCLI(ForecastingModule, ForecastDataModule,
                      args=["predict", "--config", str(config), "--ckpt_path", best])
    out = pd.read_csv(Path(cli.trainer.log_dir) / "predictions.csv", parse_dates=["origin", "time"])
    dm, windows = cli.datamodule, cli.datamodule.splits["test"]
    assert list(out.columns) == ["window", "origin", "time", "step", *dm.channel_names]
    assert len(out) == len(windows) * 6 and sorted(set(out.window)) == list(range(len(windows)))
    last = out[out.window == len(windows) - 1].sort_values("step")
    start = windows.start + len(windows) - 1  # the last window's first input row
    assert (last.time == dm.frame.index[start + 24:start + 30]).all()
    assert (last.origin == dm.frame.index[start + 23]).all()
    module = ForecastingModule.from_checkpoint(best).eval()
    with torch.no_grad():
        scaled = module(default_collate([windows[len(windows) - 1]]))[0].numpy()
    np.testing.assert_allclose(last[dm.channel_names].to_numpy(), dm.scaler.inverse(scaled),
                               rtol=1e-5, atol=1e-5)
    figure = Path(cli.trainer.log_dir) / "predictions.png"  # the last window drawn (its content: test below)
    assert figure.read_bytes().startswith(b"\x89PNG")
    [(window, forecast, title, observed)] = drawn
    assert torch.equal(window["x"], windows[len(windows) - 1]["x"]) and observed is None
    np.testing.assert_allclose(forecast, last[dm.channel_names].to_numpy())
    assert f"window {len(windows) - 1}, origin {dm.frame.index[start + 23]}" in title


def test_the_forecast_figure_shows_the_inputs_the_model_saw_the_forecast_and_the_actuals():
    from ts_continuum.data.scaling import Scaler
    from ts_continuum.data.windows import WindowDataset
    from ts_continuum.training.prediction_plot import MAX_PANELS, plot_window

    rng = np.random.default_rng(0)
    raw = rng.normal(5.0, 2.0, (60, 10))
    scaler = Scaler.fit(raw)
    mask = rng.random((60, 10)) > 0.4  # inputs dropped, as in the irregular regime
    windows = WindowDataset(scaler.transform(raw), 0, 40, 24, 6, mask=mask)
    names = [f"ch{i}" for i in range(10)]
    forecast = rng.normal(size=(6, 10))
    fig = plot_window(windows[3], forecast, scaler.inverse, names, "title")
    assert len(fig.axes) == MAX_PANELS < len(names) and "channels 1-8 of 10" in fig._suptitle.get_text()
    for c, ax in enumerate(fig.axes):
        lines = {line.get_label(): line for line in ax.get_lines()}
        seen = mask[3:27, c]
        np.testing.assert_allclose(lines["input (observed)"].get_xdata(), np.arange(-23, 1)[seen])
        np.testing.assert_allclose(lines["input (observed)"].get_ydata(), raw[3:27, c][seen], rtol=1e-5)
        np.testing.assert_allclose(lines["actual"].get_ydata(), raw[27:33, c], rtol=1e-5)
        np.testing.assert_allclose(lines["forecast"].get_ydata(), forecast[:, c])
        assert list(lines["forecast"].get_xdata()) == [1, 2, 3, 4, 5, 6]
    # interpolated inputs: the model saw every slot; the observed ones are marked on the line
    filled = WindowDataset(scaler.transform(raw), 0, 40, 24, 6, mask=mask, interpolate=True)
    fig = plot_window(filled[3], forecast, scaler.inverse, names, "title", filled.observed(3))
    for c, ax in enumerate(fig.axes):
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert "input (observed)" not in lines and len(lines["input (interpolated)"].get_xdata()) == 24
        np.testing.assert_allclose(lines["observed"].get_xdata(), np.arange(-23, 1)[mask[3:27, c]])
        np.testing.assert_allclose(lines["observed"].get_ydata(), raw[3:27, c][mask[3:27, c]], rtol=1e-5)


def test_a_forecast_figure_that_cannot_be_drawn_warns_and_keeps_the_predictions(config, monkeypatch):
    from ts_continuum.training import prediction_writer

    def broken(*args, **kwargs):
        raise RuntimeError("no fonts")
    best = fit(config).trainer.checkpoint_callback.best_model_path
    monkeypatch.setattr(prediction_writer, "plot_window", broken)
    with pytest.warns(UserWarning, match="could not draw the forecasts' figure .*predictions.png: no fonts"):
        cli = ForecastCLI(ForecastingModule, ForecastDataModule,
                          args=["predict", "--config", str(config), "--ckpt_path", best])
    folder = Path(cli.trainer.log_dir)
    assert (folder / "predictions.csv").is_file() and not (folder / "predictions.png").exists()


@pytest.mark.parametrize("name", ["predictions.csv", "predictions.png"])
def test_predict_never_overwrites_a_predictions_file(config, tmp_path, name):
    best = fit(config).trainer.checkpoint_callback.best_model_path
    folder = tmp_path / "runs" / "tiny" / "version_7"
    folder.mkdir(parents=True)
    (folder / name).write_text("mine\n")
    message = refused("predict", "--config", str(config), "--ckpt_path", best,
                      "--trainer.logger.init_args.version", "7")
    assert name in message and (folder / name).read_text() == "mine\n"
    assert sorted(p.name for p in folder.iterdir()) == [name]  # a figure never outlives its forecasts


# --- 8. the model option offers the library's models ------------------------------------------
def test_help_offers_the_librarys_models_not_every_torch_module(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    out = capsys.readouterr().out
    entry = out[out.index("  --model.model "):out.index("  --model.loss")]  # used to list ~310 nn.Modules
    assert "ts_continuum.models.PatchTST" in entry and "ts_continuum.models.EncoderTransformer" in entry
    assert "torch.nn" not in entry and "ForecastModel" in entry and "--model.model.help" in entry


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(ROOT / "configs")))
def test_every_config_parses_with_its_model(path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["ts-continuum"])
    with pytest.raises(SystemExit) as info:
        main(["fit", "--config", str(path), "--print_config"])
    assert info.value.code in (0, None)
    printed = yaml.safe_load(capsys.readouterr().out)["model"]["model"]
    assert printed["class_path"] == yaml.safe_load(path.read_text())["model"]["model"]["class_path"]


def test_a_forecast_model_of_your_own_trains_and_tests_from_the_cli(config, tmp_path, monkeypatch):
    (tmp_path / "my_forecast_models.py").write_text(
        "from ts_continuum.models import PatchTST\n\n\n"
        "class MyPatchTST(PatchTST):\n"
        '    """PatchTST under another name."""\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    mine = ("--model.model", "my_forecast_models.MyPatchTST")
    best = fit(config, *mine).trainer.checkpoint_callback.best_model_path
    cli = ForecastCLI(args=["test", "--config", str(config), "--ckpt_path", best, *mine])
    assert type(cli.model.model).__name__ == "MyPatchTST"
    message = refused("test", "--config", str(config), "--ckpt_path", best)  # the config's PatchTST
    assert "model class: given 'ts_continuum.models.patchtst.PatchTST' (checkpoint: " \
           "'my_forecast_models.MyPatchTST')" in message


def test_a_forecast_model_without_attention_trains_from_the_cli(config, tmp_path, monkeypatch):
    """ForecastModel is the base for any forecaster: one without the attention options works too."""
    (tmp_path / "my_linear.py").write_text(
        "from torch import nn\n\nfrom ts_continuum.models.base import ForecastModel\n\n\n"
        "class Linear(ForecastModel):\n"
        '    """One linear map from the lookback to the horizon, per channel."""\n\n'
        "    def __init__(self, n_channels: int, lookback: int = 24, horizon: int = 6):\n"
        "        super().__init__(locals())\n"
        "        self.linear = nn.Linear(lookback, horizon)\n\n"
        "    def forward(self, x, x_mask=None, x_time=None):\n"
        "        self.check_input(x, x_mask, x_time)\n"
        "        return self.linear(x.nan_to_num().transpose(1, 2)).transpose(1, 2)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = yaml.safe_load(config.read_text())
    cfg["model"]["model"] = {"class_path": "my_linear.Linear"}
    linear = tmp_path / "linear.yaml"
    linear.write_text(yaml.safe_dump(cfg))
    cli = fit(linear)
    assert type(cli.model.model).__name__ == "Linear" and cli.trainer.current_epoch == 1
    with pytest.raises(ValueError, match="Linear has no attention to switch"):
        cli.model.model.set_attention("continuous")


# --- 9. bad options and data: one line, before the run folder is touched -----------------------
@pytest.mark.parametrize("args,match", [
    (["--data.dataset", "ETTh3"], "'ETTh3' is neither a bundled dataset"),
    (["--data.columns", "[a,zz]"], "columns ['zz'] are not in"),
    (["--data.drop", "1.5"], "drop must be a fraction"),
    (["--model.model.init_args.d_model", "10", "--model.model.init_args.n_heads", "4"], "divisible by n_heads"),
    (["--data.lookback", "300"], "too little history"),  # used to fail inside trainer.fit
    (["--model.lr", "-1"], "lr must be a positive number, got -1.0"),  # Adam's error, after config.yaml
    (["--model.weight_decay", "-0.1"], "weight_decay must be a number >= 0"),
    (["--trainer.precision", "16-true"], "precision='16-true' trains float16 weights with Adam"),  # NaN after a step
    (["--data.horizon", "1000000000000"], "GiB of weights (the largest, head.0.weight"),  # torch's allocator failed
])
def test_bad_options_and_data_are_refused_in_one_line_before_the_run_folder(config, tmp_path, args, match):
    message = refused("fit", "--config", str(config), *args)
    assert match in message and "raised in" not in message  # the library's own checks need no origin
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("kw,match", [
    (dict(lr=0.0), "lr must be a positive number"), (dict(lr=float("nan")), "lr must be a positive number"),
    (dict(weight_decay=-1e-4), "weight_decay must be a number >= 0"),
])
def test_the_module_refuses_optimiser_settings_adam_takes_or_refuses_only_in_fit(kw, match):
    from ts_continuum.models import PatchTST
    model = PatchTST(n_channels=1, lookback=24, horizon=6, patch_len=8, stride=4, d_model=8, n_heads=2, n_layers=1)
    with pytest.raises(ValueError, match=match):
        ForecastingModule(model, **kw)


def test_errors_that_are_not_bad_input_keep_their_traceback(config, monkeypatch):
    def broken(self, stage=None):
        raise RuntimeError("a bug")
    monkeypatch.setattr(ForecastDataModule, "setup", broken)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["fit", "--config", str(config)])


def unparsable_dates(self, stage=None):
    pd.to_datetime(["2016-07-01", "not a date"], format="%Y-%m-%d")


def test_a_value_error_from_another_library_is_one_line_that_names_its_origin(config, monkeypatch):
    """Usually bad input (pandas refusing a date), but possibly a bug: the line says where it came from."""
    monkeypatch.setattr(ForecastDataModule, "setup", unparsable_dates)
    monkeypatch.delenv("TS_CONTINUUM_TRACEBACK", raising=False)
    message = refused("fit", "--config", str(config))
    assert "not a date" in message and "raised in pandas." in message
    assert "TS_CONTINUUM_TRACEBACK=1 shows the traceback" in message


def test_ts_continuum_traceback_keeps_the_traceback_of_bad_input(config, monkeypatch):
    monkeypatch.setattr(ForecastDataModule, "setup", unparsable_dates)
    monkeypatch.setenv("TS_CONTINUUM_TRACEBACK", "1")
    with pytest.raises(ValueError, match="not a date") as info:
        main(["fit", "--config", str(config)])
    assert not isinstance(info.value, CLIError)


def test_a_value_error_from_compiled_code_called_by_the_library_names_the_calling_line():
    """A traceback ends at the last Python frame: a ValueError raised inside a C function that
    ts-continuum called would otherwise pass for one of its own checks, with no origin and no hint."""
    from ts_continuum.training.errors import raised_outside

    source = "def check(x):\n    raise ValueError('own check')\n\ndef compute(x):\n    return int(x)\n"
    scope = {"__name__": "ts_continuum.fake"}
    exec(compile(source, "/somewhere/fake.py", "exec"), scope)
    with pytest.raises(ValueError) as own:
        scope["check"]("a")
    assert raised_outside(own.value) is None
    with pytest.raises(ValueError) as compiled:
        scope["compute"]("a")
    assert raised_outside(compiled.value) == "compiled code called from ts_continuum.fake, fake.py:5"
    try:
        try:
            scope["check"]("a")
        except ValueError:
            raise  # a bare re-raise is still the library's own check
    except ValueError as error:
        assert raised_outside(error) is None
