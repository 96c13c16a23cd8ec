"""The lean feed-forward block and the 1-byte-mask dropout against plain autograd compositions."""

import pytest
import torch
import torch.nn.functional as F

from ts_continuum.models import feed_forward
from ts_continuum.models.dropout import Dropout, scale_by_mask
from ts_continuum.models.feed_forward import FeedForward, _FeedForwardCore
from ts_continuum.models.layers import EncoderLayer


def _plain(ff: FeedForward, x: torch.Tensor) -> torch.Tensor:
    """The same block in plain autograd with float masks, drawing the same random numbers."""
    *norm, first, _, drop, second, last = ff
    for module in norm:
        x = module(x)
    h = first(x)
    y = F.gelu(h) * ((torch.rand_like(h) >= drop.p).to(h.dtype) * (1 / (1 - drop.p)))
    out = second(y)
    return out * ((torch.rand_like(out) >= last.p).to(out.dtype) * (1 / (1 - last.p)))


def _outputs_and_grads(fn, ff, x, seed):
    x = x.clone().requires_grad_(True)
    ff.zero_grad()
    torch.manual_seed(seed)
    out = fn(x)
    out.backward(torch.linspace(-1, 1, out.numel(), dtype=out.dtype).reshape(out.shape))
    return out.detach(), x.grad, [p.grad.clone() for p in ff.parameters()]


@pytest.fixture(params=[1 << 19, 70], ids=["one-block", "row-blocks"])
def row_block_elements(request, monkeypatch):
    """The default blocking (these shapes fit one block) and blocks of 2-3 rows with a ragged last one."""
    monkeypatch.setattr(feed_forward, "ROW_BLOCK_ELEMENTS", request.param)
    return request.param


@pytest.mark.parametrize("pre_norm", [False, True])
def test_training_matches_plain_autograd(pre_norm, row_block_elements):
    torch.manual_seed(0)
    ff = FeedForward(8, 32, dropout=0.3, pre_norm=pre_norm).double().train()
    x = torch.randn(3, 5, 8, dtype=torch.float64)
    got = _outputs_and_grads(ff, ff, x, seed=7)
    want = _outputs_and_grads(lambda t: _plain(ff, t), ff, x, seed=7)
    torch.testing.assert_close(got[0], want[0], rtol=0, atol=1e-14)  # same masks: same numbers
    torch.testing.assert_close(got[1], want[1], rtol=1e-12, atol=1e-12)
    for g, w in zip(got[2], want[2]):
        torch.testing.assert_close(g, w, rtol=1e-12, atol=1e-12)


def test_fused_function_gradcheck():
    torch.manual_seed(1)
    x = torch.randn(2, 4, 5, dtype=torch.float64, requires_grad=True)
    keep = torch.rand(2, 4, 6) >= 0.4
    params = [torch.randn(*shape, dtype=torch.float64, requires_grad=True) for shape in ((6, 5), (6,), (3, 6), (3,))]
    assert torch.autograd.gradcheck(lambda *a: _FeedForwardCore.apply(a[0], keep, 1 / 0.6, *a[1:]), (x, *params))


def test_eval_and_no_dropout_are_the_plain_block(row_block_elements):
    torch.manual_seed(2)
    ff = FeedForward(8, 16, dropout=0.5).eval()
    x = torch.randn(2, 5, 8)
    first, act, _, second, _ = ff
    torch.testing.assert_close(ff(x), second(act(first(x))), rtol=0, atol=0)
    exact = {"rtol": 0, "atol": 0} if row_block_elements > 80 else {}  # fewer rows: another summation order
    with torch.no_grad():
        torch.testing.assert_close(ff(x), second(act(first(x))), **exact)
    ff0 = FeedForward(8, 16, dropout=0.0).train()
    torch.testing.assert_close(ff0(x), ff0[3](ff0[1](ff0[0](x))), rtol=0, atol=0)


def _saved_bytes(fn) -> int:
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn()
    return total


def test_keeps_one_byte_per_hidden_unit_instead_of_twelve():
    torch.manual_seed(3)
    d_model, d_ff, n = 8, 64, 1000
    ff = FeedForward(d_model, d_ff, dropout=0.3).train()
    x = torch.randn(n, d_model)
    lean = _saved_bytes(lambda: ff(x))
    plain = _saved_bytes(lambda: _plain(ff, x))
    hidden = n * d_ff
    assert plain >= 12 * hidden
    weights = 4 * (2 * d_ff * d_model + d_ff)
    assert lean <= hidden + 5 * n * d_model + weights  # the mask; the input, the last mask; w1, b1, w2


def test_dropout_keeps_a_boolean_mask_and_scales_gradients():
    torch.manual_seed(4)
    drop = Dropout(0.25).train()
    x = torch.randn(200, 10, requires_grad=True)
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        y = drop(x)
    assert [t.dtype for t in saved] == [torch.bool]
    y.sum().backward()
    keep = saved[0]
    torch.testing.assert_close(y, x.detach() * keep / 0.75)
    torch.testing.assert_close(x.grad, keep.float() / 0.75)
    assert 0.7 < keep.float().mean() < 0.8
    assert scale_by_mask(torch.ones(3), torch.tensor([True, False, True]), 2.0).tolist() == [2.0, 0.0, 2.0]


def test_row_blocks_cover_every_row_once_on_the_cpu(monkeypatch):
    monkeypatch.setattr(feed_forward, "ROW_BLOCK_ELEMENTS", 100)
    blocks = feed_forward._row_blocks(torch.empty(3, 7, 4), width=32)  # 21 rows, 3 per block
    assert [(b.start, b.stop) for b in blocks] == [(i, min(i + 3, 21)) for i in range(0, 21, 3)]
    assert feed_forward._row_blocks(torch.empty(0, 4), width=32) == [slice(0, 0)]
    assert len(feed_forward._row_blocks(torch.empty(3, 7, 4, device="meta"), width=32)) == 1


def test_blocked_mask_is_the_whole_tensor_draw(monkeypatch):
    monkeypatch.setattr(feed_forward, "ROW_BLOCK_ELEMENTS", 50)
    x = torch.empty(4, 9, 3)
    torch.manual_seed(6)
    keep = feed_forward._draw_keep_mask(x, 16, torch.float32, 0.3)
    torch.manual_seed(6)
    assert torch.equal(keep, torch.rand(4, 9, 16) >= 0.3)


def test_autocast_bfloat16_matches_plain_autograd():
    torch.manual_seed(5)
    ff = FeedForward(8, 32, dropout=0.2).train()
    x = torch.randn(4, 6, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = _outputs_and_grads(ff, ff, x, seed=9)
        want = _outputs_and_grads(lambda t: _plain(ff, t), ff, x, seed=9)
    assert got[0].dtype == want[0].dtype == torch.bfloat16
    torch.testing.assert_close(got[0], want[0], rtol=2e-2, atol=2e-2)
    for g, w in zip([got[1], *got[2]], [want[1], *want[2]]):
        assert g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=3e-2, atol=3e-2)


def test_saved_parameter_names_are_unchanged():
    layer = EncoderLayer(d_model=8, n_heads=2, d_ff=16, dropout=0.1)
    names = {k for k in layer.state_dict() if k.startswith("ff.")}
    assert names == {"ff.0.weight", "ff.0.bias", "ff.3.weight", "ff.3.bias"}
    pre = FeedForward(8, 16, 0.1, pre_norm=True).state_dict()
    assert set(pre) == {"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"}
