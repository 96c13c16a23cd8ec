"""The synthetic control's summary.md: paired continuous - softmax per sampling (statistics from
``benchmarks/paired_stats.py``, as the study's report), another folder's runs against these, how far
the interpolated grid is from the series, and the same-epoch validation gaps."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.paired_stats import paired_stats
from benchmarks.synthetic.simulation import SAMPLINGS, grid_error

FILLED = {"interpolated": "interpolated", "inputs_interpolated": "inputs interpolated"}  # inputs that interpolate
DESCRIBED = {"encoder": "encoder-only Transformer", "patchtst": "PatchTST",
             "observed": "the observations as input", "interpolated": "input interpolated onto every step",
             "inputs_interpolated": "each window's inputs interpolated onto every step, targets observed"}


def present(rows: pd.DataFrame) -> list[str]:
    return [s for s in SAMPLINGS if s in set(rows["sampling"])]


def grid_error_lines(rows: pd.DataFrame, settings: dict) -> list[str]:
    fed = ("the grid these runs were trained on and fed." if rows["input"].iloc[0] == "interpolated" else
           "what these runs' inputs hold between observations (inside a window the first observation is also held "
           "back to the window's start); their targets are the observations.")
    lines = ["## How far the interpolated grid is from the series (added after amendment 3's runs)", "",
             "At the steps interpolation fills, against the simulated values (noise variance 0.01), over each "
             f"whole draw: {fed}", "",
             "| sampling | seed | steps filled | MSE of the filled steps | troughs filled | bias there | "
             "crests filled | bias there |", "|---|---|---|---|---|---|---|---|"]
    for sampling in present(rows):
        for seed in sorted(rows.loc[rows["sampling"] == sampling, "seed"].unique()):
            e = grid_error(sampling, int(seed), settings["series"], settings["steps"])
            lines.append(f"| {sampling} | {seed} | {100 * e['filled']:.0f} % | {e['mse']:.3f} | "
                         f"{100 * e['trough_filled']:.0f} % | {e['trough_bias']:+.3f} | "
                         f"{100 * e['crest_filled']:.0f} % | "
                         f"{e['crest_bias']:+.3f} |")
    return lines + [""]

def paired(rows: pd.DataFrame, metric: str) -> pd.DataFrame:
    """continuous - softmax per sampling, over the seeds: means, 95 % t interval, count lower."""
    wide = rows.pivot_table(index=["sampling", "seed"], columns="attention", values=metric)
    wide["delta"] = wide["continuous"] - wide["softmax"]
    out = []
    for sampling, g in wide.groupby(level="sampling"):
        d = g["delta"].dropna().to_numpy()
        s = paired_stats(d)
        out.append(dict(sampling=sampling, pairs=s["n"], softmax=g["softmax"].mean(), continuous=g["continuous"].mean(),
                        delta=s["mean"], low=s["lo"], high=s["hi"], continuous_lower=int((d < 0).sum()),
                        relative=s["mean"] / g["softmax"].mean()))
    return pd.DataFrame(out)


COMPARISONS = (("continuous on the observations vs softmax {}", "softmax", "continuous"),
               ("softmax: observations vs {}", "softmax", "softmax"),
               ("continuous: observations vs {}", "continuous", "continuous"))


def against(rows: pd.DataFrame, other: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Another folder's runs (B) against this folder's (A), pair by pair (same sampling and seed, so
    the same draw): the ``COMPARISONS`` of attention here and there, Δ = B - A."""
    out = []
    label = FILLED[rows["input"].iloc[0]]
    for sampling in present(rows):
        for name, here, there in COMPARISONS:
            name = name.format(label)
            a = rows[(rows["sampling"] == sampling) & (rows["attention"] == here)].set_index("seed")[metric]
            b = other[(other["sampling"] == sampling) & (other["attention"] == there)].set_index("seed")[metric]
            seeds = a.index.intersection(b.index)
            if len(seeds) == 0:
                continue
            d = (b[seeds] - a[seeds]).to_numpy()
            s = paired_stats(d)
            out.append(dict(sampling=sampling, comparison=name, pairs=s["n"], a=a[seeds].mean(), b=b[seeds].mean(),
                            delta=s["mean"], low=s["lo"], high=s["hi"], b_lower=int((d < 0).sum()),
                            relative=s["mean"] / a[seeds].mean()))
    return pd.DataFrame(out)


