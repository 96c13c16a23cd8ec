"""RSS, malloc in-use and malloc free-but-held memory after each of STEPS PatchTST training steps
(the quickstart model, continuous attention, BACKEND=auto|torch), with the library's allocator setting."""

import os
import resource
import sys
import time

import torch
from ts_continuum.allocator import keep_freed_memory

print(keep_freed_memory())
sys.path.insert(0, os.path.dirname(__file__))
import mallinfo_probe
from mallinfo_probe import info
from ts_continuum.models import PatchTST

torch.manual_seed(0)
torch.set_num_threads(2)
model = PatchTST(n_channels=7, attention="continuous", attention_backend=os.environ.get("BACKEND", "auto")).train()
opt = torch.optim.Adam(model.parameters(), 1e-3)
y = torch.randn(128, 96, 7)
print("start rss %.0f used %.0f free %.0f arena %.0f peak %.0f" % info())
if os.environ.get("WARMUP") == "1":  # compile the op's tiles on a 2-window batch before the heap grows
    model(torch.randn(2, 336, 7)).sum().backward()
    model.zero_grad(set_to_none=True)
    print("after warm-up rss %.0f used %.0f free %.0f arena %.0f peak %.0f" % info())
steps = int(os.environ.get("STEPS", 25))
for i in range(steps):
    if i == 2:  # time the steps after compilation
        t0 = time.time()
    x = torch.randn(128, 336, 7)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if i % 3 == 0 or i < 6 or i == steps - 1:
        print(i, "rss %.0f used %.0f free %.0f arena %.0f peak %.0f" % info(), mallinfo_probe.anon_file, flush=True)
print("time/step after the first two %.3f s, minor page faults %d" % ((time.time() - t0) / (steps - 2), resource.getrusage(resource.RUSAGE_SELF).ru_minflt))
