"""``GridState``: what a fitted grid Forecaster knows, and the operations on it that predict, backtest,
cross-validation, calibration, persistence and plotting share.

A grid model (PatchTST, the encoder) forecasts the ``horizon`` nominal steps after an origin from the
``lookback`` steps before it. The state holds the model, where the series live in a frame (``spec``),
the nominal step, the per-series scaler, the context (each series' last input window, which
``predict()`` continues) and the calibration of prediction intervals, if any.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import torch

from ..models.eager_attention import eager_attention
from .forecast_errors import user_stacklevel
from .frames import FrameSpec, Panel, read_panel
from .intervals import Calibration
from ..data.scaling import Scaler
from .steps import check_resolution, describe, warn_if_blind, warn_spacing_mismatch
from ..data.windows import Windows

PREDICT_CHUNK = 2048  # windows per forward pass


@dataclass
class GridState:
    """A fitted grid model and everything needed to read frames like its training data.

    ``spacing``: the training data's typical spacing (native units; None in older saves), the
    reference for data given later. ``blind``: the model places tokens by index (softmax attention
    with learned or no positions, inputs not interpolated), so irregular data is warned about.
    """

    model: torch.nn.Module
    spec: FrameSpec
    freq: float | int
    scaler: Scaler
    context: Panel
    spacing: float | None
    lookback: int
    horizon: int
    interpolate_inputs: bool = False
    blind: bool = False
    pos_encoding: str = "rope"
    calibration: Calibration | None = None
    series: dict = field(init=False)  # series id -> index among the series fit saw

    def __post_init__(self) -> None:
        self.series = {sid: i for i, sid in enumerate(self.context.ids)}

    # --- reading frames --------------------------------------------------------------------
    def read(self, df: pd.DataFrame, what: str) -> Panel:
        """``df`` read like the training data: same layout and kind of times, checked against the step."""
        panel = read_panel(df, self.spec, what)
        check_resolution(panel, self.freq, self.lookback)
        warn_spacing_mismatch(panel, self.spacing, self.freq, self.lookback, what)
        warn_if_blind(panel, self.freq, self.blind, self.pos_encoding)
        return panel

    def windows(self, panel: Panel) -> Windows:
        return Windows(panel.times, panel.bounds, self.freq, self.lookback, self.horizon, self.interpolate_inputs)

    def known(self, panel: Panel) -> np.ndarray:
        """(S,) each series' index among the series fit saw, -1 for a new one."""
        return np.array([self.series.get(sid, -1) for sid in panel.ids], dtype=np.int64)

    def training_end(self) -> np.ndarray:
        """(S_fit,) native time of each fitted series' last observation in the training data."""
        return self.context.times[self.context.last_rows]

    def scaler_for(self, panel: Panel, upto: np.ndarray | None = None) -> Scaler:
        """Training statistics for known series; for a new one, its own history: the rows up to
        ``upto`` (S,) row indices, default all. ``predict`` forecasts after every row, so all of them
        are history; ``backtest`` passes its origins, so that no scored value shapes the scaling."""
        history = panel if upto is None else panel.take(np.arange(len(panel.times)) <= upto[panel.codes])
        own = Scaler.fit(history.values, history.bounds)
        known = self.known(panel)
        old = known[:, None] >= 0
        return Scaler(np.where(old, self.scaler.mean[known], own.mean),
                      np.where(old, self.scaler.std[known], own.std))

    # --- checks before forecasting -----------------------------------------------------------
    def warn_short_history(self, windows: Windows, origins: np.ndarray, panel: Panel, series: np.ndarray) -> None:
        """A history shorter than ``lookback`` is legal (the rest of the input window counts as missing)
        but usually forecasts worse, and passing only the rows since ``fit`` is an easy mistake."""
        covered = windows.steps[origins] + 1  # nominal steps from the series' first observation to the origin
        short = np.flatnonzero(covered < self.lookback - 0.5)
        if not len(short):
            return
        w = short[0]
        known = sorted({str(panel.ids[s]) for s in series[short] if panel.ids[s] in self.series})
        hint = ""
        if known:
            hint = (f"; predict(df) and backtest(df) condition on df only, not on the data fit saw, so include the "
                    f"earlier rows of {', '.join(map(repr, known[:3]))}{' ...' if len(known) > 3 else ''}")
        warnings.warn(
            f"{len(short)} of {len(origins)} forecast origin(s) have less history than lookback ({self.lookback} "
            f"nominal steps of {describe(self.freq, panel.time_kind)}), e.g. series {panel.ids[series[w]]!r} spans "
            f"{covered[w]:g} step(s) up to {panel.stamp(panel.times[origins[w]])}. The model treats the rest of its "
            f"input window as missing, which usually forecasts worse: give each series its full history{hint}",
            UserWarning, stacklevel=user_stacklevel())

    def check_history(self, windows: Windows, values: np.ndarray, origins: np.ndarray, panel: Panel,
                      series: np.ndarray) -> None:
        """Refuse an origin whose input window lacks an observation of some target, saying why."""
        counts = windows.input_counts(values, origins)
        missing = np.argwhere(counts == 0)
        if not len(missing):
            return
        w, c = missing[0]
        origin, name = origins[w], self.spec.target_cols[c]

        def when(row: int):
            return panel.stamp(panel.times[row])

        first = panel.bounds[series[w]]
        seen = np.flatnonzero(~np.isnan(values[first : origin + 1, c]))
        if len(seen):  # observed earlier: the most recent values are missing, not the history short
            last = first + seen[-1]
            cause = (f"its {origin - last} most recent values of {name!r} are missing (since {when(last + 1)}; the "
                     f"last observed one is at {when(last)}). The model needs at least one observation of every "
                     f"target in its lookback window: fill the missing values (e.g. with ffill) or leave out the "
                     f"rows after {when(last)}")
        else:
            cause = ("the model needs at least one observation of every target in its lookback window: give a "
                     "longer history")
        raise ValueError(
            f"series {panel.ids[series[w]]!r} has no observation of {name!r} in the {self.lookback} nominal steps up "
            f"to {when(origin)} ({len(np.unique(missing[:, 0]))} window(s) affected); {cause}"
        )

    # --- forecasting -------------------------------------------------------------------------
    def forecast(self, batch: dict[str, torch.Tensor]) -> np.ndarray:
        """One no-grad pass (in chunks) in eval mode with eager attention: scaled (W, H, C)."""
        model = self.model.eval()
        weight = next(model.parameters())
        # the windows are float32; a model trained at another precision (precision="64-true") got its
        # inputs cast by Lightning during training, so they are cast alike here
        cast = {"x": weight.dtype, "x_mask": torch.bool, "x_time": weight.dtype}
        out = []
        with torch.no_grad(), eager_attention(model):
            for i in range(0, len(batch["x"]), PREDICT_CHUNK):
                part = [batch[k][i : i + PREDICT_CHUNK].to(weight.device, cast[k]) for k in cast]
                out.append(model(*part).float().cpu().numpy())
        return np.concatenate(out)

    def calibrated(self, action: str) -> Calibration:
        """The calibration, or the error that says how to make one."""
        if self.calibration is None:
            raise ValueError(f"{action} needs prediction-interval calibration: call calibrate(df, n_windows=...) "
                             "first, on data after the training period (e.g. fit on all but the last "
                             "horizon + (n_windows - 1) * step nominal steps of each series, then calibrate on the "
                             "full frame)")
        return self.calibration
