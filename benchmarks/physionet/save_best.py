"""Save the study's best model (chosen on validation MSE, never on test) as a ``ts-continuum`` run:
its checkpoint (weights, model class and arguments, the data's split and scaling; no optimiser state)
and a ``config.yaml``, so that one command recomputes its test MSE from the raw data file:

    python -m benchmarks.physionet.save_best [results folder] [--model async]
    ts-continuum test --config benchmarks/results/physionet2012/best/config.yaml \\
        --ckpt_path benchmarks/results/physionet2012/best/model.ckpt
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd
import torch
import yaml

from benchmarks.physionet.cell import SETTINGS
from ts_continuum.models import QUERY_MODELS

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "benchmarks" / "results" / "physionet2012"
MODEL_CLASSES = {name: f"ts_continuum.models.{cls.__name__}" for name, cls in QUERY_MODELS.items()}


def checkpoint(results: Path, cell_id: str) -> Path:
    return results / "runs" / cell_id / "best.ckpt"


def best_row(results: pd.DataFrame, model: str, folder: Path) -> tuple[pd.Series, str]:
    """The finished cell of ``model`` on complete histories with the lowest validation MSE whose
    checkpoint is still on disk (run folders are not committed), and a note if a better one's is gone."""
    ok = results[(results["status"] == "ok") & (results["model"] == model)
                 & results["switch"].fillna("none").eq("none") & (results["history_keep"] == 1.0)]
    kept = ok[[checkpoint(folder, c).exists() for c in ok["cell_id"]]]
    if kept.empty:
        raise SystemExit(f"no finished {model} cell on complete histories with its checkpoint under {folder}/runs")
    row, overall = kept.loc[kept["best_val_mse"].idxmin()], ok.loc[ok["best_val_mse"].idxmin()]
    note = "" if row["cell_id"] == overall["cell_id"] else (
        f" The best cell on validation, `{overall['cell_id']}` (validation MSE {overall['best_val_mse']:.6f}, test "
        f"{overall['test_mse']:.6f}), ran in an earlier session whose run folder (checkpoint) was not kept.")
    return row, note


def run_config(cell: dict, ckpt: dict) -> dict:
    """The CLI config that rebuilds the checkpoint's model and the cell's data module."""
    model_config = {k: v for k, v in ckpt["model_config"].items() if k != "n_variables"}
    return {
        "seed_everything": int(cell["seed"]),
        "trainer": {"accelerator": "cpu", "enable_progress_bar": False,
                    "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                               "init_args": {"save_dir": "runs", "name": "physionet2012-best"}}},
        "model": {"model": {"class_path": ckpt["model_class"], "init_args": model_config},
                  "lr": float(cell["lr"]), "lr_schedule": "cosine", "weighting": cell["weighting"]},
        "data": {"split_seed": int(cell["split_seed"]), "batch_size": int(cell["batch_size"]),
                 "eval_batch_size": int(cell["eval_batch_size"]), "history_keep": float(cell["history_keep"]),
                 **({"max_stays": int(cell["max_stays"])} if cell["max_stays"] else {})},
    }


def shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (the README's command runs from there)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=DEFAULT)
    parser.add_argument("--model", default="async", choices=sorted(MODEL_CLASSES))
    args = parser.parse_args(argv)
    row, note = best_row(pd.read_csv(args.results / "results.csv"), args.model, args.results)
    cell = {**SETTINGS, **json.loads(row["config"])}
    ckpt = torch.load(checkpoint(args.results, row["cell_id"]), map_location="cpu", weights_only=False)
    for key in ("optimizer_states", "lr_schedulers", "loops", "callbacks"):
        ckpt.pop(key, None)  # evaluation needs weights, model arguments and the data's state only
    best = args.results / "best"
    best.mkdir(exist_ok=True)
    torch.save(ckpt, best / "model.ckpt")
    (best / "config.yaml").write_text(yaml.safe_dump(run_config(cell, ckpt), sort_keys=False))
    (best / "README.md").write_text(
        f"# The best {args.model} model of `{shown(args.results)}`"
        f"{' among those whose checkpoint was kept' if note else ''}\n\n"
        f"Cell `{row['cell_id']}` (block `{row['block']}`), chosen on validation MSE "
        f"({row['best_val_mse']:.6f}) among the finished cells of its kind on complete histories; its test MSE "
        f"in `results.csv`: {row['test_mse']:.6f} (MAE {row['test_mae']:.6f}).{note}\n\n"
        "Recompute its test MSE from the raw data file (`datasets/physionet2012.csv.xz`):\n\n"
        f"```bash\nts-continuum test --config {shown(best)}/config.yaml --ckpt_path {shown(best)}/model.ckpt\n```\n\n"
        f"Written by `python -m benchmarks.physionet.save_best` ({(best / 'model.ckpt').stat().st_size / 1e6:.1f} MB, "
        "weights and the data's split and scaling, no optimiser state).\n")
    print(f"saved {row['cell_id']} to {best}")


if __name__ == "__main__":
    main()
