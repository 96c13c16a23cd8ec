"""Seconds per training step (forward, backward, Adam) of the query models on real PhysioNet batches.

    PYTHONPATH=. python -m benchmarks.physionet.step_time

Twelve training batches of split 0 (batch 32), the first two steps left out; two threads; every
model twice, in alternating rounds, each from the same initial weights (a model's first run can pay
for the allocator's warm-up, so compare the rounds). Ratios between the models are what it is for:
run it with nothing else on the machine.
"""

from __future__ import annotations

import itertools
import time

import torch

from ts_continuum.data.physionet import PhysioNetDataModule
from ts_continuum.models import AsyncTransformer, PatchGraphTransformer


def step_time(model: torch.nn.Module, batches: list[dict]) -> float:
    opt = torch.optim.Adam(model.parameters(), 1e-3)
    seconds = []
    for b in batches:
        t = time.perf_counter()
        out = model(b["values"], b["times"], b["lengths"], b["query_times"], b["query_lengths"])
        valid = torch.arange(out.shape[-1]) < b["query_lengths"][..., None]
        loss = ((out - b["query_values"])[valid] ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        seconds.append(time.perf_counter() - t)
    return sum(seconds[2:]) / len(seconds[2:])


def main() -> None:
    torch.set_num_threads(2)
    dm = PhysioNetDataModule(split_seed=0, batch_size=32, eval_batch_size=64)
    dm.setup("fit")
    batches = list(itertools.islice(iter(dm.train_dataloader()), 12))
    C = dm.n_variables
    models = {"patch-graph d64 continuous": lambda: PatchGraphTransformer(C, d_model=64, d_ff=128),
              "patch-graph d128 continuous": lambda: PatchGraphTransformer(C, d_model=128, d_ff=256),
              "patch-graph d64 softmax": lambda: PatchGraphTransformer(C, d_model=64, d_ff=128, attention="softmax"),
              "async d128 softmax (the recipe)": lambda: AsyncTransformer(C, d_model=128, d_ff=256,
                                                                          attention="softmax"),
              "async d128 continuous": lambda: AsyncTransformer(C, d_model=128, d_ff=256, attention="continuous")}
    for round_ in (1, 2):
        for name, build in models.items():
            torch.manual_seed(0)
            model = build()
            n = sum(p.numel() for p in model.parameters())
            print(f"round {round_}, {name}: {step_time(model.train(), batches):.3f} s/step, {n} parameters",
                  flush=True)


if __name__ == "__main__":
    main()
