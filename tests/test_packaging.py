"""The package layout: kernels/ and datasets/ are reachable only inside ts_continuum."""

from __future__ import annotations

import subprocess
import sys

import ts_continuum


def test_kernels_map_into_the_package_and_not_to_a_top_level_name(tmp_path):
    code = (
        "import importlib.util as u, ts_continuum.kernels as k; "
        "print(u.find_spec('kernels') is None, u.find_spec('datasets') is None or 'site-packages' in str(u.find_spec('datasets').origin))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]


def test_public_names():
    assert callable(ts_continuum.continuous_attention)
    assert callable(ts_continuum.load_dataset)
