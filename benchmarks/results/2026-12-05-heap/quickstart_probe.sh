#!/usr/bin/env bash
# The quickstart under /usr/bin/time -v with the peak-tracing callback; run from the repository root
# in an activated install. usage: bash benchmarks/results/2026-12-05-heap/quickstart_probe.sh NAME [fit options]
here=benchmarks/results/2026-12-05-heap
name=$1; shift
PYTHONPATH=$here:benchmarks/results/2026-12-05-ffn/fresh-install /usr/bin/time -v ts-continuum fit \
  --config configs/quickstart.yaml --trainer.callbacks+=peak_trace.PeakTrace \
  --trainer.logger.init_args.save_dir runs/heap_$name "$@" > runs/heap_$name.log 2>&1
grep -E "Maximum resident|Elapsed|test_mse|Minor" runs/heap_$name.log
