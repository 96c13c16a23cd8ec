"""RSS, malloc in-use and malloc free-but-held memory after each of STEPS PatchTST training steps
(the quickstart model, continuous attention, BACKEND=auto|torch), with the library's allocator setting."""

import sys, os, time, torch
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
t0 = time.time()
for i in range(int(os.environ.get("STEPS", 25))):
    x = torch.randn(128, 336, 7)
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    if i % 3 == 0 or i < 6:
        print(i, "rss %.0f used %.0f free %.0f arena %.0f peak %.0f" % info(), mallinfo_probe.anon_file, flush=True)
print("time/step %.3f" % ((time.time() - t0) / (i + 1)))
