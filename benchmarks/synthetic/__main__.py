"""``python -m benchmarks.synthetic``: the synthetic control (``cli.py``)."""

import sys

from benchmarks.synthetic.cli import main

sys.exit(main())
