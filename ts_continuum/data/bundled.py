"""The bundled benchmark datasets (ETTh1/2, ETTm1/2, Weather) and plain CSV files as DataFrames."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd

import ts_continuum

BUNDLED = {
    "etth1": "ETTh1.csv.gz",
    "etth2": "ETTh2.csv.gz",
    "ettm1": "ETTm1.csv.gz",
    "ettm2": "ETTm2.csv.gz",
    "weather": "weather.csv.gz",
}
# Nominal sampling step of each bundled file.
FREQUENCIES = {"etth1": "h", "etth2": "h", "ettm1": "15min", "ettm2": "15min", "weather": "10min"}


def data_dir() -> Path:
    """Where the bundled files live: inside the installed package (wheel) or the source checkout."""
    here = Path(ts_continuum.__file__).resolve().parent
    for candidate in (here / "datasets", here.parent / "datasets"):
        if (candidate / "SHA256SUMS").is_file():
            return candidate
    raise FileNotFoundError(
        f"the bundled datasets are missing (looked in {here / 'datasets'} and {here.parent / 'datasets'}); "
        "reinstall ts-continuum or pass a CSV path instead of a dataset name"
    )


def bundled_name(name: str) -> str | None:
    """The canonical key of a bundled dataset ('etth1', ...) or None if ``name`` is not one."""
    key = str(name).lower()
    return key if key in BUNDLED else None


def _expected_checksums(folder: Path) -> dict[str, str]:
    sums = {}
    for line in (folder / "SHA256SUMS").read_text().splitlines():
        if line.strip():
            digest, filename = line.split()
            sums[filename.lstrip("*")] = digest
    return sums


def _verify(path: Path, expected: str) -> None:
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise ValueError(
            f"checksum mismatch for {path}: expected sha256 {expected}, got {digest}. The file is corrupt "
            "or was modified; restore it from the repository (git checkout -- datasets/) or reinstall"
        )


def load_dataset(name: str | Path, verify: bool = True) -> pd.DataFrame:
    """A benchmark dataset as a DataFrame with a DatetimeIndex and one numeric column per variable.

    ``name``: "ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather" (case-insensitive), or the path of a
    CSV file whose first datetime-like column (or a column named ``date``/``ds``) is the time.
    Bundled files are checked against ``datasets/SHA256SUMS`` unless ``verify=False``.
    """
    key = bundled_name(name) if not isinstance(name, Path) else None
    if key is not None:
        folder = data_dir()
        path = folder / BUNDLED[key]
        if not path.is_file():
            raise FileNotFoundError(f"bundled dataset file {path} is missing; restore it (git checkout -- datasets/)")
        if verify:
            _verify(path, _expected_checksums(folder)[BUNDLED[key]])
    else:
        path = Path(name)
        if not path.is_file():
            known = ", ".join(["ETTh1", "ETTh2", "ETTm1", "ETTm2", "weather"])
            raise FileNotFoundError(f"{name!r} is neither a bundled dataset ({known}) nor an existing CSV file")
    return _read_csv(path)


def _read_csv(path: Path) -> pd.DataFrame:
    try:
        try:
            df = pd.read_csv(path)
        except UnicodeDecodeError:  # headers written in Latin-1 by some exporters
            df = pd.read_csv(path, encoding="latin-1")
    except Exception as exc:  # gzip or parser failure: say which file
        raise ValueError(f"could not read {path} as CSV: {exc}") from exc
    time_col = next((c for c in df.columns if str(c).lower() in ("date", "ds", "time", "timestamp")), df.columns[0])
    try:
        index = pd.DatetimeIndex(pd.to_datetime(df[time_col]), name="date")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{path}: could not parse column {time_col!r} as timestamps ({exc})") from exc
    values = df.drop(columns=[time_col])
    non_numeric = [c for c in values.columns if not pd.api.types.is_numeric_dtype(values[c])]
    if non_numeric:
        raise ValueError(f"{path}: columns {non_numeric} are not numeric; every column but the time must be")
    values.index = index
    return values.astype("float64")
