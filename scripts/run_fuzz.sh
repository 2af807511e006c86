#!/usr/bin/env bash
# Runs the libFuzzer targets built by scripts/build_fuzz.sh, each over a scratch copy of its
# committed corpus (tests/fuzz/corpus/<target>; the committed corpus never grows by itself) with
# its dictionary, a per-input time limit and a memory limit, as many at once as there are cores.
# Prints per target the executions, exec/s, coverage (libFuzzer's final cov: and ft:), the corpus
# it ended with and its seconds; exits 1 on any crash, timeout, leak or out-of-memory. A failing
# input is kept as build-fuzz/artifacts/<target>/crash-* (or timeout-*, oom-*, leak-*), its log
# as build-fuzz/logs/<target>.log.
#
#   scripts/run_fuzz.sh [--seconds N] [--runs N] [--jobs N] [target...]
#     --seconds N   fuzz each target N seconds (default 30 when --runs is not given)
#     --runs N      stop a target after N executions (with --seconds too: whichever comes first)
#     --jobs N      targets at once (default: the number of cores)
#     target        e.g. tokenizer capture_reader (default: every tests/fuzz/corpus/<target>)
set -euo pipefail
root=${LUKA_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}  # LUKA_ROOT: when run from a copy (bench/run_fuzz.sh)
build=${FUZZ_BUILD:-$root/build-fuzz}
limit=()
jobs=$(nproc)
targets=()
while (($#)); do
  case $1 in
    --seconds) limit+=(-max_total_time="$2"); shift 2 ;;
    --runs) limit+=(-runs="$2"); shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "run_fuzz: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("${1#fuzz_}"); shift ;;
  esac
done
((${#limit[@]})) || limit=(-max_total_time=30)
if ((${#targets[@]} == 0)); then
  for dir in "$root"/tests/fuzz/corpus/*/; do targets+=("$(basename "$dir")"); done
fi
for t in "${targets[@]}"; do
  if [[ ! -x $build/fuzz_$t ]]; then
    echo "run_fuzz: $build/fuzz_$t is missing (run scripts/build_fuzz.sh)" >&2
    exit 2
  fi
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/luka-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# One target: fuzz a copy of its corpus. In $scratch: <target>.log, and <target>.status holding
# the exit status and the seconds it took.
fuzz_one() {
  local t=$1 corpus=$scratch/$1/corpus artifacts=$build/artifacts/$1 start=$SECONDS
  mkdir -p "$corpus" "$artifacts"
  cp -r "$root/tests/fuzz/corpus/$t/." "$corpus/"
  local dict=()
  [[ -f $root/tests/fuzz/dict/$t.dict ]] && dict=(-dict="$root/tests/fuzz/dict/$t.dict")
  # HDF5 leaks what it loaded of a damaged file's metadata (tests/fuzz/lsan.supp); telling its
  # leaks from the reader's needs full stack unwinding, which only this target can afford.
  local sanitizer=(LSAN_OPTIONS=suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0)
  [[ $t == capture_reader ]] && sanitizer+=(ASAN_OPTIONS=fast_unwind_on_malloc=0)
  local status=0
  # TMPDIR: the targets that need files (shard_index, capture_reader) make them in the scratch.
  env "${sanitizer[@]}" TMPDIR="$scratch/$t" "$build/fuzz_$t" "${limit[@]}" "${dict[@]}" -timeout=20 -rss_limit_mb=2560 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" >"$scratch/$t.log" 2>&1 || status=$?
  echo "$status $((SECONDS - start))" >"$scratch/$t.status"
}

start=$SECONDS
running=0
for t in "${targets[@]}"; do
  if ((running >= jobs)); then
    wait -n
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

failed=0
printf '%-17s %11s %8s %7s %7s %13s %8s  %s\n' target executions exec/s cov ft corpus seconds result
for t in "${targets[@]}"; do
  read -r status seconds <"$scratch/$t.status"
  log=$scratch/$t.log
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  final=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$final")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$final")
  corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$final")
  result=ok
  if ((status != 0)); then
    result="FAILED (exit $status): $(grep -m1 -E 'ERROR: |SUMMARY: |deadly signal' "$log" || echo "see the log")"
    failed=1
    mkdir -p "$build/logs"
    cp "$log" "$build/logs/$t.log"
  fi
  printf '%-17s %11s %8s %7s %7s %13s %8s  %s\n' "$t" "${runs:--}" "${rate:--}" "${cov:--}" "${ft:--}" "${corp:--}" "$seconds" "$result"
  if ((status != 0)); then
    echo "  log: $build/logs/$t.log; input: $(ls -t "$build/artifacts/$t" | head -1)"
  fi
done
echo "total: $((SECONDS - start)) s"
exit $failed
