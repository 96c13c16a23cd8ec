"""``python -m benchmarks.run``: the study runner (``benchmarks/study/runner.py``), under the name the
README and the results' commands use."""

import os

from benchmarks.study.runner import main

if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
