"""The feed-forward block alone at the quickstart's shapes (d_model 16, d_ff 128, dropout 0.3; training:
896 sequences x 42 patches, forward + backward; evaluation: 1792 x 42 under no_grad), per row-block size
(2^30: one block, as before the change). usage: python benchmarks/results/2026-12-05-ffn-rows/ffn_block_bench.py"""
import time

import torch

from ts_continuum.models import feed_forward

torch.set_num_threads(2)
torch.manual_seed(0)
ff = feed_forward.FeedForward(16, 128, 0.3)
x_eval, x_train = torch.randn(1792, 42, 16), torch.randn(896, 42, 16, requires_grad=True)


def ms(fn, n=10):
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e3


def evaluate():
    ff.eval()
    with torch.no_grad():
        ff(x_eval)


def train():
    ff.train()
    ff(x_train).sum().backward()


for e in (30, 21, 19, 18, 17, 16):
    feed_forward.ROW_BLOCK_ELEMENTS = 1 << e
    print(f"2^{e}: evaluation {ms(evaluate):.1f} ms, training {ms(train):.1f} ms")
