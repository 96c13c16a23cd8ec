"""Summaries of a study folder: ``summary.md`` and plots from ``results.csv``.

    python -m benchmarks.report benchmarks/results/study
    python -m benchmarks.report --pool benchmarks/results/pooled benchmarks/results/study benchmarks/results/study_gpu

``--pool`` summarises several study folders together (e.g. the CPU study and a GPU replicate): a
run is identified by its folder and seed, so seed 0 on two machines makes two pairs; training
cost is left to each folder's own summary, since the machines differ.

Paired comparisons match continuous and softmax runs on everything else (model, positions,
dataset, horizon, regime, seed): the difference continuous - softmax per pair, its mean with a
95 % t-interval, a paired t-test and a Wilcoxon signed-rank test, and win counts.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import yaml  # noqa: E402
from scipy import stats  # noqa: E402

from ts_continuum.data.bundled import FREQUENCIES  # noqa: E402

# PatchTST/42 (ICLR 2023, Table 3; its test loader drops the last batch) and a rerun keeping every
# test window (FITS authors), MSE at H = 96/192/336/720; see shared docs/anchors.md.
PUBLISHED = {
    "ETTh1": ((0.375, 0.414, 0.431, 0.449), (0.385, 0.413, 0.440, 0.456)),
    "ETTh2": ((0.274, 0.339, 0.331, 0.379), (0.274, 0.338, 0.367, 0.391)),
    "ETTm1": ((0.290, 0.332, 0.366, 0.420), (0.292, 0.330, 0.365, 0.419)),
    "ETTm2": ((0.165, 0.220, 0.278, 0.367), (0.163, 0.219, 0.276, 0.368)),
    "weather": ((0.152, 0.197, 0.249, 0.320), (0.151, 0.195, 0.249, 0.321)),
}
HORIZONS = (96, 192, 336, 720)
SETTING = ["model", "pos_encoding", "dataset", "horizon", "regime"]


def load(folder: Path) -> pd.DataFrame:
    df = pd.read_csv(folder / "results.csv")
    df = df[df["status"] == "ok"].drop_duplicates("cell_id", keep="last")
    blocks = grid_blocks(folder)
    if blocks and "block" in df:
        df = df.assign(block=df["cell_id"].map(blocks).fillna(df["block"]))
    return df


def grid_blocks(folder: Path) -> dict[str, str]:
    """Cell id -> the block of the folder's grid (``grid.yaml``, its latest) that first holds it, so
    a block renamed or reordered after its cells ran is reported under its current name."""
    path = Path(folder) / "grid.yaml"
    if not path.exists():
        return {}
    from benchmarks.run import expand  # the runner imports this module
    from benchmarks.study_cell import cell_id

    return {cell_id(c): c["block"] for c in expand(yaml.safe_load(path.read_text()))}


def load_failed(folder: Path) -> pd.DataFrame:
    """Cells whose every recorded attempt failed (a failure that ``--retry-failed`` later fixed is
    not a failure), one row each, its last error."""
    raw = pd.read_csv(folder / "results.csv")
    ok = set(raw.loc[raw["status"] == "ok", "cell_id"])
    return raw[(raw["status"] != "ok") & ~raw["cell_id"].isin(ok)].drop_duplicates("cell_id", keep="last")


def paired_runs(df: pd.DataFrame, columns: list[str]):
    """Yield (setting + seed, softmax row, continuous row) for every run that has its partner."""
    runs = df.set_index(SETTING + ["seed", "attention"])[columns]
    for key in sorted({k[:-1] for k in runs.index}, key=str):
        if key + ("softmax",) in runs.index and key + ("continuous",) in runs.index:
            yield key, runs.loc[key + ("softmax",)], runs.loc[key + ("continuous",)]


def early_table(df: pd.DataFrame, epochs: int = 3, column: str = "val_curve", label: str = "val",
                by: str = "regime") -> str:
    """Paired Δ of a per-epoch curve (validation MSE by default) after each of the first epochs, per
    value of ``by`` (a SETTING column) and over all: an early-training advantage, and where? Pairs
    where both runs reached that epoch."""
    lines = [f"| {by} | epoch | pairs | Δ {label} MSE (cont − soft) [95 % CI] | continuous lower |",
             "|---|---|---|---|---|"]
    col = SETTING.index(by)
    pairs = [(key[col], json.loads(soft[column]), json.loads(cont[column]))
             for key, soft, cont in paired_runs(df, [column])]
    for group in sorted({g for g, _, _ in pairs}) + ["all"]:
        for e in range(epochs):
            d = [c[e] - s[e] for g, s, c in pairs if group in ("all", g) and len(c) > e and len(s) > e]
            if d:
                st = paired_stats(np.array(d))
                level = sum(x == 0 for x in d)  # curves are stored rounded, so exact ties happen
                lines.append(f"| {group} | {e + 1} | {st['n']} | {st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | "
                             f"{sum(x < 0 for x in d)}/{len(d)}{f' ({level} level)' if level else ''} |")
    return "\n".join(lines)


def with_test_curves(df: pd.DataFrame) -> pd.DataFrame:
    """Runs that recorded their test MSE after every epoch (study_cell.TestCurve; later cells only)."""
    if "test_curve" not in df:
        return df.iloc[:0]
    return df[df["test_curve"].astype(str).str.startswith("[")]  # NaN reads "nan"


def curve_agreement(df: pd.DataFrame, column: str = "test_curve", largest: int = 3) -> str:
    """How far apart the attentions are at the same epoch, relative to softmax's MSE: the summary
    behind "the final difference comes from which epoch each run kept". Epochs both runs reached;
    the ``largest`` gaps are named in full (model, positions, setting, epoch, which side was lower)."""
    rel, where, n_pairs = [], [], 0
    for (model, pos, dataset, horizon, regime, seed), soft_row, cont_row in paired_runs(df, [column]):
        epochs = list(zip(json.loads(soft_row[column]), json.loads(cont_row[column])))
        for e, (s, c) in enumerate(epochs):
            rel.append(abs(c - s) / s)
            side = "higher" if c > s else "lower" if c < s else "level"
            where.append(f"{model} {pos}, {dataset}-{horizon} {regime} seed {seed}, epoch {e + 1}, continuous {side}")
        n_pairs += bool(epochs)
    if not rel:
        return ""
    rel = np.array(rel)
    top = "; ".join(f"{100 * rel[i]:.1f} % ({where[i]})" for i in np.argsort(-rel, kind="stable")[:largest])
    return (f"{n_pairs} pairs, {len(rel)} epochs: |continuous − softmax| / softmax at the same epoch has median "
            f"{100 * np.median(rel):.1f} %, is under 1 % in {100 * np.mean(rel < 0.01):.0f} % of epochs; the largest: {top}.")


def lead_persistence_table(df: pd.DataFrame, epoch: int = 3) -> str:
    """Per model, dataset and horizon: is continuous attention's test MSE lower after ``epoch`` and
    still lower at the checkpoint early stopping kept? Separates an early-training lead from a lead
    in the final forecast. Gaps are relative to softmax; pairs where both runs reached ``epoch``."""
    groups: dict[tuple, list[tuple[float, float]]] = {}
    for key, soft, cont in paired_runs(df, ["test_curve", "test_mse"]):
        soft_curve, cont_curve = json.loads(soft["test_curve"]), json.loads(cont["test_curve"])
        if len(soft_curve) < epoch or len(cont_curve) < epoch:
            continue
        at_epoch = (cont_curve[epoch - 1] - soft_curve[epoch - 1]) / soft_curve[epoch - 1]
        kept = (cont["test_mse"] - soft["test_mse"]) / soft["test_mse"]
        groups.setdefault((key[0], key[2], key[3]), []).append((at_epoch, kept))
    if not groups:
        return ""
    lines = [f"| model | dataset | horizon | pairs | continuous lower after epoch {epoch} | mean gap there "
             "| continuous lower at the kept checkpoint | mean gap there |", "|---|---|---|---|---|---|---|---|"]
    for (model, dataset, horizon), gaps in sorted(groups.items()):
        at_epoch, kept = np.array(gaps).T
        lines.append(f"| {model} | {dataset} | {horizon} | {len(gaps)} | {int((at_epoch < 0).sum())}/{len(gaps)} | "
                     f"{100 * at_epoch.mean():+.2f} % | {int((kept < 0).sum())}/{len(gaps)} | {100 * kept.mean():+.2f} % |")
    return "\n".join(lines)


class ReportError(ValueError):
    """Recorded results that cannot be summarised as they are; the message says how to fix them."""


def check_unique_runs(df: pd.DataFrame) -> None:
    """Two runs of one (setting, seed, attention) would be averaged into one pair: refuse."""
    twice = df[df.duplicated(SETTING + ["seed", "attention"], keep=False)]
    if len(twice):
        raise ReportError(f"{len(twice)} finished runs share a setting, seed and attention with another "
                         f"(cells {sorted(twice['cell_id'].astype(str))[:6]}): a pair must be one run of "
                         "each attention; remove the extra rows from results.csv")


def unpaired(df: pd.DataFrame) -> list[str]:
    """Cell ids of finished runs left out of the paired statistics: no run of the other attention
    for the same setting and seed, or a missing test metric on either side."""
    if set(df["attention"]) < {"softmax", "continuous"}:
        return []
    complete = df.dropna(subset=["test_mse", "test_mae"])
    both = complete.groupby(SETTING + ["seed"])["attention"].transform("nunique") == 2
    paired = set(complete.loc[both, "cell_id"])
    return sorted(c for c in df["cell_id"].astype(str) if c not in paired)


def pairs(df: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed) holding both attentions' test metrics; runs without their
    partner are left out (``unpaired`` names them)."""
    if set(df["attention"]) < {"softmax", "continuous"}:
        return pd.DataFrame()
    check_unique_runs(df)
    wide = df.pivot(index=SETTING + ["seed"], columns="attention", values=["test_mse", "test_mae"])
    wide = wide.dropna()
    if wide.empty:
        return pd.DataFrame()
    out = pd.DataFrame(index=wide.index)
    for m in ("test_mse", "test_mae"):
        out[f"{m}_softmax"] = wide[(m, "softmax")]
        out[f"{m}_continuous"] = wide[(m, "continuous")]
        out[f"d_{m}"] = out[f"{m}_continuous"] - out[f"{m}_softmax"]
    return out.reset_index()


