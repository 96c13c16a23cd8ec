"""Train one short epoch, save the weights and predict the test windows with the CLI's
PredictionWriter: run by tests/test_training.py in a subprocess, once in a single process and once
with DDP on two CPU processes (each rank writes its own predictions file).

The encoder model (LayerNorm) is used: PatchTST's BatchNorm keeps per-process statistics under
DDP unless synchronised, and PyTorch's SyncBatchNorm runs on GPUs only. Both runs use the DDP
strategy (world size 1 or 2) so that Lightning's distributed sampler deals the same shuffled
global batches: one process with batch 16 must then equal two processes with batch 8 each."""

import sys
from pathlib import Path

import lightning as L
import torch

from ts_continuum.data import ForecastDataModule
from ts_continuum.models import EncoderTransformer
from ts_continuum.training import ForecastingModule
from ts_continuum.training.prediction_writer import PredictionWriter


def main(csv: str, out: str, devices: int) -> None:
    L.seed_everything(0)
    per_device = 8
    dm = ForecastDataModule(csv, lookback=24, horizon=6, batch_size=per_device * (2 // devices), shuffle_train=False)
    model = EncoderTransformer(n_channels=3, lookback=24, horizon=6, d_model=16, n_heads=2, n_layers=1, d_ff=32,
                               dropout=0.0, attention="continuous", attention_backend="torch")
    module = ForecastingModule(model, lr=1e-3, lr_schedule="constant")
    trainer = L.Trainer(
        accelerator="cpu", devices=devices, strategy="ddp",
        max_epochs=1, logger=False, enable_checkpointing=False, enable_progress_bar=False, limit_val_batches=0,
        enable_model_summary=False,
    )
    trainer.fit(module, dm)
    if trainer.global_rank == 0:
        torch.save({k: v.clone() for k, v in module.model.state_dict().items()}, out)
    predictor = L.Trainer(
        accelerator="cpu", devices=devices, strategy="ddp", logger=False, enable_progress_bar=False,
        enable_model_summary=False, callbacks=[PredictionWriter()], default_root_dir=Path(out).with_suffix(""),
    )
    predictor.predict(module, dm, return_predictions=False)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
