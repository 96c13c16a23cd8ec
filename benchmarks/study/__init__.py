"""The accuracy study: a YAML grid of cells (``grid.py``), each one training run (``cell.py``), run
and recorded by ``runner.py`` (``python -m benchmarks.run``) and summarised by ``report.py``
(``python -m benchmarks.report``)."""
