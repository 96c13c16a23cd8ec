"""Benchmarks of ts-continuum, by purpose: ``study/`` (the accuracy study: grids, runner, report),
``synthetic/`` (the synthetic control), ``speed/`` (CPU and GPU speed, kernel code). ``grids/``
and ``results/`` hold the study's grids and every recorded result. Run from the repository root;
nothing in the library imports this package."""
