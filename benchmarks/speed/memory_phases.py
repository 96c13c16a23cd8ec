"""Where a CPU training run's resident memory goes: imports, the saved activations of one
training step, and the process's RSS at each phase of a ``ts-continuum fit`` run.

    python -m benchmarks.speed.memory_phases imports
    python -m benchmarks.speed.memory_phases saved [--attention continuous] [--batch 128]
    python -m benchmarks.speed.memory_phases fit --config configs/quickstart.yaml [any fit options]

``imports`` prints the RSS each import adds, in the order the CLI meets them; ``saved`` sums the
tensors autograd keeps for the backward of one PatchTST forward (the quickstart's model, one batch of
ETTh1-shaped windows) by shape and dtype; ``fit`` runs the CLI with a callback that prints the current
and peak RSS at setup, after the sanity check, after training batches 0, 1, 5, 19, 99 and at the end of
every validation and test (``rss_callback.PrintRSS``). Linux only (reads /proc/self/statm); the
callback module is not imported by the other two, which would otherwise count Lightning's imports.
"""

from __future__ import annotations

import argparse
import collections
import importlib
import resource
import sys

IMPORTS = ("numpy", "torch", "pandas", "scipy.stats", "sympy", "matplotlib.pyplot", "torch._dynamo",
           "torch._inductor.compile_fx", "lightning.pytorch", "jsonargparse", "ts_continuum",
           "ts_continuum.training.cli")


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB (Linux: reads /proc/self/statm)."""
    pages = int(open("/proc/self/statm").read().split()[1])
    return pages * resource.getpagesize() / 2**20, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def imports() -> None:
    last = rss_mb()[0]
    print(f"{'(interpreter)':32s} {last:7.0f} MB")
    for name in IMPORTS:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as error:  # scipy comes with the test extra only
            print(f"{name:32s} not installed ({error.name})")
            continue
        now = rss_mb()[0]
        print(f"{name:32s} +{now - last:6.0f} MB -> {now:7.0f} MB")
        last = now


def saved(attention: str, batch: int) -> None:
    import torch

    from ts_continuum.models import PatchTST

    torch.manual_seed(0)
    model = PatchTST(n_channels=7, attention=attention, attention_backend="torch").train()
    x = torch.randn(batch, 336, 7)
    by_kind: collections.Counter = collections.Counter()
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = t.untyped_storage().data_ptr()
        if key not in storages:
            storages[key] = t.untyped_storage().nbytes()
            by_kind[tuple(t.shape), str(t.dtype).removeprefix("torch.")] += storages[key]
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(x)
    print(f"PatchTST ({attention}), batch {batch} windows x 7 channels: "
          f"{sum(storages.values()) / 2**20:.1f} MB saved for the backward")
    for (shape, dtype), nbytes in by_kind.most_common(10):
        print(f"  {nbytes / 2**20:7.1f} MB  {dtype:8s} {shape}")


def fit(argv: list[str]) -> None:
    from ts_continuum.training.cli import main

    main(["fit", *argv, "--trainer.callbacks+=benchmarks.speed.rss_callback.PrintRSS"])


def cli(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed.memory_phases",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("imports", help="RSS added by each import")
    s = sub.add_parser("saved", help="tensors saved for the backward of one PatchTST training forward")
    s.add_argument("--attention", choices=("softmax", "continuous"), default="continuous")
    s.add_argument("--batch", type=int, default=128)
    sub.add_parser("fit", help="ts-continuum fit with RSS printed by phase (pass fit's options after it)",
                   add_help=False)
    args, rest = parser.parse_known_args(argv)
    if args.what == "imports":
        imports()
    elif args.what == "saved":
        saved(args.attention, args.batch)
    else:
        fit(rest)


if __name__ == "__main__":
    cli(sys.argv[1:])
