"""Greedy ensemble selection on the validation stays (Caruana et al., ICML 2004) over finished
PhysioNet cells, then one score on the test stays.

    python -m benchmarks.physionet.ensemble_selection benchmarks/results/physionet2012-ensemble \\
        --candidates benchmarks/results/physionet2012-ema benchmarks/results/physionet2012-lr/lr2e-3:lr-2e-3 ...

Candidates: every finished cell of each named results FOLDER (or of one BLOCK of it, ``FOLDER:BLOCK``)
whose checkpoint is on disk and that did not switch attention. Each is scored once on the validation and
test stays (its test MSE must reproduce its row's); its forecasts are kept in ``<out>/runs/`` (not
committed; the queries once, each candidate's forecasts apart) so that a rerun only scores new
candidates. Selection: start from nothing and, ``--steps`` times, add (with replacement) the candidate
that makes the mean forecast's validation MSE lowest; the ensemble is the step with the lowest
validation MSE. Test numbers never enter a choice. Writes ``candidates.csv`` (each candidate alone),
``selection.csv`` (each step; the chosen one marked) and ``selection.png`` (validation and test MSE by
step) in ``<out>``, and prints the chosen ensemble's test MSE minus the first candidate's with a paired
bootstrap interval over the test stays (name the reference model first).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from benchmarks.physionet.bootstrap import bootstrap, metric
from benchmarks.physionet.cell import data_module
from benchmarks.physionet.ensemble import load_member, member_rows
from ts_continuum.training.query_module import query_mask

SPLITS = ("val", "test")


def forecasts(module: torch.nn.Module, loader) -> dict[str, np.ndarray]:
    """Every query of a loader, flat: the forecast, the target, its variable and its stay."""
    out: dict[str, list] = {"pred": [], "target": [], "variable": [], "stay": []}
    module.eval()
    with torch.no_grad():
        for batch in loader:
            mask = query_mask(batch)
            pred = module(batch)
            variable = torch.arange(mask.shape[1])[None, :, None].expand_as(mask)
            out["pred"].append(pred[mask].numpy())  # the model's own dtype: cached exactly, scored in float64
            out["target"].append(batch["query_values"][mask].double().numpy())
            out["variable"].append(variable[mask].numpy())
            out["stay"].append(batch["index"][:, None, None].expand_as(mask)[mask].numpy())
    return {k: np.concatenate(v) for k, v in out.items()}


def stay_sums(pred: np.ndarray, target: np.ndarray, variable: np.ndarray, stay: np.ndarray,
              n_variables: int) -> dict[str, np.ndarray]:
    """Squared-error sums and query counts per (stay, variable), as a cell's ``errors.npz`` holds them."""
    ids, index = np.unique(stay, return_inverse=True)
    cell, size = index * n_variables + variable, len(ids) * n_variables
    return {"ids": ids, "sq": np.bincount(cell, (pred - target) ** 2, minlength=size).reshape(len(ids), -1),
            "count": np.bincount(cell, minlength=size).reshape(len(ids), -1).astype(np.float64)}


def per_variable_mse(pred: np.ndarray, target: np.ndarray, variable: np.ndarray) -> float:
    """The published metric: squared error per variable over its queries, averaged over variables."""
    counts = np.bincount(variable).astype(np.float64)
    return float(metric(np.bincount(variable, (pred - target) ** 2, minlength=len(counts)), counts))


