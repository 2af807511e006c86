#!/usr/bin/env bash
# The test suite as CI runs it (the README's test command), in three stages:
#   1. scripts/setup.sh, then every ctest test in build/ (Release);
#   2. the suite again under AddressSanitizer and UBSan: build-sanitize/ is everything but the
#      CUDA code and the benchmark drivers, built with LUKA_SANITIZE=address,undefined (-O1 -g1);
#      any report fails its test (UBSan stops at the first finding, LeakSanitizer's exit code
#      fails the process). Two walks of the command line are left to stage 1: ExitCodes.* (every
#      option of every command with a bad value) and DocExamples.* (every documented command
#      line parses). Each starts luka some hundreds of times to check exit codes and parsing,
#      not memory (about 7 minutes of the stage's 26); under the sanitizers the parsers are
#      covered by the bad-input battery, the CLI tests and the fuzz targets;
#   3. every libFuzzer target (tests/fuzz, clang) for 30 s over its committed corpus.
# Each stage runs even when an earlier one failed; the exit code is 1 when any failed.
#
#   scripts/test.sh            all three stages
#   scripts/test.sh --quick    stage 1 only
#
# Environment: LUKA_FUZZ_SECONDS (default 30), LUKA_JOBS (build jobs, default all cores).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=0
for arg in "$@"; do
  case $arg in
    --quick) quick=1 ;;
    -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$arg' (see scripts/test.sh --help)" >&2; exit 2 ;;
  esac
done
jobs=${LUKA_JOBS:-$(nproc)}
say() { printf '[test] %s\n' "$*"; }
failed=()
stage() {  # stage NAME COMMAND...: runs it, times it, remembers a failure
  local name=$1 start=$SECONDS
  shift
  say "$name"
  if "$@"; then
    say "$name: passed in $((SECONDS - start)) s"
  else
    say "$name: FAILED after $((SECONDS - start)) s"
    failed+=("$name")
  fi
}

"$root/scripts/setup.sh" || { echo "test.sh: setup failed" >&2; exit 1; }
stage "ctest (build)" ctest --test-dir "$root/build" --output-on-failure -j2

if ((!quick)); then
  sanitize_build() {
    local dir=$root/build-sanitize generator=()
    [[ -f $dir/CMakeCache.txt ]] || generator=(-G Ninja)
    # -O1 -g1: the usual sanitizer build (line tables for the reports' stacks); it compiles in
    # under half the time of RelWithDebInfo's -O2 -g (bench/results/reliability.md).
    # The benchmark drivers are left out: no test runs them.
    cmake -S "$root" -B "$dir" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DLUKA_SANITIZE=address,undefined -DLUKA_CUDA=OFF \
      -DLUKA_BENCH=OFF \
      "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" \
      > "$dir.configure.log" 2>&1 || { cat "$dir.configure.log" >&2; return 1; }
    rm -f "$dir.configure.log"
    cmake --build "$dir" -j "$jobs"
  }
  sanitize_test() {
    ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1 \
    LSAN_OPTIONS=suppressions=$root/tests/sanitizers/lsan.supp:print_suppressions=0 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      ctest --test-dir "$root/build-sanitize" --output-on-failure -j2 -E '^(ExitCodes|DocExamples)\.'
  }
  stage "sanitized build (build-sanitize)" sanitize_build
  stage "ctest under AddressSanitizer and UBSan (build-sanitize)" sanitize_test
  stage "libFuzzer build (build-fuzz)" "$root/scripts/build_fuzz.sh"
  stage "libFuzzer targets, ${LUKA_FUZZ_SECONDS:-30} s each" "$root/scripts/run_fuzz.sh" --seconds "${LUKA_FUZZ_SECONDS:-30}"
fi

if ((${#failed[@]})); then
  say "failed: ${failed[*]}"
  exit 1
fi
say "all stages passed"
