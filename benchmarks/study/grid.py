"""A study grid: its YAML checked key by key, expanded into cells, and a cell's deciding settings.

A grid crosses model × attention × pos_encoding × dataset × horizon × regime × seed per block, with
the published settings (``configs/<model>/<dataset>.yaml``) overridden by ``defaults`` and a block's
``overrides``. Anything the cell would not read is refused here, before anything runs.
"""

from __future__ import annotations

import difflib
import itertools
import json
from pathlib import Path

import yaml

from benchmarks.study.cell import OPTIONAL, PCT_START, REGIMES, REQUIRED, cell_id
from ts_continuum.models import MODELS
from ts_continuum.models.layers import ATTENTIONS, POS_ENCODINGS

# The values an axis takes (datasets: the bundled ones in their published spelling, or a CSV path).
AXIS_VALUES = {"model": tuple(MODELS), "attention": ATTENTIONS, "pos_encoding": POS_ENCODINGS,
               "regime": tuple(REGIMES)}
DATASETS = ("ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather")

ROOT = Path(__file__).resolve().parents[2]
GRIDS = ROOT / "benchmarks" / "grids"
# Grids that another study's runner reads, by name or name prefix ("physionet2012-budget"): their
# keys are not this runner's.
OTHER_RUNNERS = {"physionet2012": "python -m benchmarks.physionet.run"}
# the order cells run in: both attentions of one setting side by side, horizons outermost
LOOP_ORDER = ("horizon", "dataset", "seed", "regime", "pos_encoding", "model", "attention")
# What a grid may hold: a block names itself, gives the axes and may override settings; defaults
# and overrides hold only the settings run_cell reads.
GRID_KEYS = ("name", "out", "defaults", "blocks")
BLOCK_KEYS = ("name", *LOOP_ORDER, "overrides")
SETTINGS = (*REQUIRED, *OPTIONAL)


def other_runner(name: object) -> str | None:
    """The command that runs grid ``name`` if another study's runner reads it, else None."""
    for study, command in OTHER_RUNNERS.items():
        if isinstance(name, str) and (name == study or name.startswith(study + "-")):
            return command
    return None


def study_grids() -> list[Path]:
    """The grids in GRIDS that this runner reads (its ``--profile`` choices)."""
    return sorted(p for p in GRIDS.glob("*.yaml") if other_runner(p.stem) is None)


def published_settings(model: str, dataset: str) -> dict:
    """Model arguments and training settings from ``configs/<model>/<dataset>.yaml`` (empty for a
    dataset without a config: the grid must then give them)."""
    path = ROOT / "configs" / model / f"{dataset}.yaml"
    if not path.exists():
        return {}
    cfg = yaml.safe_load(path.read_text())
    init = dict(cfg["model"]["model"]["init_args"])
    for key in ("attention", "pos_encoding"):
        init.pop(key, None)
    return {
        "model_args": init,
        "lr": cfg["model"]["lr"],
        "lr_schedule": cfg["model"]["lr_schedule"],
        "pct_start": cfg["model"].get("pct_start", PCT_START),
        "lookback": cfg["data"]["lookback"],
        "batch_size": cfg["data"]["batch_size"],
        "eval_batch_size": cfg["data"].get("eval_batch_size", OPTIONAL["eval_batch_size"]),
        "max_epochs": cfg["trainer"]["max_epochs"],
        "patience": next(c["init_args"]["patience"] for c in cfg["trainer"]["callbacks"]
                         if "EarlyStopping" in c["class_path"]),
    }


