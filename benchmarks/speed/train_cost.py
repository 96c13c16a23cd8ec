"""Training cost of continuous vs softmax attention, same models, same machine, same run.

    python -m benchmarks.speed.train_cost [--configs patchtst/ETTh1 encoder/ETTh1 patchtst/ETTm1 ...]
                                          [--steps 12] [--threads 2] [--out benchmarks/results/train_cost]

For each configuration (configs/<model>/<dataset>.yaml: the published model size for that dataset,
horizon 96), times training steps (forward, backward, Adam) of both attentions on real batches of
that dataset, regular and with 60 % of the inputs dropped, interleaved step by step so that any
background load hits both alike, after a warm-up that includes compilation. Reports the median
step time, the implied seconds per full training epoch and the continuous / softmax ratio, and per
step the minor page faults and system CPU time (counts that load does not move). Runs with the
entry points' allocator setting (ts_continuum/allocator.py); TS_CONTINUUM_ALLOCATOR=0 measures without.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch
import yaml

from ts_continuum import allocator
from ts_continuum.data import ForecastDataModule
from ts_continuum.models import build_model

from benchmarks.machine import command, cpu_facts, faults_and_system_time, load_average, peak_rss_mb

ROOT = Path(__file__).resolve().parents[2]


def config_path(spec: str) -> Path:
    """``model/dataset`` -> its YAML file, with a clear error for a name that has none."""
    path = ROOT / "configs" / f"{spec}.yaml"
    if spec.count("/") != 1 or not path.is_file():
        known = sorted(f"{p.parent.name}/{p.stem}" for p in (ROOT / "configs").glob("*/*.yaml"))
        raise SystemExit(f"unknown configuration {spec!r}: expected model/dataset, one of {', '.join(known)}")
    return path


def setup(spec: str, attention: str, drop: float):
    cfg = yaml.safe_load(config_path(spec).read_text())
    model_name = spec.split("/")[0]
    dm = ForecastDataModule(cfg["data"]["dataset"], lookback=cfg["data"]["lookback"], horizon=96,
                            batch_size=cfg["data"]["batch_size"], drop=drop)
    dm.setup()
    args = {k: v for k, v in cfg["model"]["model"]["init_args"].items() if k != "attention"}
    torch.manual_seed(0)
    model = build_model(model_name, n_channels=dm.n_channels, lookback=dm.lookback, horizon=96, attention=attention,
                        **args)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    batches = iter(dm.train_dataloader())

    def step() -> tuple[float, int, float]:
        """Seconds, minor page faults and system CPU seconds of one training step."""
        batch = next(batches)
        faults, system = faults_and_system_time()
        t0 = time.perf_counter()
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(batch["x"], batch["x_mask"], batch["x_time"]), batch["y"])
        loss.backward()
        opt.step()
        seconds = time.perf_counter() - t0
        faults_after, system_after = faults_and_system_time()
        return seconds, faults_after - faults, system_after - system

    return step, len(dm.train_dataloader())


def plot(rows: list[dict], path: Path) -> None:
    """Continuous / softmax time per training step for each configuration, softmax's epoch time
    written under each bar (the ratio is what the run measures best: both share the load)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pairs = [(rows[i], rows[i + 1]) for i in range(0, len(rows), 2)]
    fig, ax = plt.subplots(figsize=(1.5 + 1.0 * len(pairs), 3.6))
    ratios = [c["ratio_to_softmax"] for _, c in pairs]
    ax.bar(range(len(pairs)), ratios, 0.6, color="tab:orange")
    ax.axhline(1.0, color="tab:blue", lw=1, label="softmax")
    for i, r in enumerate(ratios):
        ax.annotate(f"{r:.2f}x", (i, r), ha="center", va="bottom", fontsize=8)
    ax.set_xticks(range(len(pairs)), [f"{s['model']}\n{s['dataset']}\n{s['regime']}\nsoftmax {s['epoch_s']:.0f} s/epoch"
                                      for s, _ in pairs], fontsize=7)
    ax.set_ylabel("continuous / softmax, time per step")
    ax.set_ylim(0, max(ratios) * 1.15)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    p = argparse.ArgumentParser(prog=f"python -m {__spec__.name}", description=__doc__.splitlines()[0])
    p.add_argument("--configs", nargs="+", default=["patchtst/ETTh1", "encoder/ETTh1"],
                   help="model/dataset names of configs/ YAML files")
    p.add_argument("--steps", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None)
    args = p.parse_args()
    for spec in args.configs:
        config_path(spec)
    setting = allocator.keep_freed_memory()  # as the entry points do (TS_CONTINUUM_ALLOCATOR=0: not)
    torch.set_num_threads(args.threads)
    load_before = load_average()
    rows = []
    for spec, (regime, drop) in [(c, r) for c in args.configs for r in (("regular", 0.0), ("drop60", 0.6))]:
        model_name, dataset = spec.split("/")
        runs = {a: setup(spec, a, drop) for a in ("softmax", "continuous")}
        warm = {a: sum(runs[a][0]()[0] for _ in range(2)) for a in runs}  # includes compilation
        steps = {a: [] for a in runs}
        for _ in range(args.steps):
            for a in runs:
                steps[a].append(runs[a][0]())
        for a in runs:
            times = [t for t, _, _ in steps[a]]
            med = statistics.median(times)
            rows.append({"model": model_name, "dataset": dataset, "regime": regime, "attention": a, "step_s": med,
                         "step_s_range": [min(times), max(times)], "steps_per_epoch": runs[a][1],
                         "epoch_s": med * runs[a][1], "warmup_s": warm[a],
                         "faults_per_step": statistics.median(f for _, f, _ in steps[a]),
                         "system_s_per_step": statistics.median(s for _, _, s in steps[a])})
        ratio = rows[-1]["step_s"] / rows[-2]["step_s"]
        rows[-1]["ratio_to_softmax"] = ratio
        print(f"{spec} {regime}: softmax {rows[-2]['step_s']:.3f} s/step, continuous {rows[-1]['step_s']:.3f} s/step, "
              f"ratio {ratio:.2f} ({runs['softmax'][1]} steps per epoch)")
    meta = {"date": time.strftime("%Y-%m-%d %H:%M"), "torch": torch.__version__, "threads": torch.get_num_threads(),
            **cpu_facts(), "command": command(__spec__.name, sys.argv[1:]), "allocator": setting,
            "peak_rss_mb": peak_rss_mb(),
            "load_average_before": load_before, "load_average_after": load_average()}
    print(f"{setting}; peak RSS {meta['peak_rss_mb']:.0f} MB; load average {load_before} before, "
          f"{meta['load_average_after']} after")
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "train_cost.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
        lines = [f"# Training cost, H = 96, published configuration of each model and dataset ({meta['date']})",
                 f"`{meta['command']}`: torch {meta['torch']}, {meta['threads']} threads, {meta['cpu']} "
                 f"({meta['cores']} cores), median of {args.steps} interleaved steps after a warm-up (compilation "
                 "included in the warm-up, not in the medians; the fastest and slowest step in brackets). "
                 f"Allocator: {setting}. Load average (1, 5, 15 min) {load_before} before, "
                 f"{meta['load_average_after']} after; peak RSS of the process {meta['peak_rss_mb']:.0f} MB. "
                 "Minor page faults and system CPU time per step are medians too.", "",
                 "| model | dataset | regime | attention | s / step [min, max] | steps / epoch | s / epoch | "
                 "continuous / softmax | warm-up s | page faults / step | system s / step |",
                 "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            low, high = r["step_s_range"]
            lines.append(f"| {r['model']} | {r['dataset']} | {r['regime']} | {r['attention']} | {r['step_s']:.3f} "
                         f"[{low:.3f}, {high:.3f}] | {r['steps_per_epoch']} | "
                         f"{r['epoch_s']:.1f} | {r.get('ratio_to_softmax', 1.0):.2f} | {r['warmup_s']:.1f} | "
                         f"{r['faults_per_step']:.0f} | {r['system_s_per_step']:.3f} |")
        lines += ["", "![continuous / softmax time per step](train_cost.png)"]
        (out / "train_cost.md").write_text("\n".join(lines) + "\n")
        plot(rows, out / "train_cost.png")


if __name__ == "__main__":
    main()
