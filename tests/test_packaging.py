"""The package layout: kernels/ and datasets/ are reachable only inside ts_continuum."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import ts_continuum

ROOT = Path(__file__).resolve().parents[1]


def test_kernels_map_into_the_package_and_not_to_a_top_level_name(tmp_path):
    code = (
        "import importlib.util as u, ts_continuum.kernels as k; "
        "print(u.find_spec('kernels') is None, "
        "u.find_spec('datasets') is None or 'site-packages' in str(u.find_spec('datasets').origin))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_public_names():
    assert callable(ts_continuum.continuous_attention)
    assert callable(ts_continuum.load_dataset)


@pytest.mark.slow
def test_the_wheel_holds_the_kernels_and_data_inside_the_package(tmp_path):
    """What users install is the wheel, not the editable checkout: the package-dir mapping must put
    kernels/ and datasets/ inside ts_continuum there too, with nothing at the top level. Built from a
    copy, so a stale build/ folder in the checkout cannot leak old files into it."""
    src = tmp_path / "src"
    for name in ("pyproject.toml", "README.md"):
        src.mkdir(exist_ok=True)
        shutil.copy(ROOT / name, src / name)
    for name in ("ts_continuum", "kernels", "datasets"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"),
                            str(src)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "dist").glob("ts_continuum-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"ts_continuum", wheel.name.split("-py")[0] + ".dist-info"}
    expected = {f"ts_continuum/kernels/{p.name}" for p in (ROOT / "kernels").glob("*.py")}
    sums = (ROOT / "datasets" / "SHA256SUMS").read_text().split()[1::2]
    expected |= {f"ts_continuum/datasets/{n.lstrip('*')}" for n in sums}
    assert expected <= set(names), sorted(expected - set(names))
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "ts-continuum = ts_continuum.training.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()

    target = tmp_path / "installed"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    code = ("import importlib.util as u, ts_continuum, ts_continuum.kernels; "
            "from ts_continuum.data.bundled import load_dataset; "
            "print(ts_continuum.__file__); print(u.find_spec('kernels') is None); print(len(load_dataset('ETTh1')))")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(target)})
    assert out.returncode == 0, out.stderr[-3000:]
    file, no_top_level, rows = out.stdout.split()
    assert file.startswith(str(target)) and no_top_level == "True" and int(rows) > 17000
