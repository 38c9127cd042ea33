#!/usr/bin/env bash
# A short scripted check of minitx on a CUDA GPU: the speed, decode, time-to-accuracy and
# whole-process benchmarks with --device cuda, the app training headless on CUDA, and the
# bf16-autocast and torch.compile variants. Every step is timed out on its own, so one that
# hangs does not take the rest with it; the output goes to the screen and to a log file.
#
#   benchmarks/gpu_check.sh [--list] [--cpu] [LOG]     (LOG: default gpu_check.log)
#
# Without a usable CUDA GPU it says so and runs each step's --smoke version on the CPU instead
# (about a minute), which checks the script and the benchmarks, not the GPU figures.
# --cpu asks for that fallback even on a GPU machine; --list prints the steps and runs nothing.
# PYTHON picks the interpreter (default .venv/bin/python), STEP_TIMEOUT each step's limit in
# seconds (default 300).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
STEP_TIMEOUT=${STEP_TIMEOUT:-300}
LIST=0 FORCE_CPU=0 LOG=gpu_check.log
for arg in "$@"; do
  case "$arg" in
    --list) LIST=1 ;;
    --cpu) FORCE_CPU=1 ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "gpu_check.sh: unknown option $arg (try --help)" >&2; exit 2 ;;
    *) LOG=$arg ;;
  esac
done

if [ "$FORCE_CPU" = 0 ] && "$PY" -c "import sys, torch; sys.exit(not torch.cuda.is_available())" 2>/dev/null; then
  DEVICE=cuda SMOKE=""
else
  DEVICE=cpu SMOKE="--smoke"
fi

# One step per line: the benchmark script and its arguments (SMOKE is empty on a GPU).
steps() {
  cat <<EOF
train_speed.py --device $DEVICE $SMOKE
decode_speed.py --device $DEVICE $SMOKE
time_to_accuracy.py --device $DEVICE --seeds 0 $SMOKE
process_time_to_accuracy.py --device $DEVICE --seeds 0 $SMOKE
scaling.py --device $DEVICE --models reference big --repeats 3 $SMOKE
tui_big_model.py --device $DEVICE --seconds 10 --keys 10 $SMOKE
precision_compile.py --device $DEVICE $([ "$DEVICE" = cuda ] && echo --compile) $SMOKE
EOF
}

if [ "$LIST" = 1 ]; then
  steps | sed "s|^|$PY benchmarks/|"
  exit 0
fi

{
  echo "minitx GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), device $DEVICE"
  if [ "$DEVICE" = cpu ]; then
    echo "no usable CUDA GPU (or --cpu): running the CPU smoke versions; no GPU figures here"
  else
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || true
  fi
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
} | tee "$LOG"

failed=0
while read -r script args; do
  echo "== $PY benchmarks/$script $args" | tee -a "$LOG"
  start=$(date +%s)
  # shellcheck disable=SC2086  # args is a list of words
  timeout "$STEP_TIMEOUT" "$PY" "benchmarks/$script" $args </dev/null 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  echo "-- exit $rc after $(( $(date +%s) - start )) s" | tee -a "$LOG"
  [ "$rc" = 0 ] || failed=$((failed + 1))
done < <(steps)

echo "gpu_check: $failed step(s) failed; log in $LOG" | tee -a "$LOG"
[ "$failed" = 0 ]
