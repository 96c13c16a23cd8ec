#!/usr/bin/env bash
# README's first command, before and after in turn (ROUNDS rounds), each under /usr/bin/time -v.
# usage: bash benchmarks/results/2026-12-05-ffn-rows/alternate.sh [BEFORE_DIR] [ROUNDS]
set -u
HERE=$(cd "$(dirname "$0")/../../.." && pwd)
OUT=$HERE/benchmarks/results/2026-12-05-ffn-rows/alternate
BEFORE=${1:-/work/wt/base}; ROUNDS=${2:-2}
mkdir -p $OUT
for r in $(seq $ROUNDS); do
  for side in before after; do
    dir=$BEFORE; [ $side = after ] && dir=$HERE
    cd $dir; rm -rf /tmp/quickstart-timing
    PYTHONPATH=$dir /usr/bin/time -v -o $OUT/$side-$r.time python -c "from ts_continuum.training.cli import main; main()" fit --config configs/quickstart.yaml --trainer.enable_progress_bar false --trainer.logger.init_args.save_dir /tmp/quickstart-timing > $OUT/$side-$r.log 2>&1
    echo "$side round $r ($(git log -1 --format=%h)): $(grep -oE 'test_mse.*' $OUT/$side-$r.log | tr -s ' │' ' ') $(grep -E 'Elapsed' $OUT/$side-$r.time | awk '{print $NF}') wall, $(grep -E 'Maximum resident' $OUT/$side-$r.time | awk '{print $NF}') kB peak, load $(cut -d' ' -f1-3 /proc/loadavg)"
  done
done
