"""The PhysioNet 2012 study's report: ``summary.md`` and plots from ``results.csv``.

    python -m benchmarks.physionet.report [benchmarks/results/physionet2012]

Tables: every setting's test MSE/MAE over seeds beside the published numbers; the paired
differences continuous - softmax (same model, positions, data and seed) with 95 % t-intervals; the
same differences within thirds of the test stays by how densely their history was observed
(recomputed from each run's per-stay errors); the switch runs; seconds per epoch. Plots: validation
curves of both attentions, and the paired differences.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from benchmarks.paired_stats import paired_stats  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "benchmarks" / "results" / "physionet2012"
# t-PatchGNN (ICML 2024) Table 1, PhysioNet: test MSE x1e-3, MAE x1e-2 (mean of 5 seeds)
PUBLISHED = [("t-PatchGNN", 4.98, 3.72), ("GRU-D", 5.59, 4.08), ("Warpformer", 5.94, 4.21),
             ("Latent-ODE", 6.05, 4.23), ("Graph WaveNet", 6.04, 4.41), ("mTAND", 6.23, 4.51),
             ("Crossformer", 6.66, 4.81), ("PatchTST (published)", 12.00, 6.02), ("DLinear", 41.86, 15.52)]
SETTING = ["model", "pos_encoding", "history_keep", "switch"]


def _fmt(mean: float, sd: float, scale: float) -> str:
    return f"{mean * scale:.3f} ± {sd * scale:.3f}" if np.isfinite(sd) else f"{mean * scale:.3f}"


def settings_table(ok: pd.DataFrame) -> str:
    rows = ["| model | attention | positions | history kept | switch | seeds | test MSE ×10⁻³ | test MAE ×10⁻² | "
            "best val MSE ×10⁻³ | s/epoch |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key, g in ok.groupby(["model", "attention", "pos_encoding", "history_keep", "switch"], sort=True):
        sd = g["test_mse"].std(ddof=1) if len(g) > 1 else float("nan")
        sd_a = g["test_mae"].std(ddof=1) if len(g) > 1 else float("nan")
        rows.append(f"| {' | '.join(map(str, key))} | {len(g)} | {_fmt(g['test_mse'].mean(), sd, 1e3)} | "
                    f"{_fmt(g['test_mae'].mean(), sd_a, 1e2)} | {g['best_val_mse'].mean() * 1e3:.3f} | "
                    f"{g['s_per_epoch'].mean():.0f} |")
    return "\n".join(rows)


def published_table() -> str:
    rows = ["| published model (t-PatchGNN paper, 5 seeds) | test MSE ×10⁻³ | test MAE ×10⁻² |", "|---|---|---|"]
    rows += [f"| {name} | {mse:.2f} | {mae:.2f} |" for name, mse, mae in PUBLISHED]
    return "\n".join(rows)


def pairs(ok: pd.DataFrame) -> pd.DataFrame:
    """One row per (setting, seed) run in both attentions: their test MSEs and the run folders."""
    trained = ok[ok["attention"].isin(["softmax", "continuous"])]
    columns = SETTING + ["seed", "softmax", "continuous", "cell_softmax", "cell_continuous", "delta"]
    if set(trained["attention"]) != {"softmax", "continuous"}:
        return pd.DataFrame(columns=columns)
    wide = trained.pivot_table(index=SETTING + ["seed"], columns="attention", values=["test_mse", "cell_id"],
                               aggfunc="first")
    wide = wide.dropna()
    out = pd.DataFrame({"softmax": wide[("test_mse", "softmax")].astype(float),
                        "continuous": wide[("test_mse", "continuous")].astype(float),
                        "cell_softmax": wide[("cell_id", "softmax")],
                        "cell_continuous": wide[("cell_id", "continuous")]})
    out["delta"] = out["continuous"] - out["softmax"]
    return out.reset_index()


def _interval(s: dict) -> str:
    """The 95 % interval ×10⁻³, or why there is none (one pair has no spread)."""
    if not np.isfinite(s["lo"]):
        return "(no interval: 1 pair)"
    return f"[{s['lo'] * 1e3:+.3f}, {s['hi'] * 1e3:+.3f}]"


def paired_table(p: pd.DataFrame) -> str:
    rows = ["| model | positions | history kept | switch | pairs | Δ MSE ×10⁻³ [95 % CI] | Δ % of softmax | "
            "continuous lower |", "|---|---|---|---|---|---|---|---|"]
    for key, g in p.groupby(SETTING, sort=True):
        s = paired_stats(g["delta"].to_numpy())
        rel = 100 * s["mean"] / g["softmax"].mean()
        rows.append(f"| {' | '.join(map(str, key))} | {s['n']} | {s['mean'] * 1e3:+.3f} {_interval(s)} | "
                    f"{rel:+.1f} % | {int((g['delta'] < 0).sum())} of {len(g)} |")
    return "\n".join(rows)


def _metric(errors: dict, stays: np.ndarray) -> float:
    """The per-variable MSE over the chosen stays (rows of the saved error sums)."""
    sq, count = errors["sq"][stays].sum(0), errors["count"][stays].sum(0)
    has = count > 0
    return float((sq[has] / count[has]).mean())


def density_sums(out: Path, cells: list[str]) -> pd.DataFrame:
    """Per cell, the error sums per variable within each third of the test stays by history observations
    per hour. Read from the cells' ``errors.npz`` where present (not committed: 0.6 MB each) and kept in
    the committed ``by_density.csv``, which is read for the rest."""
    path = out / "by_density.csv"
    kept = pd.read_csv(path) if path.is_file() else pd.DataFrame()
    rows = []
    for cid in cells:
        npz = out / "runs" / cid / "errors.npz"
        if not npz.is_file():
            continue
        e = np.load(npz)
        density = e["history_obs"] / 24.0
        edges = np.quantile(density, [1 / 3, 2 / 3])
        third = np.digitize(density, edges)
        for t in range(3):
            stays = third == t
            sq, ab, n = e["sq"][stays].sum(0), e["abs"][stays].sum(0), e["count"][stays].sum(0)
            rows += [{"cell_id": cid, "third": t, "variable": v, "sq": sq[v], "abs": ab[v], "count": int(n[v]),
                      "edge_lo": edges[0], "edge_hi": edges[1]} for v in range(len(sq))]
    fresh = pd.DataFrame(rows)
    if len(kept) and len(fresh):
        kept = kept[~kept["cell_id"].isin(set(fresh["cell_id"]))]
    table = pd.concat([kept, fresh], ignore_index=True) if len(kept) or len(fresh) else fresh
    if len(table):
        table.to_csv(path, index=False)
    return table


def _third_mse(sums: pd.DataFrame, cid: str, third: int) -> float:
    g = sums[(sums["cell_id"] == cid) & (sums["third"] == third) & (sums["count"] > 0)]
    return float((g["sq"] / g["count"]).mean()) if len(g) else float("nan")


def sparsity_table(p: pd.DataFrame, sums: pd.DataFrame) -> str:
    """Paired differences within thirds of the test stays by history observations per hour."""
    rows = ["| model | positions | history kept | third (obs/hour of history) | pairs | Δ MSE ×10⁻³ [95 % CI] | "
            "Δ % |", "|---|---|---|---|---|---|---|"]
    if not len(sums):
        return "(no per-stay errors yet)"
    for key, g in p[p["switch"] == "none"].groupby(["model", "pos_encoding", "history_keep"], sort=True):
        g = g[g["cell_softmax"].isin(set(sums["cell_id"])) & g["cell_continuous"].isin(set(sums["cell_id"]))]
        if g.empty:
            continue
        edges = sums.loc[sums["cell_id"] == g["cell_softmax"].iloc[0], ["edge_lo", "edge_hi"]].iloc[0]
        labels = [f"sparsest (< {edges['edge_lo']:.1f})", f"middle ({edges['edge_lo']:.1f}-{edges['edge_hi']:.1f})",
                  f"densest (> {edges['edge_hi']:.1f})"]
        for t in range(3):
            a = np.array([_third_mse(sums, c, t) for c in g["cell_softmax"]])
            b = np.array([_third_mse(sums, c, t) for c in g["cell_continuous"]])
            s = paired_stats(b - a)
            rows.append(f"| {' | '.join(map(str, key))} | {labels[t]} | {s['n']} | {s['mean'] * 1e3:+.3f} "
                        f"{_interval(s)} | {100 * s['mean'] / np.mean(a):+.1f} % |")
    return "\n".join(rows)


def switch_table(ok: pd.DataFrame) -> str:
    sw = ok[ok["switch"] != "none"]
    if sw.empty:
        return "(no switch runs yet)"
    rows = ["| model | positions | trained with → switched to @ epoch | seed | val MSE before switch ×10⁻³ | "
            "right after ×10⁻³ | jump | final val ×10⁻³ | test ×10⁻³ | unswitched run of the final attention, "
            "test ×10⁻³ | Δ |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    other = {"softmax": "continuous", "continuous": "softmax"}
    for _, r in sw.sort_values(["switch", "seed"]).iterrows():
        curve = json.loads(r["val_curve"])
        epoch = int(str(r["switch"]).split("@")[1])
        before = curve[epoch - 1] if 0 < epoch <= len(curve) else float("nan")
        after = r["val_after_switch"]
        final = other.get(r["attention"], "?")
        same = ok[(ok["switch"] == "none") & (ok["attention"] == final) & (ok["model"] == r["model"])
                  & (ok["pos_encoding"] == r["pos_encoding"]) & (ok["history_keep"] == r["history_keep"])
                  & (ok["seed"] == r["seed"])]
        unswitched = float(same["test_mse"].iloc[0]) if len(same) else float("nan")
        rows.append(f"| {r['model']} | {r['pos_encoding']} | {r['attention']} → {final} @ {epoch} | {r['seed']} | "
                    f"{before * 1e3:.3f} | {after * 1e3:.3f} | {100 * (after - before) / before:+.1f} % | "
                    f"{curve[-1] * 1e3:.3f} | {r['test_mse'] * 1e3:.3f} | {unswitched * 1e3:.3f} | "
                    f"{100 * (r['test_mse'] - unswitched) / unswitched:+.1f} % |")
    return "\n".join(rows)


def plot_curves(ok: pd.DataFrame, path: Path) -> None:
    runs = ok[(ok["switch"] == "none") & ok["attention"].isin(["softmax", "continuous"])]
    groups = list(runs.groupby(["model", "pos_encoding", "history_keep"], sort=True))
    if not groups:
        return
    fig, axes = plt.subplots(1, len(groups), figsize=(4.5 * len(groups), 3.6), squeeze=False)
    for ax, (key, g) in zip(axes[0], groups):
        for attention, colour in (("softmax", "tab:blue"), ("continuous", "tab:red")):
            curves = [json.loads(c) for c in g.loc[g["attention"] == attention, "val_curve"]]
            for c in curves:
                ax.plot(range(1, len(c) + 1), np.array(c) * 1e3, color=colour, alpha=0.25, lw=0.8)
            if curves:
                n = min(map(len, curves))
                ax.plot(range(1, n + 1), np.mean([c[:n] for c in curves], 0) * 1e3, color=colour, lw=2,
                        label=f"{attention} (mean of {len(curves)})")
        ax.set_title(" / ".join(map(str, key)), fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("validation MSE ×10⁻³")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_deltas(p: pd.DataFrame, path: Path) -> None:
    groups = list(p.groupby(SETTING, sort=True))
    if not groups:
        return
    fig, ax = plt.subplots(figsize=(7, 0.5 + 0.45 * len(groups)))
    for i, (_, g) in enumerate(groups):
        s = paired_stats(g["delta"].to_numpy())
        ax.scatter(g["delta"] * 1e3, [i] * len(g), color="grey", s=12)
        if np.isfinite(s["lo"]):
            ax.plot([s["lo"] * 1e3, s["hi"] * 1e3], [i, i], color="black")
        ax.scatter([s["mean"] * 1e3], [i], color="red", zorder=3)
    ax.axvline(0, color="black", lw=0.8, ls="--")
    ax.set_yticks(range(len(groups)), [" / ".join(map(str, k)) for k, _ in groups], fontsize=7)
    ax.set_xlabel("continuous − softmax test MSE ×10⁻³ (dots: seeds; bar: 95 % CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0]) if args else DEFAULT
    df = pd.read_csv(out / "results.csv")
    ok = df[df["status"] == "ok"].copy()
    ok["switch"] = ok["switch"].fillna("none")
    p = pairs(ok)
    plot_curves(ok, out / "val_curves.png")
    plot_deltas(p, out / "paired_deltas.png")
    figure = {name: f"![{label}]({name}.png)" if (out / f"{name}.png").is_file() else "(no runs to draw yet)"
              for name, label in (("paired_deltas", "paired differences"), ("val_curves", "validation curves"))}
    failed = df[df["status"] != "ok"]
    shown = out.relative_to(ROOT) if out.is_relative_to(ROOT) else out
    text = [f"# PhysioNet 2012 study: summary of {len(ok)} finished cells", "",
            f"Generated by `python -m benchmarks.physionet.report {shown}`"
            " from `results.csv`; the grid and its pre-registered predictions: `grid.yaml`.", "",
            "## Every setting (mean ± sd over seeds)", "", settings_table(ok), "", published_table(), "",
            "## Paired differences, continuous − softmax (same model, positions, data, seed)", "", paired_table(p),
            "", figure["paired_deltas"], "",
            "## By sparsity of the history (thirds of the test stays by observations per hour before hour 24)", "",
            sparsity_table(p, density_sums(out, list(ok["cell_id"]))), "", "## Switch runs", "", switch_table(ok), "",
            "## Validation curves", "", figure["val_curves"], ""]
    if len(failed):
        text += ["## Failed cells", ""] + [f"- {r.cell_id}: {r.error}" for r in failed.itertuples()] + [""]
    (out / "summary.md").write_text("\n".join(text))
    print(f"wrote {out / 'summary.md'}")


if __name__ == "__main__":
    main()
