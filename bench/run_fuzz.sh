#!/usr/bin/env bash
# Long fuzzing run of every libFuzzer target (tests/fuzz/README.md): 10,000,000 executions each,
# two targets at a time, a target stopped after LUKA_FUZZ_MAX_SECONDS (default 2,400 s) when its
# rate cannot reach them in that time (the table says so). Builds build-fuzz/ first. Appends a
# dated section to bench/results/fuzz.md: per target the executions, exec/s, coverage (cov, ft),
# final corpus, seconds and crashes (any crash fails the script, as scripts/run_fuzz.sh does).
#
#   bench/run_fuzz.sh [target...]      (LUKA_FUZZ_RUNS, LUKA_FUZZ_MAX_SECONDS, LUKA_FUZZ_JOBS)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
runs=${LUKA_FUZZ_RUNS:-10000000}
max_seconds=${LUKA_FUZZ_MAX_SECONDS:-2400}
jobs=${LUKA_FUZZ_JOBS:-2}
out=$root/bench/results/fuzz.md
mkdir -p "$root/bench/results" "$root/bench/out"

"$root/scripts/build_fuzz.sh" >/dev/null
compiler=$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "$root/build-fuzz/CMakeCache.txt")
started=$(date -u '+%Y-%m-%d %H:%M UTC')
# The commit the targets were built from, taken now: commits made during a long run change nothing
# it runs, and the section written at the end must not see itself as a local change.
commit="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- . 2>/dev/null || echo ' with local changes')"
start=$SECONDS
status=0
# run_fuzz.sh is copied: the script may be edited while a long run reads it.
cp "$root/scripts/run_fuzz.sh" "$root/bench/out/run_fuzz.sh"
LUKA_ROOT=$root "$root/bench/out/run_fuzz.sh" --runs "$runs" --seconds "$max_seconds" --jobs "$jobs" "$@" | tee "$root/bench/out/fuzz.txt" || status=$?
total=$((SECONDS - start))
if ! awk 'NR > 1 && NF >= 8 && $1 != "total:" { found = 1 } END { exit !found }' "$root/bench/out/fuzz.txt"; then
  echo "bench/run_fuzz.sh: no target ran (exit $status); nothing appended to $out" >&2
  exit $((status ? status : 1))
fi

{
  echo
  echo "## $started — $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo
  echo "Command: \`bench/run_fuzz.sh${*:+ $*}\` ($runs executions per target, at most $max_seconds s each, $jobs targets at a"
  echo "time). Commit $commit;"
  echo "$("$compiler" --version | head -1), libFuzzer with AddressSanitizer and UBSan, -O1. Each target"
  echo "starts from a scratch copy of its committed corpus with its dictionary; \"corpus\" is what it ended with"
  echo "(inputs/bytes); cov and ft are libFuzzer's final coverage counters (edges, features)."
  echo
  echo "| target | executions | exec/s | cov | ft | corpus | seconds | crashes |"
  echo "|---|---:|---:|---:|---:|---:|---:|---:|"
  # run_fuzz.sh's table: target executions exec/s cov ft corpus seconds result...
  awk 'NR > 1 && NF >= 8 && $1 != "total:" { printf "| %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, ($8 == "ok" ? 0 : 1) }' \
    "$root/bench/out/fuzz.txt"
  echo
  awk -v runs="$runs" -v max="$max_seconds" 'NR > 1 && NF >= 8 && $1 != "total:" && $2 < runs && $3 > 0 {
      printf "- %s stopped at the %d s limit: at %d exec/s, %d executions take %.1f hours.\n", $1, max, $3, runs, runs / $3 / 3600
    }' "$root/bench/out/fuzz.txt"
  echo "- Total: $total s."
} >>"$out"
echo "appended to $out"
exit $status
