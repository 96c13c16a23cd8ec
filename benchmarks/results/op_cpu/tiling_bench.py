"""Old (query-chunk, commit 7d173bf) vs new (whole-sequence) tiling of the exact path, interleaved.

A one-off comparison: the old reference.py comes from `git show 7d173bf:ts_continuum/attention/reference.py`
with its `from .phi import` made absolute, saved as /tmp/tilebench/reference_old.py.
"""
import statistics, sys, time
sys.path.insert(0, "/tmp/tilebench")
import torch
import reference_old
from ts_continuum import continuous_attention
from ts_continuum.attention import backends, op

torch.set_num_threads(2)
NEW = (backends.ContinuousAttentionFunction, op.SegmentLayout)
OLD = (reference_old.ContinuousAttentionFunction, reference_old.SegmentLayout)

def use(impl):
    backends.ContinuousAttentionFunction, op.SegmentLayout = impl

def call(shape, grad, backend):
    B, H, T, D = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(B, H, T, D, generator=g, requires_grad=grad) for _ in range(3))
    times = torch.cumsum(0.5 + torch.rand(B, T, generator=g), -1)
    def f():
        if grad:
            continuous_attention(q, k, v, times=times, backend=backend).sum().backward()
        else:
            with torch.inference_mode():
                continuous_attention(q, k, v, times=times, backend=backend)
    return f

rows = []
for shape, grad in [((7168, 16, 42, 8), False), ((896, 16, 42, 8), True), ((7168, 4, 42, 4), False), ((896, 4, 42, 4), True)]:
    for backend in ("torch", "auto"):
        fns = {}
        for name, impl in (("old", OLD), ("new", NEW)):
            use(impl); f = call(shape, grad, backend); f(); fns[name] = f
        t = {"old": [], "new": []}
        for _ in range(3):
            for name, impl in (("old", OLD), ("new", NEW)):
                use(impl); t0 = time.perf_counter(); fns[name](); t[name].append(time.perf_counter() - t0)
        o, n = statistics.median(t["old"]), statistics.median(t["new"])
        line = f"{shape} {'fwd+bwd' if grad else 'fwd (inference)'} backend={backend}: old {o:.2f} s, new {n:.2f} s, old/new {o/n:.2f}x"
        print(line, flush=True); rows.append(line)
print("threads", torch.get_num_threads(), "torch", torch.__version__)
