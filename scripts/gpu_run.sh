#!/usr/bin/env bash
# Run on a GPU machine, in a checkout that carries .gpubin/ (scripts/gpu_pack.sh): the CUDA tests,
# compute-sanitizer's memcheck and racecheck over them, and/or the benchmarks (which append to
# bench/results/cuda-decode.md). Logs go to $LOG_DIR (default .gpubin/logs).
#
#   scripts/gpu_run.sh [tests|sanitize|bench|all]      (default all)
set -uo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
usage="usage: scripts/gpu_run.sh [tests|sanitize|bench|all]   (default all; logs in \$LOG_DIR, default .gpubin/logs)"
case "$what" in
  tests|sanitize|bench|all) ;;
  -h|--help) echo "$usage"; exit 0 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
[ -x .gpubin/tests/test_cuda_luka_decode ] || { echo "gpu_run: .gpubin is missing (scripts/gpu_pack.sh)" >&2; exit 1; }
py="${PYTHON:-python3}"
have="$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)" || { echo "gpu_run: $py has no torch" >&2; exit 1; }
want="$(cat .gpubin/TORCH_VERSION)"
[ "$have" = "$want" ] || { echo "gpu_run: .gpubin links torch $want, $py has $have; pack again" >&2; exit 1; }
export LD_LIBRARY_PATH="$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUKA_SOURCE_DIR="$PWD"
logs="${LOG_DIR:-.gpubin/logs}"
mkdir -p "$logs"
status=0
binaries=(test_cuda_device test_cuda_decode_attention test_cuda_luka_decode test_cuda_model)

if [ "$what" = tests ] || [ "$what" = all ]; then
  for t in "${binaries[@]}"; do
    .gpubin/tests/$t --gtest_brief=1 > "$logs/$t.log" 2>&1
    rc=$?
    echo "$t: $(grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$logs/$t.log" | tr -s ' \n' ' ')(exit $rc)"
    [ $rc -eq 0 ] || status=1
  done
fi

if [ "$what" = sanitize ] || [ "$what" = all ]; then
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  [ -x "$cs" ] || { echo "gpu_run: compute-sanitizer not found" >&2; exit 1; }
  # memcheck over each binary, racecheck over each test (racecheck is slow: one process per test).
  jobs=()
  for t in test_cuda_decode_attention test_cuda_luka_decode test_cuda_model; do
    "$cs" --tool memcheck --error-exitcode 9 .gpubin/tests/$t --gtest_brief=1 > "$logs/memcheck-$t.log" 2>&1 &
    jobs+=("$!:memcheck $t")
  done
  for t in test_cuda_decode_attention test_cuda_luka_decode; do
    for name in $(.gpubin/tests/$t --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}'); do
      "$cs" --tool racecheck --error-exitcode 9 .gpubin/tests/$t --gtest_filter="$name" > "$logs/racecheck-$name.log" 2>&1 &
      jobs+=("$!:racecheck $name")
    done
  done
  for j in "${jobs[@]}"; do
    wait "${j%%:*}"
    rc=$?
    job="${j#*:}"
    log="$logs/${job%% *}-${job#* }.log"
    # A test that never calls CUDA (argument checks) gives the sanitizer nothing to watch; it
    # exits non-zero for that alone. Such a test passed if gtest says so.
    if [ $rc -ne 0 ] && grep -q 'terminated before first instrumented API call' "$log" && grep -q '^\[  PASSED  \]' "$log"; then
      echo "$job: passed, no CUDA call to check"
      continue
    fi
    echo "$job: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
fi

if [ "$what" = bench ] || [ "$what" = all ]; then
  PYTHON="$py" bench/run_cuda_bench.sh .gpubin || status=1
fi
exit $status
