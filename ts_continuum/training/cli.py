"""The ``ts-continuum`` command: Lightning's CLI (fit / validate / test / predict) over YAML configs.

    ts-continuum fit --config configs/quickstart.yaml
    ts-continuum test --config configs/patchtst/ETTh1.yaml --ckpt_path path/to/best.ckpt

The data module's lookback, horizon and channel count are linked into the model, so a config
names them once.
"""

from __future__ import annotations

from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.cli import LightningCLI

from ..data import ForecastDataModule
from .module import ForecastingModule


class ForecastCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        parser.link_arguments("data.lookback", "model.model.init_args.lookback")
        parser.link_arguments("data.horizon", "model.model.init_args.horizon")
        parser.link_arguments("data.n_channels", "model.model.init_args.n_channels", apply_on="instantiate")
        parser.add_argument("--test_after_fit", type=bool, default=False,
                            help="after fit, test the best checkpoint and print test MSE/MAE")

    def after_fit(self) -> None:
        if not self.config[self.subcommand].get("test_after_fit"):
            return
        ckpt = self.trainer.checkpoint_callback
        best = ckpt.best_model_path if isinstance(ckpt, ModelCheckpoint) and ckpt.best_model_path else None
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best)


def main(args=None) -> None:
    ForecastCLI(ForecastingModule, ForecastDataModule, args=args, save_config_kwargs={"overwrite": False})


if __name__ == "__main__":
    main()
