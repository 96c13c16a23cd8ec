"""Bundled datasets: checksums, parsing, clear failures."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import numpy as np
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


def test_unknown_path_names_the_file_not_its_repr():
    with pytest.raises(FileNotFoundError) as err:
        load_dataset(Path("ETTh3"))
    assert str(err.value) == (
        "'ETTh3' is neither a bundled dataset (ETTh1, ETTh2, ETTm1, ETTm2, weather) nor an existing file"
    )


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


def _frame(n: int = 5) -> pd.DataFrame:
    return pd.DataFrame({"load": np.arange(n, dtype=float), "when": pd.date_range("2020-01-01", periods=n, freq="h"),
                         "temp": np.arange(n, dtype=float) / 2})


@pytest.mark.parametrize("name", ["datetime", "Date Time", "date_time", "DATETIME"])
def test_time_column_is_found_by_name_anywhere(tmp_path, name):
    path = tmp_path / "x.csv"
    _frame().rename(columns={"when": name}).to_csv(path, index=False)
    df = load_dataset(path)
    assert list(df.columns) == ["load", "temp"]
    assert df.index[1] == pd.Timestamp("2020-01-01 01:00")


def test_first_datetime_text_column_is_the_time(tmp_path):
    path = tmp_path / "x.csv"
    _frame().to_csv(path, index=False)  # "when" is not a time-like name, but it holds datetime text
    df = load_dataset(path)
    assert list(df.columns) == ["load", "temp"] and df.index[-1] == pd.Timestamp("2020-01-01 04:00")


def test_csv_without_a_time_column_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    _frame().drop(columns="when").to_csv(path, index=False)  # numbers are never taken as 1970 timestamps
    with pytest.raises(ValueError, match=r"has no time column: .*columns: \['load', 'temp'\]\)\. Add a column"):
        load_dataset(path)


def test_numeric_time_column_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    pd.DataFrame({"time": [0, 1, 2], "a": [1.0, 2.0, 3.0]}).to_csv(path, index=False)
    with pytest.raises(ValueError, match="time column 'time' holds numbers, not datetimes"):
        load_dataset(path)


def test_index_written_by_to_csv_is_refused(tmp_path):
    path = tmp_path / "x.csv"
    _frame().to_csv(path)  # index=True: a header-less first column 0, 1, 2, ...
    with pytest.raises(ValueError, match=r"'Unnamed: 0' has no name in the header.*index=False.*drop the column"):
        load_dataset(path)


def test_two_time_like_columns_are_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("Date,Time,a\n2020-01-01,00:00,1\n2020-01-01,01:00,2\n")
    with pytest.raises(ValueError, match=r"columns \['Date', 'Time'\] all look like time columns"):
        load_dataset(path)


def test_empty_timestamps_are_refused(tmp_path):
    path = tmp_path / "x.csv"
    path.write_text("date,a\n2020-01-01 00:00,1\n2020-01-01 01:00,2\n,3\n")
    with pytest.raises(ValueError, match=r"time column 'date' is empty in 1 rows \(first at row 2"):
        load_dataset(path)


def test_csv_dates_that_read_both_ways_take_the_regular_reading_or_are_refused(tmp_path):
    """pandas reads "05/01/2024 00:00" month-first: hourly day-first dates of early January became
    the first of seven months."""
    hours = pd.date_range("2024-01-01", periods=150, freq="h")
    path = tmp_path / "hourly.csv"
    pd.DataFrame({"date": hours.strftime("%d/%m/%Y %H:%M"), "x": np.arange(150.0)}).to_csv(path, index=False)
    pd.testing.assert_index_equal(load_dataset(path).index, hours.as_unit("us").rename("date"), check_exact=True,
                                  exact=False)
    days = pd.date_range("2024-01-01", periods=10, freq="D")  # daily day-first, or the firsts of 10 months
    path = tmp_path / "daily.csv"
    pd.DataFrame({"date": days.strftime("%d/%m/%Y"), "x": np.arange(10.0)}).to_csv(path, index=False)
    with pytest.raises(ValueError, match=r"daily.csv: time column 'date' holds date strings that read both .*"
                                         r"both readings space the times regularly.*ISO 8601"):
        load_dataset(path)
