"""Live CPU-allocator memory over one PatchTST training step (the quickstart model), from the profiler's
memory events: the step's peak above its start and the ops running at that moment.
usage: python step_peak.py [auto|torch] [continuous|softmax]"""

import sys

import torch
from torch.profiler import ProfilerActivity, profile

from ts_continuum.models import PatchTST

torch.manual_seed(0)
torch.set_num_threads(2)
backend = sys.argv[1] if len(sys.argv) > 1 else "auto"
attention = sys.argv[2] if len(sys.argv) > 2 else "continuous"
model = PatchTST(n_channels=7, attention=attention, attention_backend=backend).train()
opt = torch.optim.Adam(model.parameters(), 1e-3)
x, y = torch.randn(128, 336, 7), torch.randn(128, 96, 7)


def step() -> None:
    opt.zero_grad(set_to_none=True)
    torch.nn.functional.mse_loss(model(x), y).backward()
    opt.step()


for _ in range(3):  # compile and warm up
    step()
with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
    step()
events = list(prof.profiler.kineto_results.events())
allocations = sorted((e.start_ns(), e.nbytes()) for e in events if e.name() == "[memory]")
live = peak = 0
at = None
for t, n in allocations:
    live += n
    if live > peak:
        peak, at = live, t
print(
    f"{attention} {backend}: step live-memory peak {peak / 2**20:.1f} MB above the start (net at end {live / 2**20:.1f} MB)"
)
running = [e for e in events if e.name() != "[memory]" and e.start_ns() <= at <= e.start_ns() + e.duration_ns()]
for e in sorted(running, key=lambda e: e.duration_ns(), reverse=True)[:4]:
    print("   at peak:", e.name()[:100])
print(
    "largest allocations MB:",
    [round(n / 2**20, 1) for n in sorted((n for _, n in allocations if n > 0), reverse=True)[:5]],
)
