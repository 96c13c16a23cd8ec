"""``python -m benchmarks.report``: a study folder's summary (``benchmarks/study/report.py``), under
the name the README and the results' commands use."""

import sys

from benchmarks.study.report import main

if __name__ == "__main__":
    main(sys.argv[1:])
