"""An independent oracle: the defining integral of continuous attention by dense Simpson quadrature.

It knows nothing of the closed form: keys and values are interpolated linearly on every segment,
exp(q·k(s)) is sampled on a fine grid and both integrals are summed numerically, one query at a time.
"""

from __future__ import annotations

import numpy as np
import torch

NODES = 2001  # per segment (odd: Simpson); error ~ 1e-13 for scores of order 1


def _simpson_weights(n: int) -> np.ndarray:
    w = np.ones(n)
    w[1:-1:2] = 4.0
    w[2:-1:2] = 2.0
    return w / (3.0 * (n - 1))


def quadrature_attention(
    q, k, v, *, times=None, causal=False, sink="zero", sink_k=None, sink_v=None, sink_gap=1.0, lengths=None, scale=None,
    q_lengths=None,
) -> torch.Tensor:
    """Self-attention when ``q`` has as many rows as ``k`` and no ``q_lengths`` is given (rows past
    ``lengths`` are padding); otherwise every query row below ``q_lengths`` integrates over the
    whole key sequence (queries at their own times)."""
    q, k, v = (t.detach().double().numpy() for t in (q, k, v))
    B, H, Tq, D = q.shape
    T = k.shape[2]
    cross = Tq != T or q_lengths is not None
    scale = D**-0.5 if scale is None else scale
    s = np.linspace(0.0, 1.0, NODES)
    w = _simpson_weights(NODES)
    out = np.zeros(q.shape[:3] + (v.shape[-1],))
    for b in range(B):
        L = T if lengths is None else int(lengths[b])
        if times is None:
            tau = np.arange(1, L + 1, dtype=float)
        else:
            tt = times.detach().double().numpy()
            tau = (tt if tt.ndim == 1 else tt[b])[:L]
        for h in range(H):
            kk, vv, tt_ = k[b, h, :L], v[b, h, :L], tau
            if sink != "none":
                if sink == "zero":
                    k0, v0 = np.zeros(D), np.zeros(v.shape[-1])
                elif sink == "repeat":
                    k0, v0 = kk[0], vv[0]
                else:
                    k0, v0 = sink_k.detach().double().numpy()[h], sink_v.detach().double().numpy()[h]
                kk, vv = np.vstack([k0, kk]), np.vstack([v0, vv])
                tt_ = np.concatenate([[tau[0] - sink_gap], tau])
            offset = 0 if sink == "none" else 1  # index of observation 1 in the extended arrays
            rows = (Tq if q_lengths is None else int(q_lengths[b])) if cross else L
            for t in range(rows):
                end = (t + offset) if causal else (L - 1 + offset)
                if end == 0:  # zero-length range: the limit is v_1
                    out[b, h, t] = vv[0]
                    continue
                # points 0..end, segments between consecutive points
                kl, kr = kk[:end, None, :], kk[1 : end + 1, None, :]
                vl, vr = vv[:end, None, :], vv[1 : end + 1, None, :]
                ks = (1 - s)[None, :, None] * kl + s[None, :, None] * kr  # (segments, nodes, D)
                vs = (1 - s)[None, :, None] * vl + s[None, :, None] * vr
                a = scale * ks @ q[b, h, t]
                a_max = a.max()
                f = np.exp(a - a_max) * w[None, :]
                dt = np.diff(tt_[: end + 1])[:, None]
                z = (f * dt).sum()
                n = ((f * dt)[..., None] * vs).sum(axis=(0, 1))
                out[b, h, t] = n / z
    return torch.from_numpy(out)
