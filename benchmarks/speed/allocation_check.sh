#!/usr/bin/env bash
# Issue 47's before/after: the op (op_cpu_bench), training steps (train_cost: PatchTST ETTh1 and
# Weather) and README's first command (ts-continuum fit --config configs/quickstart.yaml), each
# under /usr/bin/time -v (wall, system time, minor page faults, peak RSS).
#   before: this checkout with the exact path's files and the quickstart config of BASE (default
#           main), and TS_CONTINUUM_ALLOCATOR=0 (malloc left as it is, as before the issue);
#   after:  this checkout as it is.
# Usage: bash benchmarks/speed/allocation_check.sh OUT [BASE]     (about 20 minutes on 2 idle cores)
set -euo pipefail
OUT=$(realpath -m "$1"); BASE=${2:-main}
HERE=$(cd "$(dirname "$0")/../.." && pwd)
BEFORE=$(mktemp -d)/before
git -C "$HERE" worktree add -q --detach "$BEFORE" HEAD
trap 'git -C "$HERE" worktree remove --force "$BEFORE"' EXIT
git -C "$BEFORE" checkout -q "$BASE" -- ts_continuum/attention/reference.py ts_continuum/attention/phi.py configs/quickstart.yaml
mkdir -p "$OUT"
measure() {  # side dir env...
  local side=$1 dir=$2; shift 2
  mkdir -p "$OUT/$side"
  cd "$dir"
  echo "== $side: $(git -C "$dir" log -1 --format=%h) + $(git -C "$dir" status --short | wc -l) changed files; $* ; load $(cut -d' ' -f1-3 /proc/loadavg)"
  env "$@" /usr/bin/time -v -o "$OUT/$side/op_cpu.time" python -m benchmarks.speed.op_cpu_bench --threads 2 --repeats 7 --out "$OUT/$side/op_cpu"
  env "$@" /usr/bin/time -v -o "$OUT/$side/train_cost.time" python -m benchmarks.speed.train_cost --configs patchtst/ETTh1 patchtst/weather --steps 6 --threads 2 --out "$OUT/$side/train_cost"
  rm -rf runs/quickstart
  env "$@" /usr/bin/time -v -o "$OUT/$side/quickstart.time" python -c "from ts_continuum.training.cli import main; main()" fit --config configs/quickstart.yaml --trainer.enable_progress_bar false > "$OUT/$side/quickstart.log" 2>&1
  grep -E "test_mse|test_mae" "$OUT/$side/quickstart.log" | tail -2
  grep -E "Elapsed|System time|User time|Minor|Maximum resident" "$OUT/$side/quickstart.time"
}
measure before "$BEFORE" TS_CONTINUUM_ALLOCATOR=0
measure after "$HERE"
