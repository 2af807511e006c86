#!/usr/bin/env bash
# `luka sweep --plan` run for real on a one-node Slurm cluster on this machine: munged, slurmctld
# and slurmd on localhost (Debian's slurm-wlm and munge, installed here when missing; needs root),
# the generated job array submitted with sbatch, `luka sweep --merge` over what its tasks wrote,
# and the merged table compared with the same grid run locally by `luka sweep`. Stops the daemons
# it started. Appends a dated section to bench/results/slurm-sweep.md.
#
#   sudo bench/run_slurm_sweep.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=$build/luka
text=$root/../shared/data/texts/emma.txt
[[ -x $luka ]] || { echo "run_slurm_sweep: no $luka (build first)" >&2; exit 1; }
[[ -f $text ]] || { echo "run_slurm_sweep: no text at $text (../shared/data)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "run_slurm_sweep: starts Slurm's daemons: run it as root" >&2; exit 1; }
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  apt-get update -qq && apt-get install -y -qq --no-install-recommends slurm-wlm munge >/dev/null
fi

work=$root/bench/out/slurm
rm -rf "$work"
mkdir -p "$work/state" "$work/spool" "$work/munge" "$root/bench/results"
node=$(hostname -s)
cpus=$(nproc)
memory=$(awk '/MemTotal/ { print int($2 / 1024 * 0.9) }' /proc/meminfo)
conf=$work/slurm.conf
cat > "$conf" <<EOF
ClusterName=luka-bench
SlurmctldHost=$node(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$work/munge/munge.socket
StateSaveLocation=$work/state
SlurmdSpoolDir=$work/spool
SlurmctldPidFile=$work/slurmctld.pid
SlurmdPidFile=$work/slurmd.pid
SlurmctldLogFile=$work/slurmctld.log
SlurmdLogFile=$work/slurmd.log
SlurmctldPort=16817
SlurmdPort=16818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
ReturnToService=2
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory State=UNKNOWN
PartitionName=bench Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$conf

# munge's key: the package's, or a fresh one in the work folder.
key=/etc/munge/munge.key
if [[ ! -f $key ]]; then
  key=$work/munge/munge.key
  dd if=/dev/urandom of="$key" bs=1 count=1024 status=none
  chmod 400 "$key"
fi
pids=()
cleanup() {
  scancel --quiet --full -u root 2>/dev/null || true
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  [[ -f $work/slurmctld.pid ]] && kill "$(cat "$work/slurmctld.pid")" 2>/dev/null || true
  [[ -f $work/slurmd.pid ]] && kill "$(cat "$work/slurmd.pid")" 2>/dev/null || true
  [[ -f $work/munge/munged.pid ]] && kill "$(cat "$work/munge/munged.pid")" 2>/dev/null || true
}
trap cleanup EXIT
munged --force --key-file="$key" --socket="$work/munge/munge.socket" --pid-file="$work/munge/munged.pid" \
  --log-file="$work/munge/munged.log" --seed-file="$work/munge/munged.seed"
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 60); do
  sinfo -h -o '%T' 2>/dev/null | grep -q idle && break
  sleep 1
done
sinfo -h -o '%T' | grep -q idle || { echo "run_slurm_sweep: the node never came up (see $work/*.log)" >&2; exit 1; }
slurm_version=$(sinfo --version)

grid="preset=clustered;compressor=mean,attention_weighted,random;top_k=1,3"
metric_args=(--text-file "$text" --max-tokens 512 --prompt-tokens 256)
start=$SECONDS
"$luka" sweep --metric perplexity --out "$work/array" --grid "$grid" --baseline preset=dense --plan \
  --slurm-cpus 1 --slurm-time 00:30:00 -- "${metric_args[@]}" > "$work/plan.txt"
job=$(sbatch --parsable "$work/array/sweep.sbatch")
echo "submitted array job $job"
while squeue -h -j "$job" 2>/dev/null | grep -q .; do sleep 2; done
array_seconds=$((SECONDS - start))
states=$(sacct -n -X -j "$job" -o State 2>/dev/null | sort | uniq -c | tr -s ' ' || true)
"$luka" sweep --merge --out "$work/array" > "$work/merge.txt"

start=$SECONDS
"$luka" sweep --metric perplexity --out "$work/local" --grid "$grid" --baseline preset=dense --quiet -- "${metric_args[@]}" > "$work/local.txt"
local_seconds=$((SECONDS - start))
if cmp -s "$work/array/results.csv" "$work/local/results.csv"; then same="identical"; else same="DIFFERENT"; fi

{
  echo
  echo "## $(date -u +%Y-%m-%d) — Slurm job array (commit $(git -C "$root" rev-parse --short HEAD))"
  echo
  echo "Command: \`sudo bench/run_slurm_sweep.sh\`. $slurm_version, one node (this machine, $cpus CPUs),"
  echo "munge; the array from \`luka sweep --plan --slurm-cpus 1\` submitted with \`sbatch\`, then"
  echo "\`luka sweep --merge\`. Grid \`$grid\` plus a dense baseline, perplexity of emma.txt"
  echo "(512 tokens, 256 prefilled)."
  echo
  echo "- $(grep -c . "$work/array/results.csv" | awk '{ print $1 - 1 }') array tasks, $array_seconds s from submission to the last task's end; the same grid run locally by \`luka sweep\`: $local_seconds s."
  echo "- Merged results.csv and the local run's: $same."
  [[ -n $states ]] && echo "- Task states (sacct): $states."
  echo
  echo '```'
  cat "$work/merge.txt"
  echo '```'
} >> "$root/bench/results/slurm-sweep.md"
[[ $same == identical ]] || { echo "run_slurm_sweep: the array's results differ from the local run's" >&2; exit 1; }
echo "appended to bench/results/slurm-sweep.md"
