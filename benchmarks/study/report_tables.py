"""The markdown tables of a study summary, each built from finished runs or their pairs."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from benchmarks.paired_stats import hodges_lehmann, paired_stats, sign_test_p
from benchmarks.study.paired_comparison import SETTING, paired_runs, pairs, with_recipe, with_test_curves
from ts_continuum.data.bundled import FREQUENCIES

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


def _fmt(x: float, digits: int = 4) -> str:
    """Fixed digits, or a dash for a figure that is missing (no spread from one seed, no test from few pairs)."""
    return "—" if x is None or (isinstance(x, float) and np.isnan(x)) else f"{x:.{digits}f}"


def input_kind(regime: str) -> str:
    """'regular', 'irregular' (inputs dropped, timestamps given) or 'interpolated' (the baseline)."""
    if regime.endswith("-interp"):
        return "interpolated"
    return "irregular" if regime.startswith("drop") else regime


def cell_table(df: pd.DataFrame) -> str:
    """Test metrics per setting and attention over seeds: the raw figures behind every paired one."""
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
    mixed = []
    for key, recipes in with_recipe(df).groupby(SETTING + ["attention"])["recipe"]:
        configs = [json.loads(r) if r else {} for r in recipes.unique()]
        if len(configs) > 1:
            differ = sorted({k for c in configs for k in c if any(c.get(k) != o.get(k) for o in configs)})
            mixed.append(f"{' '.join(map(str, key))} ({', '.join(differ)})")
    if mixed:
        lines += ["", f"Note: the seeds of {len(mixed)} rows above were run with configs that differ (in the keys "
                      f"named) and are averaged together: {'; '.join(mixed[:6])}"]
    return "\n".join(lines)


def paired_table(p: pd.DataFrame, by: list[str], sort: bool = True) -> str:
    """One row per group of ``by`` (in order of first appearance when ``sort`` is False)."""
    lines = [f"| {' | '.join(by)} | pairs | Δ MSE (cont − soft) [95 % CI] | paired t p | Wilcoxon p "
             "| continuous wins |",
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


def horizon_span_table(p: pd.DataFrame, up_to: int = 336, by: tuple[str, ...] = ("model",)) -> str:
    """Per group of ``by`` (the model, or the model and kind of input), pooled over horizons: the
    shortest horizon alone and the longer ones up to ``up_to`` (when both have pairs), all up to
    ``up_to``, and all (when it adds horizons). Rows are labelled by the horizons they hold. Beside
    the paired table: the sign test, the Hodges-Lehmann shift and the size of the differences
    relative to softmax's MSE (median and largest |Δ| / softmax), so each headline figure comes
    from this table."""
    by = list(by)

    def label(grp: pd.DataFrame) -> str:
        """The horizons a span holds, as they are: a custom grid's H = 24 is not called 96."""
        lo, hi = int(grp["horizon"].min()), int(grp["horizon"].max())
        return str(lo) if lo == hi else f"{lo}-{hi}"

    def spans(m: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        short = m[m["horizon"] <= up_to]
        first = short[short["horizon"] == short["horizon"].min()] if len(short) else short
        rest = short.drop(first.index)
        candidates = [first, rest, short] if len(first) and len(rest) else [short]
        out = [(label(g), g) for g in candidates if len(g)]
        if not out or len(m) > len(out[-1][1]):  # "all" only where it adds horizons
            out.append(("all", m))
        return out

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
    lines = ["| block | pairs | Δ MSE (cont − soft) [95 % CI] | paired t p | Wilcoxon p | sign test p "
             f"| continuous wins | {head} |",
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
        lines.append(f"| {name} | {st['n']} | {st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | "
                     f"{_fmt(st['p_t'], 3)} | {_fmt(st['p_w'], 3)} | "
                     f"{_fmt(sign_test_p(d), 3)} | {int((d < 0).sum())}/{st['n']} | {' | '.join(gaps)} |")
    return "\n".join(lines)


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
                lines.append(f"| {group} | {e + 1} | {st['n']} | "
                             f"{st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | "
                             f"{sum(x < 0 for x in d)}/{len(d)}{f' ({level} level)' if level else ''} |")
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
    table = paired_table(p, ["model", "horizon"])
    return table.replace("Δ MSE (cont − soft)", "Δ best validation MSE (cont − soft)")


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
            f"{100 * np.median(rel):.1f} %, is under 1 % in {100 * np.mean(rel < 0.01):.0f} % of epochs; "
            f"the largest: {top}.")


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
                     f"{100 * at_epoch.mean():+.2f} % | {int((kept < 0).sum())}/{len(gaps)} | "
                     f"{100 * kept.mean():+.2f} % |")
    return "\n".join(lines)


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
            rows.append((key, drop, f"| {' | '.join(map(str, key))} | {drop} | "
                                    f"{_fmt(reg)} | {_fmt(irr)} | {_fmt(itp)} | "
                                    f"{st['n']} | {st['mean']:+.4f} [{_fmt(st['lo'])}, {_fmt(st['hi'])}] | "
                                    f"{wins}/{len(grp)} | {recovered} |"))
    if not rows:
        return ""
    lines = ["| model | pos | dataset | H | regime | regular data | irregular input | interpolated | seeds | "
             "Δ MSE (interpolated − irregular) [95 % CI over seeds] | interpolated better (runs) | recovered |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    return "\n".join(lines + [line for *_, line in sorted(rows, key=lambda r: r[:2])])


def published_table(df: pd.DataFrame) -> str:
    """Our regular-data PatchTST runs beside the published MSE: is the baseline trained as well as
    its authors trained it?"""
    lines = ["| dataset | H | PatchTST/42 paper | rerun, every test window | ours softmax (regular) "
             "| ours continuous (regular) |",
             "|---|---|---|---|---|---|"]
    reg = df[(df["model"] == "patchtst") & (df["regime"] == "regular") & (df["pos_encoding"] == "learned")]
    for (dataset, horizon), grp in reg.groupby(["dataset", "horizon"]):
        if dataset not in PUBLISHED or horizon not in HORIZONS:
            continue
        i = HORIZONS.index(horizon)
        ours = {a: grp[grp["attention"] == a]["test_mse"] for a in ("softmax", "continuous")}
        cells = [f"{_fmt(v.mean())} ± {_fmt(v.std())} (n={len(v)})" if len(v) else "—" for v in ours.values()]
        lines.append(f"| {dataset} | {horizon} | {PUBLISHED[dataset][0][i]:.3f} | {PUBLISHED[dataset][1][i]:.3f} | "
                     f"{cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def cost_table(df: pd.DataFrame) -> str:
    """Median seconds per epoch per model, dataset and attention: what each attention costs to train."""
    lines = ["| model | dataset | attention | s / epoch incl. validation (median) | cells | threads |",
             "|---|---|---|---|---|---|"]
    for (model, dataset, attention), grp in df.groupby(["model", "dataset", "attention"]):
        lines.append(f"| {model} | {dataset} | {attention} | {grp['train_s_per_epoch'].median():.1f} | {len(grp)} | "
                     f"{int(grp['threads'].iloc[0])} |")
    return "\n".join(lines)
