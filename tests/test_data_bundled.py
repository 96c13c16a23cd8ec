"""Bundled datasets: checksums, parsing, clear failures."""

from __future__ import annotations

import gzip
import shutil

import pandas as pd
import pytest

from ts_continuum.data import bundled, load_dataset


@pytest.mark.parametrize(
    "name,rows,cols,step",
    [("ETTh1", 17420, 7, "1h"), ("etth2", 17420, 7, "1h"), ("ETTm1", 69680, 7, "15min"), ("ETTm2", 69680, 7, "15min"),
     ("weather", 52696, 21, "10min")],
)
def test_bundled_datasets_load_with_datetime_index(name, rows, cols, step):
    df = load_dataset(name)
    assert df.shape == (rows, cols)
    assert isinstance(df.index, pd.DatetimeIndex) and df.index.is_monotonic_increasing
    assert (df.dtypes == "float64").all()
    assert pd.Timedelta(step) == pd.Series(df.index).diff().median()
    assert "OT" in df.columns


@pytest.fixture
def fake_bundle(tmp_path, monkeypatch):
    folder = tmp_path / "datasets"
    shutil.copytree(bundled.data_dir(), folder)
    monkeypatch.setattr(bundled, "data_dir", lambda: folder)
    return folder


def test_corrupt_bundled_file_is_refused(fake_bundle):
    path = fake_bundle / "ETTh1.csv.gz"
    path.chmod(0o644)
    with gzip.open(path, "at") as f:
        f.write("2099-01-01 00:00:00,1,2,3,4,5,6,7\n")
    with pytest.raises(ValueError, match="checksum mismatch"):
        load_dataset("ETTh1")


def test_missing_bundled_file_is_a_clear_error(fake_bundle):
    (fake_bundle / "ETTm2.csv.gz").unlink()
    with pytest.raises(FileNotFoundError, match="ETTm2.csv.gz is missing"):
        load_dataset("ETTm2")


def test_unknown_name_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="neither a bundled dataset"):
        load_dataset("ETTh3")


def test_csv_path(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("ds,a,b\n2020-01-01,1,2\n2020-01-02,3,4\n")
    df = load_dataset(path)
    assert list(df.columns) == ["a", "b"] and len(df) == 2


def test_csv_with_text_column_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("date,a,b\n2020-01-01,1,x\n2020-01-02,3,y\n")
    with pytest.raises(ValueError, match="not numeric"):
        load_dataset(path)