def against_lines(rows: pd.DataFrame, other: pd.DataFrame, where: str) -> list[str]:
    lines = [f"## Against the observations as input (`{where}`)", "",
             f"A = this folder's run ({DESCRIBED[rows['input'].iloc[0]]}), B = the same draw and seed with the "
             "observations as input; Δ = B - A, mean over seeds with a 95 % t interval (below 0: the observations as "
             "input do better).", ""]
    for metric in ("mse_all", "mse_observed"):
        lines += [f"`{metric}`:", "", "| sampling | comparison | pairs | A | B | Δ [95 % CI] | Δ / A | B lower |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in against(rows, other, metric).itertuples():
            lines.append(f"| {r.sampling} | {r.comparison} | {r.pairs} | {r.a:.4f} | {r.b:.4f} | {r.delta:+.4f} "
                         f"[{r.low:+.4f}, {r.high:+.4f}] | {100 * r.relative:+.1f} % | {r.b_lower} of {r.pairs} |")
        lines.append("")
    return lines


def write_summary(rows: pd.DataFrame, out: Path, meta: dict, compare: tuple[pd.DataFrame, str] | None = None) -> None:
    model, input_ = rows["model"].iloc[0], rows["input"].iloc[0]
    lines = [f"# Synthetic control: {', '.join(present(rows))} sampling ({DESCRIBED[model]}, {DESCRIBED[input_]})",
             "",
             f"`{meta['command']}`; {meta['date']}; torch {meta['torch']}, {meta['threads']} thread(s), {meta['cpu']} "
             f"({meta['cores']} cores). Design and the prediction written before the runs: "
             "`benchmarks/results/synthetic_control_design.md`.", "",
             "Δ = continuous - softmax (same data and seed), mean over seeds with a 95 % t interval.", ""]
    for metric, what in (("mse_all", "every future step"), ("mse_observed", "observed future steps only")):
        lines += [f"## Test MSE on {what} (`{metric}`)", "",
                  "| sampling | pairs | softmax | continuous | Δ [95 % CI] | Δ / softmax | continuous lower |",
                  "|---|---|---|---|---|---|---|"]
        for r in paired(rows, metric).itertuples():
            lines.append(f"| {r.sampling} | {r.pairs} | {r.softmax:.4f} | {r.continuous:.4f} | {r.delta:+.4f} "
                         f"[{r.low:+.4f}, {r.high:+.4f}] | {100 * r.relative:+.1f} % "
                         f"| {r.continuous_lower} of {r.pairs} |")
        lines.append("")
    if compare is not None:
        lines += against_lines(rows, *compare) + ["![both inputs, both attentions](against_observed.png)", ""]
    if input_ in FILLED:
        lines += grid_error_lines(rows, meta["settings"])
    lines += ["## Runs", "", "| sampling | attention | seed | mse_all | mse_observed | observed share | crest share "
              "| kept epoch / epochs (from 1) | fit s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows.sort_values(["sampling", "seed", "attention"]).itertuples():
        lines.append(f"| {r.sampling} | {r.attention} | {r.seed} | {r.mse_all:.4f} | {r.mse_observed:.4f} | "
                     f"{r.observed_share:.2f} | {r.crest_share:.2f} | {r.best_epoch + 1} / {r.epochs} | "
                     f"{r.fit_s:.0f} |")
    lines += ["", "![test MSE per run](synthetic_control.png)", ""]
    if "val_curve" in rows:
        lines += gap_table(rows)
        lines += ["![validation MSE after every epoch](validation_curves.png)", "",
                  "![same-epoch validation gap of each pair](validation_gap.png)", ""]
    (out / "summary.md").write_text("\n".join(lines))

def validation_gaps(rows: pd.DataFrame) -> dict[tuple[str, int], list[float]]:
    """(sampling, seed) -> continuous / softmax - 1 of the validation MSE after each epoch both ran."""
    curves = {(r.sampling, r.seed, r.attention): json.loads(r.val_curve) for r in rows.itertuples()}
    gaps = {}
    for (sampling, seed, attention), soft in curves.items():
        cont = curves.get((sampling, seed, "continuous"))
        if attention == "softmax" and cont is not None:
            gaps[sampling, seed] = [c / s - 1 for s, c in zip(soft, cont)]
    return gaps


GAP_EPOCHS = (1, 2, 3, 5, 10, 15, 20, 25)


def gap_table(rows: pd.DataFrame) -> list[str]:
    """Mean same-epoch validation gap over the pairs whose runs both reached the epoch."""
    gaps = validation_gaps(rows)
    lines = ["## Validation MSE at the same epoch, continuous / softmax - 1 (mean over the pairs that reached it)",
             "", "| sampling | " + " | ".join(f"epoch {e}" for e in GAP_EPOCHS) + " |",
             "|---|" + "---|" * len(GAP_EPOCHS)]
    for sampling in present(rows):
        cells = []
        for e in GAP_EPOCHS:
            at = [g[e - 1] for (s, _), g in gaps.items() if s == sampling and len(g) >= e]
            cells.append(f"{100 * np.mean(at):+.1f} % ({len(at)})" if at else "")
        lines.append(f"| {sampling} | " + " | ".join(cells) + " |")
    return lines + [""]
