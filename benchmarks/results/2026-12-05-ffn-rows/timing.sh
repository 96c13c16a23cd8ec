#!/usr/bin/env bash
# Quiet-machine timing for the feed-forward row blocks (issue 47): train_cost ETTh1 and README's first
# command under /usr/bin/time -v, before (a worktree of BEFORE, default 73d6c2a) and after (this checkout).
# usage: bash benchmarks/results/2026-12-05-ffn-rows/timing.sh [BEFORE_DIR]
set -u
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=$HERE/benchmarks/results/2026-12-05-ffn-rows
BEFORE=${1:-/work/wt/base}
for side in before after; do
  dir=$BEFORE; [ $side = after ] && dir=$HERE
  mkdir -p $OUT/$side
  cd $dir
  echo "== $side $(git log -1 --format=%h) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
  PYTHONPATH=$dir /usr/bin/time -v -o $OUT/$side/train_cost.time python -m benchmarks.speed.train_cost --configs patchtst/ETTh1 --steps 6 --threads 2 --out $OUT/$side/train_cost > $OUT/$side/train_cost.log 2>&1
  tail -4 $OUT/$side/train_cost.log
  rm -rf /tmp/quickstart-timing
  PYTHONPATH=$dir /usr/bin/time -v -o $OUT/$side/quickstart.time python -c "from ts_continuum.training.cli import main; main()" fit --config configs/quickstart.yaml --trainer.enable_progress_bar false --trainer.logger.init_args.save_dir /tmp/quickstart-timing > $OUT/$side/quickstart.log 2>&1
  grep -E "test_mse" $OUT/$side/quickstart.log | tail -1
  grep -E "Elapsed|System time|User time|Minor|Maximum resident" $OUT/$side/quickstart.time
done