def unknown_key(key, allowed: tuple, where: str, misplaced: dict[tuple, str]) -> str:
    """Why ``key`` has no place here: where it belongs instead, or the nearest allowed key."""
    for keys, advice in misplaced.items():
        if key in keys:
            return f"{where}: {key!r} {advice}"
    close = difflib.get_close_matches(str(key), allowed, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"allowed here: {', '.join(allowed)}"
    return f"{where}: unknown key {key!r}, which the runner would ignore; {hint}"


def bad_value(where: str, axis_name: str, value) -> str:
    """Why ``value`` is refused on an axis: a near spelling would fail later, or (names read in any
    case) run as a setting of its own that pairs with nothing and misses the published row."""
    allowed = AXIS_VALUES[axis_name]
    same = [a for a in allowed if str(a).lower() == str(value).lower()]
    close = same or difflib.get_close_matches(str(value), [str(a) for a in allowed], n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"allowed: {', '.join(map(str, allowed))}"
    return f"{where}: {axis_name} {value!r} is not one the runner knows; {hint}"


def check_keys(grid: dict) -> None:
    """Refuse any key the runner would not use: run_cell reads only its settings, so a typo such as
    ``limit_train_batch`` (or an unsupported ``weight_decay``) would silently run something else."""
    if not isinstance(grid, dict) or not isinstance(grid.get("blocks"), list):
        raise ValueError("a grid is a mapping with a list of 'blocks'")
    if other_runner(grid.get("name")):
        raise ValueError(f"grid {grid['name']!r} belongs to another study: run it with {other_runner(grid['name'])}")
    axis = {LOOP_ORDER: "is an axis: give it as a key of each block"}
    setting = {SETTINGS: "is a setting: put it under 'defaults' or a block's 'overrides'"}
    errors = [unknown_key(k, GRID_KEYS, "grid", setting) for k in grid if k not in GRID_KEYS]
    errors += [unknown_key(k, SETTINGS, "defaults", axis) for k in grid.get("defaults") or {} if k not in SETTINGS]
    for i, block in enumerate(grid["blocks"]):
        if not isinstance(block, dict):
            errors.append(f"block {i + 1}: not a mapping of keys {BLOCK_KEYS}")
            continue
        name = f"block {block.get('name', i + 1)!r}"
        errors += [unknown_key(k, BLOCK_KEYS, name, {SETTINGS: "is a setting: put it under the block's 'overrides'"})
                   for k in block if k not in BLOCK_KEYS]
        errors += [unknown_key(k, SETTINGS, f"{name} overrides", axis)
                   for k in block.get("overrides") or {} if k not in SETTINGS]
        missing = [k for k in BLOCK_KEYS[:-1] if k not in block]
        if missing:
            errors.append(f"{name} lacks {missing}: every block has a name and gives each axis {LOOP_ORDER}")
        errors += [bad_value(name, axis_name, value) for axis_name in AXIS_VALUES if axis_name in block
                   for value in (block[axis_name] if isinstance(block[axis_name], list) else [block[axis_name]])
                   if value not in AXIS_VALUES[axis_name]]
        datasets = block.get("dataset", [])
        errors += [f"{name}: dataset {d!r} is spelled {canonical!r} in the study (its configs, published rows "
                   "and pairs use that name)" for d in (datasets if isinstance(datasets, list) else [datasets])
                   for canonical in DATASETS if str(d).lower() == canonical.lower() and d != canonical]
    if errors:
        raise ValueError("\n".join(errors))


def expand(grid: dict) -> list[dict]:
    """All cells of a grid, in run order: published settings, then grid defaults, then block overrides."""
    check_keys(grid)
    cells, seen = [], {}
    for block in grid["blocks"]:
        axes = {k: block[k] if isinstance(block[k], list) else [block[k]] for k in LOOP_ORDER}
        for values in itertools.product(*(axes[k] for k in LOOP_ORDER)):
            key = dict(zip(LOOP_ORDER, values))
            cell = {**published_settings(key["model"], key["dataset"]), **(grid.get("defaults") or {}),
                    **(block.get("overrides") or {}), **key, "block": block["name"]}
            missing = [k for k in REQUIRED if k not in cell]
            if missing:
                raise ValueError(f"block {block['name']!r}: cell {key} lacks {missing}; "
                                 "give them in defaults or overrides")
            cid = cell_id(cell)
            first = seen.get(cid)
            if first is None:
                seen[cid] = cell
                cells.append(cell)
                continue
            was, now = experiment(first), experiment(cell)  # an optional setting left out is its default
            differ = sorted(k for k in SETTINGS if was[k] != now[k])
            if differ:  # it would be dropped, and its partner paired with a run of other settings
                detail = ", ".join(f"{k} {now[k]} (block {first['block']!r}: {was[k]})" for k in differ)
                raise ValueError(f"block {block['name']!r} repeats cell {cid} of block {first['block']!r} with other "
                                 f"settings: {detail}. A cell runs once per results folder; run other settings "
                                 "of the same cells into another --out")
    return cells


def warmup_warnings(cells: list[dict]) -> list[str]:
    """Cells whose early stopping can end training during OneCycle's warm-up. OneCycle's length
    follows max_epochs, and validation MSE may rise while the learning rate climbs, so a patience
    shorter than the warm-up can stop a run before the peak (the budget probe's first design:
    patience 2 against a 3.2-epoch warm-up stopped it at epoch 3, keeping epoch 1). One line per
    block and setting; a warning, since the published ETTm recipe (patience 20, warm-up 40) does it."""
    found: dict[tuple, float] = {}
    for c in cells:
        if c.get("lr_schedule") == "onecycle":
            warmup = c.get("pct_start", PCT_START) * c["max_epochs"]
            if c["patience"] < warmup:
                found[(c["block"], c["dataset"], c["patience"], c["max_epochs"])] = warmup
    return [f"warning: block {block!r}, {dataset}: early-stopping patience {patience} is shorter than OneCycle's "
            f"{warmup:g}-epoch warm-up (of {epochs} epochs); a run can stop before the learning rate peaks. "
            f"Give patience >= {warmup:g} to run the schedule through."
            for (block, dataset, patience, epochs), warmup in found.items()]


def experiment(cell: dict) -> dict[str, str]:
    """The settings that decide a cell's result, as JSON: those run_cell reads, a missing optional
    one at run_cell's default (so a config recorded before a default was written out still
    matches). JSON keeps 1 and 1.0 apart: Lightning reads them as one batch and all batches. The
    block's name is left out: renaming a block changes no result."""
    full = {**OPTIONAL, **cell}
    return {k: json.dumps(full[k], sort_keys=True) if k in full else "not recorded" for k in SETTINGS}


