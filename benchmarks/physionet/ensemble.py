"""Score an equal-weight ensemble of finished PhysioNet cells: the mean of their forecasts, on the
validation and test stays, beside each member alone (which must reproduce its row's test MSE).

    python -m benchmarks.physionet.ensemble benchmarks/results/physionet2012-width --block width-128 width-128-seeds

Members are every finished cell of the named blocks whose checkpoint (``runs/<cell>/best.ckpt``,
not committed, or the folder's saved best model ``best/model.ckpt`` when its README names the cell)
is on disk; ``--also FOLDER:BLOCK`` adds the cells of a block of another results folder (models of
other kinds too). Choose them before looking at any test number (by block, never by test score).
Writes ``ensemble.csv`` in the first results folder: one row per member and one for the ensemble.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import pandas as pd
import torch
from torch import nn

from benchmarks.physionet.cell import SETTINGS, build_model, data_module, evaluate
from ts_continuum.training.query_module import QueryForecastingModule


class MeanForecast(nn.Module):
    """The mean of several trained modules' forecasts for one batch."""

    def __init__(self, members: list[nn.Module]):
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, batch: dict) -> torch.Tensor:
        return torch.stack([m(batch) for m in self.members]).mean(0)


def load_member(folder: Path, row: pd.Series) -> tuple[dict, QueryForecastingModule]:
    cell = {**SETTINGS, **json.loads(row["config"])}
    dm = data_module(cell)
    module = QueryForecastingModule(build_model(cell, dm))
    state = torch.load(checkpoint_of(folder, row["cell_id"]), map_location="cpu", weights_only=False)
    module.load_state_dict(state["state_dict"])
    return cell, module.eval()


def checkpoint_of(folder: Path, cell_id: str) -> Path | None:
    """The cell's checkpoint on disk: its run's, or the folder's saved best model if that is the cell."""
    run = folder / "runs" / cell_id / "best.ckpt"
    saved = folder / "best" / "model.ckpt"
    if run.exists():
        return run
    readme = folder / "best" / "README.md"
    if saved.exists() and readme.exists() and f"Cell `{cell_id}`" in readme.read_text():
        return saved
    return None


def member_rows(folder: Path, blocks: list[str]) -> pd.DataFrame:
    """The finished cells of ``blocks`` in ``folder`` with a checkpoint on disk."""
    results = pd.read_csv(folder / "results.csv")
    rows = results[(results["status"] == "ok") & results["block"].isin(blocks)]
    switched = rows.loc[rows["switch"] != "none", "cell_id"].tolist()
    if switched:
        raise SystemExit(f"cells that switched attention during training cannot be members (which attention "
                         f"their checkpoint used is not recorded): {', '.join(switched)}; name other blocks")
    return rows[[checkpoint_of(folder, c) is not None for c in rows["cell_id"]]].assign(folder=str(folder))


def score(module: nn.Module, dm) -> tuple[dict, dict]:
    """The metric on the validation and the test stays."""
    return evaluate(module, dm.val_dataloader(), dm.n_variables), evaluate(module, dm.test_dataloader(), dm.n_variables)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path, help="a results folder with results.csv and runs/")
    parser.add_argument("--block", nargs="+", required=True, help="the blocks whose finished cells are the members")
    parser.add_argument("--also", action="append", default=[], metavar="FOLDER:BLOCK",
                        help="also the finished cells of BLOCK in another results FOLDER (repeatable)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    groups = [member_rows(args.folder, args.block)]
    for spec in args.also:
        folder, sep, block = spec.rpartition(":")
        if not sep or not folder or not block:
            raise SystemExit(f"--also takes FOLDER:BLOCK, got {spec!r}")
        groups.append(member_rows(Path(folder), [block]))
    rows = pd.concat(groups, ignore_index=True)
    if len(rows) < 2:
        raise SystemExit(f"need at least two finished cells with checkpoints in the named blocks, found {len(rows)}")
    t0 = time.perf_counter()
    members, out = [], []
    for _, row in rows.iterrows():
        folder = Path(row["folder"])
        cell, module = load_member(folder, row)
        dm = data_module(cell)
        val, test = score(module, dm)
        if abs(test["mse"] - row["test_mse"]) > 1e-6 * max(1.0, abs(row["test_mse"])):
            raise SystemExit(f"{row['cell_id']}: reloaded test MSE {test['mse']:.6g} differs from its row "
                             f"{row['test_mse']:.6g}; the checkpoint or the code changed")
        name = row["cell_id"] if folder == args.folder else f"{folder}/{row['cell_id']}"
        out.append({"member": name, "val_mse": val["mse"], "test_mse": test["mse"], "test_mae": test["mae"]})
        members.append(module)
        print(f"{name}: val {val['mse']:.6f} test {test['mse']:.6f}", flush=True)
    ensemble = MeanForecast(members)
    val, test = score(ensemble, dm)
    out.append({"member": f"mean of {len(members)}", "val_mse": val["mse"], "test_mse": test["mse"],
                "test_mae": test["mae"]})
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"ensemble of {len(members)}: val {val['mse']:.6f} test {test['mse']:.6f} mae {test['mae']:.6f} "
          f"({time.perf_counter() - t0:.0f} s, peak RSS {rss_mb:.0f} MB)")
    pd.DataFrame(out).to_csv(args.folder / "ensemble.csv", index=False)


if __name__ == "__main__":
    main()
