"""``ts-continuum predict``'s figure: one window's inputs as the model saw them, its forecast and the
actual values, one panel per channel (the first ``MAX_PANELS``), in the data's units.

The x axis is in nominal steps from the forecast origin, the model's own time axis: dropped inputs are
absent and jittered ones sit at their real times, so the figure shows what the model was given.
"""

from __future__ import annotations

import numpy as np
import torch
from matplotlib.figure import Figure

MAX_PANELS = 8  # Weather has 21 channels: a figure of 21 panels is unreadable


def plot_window(window: dict[str, torch.Tensor], forecast: np.ndarray, inverse, channel_names: list[str],
                title: str, observed: np.ndarray | None = None) -> Figure:
    """``window``: a ``WindowDataset`` item (scaled ``x``, ``x_mask``, ``x_time``, ``y``); ``forecast``
    (horizon, channels) and ``inverse``, the scaler's ``inverse``, already in the data's units.
    ``observed`` (lookback, channels): which inputs were observed when the window's inputs were
    interpolated (the model then sees every slot): drawn as points on the interpolated line."""
    x = inverse(np.nan_to_num(window["x"].numpy()))
    seen = window["x_mask"].numpy().astype(bool)
    x_time = window["x_time"].numpy()
    y = inverse(window["y"].numpy())
    steps = np.arange(1, len(forecast) + 1)
    shown = min(len(channel_names), MAX_PANELS)
    fig = Figure(figsize=(10, 1.9 * shown + 0.8), layout="constrained")
    axes = fig.subplots(shown, 1, sharex=True, squeeze=False)[:, 0]
    for c, ax in enumerate(axes):
        if observed is None:
            ax.plot(x_time[seen[:, c]], x[seen[:, c], c], ".-", lw=0.8, ms=2.5, color="tab:blue",
                    label="input (observed)")
        else:
            ax.plot(x_time, x[:, c], "-", lw=0.8, color="tab:blue", alpha=0.6, label="input (interpolated)")
            ax.plot(x_time[observed[:, c]], x[observed[:, c], c], ".", ms=3, color="tab:blue", label="observed")
        ax.plot(steps, y[:, c], "-", lw=1.0, color="black", alpha=0.6, label="actual")
        ax.plot(steps, forecast[:, c], "-", lw=1.4, color="tab:orange", label="forecast")
        ax.axvline(0, ls=":", color="grey", lw=0.8)
        ax.set_ylabel(str(channel_names[c]))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="upper left", fontsize="small", ncols=3)
    axes[-1].set_xlabel("steps from the forecast origin")
    more = f" (channels 1-{shown} of {len(channel_names)})" if shown < len(channel_names) else ""
    fig.suptitle(title + more)
    return fig
