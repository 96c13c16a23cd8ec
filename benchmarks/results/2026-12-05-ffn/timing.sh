#!/usr/bin/env bash
# Quiet-machine timing for the lean FFN (issue 47): train_cost ETTh1 and the quickstart, before (e11f8c4) and after (HEAD).
set -u
OUT=/work/main/benchmarks/results/2026-12-05-ffn
mkdir -p $OUT/before $OUT/after
. /work/main/.venv/bin/activate
for side in before after; do
  dir=/tmp/wt_before; [ $side = after ] && dir=/work/main
  cd $dir
  echo "== $side $(git log -1 --format=%h) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%H:%M:%S)"
  /usr/bin/time -v -o $OUT/$side/train_cost.time python -m benchmarks.speed.train_cost --configs patchtst/ETTh1 --steps 6 --threads 2 --out $OUT/$side/train_cost > $OUT/$side/train_cost.log 2>&1
  tail -5 $OUT/$side/train_cost.log
  rm -rf runs/quickstart-timing
  /usr/bin/time -v -o $OUT/$side/quickstart.time python -c "from ts_continuum.training.cli import main; main()" fit --config configs/quickstart.yaml --trainer.enable_progress_bar false --trainer.logger.init_args.name quickstart-timing > $OUT/$side/quickstart.log 2>&1
  grep -E "test_mse" $OUT/$side/quickstart.log | tail -1
  grep -E "Elapsed|System time|User time|Minor|Maximum resident" $OUT/$side/quickstart.time
done