def paired_bootstrap(a: np.ndarray, b: np.ndarray, target: np.ndarray, variable: np.ndarray, stay: np.ndarray,
                     draws: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """The metric of forecasts ``b`` minus that of ``a`` on the same queries, and its 95 % interval
    over resamples of the stays (``benchmarks.physionet.bootstrap``'s, each stay's queries together)."""
    C = int(variable.max()) + 1
    out = bootstrap([stay_sums(p, target, variable, stay, C) for p in (a, b)], draws, seed)
    low, high = np.percentile(out["resampled"][1] - out["resampled"][0], [2.5, 97.5])
    return float(out["full"][1] - out["full"][0]), float(low), float(high)


def candidate_rows(specs: list[str]) -> pd.DataFrame:
    """The finished, unswitched cells with checkpoints named by FOLDER or FOLDER:BLOCK specs."""
    groups = []
    for spec in specs:
        folder, sep, block = spec.partition(":")
        path = Path(folder)
        if not (path / "results.csv").is_file():
            raise SystemExit(f"{folder}: no results.csv; name a results folder of benchmarks.physionet.run")
        blocks = [block] if sep else pd.read_csv(path / "results.csv")["block"].unique().tolist()
        groups.append(member_rows(path, blocks))
    rows = pd.concat(groups, ignore_index=True)
    rows["name"] = [f"{f.removeprefix('benchmarks/results/')}/{c}" for f, c in zip(rows["folder"], rows["cell_id"])]
    if rows["name"].duplicated().any():
        raise SystemExit(f"a candidate is named twice: {rows.loc[rows['name'].duplicated(), 'name'].tolist()}")
    if len(rows) < 2:
        raise SystemExit(f"need at least two candidates with checkpoints on disk, found {len(rows)}")
    return rows


def score_candidates(rows: pd.DataFrame, cache: Path) -> tuple[list[dict[str, np.ndarray]], dict]:
    """Each candidate's forecasts on both splits (from the cache when there), checked against the shared
    queries and against its row's test MSE. The cache keeps the queries (targets, variables, stays) once,
    in ``queries.npz``, and each candidate's forecasts in a file of its own."""
    cache.mkdir(parents=True, exist_ok=True)
    queries_path = cache / "queries.npz"
    reference = dict(np.load(queries_path)) if queries_path.is_file() else None
    preds = []
    t0 = time.perf_counter()
    for i, (_, row) in enumerate(rows.iterrows()):
        path = cache / (row["name"].replace("/", "__") + ".npz")
        if path.is_file():
            stored = dict(np.load(path))
        else:
            try:
                cell, module = load_member(Path(row["folder"]), row)
            except TypeError as err:  # a model option since removed from the library
                raise SystemExit(f"{row['name']}: this code cannot build its model ({err}); leave it out") from err
            dm = data_module(cell)
            loaders = {"val": dm.val_dataloader(), "test": dm.test_dataloader()}
            stored = {f"{s}_{k}": v for s in SPLITS for k, v in forecasts(module, loaders[s]).items()}
        if reference is None:
            reference = {k: v for k, v in stored.items() if not k.endswith("_pred")}
            np.savez(queries_path, **reference)
        for key, value in reference.items():
            if key in stored and not np.array_equal(stored[key], value):
                raise SystemExit(f"{row['name']}: its {key} differ from the other candidates'; candidates must "
                                 "share the split and the queries")
        if not path.is_file():
            np.savez(path, **{f"{s}_pred": stored[f"{s}_pred"] for s in SPLITS})
        test = per_variable_mse(stored["test_pred"], reference["test_target"], reference["test_variable"])
        if abs(test - row["test_mse"]) > 1e-6 * max(1.0, abs(row["test_mse"])):
            raise SystemExit(f"{row['name']}: reloaded test MSE {test:.6g} differs from its row "
                             f"{row['test_mse']:.6g}; the checkpoint or the code changed")
        preds.append({s: stored[f"{s}_pred"].astype(np.float64) for s in SPLITS})
        print(f"[{i + 1}/{len(rows)}] {row['name']}: test {test:.6f} ({time.perf_counter() - t0:.0f} s)", flush=True)
    return preds, reference


def select(preds: list[dict[str, np.ndarray]], reference: dict, steps: int) -> pd.DataFrame:
    """Greedy forward selection with replacement on validation MSE; each step's validation and test MSE."""
    def mse(split: str, total: np.ndarray, n: int) -> float:
        return per_variable_mse(total / n, reference[f"{split}_target"], reference[f"{split}_variable"])

    totals = {s: np.zeros_like(preds[0][s]) for s in SPLITS}
    out = []
    for step in range(1, steps + 1):
        val = [mse("val", totals["val"] + p["val"], step) for p in preds]
        best = int(np.argmin(val))
        for s in SPLITS:
            totals[s] = totals[s] + preds[best][s]
        out.append({"step": step, "added": best, "val_mse": val[best], "test_mse": mse("test", totals["test"], step)})
    table = pd.DataFrame(out)
    table["chosen"] = table.index == table["val_mse"].idxmin()
    return table


def plot(table: pd.DataFrame, members_test: float, path: Path, target: float | None = None) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(table["step"], table["val_mse"] * 1e3, "o-", label="validation")
    ax.plot(table["step"], table["test_mse"] * 1e3, "s-", label="test")
    ax.axhline(members_test * 1e3, color="grey", ls=":", label="candidates' mean test MSE")
    ax.axvline(table.loc[table["chosen"], "step"].item(), color="k", lw=0.8, label="chosen (lowest validation)")
    if target is not None:
        ax.axhline(target * 1e3, color="tab:red", ls="--", lw=0.8, label="target test MSE")
    ax.set_xlabel("selection step (models in the mean, with repeats)")
    ax.set_ylabel("MSE ×10⁻³")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="folder for the tables, the plot and the forecasts' cache (runs/)")
    parser.add_argument("--candidates", nargs="+", required=True, metavar="FOLDER[:BLOCK]")
    parser.add_argument("--steps", type=int, default=20, help="selection steps (default 20)")
    parser.add_argument("--target", type=float, help="a test MSE to mark on the plot (e.g. 0.0055)")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    if args.steps < 1:
        raise SystemExit(f"--steps must be at least 1, got {args.steps}")
    torch.set_num_threads(args.threads)
    rows = candidate_rows(args.candidates)
    preds, reference = score_candidates(rows, args.out / "runs")
    alone = rows[["name", "best_val_mse", "test_mse"]].assign(
        val_mse=[per_variable_mse(p["val"], reference["val_target"], reference["val_variable"]) for p in preds])
    alone.to_csv(args.out / "candidates.csv", index=False)
    table = select(preds, reference, args.steps)
    table.insert(2, "added_name", rows["name"].iloc[table["added"]].to_numpy())
    table.to_csv(args.out / "selection.csv", index=False)
    plot(table, float(rows["test_mse"].mean()), args.out / "selection.png", args.target)
    chosen = table[table["chosen"]].iloc[0]
    used = table.loc[: chosen.name, "added_name"].value_counts()
    mean = np.mean([preds[i]["test"] for i in table.loc[: chosen.name, "added"]], axis=0)
    delta, low, high = paired_bootstrap(preds[0]["test"], mean, reference["test_target"], reference["test_variable"],
                                        reference["test_stay"])
    print(f"chosen: step {chosen['step']} ({len(used)} distinct models): validation {chosen['val_mse']:.6f}, "
          f"test {chosen['test_mse']:.6f}; minus the first candidate ({rows['name'].iloc[0]}) on test: "
          f"{delta:+.6f} [{low:+.6f}, {high:+.6f}] (95 %, 2,000 resamples of the test stays)")
    for name, n in used.items():
        print(f"  {n} x {name}")


if __name__ == "__main__":
    main()
