"""Each run writes into its own folder: one holding an earlier run's files is refused before the
trainer touches it, and what a refused run wrote is removed again."""

from __future__ import annotations

from pathlib import Path

from lightning.fabric.utilities.cloud_io import get_filesystem
from lightning.pytorch import Trainer
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger

from . import learning_curve
from .errors import CLIError
from .prediction_writer import PREDICTIONS

# what a run leaves in its folder; CSVLogger deletes an existing metrics.csv as soon as it starts
RUN_FILES = ("config.yaml", "hparams.yaml", "metrics.csv", "checkpoints", learning_curve.CSV, learning_curve.PNG)


def check_run_folder(trainer: Trainer) -> None:
    """Stops before the trainer touches the run folder if an earlier run left its files there."""
    folder = trainer.log_dir
    if folder is None:
        return
    fs = get_filesystem(folder)
    if not fs.isdir(folder):
        return
    names = {Path(str(p)).name for p in fs.ls(folder, detail=False)}
    found = [n for n in RUN_FILES if n in names and not (n == "checkpoints" and not fs.ls(f"{folder}/{n}"))]
    found += sorted(n for n in names if n.startswith(PREDICTIONS) and n.endswith((".csv", ".png")))
    if not found:
        return
    logger = trainer.logger
    if isinstance(logger, (CSVLogger, TensorBoardLogger)):
        how = ("leave --trainer.logger.init_args.version unset, or add --trainer.logger.init_args.version null "
               "where a config file sets it (each run then gets the next free version_<N> folder), or give another "
               "version or --trainer.logger.init_args.name")
    elif logger is None:
        how = ("without a logger the run writes straight into --trainer.default_root_dir: give it a new "
               "folder, or use a logger (the configs' CSVLogger gives each run its own version_<N> folder)")
    else:
        how = "point the logger to another folder"
    raise CLIError(f"{folder} holds an earlier run's files ({', '.join(found)}), which this run would overwrite "
                   f"or delete; nothing was changed. To run, {how}; or delete those files if their results are "
                   "not needed")


def remove_run_files(trainer: Trainer) -> None:
    """Removes what a refused run wrote into its folder, and the folder if that leaves it empty: the
    run never started. ``check_run_folder`` made sure no earlier run's files were there."""
    folder = trainer.log_dir
    if folder is None or not trainer.is_global_zero or not Path(folder).is_dir():
        return  # remote loggers' folders are left as they are
    folder = Path(folder)
    for name in RUN_FILES:
        path = folder / name
        if path.is_file():
            path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()
