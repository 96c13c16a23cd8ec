"""The data module's lookback, horizon and channel count are passed to the model, so a config names
them once; a different value given for the model is refused, not overwritten."""

from __future__ import annotations

from lightning.pytorch.cli import LightningArgumentParser

from .errors import CLIError

LINKED = ("lookback", "horizon", "n_channels")  # data module attribute -> model argument


def link_data_to_model(parser: LightningArgumentParser) -> None:
    """The channel count is linked on instantiation: it is known once the data module has read its columns."""
    parser.link_arguments("data.lookback", "model.model.init_args.lookback")
    parser.link_arguments("data.horizon", "model.model.init_args.horizon")
    parser.link_arguments("data.n_channels", "model.model.init_args.n_channels", apply_on="instantiate")


def check_linked(name: str, value: int | None, data_value: int) -> None:
    """Refuses a model ``name`` the user gave (``value``; None if not given) that the link would overwrite."""
    if value is None or value == data_value:
        return
    if name == "n_channels":
        how = "the channel count is that of the data's columns (choose them with --data.columns)"
    else:
        how = f"set it under data instead (--data.{name} {value}, or data: {name}: in the YAML)"
    raise CLIError(f"the model's {name} ({value}) differs from the data's ({data_value}): the data module's "
                   f"{name} is passed to the model, so remove model.model.init_args.{name}; {how}")