def paired_stats(d: np.ndarray) -> dict:
    n = len(d)
    mean = float(np.mean(d)) if n else float("nan")
    if n < 2:
        return {"n": n, "mean": mean, "lo": float("nan"), "hi": float("nan"), "p_t": float("nan"), "p_w": float("nan")}
    half = stats.t.ppf(0.975, n - 1) * np.std(d, ddof=1) / np.sqrt(n)
    p_t = float(stats.ttest_1samp(d, 0.0).pvalue) if np.std(d) > 0 else float("nan")
    p_w = float(stats.wilcoxon(d).pvalue) if n >= 6 and np.any(d != 0) else float("nan")
    return {"n": n, "mean": mean, "lo": mean - half, "hi": mean + half, "p_t": p_t, "p_w": p_w}


def _fmt(x: float, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def cell_table(df: pd.DataFrame) -> str:
    g = df.groupby(SETTING + ["attention"])
    agg = g.agg(mse=("test_mse", "mean"), mse_sd=("test_mse", "std"), mae=("test_mae", "mean"),
                mae_sd=("test_mae", "std"), n=("seed", "count"), epochs=("epochs", "mean")).reset_index()
    lines = ["| model | pos | dataset | H | regime | attention | test MSE | test MAE | seeds | epochs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for _, r in agg.iterrows():
        lines.append(
            f"| {r.model} | {r.pos_encoding} | {r.dataset} | {r.horizon} | {r.regime} | {r.attention} | "
            f"{_fmt(r.mse)} ± {_fmt(r.mse_sd)} | {_fmt(r.mae)} ± {_fmt(r.mae_sd)} | {r.n} | {r.epochs:.1f} |"
        )
    return "\n".join(lines)


def paired_table(p: pd.DataFrame, by: list[str], sort: bool = True) -> str:
    """One row per group of ``by`` (in order of first appearance when ``sort`` is False)."""
    lines = [f"| {' | '.join(by)} | pairs | Δ MSE (cont − soft) [95 % CI] | paired t p | Wilcoxon p | continuous wins |",
             "|" + "---|" * (len(by) + 5)]
    for key, grp in p.groupby(by, sort=sort):
        key = key if isinstance(key, tuple) else (key,)
        s = paired_stats(grp["d_test_mse"].to_numpy())
        wins = int((grp["d_test_mse"] < 0).sum())
        lines.append(
            f"| {' | '.join(map(str, key))} | {s['n']} | {s['mean']:+.4f} [{_fmt(s['lo'])}, {_fmt(s['hi'])}] | "
            f"{_fmt(s['p_t'], 3)} | {_fmt(s['p_w'], 3)} | {wins}/{s['n']} |"
        )
    return "\n".join(lines)


def block_table(df: pd.DataFrame, epochs: int = 3) -> str:
    """Paired Δ per block of the grid, in the grid's order: a block is how a grid names a question
    (a priority, an ablation, a check whose prediction was committed before it ran), so each gets
    its own answer. A pair belongs to its softmax run's block (a cell repeated by a later block ran
    once, in the first). Adds the sign test and, for runs that recorded it, the mean same-epoch
    test gap after each of the first ``epochs`` epochs."""
    p = pairs(df)
    if "block" not in df or not len(p):
        return ""
    key = SETTING + ["seed"]
    block = df[df["attention"] == "softmax"].set_index(key)["block"]
    p["block"] = [block.get(tuple(k)) for k in p[key].itertuples(index=False)]
    tested = with_test_curves(df)
    curves = {k: (json.loads(s["test_curve"]), json.loads(c["test_curve"]))
              for k, s, c in paired_runs(tested, ["test_curve"])} if len(tested) else {}
    head = " | ".join(f"test gap after epoch {e + 1}" for e in range(epochs))
    lines = [f"| block | pairs | Δ MSE (cont − soft) [95 % CI] | paired t p | Wilcoxon p | sign test p | continuous wins | {head} |",
             "|" + "---|" * (7 + epochs)]
    for name in dict.fromkeys(df["block"]):
        grp = p[p["block"] == name]
        if not len(grp):
            continue
        d = grp["d_test_mse"].to_numpy()
        st = paired_stats(d)
        both = [curves[tuple(k)] for k in grp[key].itertuples(index=False) if tuple(k) in curves]
        gaps = []
        for e in range(epochs):
            g = [cont[e] - soft[e] for soft, cont in both if len(soft) > e and len(cont) > e]
            gaps.append(f"{np.mean(g):+.4f} ({len(g)})" if g else "—")
        lines.append(f"| {name} | {st['n']} | {st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | {_fmt(st['p_t'], 3)} | {_fmt(st['p_w'], 3)} | "
                     f"{_fmt(sign_test_p(d), 3)} | {int((d < 0).sum())}/{st['n']} | {' | '.join(gaps)} |")
    return "\n".join(lines)


def hodges_lehmann(d: np.ndarray) -> float:
    """Median of the Walsh averages (d_i + d_j) / 2, i <= j: the shift the signed-rank test sees."""
    d = np.asarray(d, dtype=float)
    i, j = np.triu_indices(len(d))
    return float(np.median((d[i] + d[j]) / 2)) if len(d) else float("nan")


def sign_test_p(d: np.ndarray) -> float:
    """Two-sided sign test on the nonzero differences (ties dropped)."""
    d = np.asarray(d, dtype=float)
    n = int(np.count_nonzero(d))
    return float(stats.binomtest(int((d < 0).sum()), n, 0.5).pvalue) if n else float("nan")


def input_kind(regime: str) -> str:
    """'regular', 'irregular' (inputs dropped, timestamps given) or 'interpolated' (the baseline)."""
    if regime.endswith("-interp"):
        return "interpolated"
    return "irregular" if regime.startswith("drop") else regime


def horizon_span_table(p: pd.DataFrame, up_to: int = 336, by: tuple[str, ...] = ("model",)) -> str:
    """Per group of ``by`` (the model, or the model and kind of input), pooled over horizons: the
    first horizon alone and the longer ones up to ``up_to`` (when both have pairs), all up to
    ``up_to``, and all. Beside the paired table: the sign test, the Hodges-Lehmann shift and the
    size of the differences relative to softmax's MSE (median and largest |Δ| / softmax), so each
    headline figure comes from this table."""
    by = list(by)

    def spans(m: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        first, rest = m[m["horizon"] == HORIZONS[0]], m[(m["horizon"] > HORIZONS[0]) & (m["horizon"] <= up_to)]
        split = [(str(HORIZONS[0]), first), (f"{HORIZONS[1]}-{up_to}", rest)] if len(first) and len(rest) else []
        return split + [(f"{HORIZONS[0]}-{up_to}", m[m["horizon"] <= up_to]), ("all", m)]

    table = pd.concat([grp.assign(horizons=name) for _, m in p.groupby(by)
                       for name, grp in spans(m) if len(grp)])
    lines = paired_table(table, by + ["horizons"], sort=False).splitlines()
    lines[0] += " sign test p | Hodges-Lehmann Δ | median, largest abs(Δ) / softmax |"
    lines[1] += "---|---|---|"
    for i, (_, grp) in enumerate(table.groupby(by + ["horizons"], sort=False), start=2):
        d = grp["d_test_mse"].to_numpy()
        rel = np.abs(d) / grp["test_mse_softmax"].to_numpy()
        lines[i] += (f" {_fmt(sign_test_p(d), 3)} | {hodges_lehmann(d):+.4f} |"
                     f" {100 * np.median(rel):.1f} %, {100 * rel.max():.1f} % |")
    return "\n".join(lines)


def best_val_table(df: pd.DataFrame) -> str:
    """Best validation MSE (the checkpoint early stopping kept), paired per model and horizon: where
    an early-training gap ends up on the data that chose the checkpoint."""
    if "best_val_mse" not in df or set(df["attention"]) < {"softmax", "continuous"}:
        return ""
    wide = df.pivot(index=SETTING + ["seed"], columns="attention", values="best_val_mse").dropna()
    if wide.empty:
        return ""
    p = wide.reset_index().assign(d_test_mse=wide["continuous"].to_numpy() - wide["softmax"].to_numpy())
    return paired_table(p, ["model", "horizon"]).replace("Δ MSE (cont − soft)", "Δ best validation MSE (cont − soft)")


def sampling_table(p: pd.DataFrame) -> str:
    """Pairs grouped by how often their data is sampled, per model and horizon: each sampling step
    and, where more than one step is finer than an hour, all of those together. The grouping was
    chosen after the ETTm1/ETTm2 results were seen, so its tests are exploratory."""
    groups = []
    for _, m in p.groupby("model"):  # each label names the datasets that model ran on
        step = m["dataset"].str.lower().map(FREQUENCIES).fillna("unknown")
        names = m.groupby(step)["dataset"].agg(lambda d: ", ".join(sorted(set(d))))
        groups.append(m.assign(sampling=step + " (" + step.map(names) + ")"))
        finer = step[~step.isin(["h", "unknown"])]
        if finer.nunique() > 1:
            datasets = ", ".join(sorted(set(m.loc[finer.index, "dataset"])))
            groups.append(m.loc[finer.index].assign(sampling=f"under 1 h ({datasets})"))
    return paired_table(pd.concat(groups), ["model", "horizon", "sampling"])


def interpolation_table(df: pd.DataFrame) -> str:
    """Irregular input against the conventional baseline (the dropped inputs linearly interpolated
    back onto the grid, then the regular model), per setting and drop rate: does feeding real
    timestamps beat filling the gaps? Runs are paired by seed and attention, but a seed's two
    attentions share the dropped inputs, initial weights and data order, so their differences are
    not independent: the interval and test treat each seed (its attentions averaged) as one unit.
    "Recovered" is the share of the cost of dropping (irregular − regular) that interpolation wins back."""
    keys = ["model", "pos_encoding", "dataset", "horizon"]
    regular = df[df["regime"] == "regular"].groupby(keys)["test_mse"].mean()
    rows = []
    for drop in sorted(r for r in df["regime"].unique() if r.startswith("drop") and not r.endswith("-interp")):
        both = df[df["regime"] == drop].merge(df[df["regime"] == f"{drop}-interp"], on=keys + ["attention", "seed"],
                                              suffixes=("_irr", "_itp"))
        for key, grp in both.groupby(keys):
            irr, itp = grp["test_mse_irr"].mean(), grp["test_mse_itp"].mean()
            reg = regular.get(key, float("nan"))
            recovered = f"{100 * (irr - itp) / (irr - reg):.0f} %" if irr - reg > 0 else "—"
            per_seed = (grp["test_mse_itp"] - grp["test_mse_irr"]).groupby(grp["seed"]).mean()
            st = paired_stats(per_seed.to_numpy())
            wins = int((grp["test_mse_itp"] < grp["test_mse_irr"]).sum())
            rows.append((key, drop, f"| {' | '.join(map(str, key))} | {drop} | {_fmt(reg)} | {_fmt(irr)} | {_fmt(itp)} | "
                                    f"{st['n']} | {st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | "
                                    f"{wins}/{len(grp)} | {recovered} |"))
    if not rows:
        return ""
    lines = ["| model | pos | dataset | H | regime | regular data | irregular input | interpolated | seeds | "
             "Δ MSE (interpolated − irregular) [95 % CI over seeds] | interpolated better (runs) | recovered |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return "\n".join(lines + [line for *_, line in sorted(rows, key=lambda r: r[:2])])


def published_table(df: pd.DataFrame) -> str:
    lines = ["| dataset | H | PatchTST/42 paper | rerun, every test window | ours softmax (regular) | ours continuous (regular) |",
             "|---|---|---|---|---|---|"]
    reg = df[(df["model"] == "patchtst") & (df["regime"] == "regular") & (df["pos_encoding"] == "learned")]
    for (dataset, horizon), grp in reg.groupby(["dataset", "horizon"]):
        if dataset not in PUBLISHED or horizon not in HORIZONS:
            continue
        i = HORIZONS.index(horizon)
        ours = {a: grp[grp["attention"] == a]["test_mse"] for a in ("softmax", "continuous")}
        cells = [f"{_fmt(v.mean())} ± {_fmt(v.std())} (n={len(v)})" if len(v) else "—" for v in ours.values()]
        lines.append(f"| {dataset} | {horizon} | {PUBLISHED[dataset][0][i]} | {PUBLISHED[dataset][1][i]} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def cost_table(df: pd.DataFrame) -> str:
    lines = ["| model | dataset | attention | s / epoch incl. validation (median) | cells | threads |", "|---|---|---|---|---|---|"]
    for (model, dataset, attention), grp in df.groupby(["model", "dataset", "attention"]):
        lines.append(f"| {model} | {dataset} | {attention} | {grp['train_s_per_epoch'].median():.1f} | {len(grp)} | "
                     f"{int(grp['threads'].iloc[0])} |")
    return "\n".join(lines)


def panel_grid(n: int):
    """A figure of n epoch panels, four to a row."""
    cols = min(4, n)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax in axes.flat[n:]:
        ax.axis("off")
    return fig, axes.flat[:n]


def save_panels(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_curves(df: pd.DataFrame, path: Path) -> None:
    groups = list(df.groupby(["model", "dataset", "horizon", "regime", "pos_encoding"]))
    if not groups:
        return
    fig, axes = panel_grid(len(groups))
    for ax, (key, grp) in zip(axes, groups):
        for attention, colour in (("softmax", "tab:blue"), ("continuous", "tab:red")):
            for i, (_, r) in enumerate(grp[grp["attention"] == attention].iterrows()):
                curve = json.loads(r["val_curve"])
                ax.plot(range(1, len(curve) + 1), curve, color=colour, alpha=0.6, label=attention if i == 0 else None)
        ax.set_title(" ".join(map(str, key)), fontsize=8)
        ax.set_xlabel("epoch")
        ax.set_ylabel("val MSE")
        ax.legend(fontsize=7)
    save_panels(fig, path)


def plot_paired_deltas(df: pd.DataFrame, path: Path) -> None:
    """Validation MSE of continuous minus softmax per epoch, one thin line per seed, the mean with
    its 95 % t-band: an early-training advantage shows as a band below zero in the first epochs."""
    by_setting: dict[tuple, list[np.ndarray]] = {}
    for key, soft, cont in paired_runs(df, ["val_curve"]):
        c, s = json.loads(cont["val_curve"]), json.loads(soft["val_curve"])
        n = min(len(c), len(s))
        by_setting.setdefault(key[:-1], []).append(np.array(c[:n]) - np.array(s[:n]))
    if not by_setting:
        return
    fig, axes = panel_grid(len(by_setting))
    for ax, (setting, deltas) in zip(axes, by_setting.items()):
        for d in deltas:
            ax.plot(range(1, len(d) + 1), d, color="grey", alpha=0.4, lw=0.8)
        epochs = max(map(len, deltas))
        mean, lo, hi = [], [], []
        for e in range(epochs):
            st = paired_stats(np.array([d[e] for d in deltas if len(d) > e]))
            mean.append(st["mean"])
            lo.append(st["lo"])
            hi.append(st["hi"])
        x = range(1, epochs + 1)
        ax.plot(x, mean, color="tab:red", lw=2, label=f"mean of {len(deltas)} pairs")
        ax.fill_between(x, lo, hi, color="tab:red", alpha=0.2, label="95 % CI")
        ax.axhline(0.0, color="black", lw=0.8)
        ax.set_title(" ".join(map(str, setting)), fontsize=8)
        ax.set_xlabel("epoch")
        ax.set_ylabel("val MSE, continuous − softmax")
        ax.legend(fontsize=7)
    save_panels(fig, path)


def plot_bars(df: pd.DataFrame, path: Path) -> None:
    groups = list(df.groupby(["model", "dataset", "horizon", "pos_encoding"]))
    if not groups:
        return
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.5), squeeze=False)
    for ax, (key, grp) in zip(axes.flat, groups):
        regimes = sorted(grp["regime"].unique(), key=lambda r: (len(r), r))
        x = np.arange(len(regimes))
        for j, (attention, colour) in enumerate((("softmax", "tab:blue"), ("continuous", "tab:red"))):
            sub = grp[grp["attention"] == attention].groupby("regime")["test_mse"]
            mean, sd = sub.mean().reindex(regimes), sub.std().reindex(regimes)
            ax.bar(x + (j - 0.5) * 0.38, mean, 0.38, yerr=sd, color=colour, label=attention, capsize=3)
        ax.set_xticks(x, regimes, rotation=30, fontsize=8)
        lo = grp["test_mse"].min()
        ax.set_ylim(lo * 0.9, grp["test_mse"].max() * 1.03)
        ax.set_title(" ".join(map(str, key)), fontsize=9)
        ax.set_ylabel("test MSE")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def load_pooled(sources: list[Path]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Finished and failed cells of several folders; seeds and cell ids become '<folder>:<seed>' and
    '<folder>:<cell id>' (the same cell id in two folders names two runs)."""
    names = [Path(s).name for s in sources]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ReportError(f"several study folders are named {clash}: pooled seeds are labelled by folder name, "
                         "so their runs would be merged; give each folder its own name")
    done, failed = [], []
    for src in map(Path, sources):
        for frame, target in ((load(src), done), (load_failed(src), failed)):
            frame = frame.copy()
            frame["seed"] = src.name + ":" + frame["seed"].astype(str)
            frame["cell_id"] = src.name + ":" + frame["cell_id"].astype(str)
            target.append(frame)
    return pd.concat(done, ignore_index=True), pd.concat(failed, ignore_index=True)


def write(folder: Path, sources: list[Path] | None = None) -> Path:
    """summary.md and plots in ``folder``, from its results.csv or from those of ``sources``."""
    folder = Path(folder)
    if sources:
        folder.mkdir(parents=True, exist_ok=True)
        df, failed = load_pooled(sources)
        origin = ", ".join(f"`{Path(s) / 'results.csv'}`" for s in sources)
        command = f"python -m benchmarks.report --pool {folder} {' '.join(map(str, sources))}"
    else:
        df, failed = load(folder), load_failed(folder)
        origin, command = f"`{folder / 'results.csv'}`", f"python -m benchmarks.report {folder}"
    p = pairs(df)
    alone = unpaired(df)
    plot_curves(df, folder / "val_curves.png")
    plot_paired_deltas(df, folder / "val_delta.png")
    plot_bars(df, folder / "test_mse_bars.png")
    parts = [
        f"# Study summary: {folder.name}",
        f"Written {time.strftime('%Y-%m-%d %H:%M')} from {origin} by `{command}`. "
        f"{len(df)} finished cells, {len(failed)} failed"
        f"{f', {len(alone)} without their partner (listed at the end)' if alone else ''}. Threads per run: "
        f"{', '.join(map(str, sorted(df['threads'].unique()))) if len(df) else '—'}.",
        "## Test metrics per setting (mean ± std over seeds; scaled data, every test window)",
        cell_table(df) if len(df) else "(no finished cells)",
    ]
    if len(p):
        parts += [
            "## Paired differences, continuous − softmax (negative = continuous better)",
            "Per regime, over all settings and seeds:",
            paired_table(p, ["regime"]),
            "Per model, pooled over horizons (every dataset, regime and positional encoding):",
            horizon_span_table(p),
            "The same per kind of input (regular; irregular: inputs dropped, timestamps given; "
            "interpolated: the dropped inputs interpolated back onto the grid):",
            horizon_span_table(p.assign(input=p["regime"].map(input_kind)), by=("model", "input")),
            "Per model, dataset and horizon, over every regime and positional encoding:",
            paired_table(p, ["model", "dataset", "horizon"]),
            "Per model, horizon and sampling step, over every regime and positional encoding (a grouping "
            "chosen after the ETTm1/ETTm2 results were seen: read its tests as exploratory):",
            sampling_table(p),
            "Per setting:",
            paired_table(p, SETTING),
            "Per block of the grid (test gaps: mean continuous − softmax test MSE at the same epoch, "
            "pairs in brackets; blocks without per-epoch test MSE show —):",
            block_table(df),
            "Early training: validation MSE after each of the first epochs, paired as above:",
            early_table(df),
            "The same per horizon (every model, regime and positional encoding):",
            early_table(df, by="horizon"),
            "Best validation MSE (the epoch early stopping kept), paired as above:",
            best_val_table(df),
        ]
        tested = with_test_curves(df)
        if len(pairs(tested)):
            parts += [
                "Test MSE after every epoch, paired as above, for the runs that recorded it (no decision "
                "used it): the attentions compared epoch by epoch, without the effect of the epoch "
                "early stopping picked for each run:",
                early_table(tested, epochs=int(tested["epochs"].max()), column="test_curve", label="test"),
                "The same per horizon:",
                early_table(tested, epochs=3, column="test_curve", label="test", by="horizon"),
                curve_agreement(tested),
                "Does a lead after epoch 3 last? Test MSE after epoch 3 against the checkpoint early "
                "stopping kept (gaps relative to softmax; a run that stopped at epoch 3 kept it):",
                lead_persistence_table(tested),
            ]
    interpolation = interpolation_table(df)
    if interpolation:
        parts += ["## Irregular input against the interpolation baseline",
                  "Test MSE, mean over the runs (paired by seed and attention across the two regimes; "
                  "regular data: every run of that setting). A seed's two attentions share the dropped "
                  "inputs, so the interval is over seeds, each the mean of its attentions. "
                  "'Recovered' is the share of the cost of dropping inputs (irregular − regular data) that "
                  "interpolating them back onto the grid wins back.",
                  interpolation]
    parts += ["## Against the published PatchTST/42 (MSE)", published_table(df)]
    if not sources:
        parts += ["## Training cost (same machine, same run)", cost_table(df)]
    parts += ["Plots: `val_curves.png` (validation MSE per epoch, every seed), `val_delta.png` (paired "
              "difference continuous − softmax per epoch, mean and 95 % band), `test_mse_bars.png` (mean ± std)."]
    if alone:
        parts += ["## Finished cells left out of the paired statistics",
                  "No run of the other attention for the same setting and seed (or a test metric missing):",
                  "\n".join(f"- {c}" for c in alone)]
    if len(failed):
        parts += ["## Failed cells", "\n".join(f"- {r.cell_id}: {r.error}" for r in failed.itertuples())]
    out = folder / "summary.md"
    out.write_text("\n\n".join(parts) + "\n")
    return out


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.report", description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path, metavar="STUDY_FOLDER",
                        help="a folder written by python -m benchmarks.run (it holds results.csv)")
    parser.add_argument("--pool", type=Path, metavar="OUT_FOLDER",
                        help="summarise all STUDY_FOLDERs together into OUT_FOLDER")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.folders if not (f / "results.csv").is_file()]
    if missing:
        parser.error(f"no results.csv in {', '.join(missing)}: pass folders written by python -m benchmarks.run")
    if args.pool is None and len(args.folders) > 1:
        parser.error("several study folders: pass --pool OUT_FOLDER to summarise them together")
    try:
        print(write(args.pool, args.folders) if args.pool else write(args.folders[0]))
    except ReportError as err:
        parser.error(str(err))


if __name__ == "__main__":
    main(sys.argv[1:])
