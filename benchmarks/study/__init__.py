"""The accuracy study: a YAML grid of cells (``grid.py``), each one training run (``cell.py``), run
one after another or as Ray tasks (``execute.py``, ``ray_executor.py``) and recorded by
``runner.py`` (``python -m benchmarks.run``), summarised by ``report.py`` (``python -m benchmarks.report``)."""
