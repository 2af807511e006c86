#!/usr/bin/env bash
# Every GPU check and benchmark of the open GPU issues, on a GPU machine, from what
# scripts/gpu_pack.sh packed on the development machine: .gpubin (`luka` with its CUDA plugin, the
# CUDA tests and benchmarks, the shared libraries they need, the Qwen3 tokenizer and a text),
# carried compressed in .gpucarry-a with the default model's first part, and the model's second
# part in .gpucarry-b. Logs go to $LOG_DIR (default .gpubin/logs); results are appended to
# bench/results/ (cuda-decode.md for the kernels, cuda-product.md for the product checks).
#
#   scripts/gpu_run.sh [stage|model|kernels|tests|sanitize|bench|product|v2|graph|fused|all|ordered]   (default all)
#
#   stage     unpacks .gpucarry-a: .gpubin, and the model's first part set aside
#   model     joins the model's parts (.gpucarry-b carried) and checks its sha256
#   tests     the CUDA tests (kernels against the CPU core, the GPU model, the plugin, the device
#             sampler, records and the dense shadow, the Studio's session layer on cuda)
#   kernels   what needs no model: the kernel tests, then memcheck and racecheck over them
#   sanitize  compute-sanitizer memcheck over the test binaries, racecheck per kernel test, and
#             memcheck over a GPU capture
#   bench     bench/run_cuda_bench.sh (kernel and end-to-end decode timings)
#   product   bench/run_cuda_product.sh: luka on the GPU against luka on the CPU (greedy ids on the
#             default model, every preset's logits on a Qwen3-0.6B-shaped checkpoint, captures
#             compared with h5py at 4K and one at 32K, the capture overhead per decode step)
#
#   v2        the v2 kernels (issue 45, docs/kernels-v2.md): test_cuda_luka_v2 (dense v2 and the device
#             heavy set against the CPU), then compute-sanitizer memcheck and racecheck over it (racecheck
#             on the short cases: LUKA_V2_SHORT=1). After stage: timeout 150 scripts/gpu_run.sh v2
#   graph     the recorded decode step (issue 44): the CUDA graph wrapper's test and
#             test_graphed_step_cuda (the static step recorded through the run loop against the
#             eager GPU steps: plain attention, then LuKA layers with a schedule), then the default
#             model's decode with --graph against --no-graph, both fp32 with dequantized weights, for
#             plain attention, --preset clustered, and clustered switched to lined at step 16 (64
#             greedy ids identical, recorded with LibTorch's sync-debug mode at error:
#             LUKA_SYNC_DEBUG=error) and in bf16 (ids reported), the kernel-node count and the
#             changes' cost that --verbose prints, tokens/s of both; `luka capture --graph` of the demo
#             prompt (clustered) against the eager GPU capture (tokens, covers, pages equal; rows within
#             one half step) and its recording's cost per step against --record none; then test_tiled_prefill_cuda (the
#             flash-class prefill against the formula) and bench_cuda_model --graph --tiled-prefill on
#             the Qwen3-0.6B shape in bf16 at 4K and 32K (eager against graph for plain, LuKA dense and
#             clustered; both prefill forms with peak memory; one layer's attention prefill against
#             SDPA), all appended to bench/results/cuda-graph.md; a few minutes
#   fused     the fused per-layer kernels of the decode step (issue 44, docs/kernels-v2.md, "Fused layer
#             kernels"): test_cuda_fused (residual add + RMSNorm, RoPE tables, q/k norm + RoPE + KV
#             append, SwiGLU, fp32 and bf16, against their CPU twins), test_step_kernels_cuda (a layer
#             through the step's CUDA ops against its CPU ops), then compute-sanitizer memcheck and
#             racecheck over test_cuda_fused; about 1 minute (all runs it too). After stage:
#             timeout 90 scripts/gpu_run.sh fused
#   ordered   what needs the model, after kernels: graph, the product tests, product, the capture's
#             memcheck, then bench, each started only while the time since the script began is
#             under GPU_RUN_BUDGET_S (default 420): what is left is named as skipped, so one call
#             fits the device time a session has
#
# A session's device time is 15 minutes, machine start included; the two calls, back to back
# (the machine stays warm for 30 s between them). On 2026-11-27 (H100) call 1 held the machine
# 241 s with the start and its sanitizers cut at 200 s, and call 2 ran 452 s with the capture's
# memcheck and the benchmarks left for their budget; 156 s of device time were left. The fused stage
# (about 60 s, sanitizers included) goes first in call 1 and takes most of that margin:
#   1. carry [".gpucarry-a"]:  scripts/gpu_run.sh stage && { timeout 90 scripts/gpu_run.sh fused;
#      timeout 200 scripts/gpu_run.sh kernels; }
#      (GPU_RUN_RACECHECK=0 where the CUDA sources are unchanged since a racecheck that passed)
#   2. carry [".gpucarry-b"]:  scripts/gpu_run.sh model && GPU_RUN_BUDGET_S=360 timeout 525 scripts/gpu_run.sh ordered
# Results and logs written on the GPU machine stay there: end each call with a copy into the
# tool's $OUT, e.g. `cp bench/results/cuda-*.md $OUT/; tar -czf $OUT/logs.tgz -C /tmp/luka-gpu logs`
# (with LOG_DIR=/tmp/luka-gpu/logs). Without the model, the checks that need it say so and skip. LUKA_GPU_RUN_DEVICE=cpu runs the
# product checks with the CPU in the GPU's place (a dry run on a machine without a GPU).
set -uo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
usage="usage: scripts/gpu_run.sh [stage|model|kernels|tests|sanitize|bench|product|v2|graph|fused|all|ordered]   (default all; logs in \$LOG_DIR, default .gpubin/logs)"
case "$what" in
  stage|model|kernels|tests|sanitize|bench|product|v2|graph|fused|all|ordered) ;;
  -h|--help) echo "$usage"; exit 0 ;;
  *) echo "$usage" >&2; exit 2 ;;
esac
stash="${LUKA_GPU_STASH:-/tmp/luka-gpu}"   # outside the checkout: survives the next call's sync
mkdir -p "$stash"
if [ "$what" = stage ]; then
  [ -f .gpucarry-a/gpubin.tar.xz ] || { echo "gpu_run: .gpucarry-a is missing (scripts/gpu_pack.sh, then carry .gpucarry-a)" >&2; exit 1; }
  rm -rf .gpubin "$stash/gpubin" && tar -xJf .gpucarry-a/gpubin.tar.xz && cp -a .gpubin "$stash/gpubin"
  if [ -f .gpucarry-a/model-part ]; then cp .gpucarry-a/model-part "$stash/model-a" && cp .gpucarry-a/SHA256 .gpucarry-a/NAME "$stash/"; fi
  echo "gpu_run: staged .gpubin $(cat .gpubin/REVISION) for $(cat .gpubin/ARCH)$([ -f "$stash/model-a" ] && echo ", model part 1")"
  exit 0
fi
if [ "$what" = model ]; then
  [ -f "$stash/model-a" ] || { echo "gpu_run: no first part in $stash (the call before runs stage with .gpucarry-a)" >&2; exit 1; }
  [ -f .gpucarry-b/model-part ] || { echo "gpu_run: .gpucarry-b/model-part is missing (carry .gpucarry-b)" >&2; exit 1; }
  cat "$stash/model-a" .gpucarry-b/model-part | xz -d > "$stash/model.gguf" || { echo "gpu_run: the model's parts do not decompress" >&2; exit 1; }
  [ "$(sha256sum "$stash/model.gguf" | cut -d' ' -f1)" = "$(cat "$stash/SHA256")" ] || { echo "gpu_run: the joined model's sha256 differs" >&2; exit 1; }
  echo "gpu_run: default model joined: $stash/model.gguf ($(cat "$stash/NAME"))"
  exit 0
fi
if [ ! -x .gpubin/bin/luka ] && [ -d "$stash/gpubin" ]; then cp -a "$stash/gpubin" .gpubin; fi
[ -x .gpubin/bin/luka ] || { echo "gpu_run: .gpubin is missing (run stage with .gpucarry-a carried first)" >&2; exit 1; }
py="${PYTHON:-python3}"
have="$("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)" || { echo "gpu_run: $py has no torch" >&2; exit 1; }
want="$(cat .gpubin/TORCH_VERSION)"
[ "$have" = "$want" ] || { echo "gpu_run: .gpubin links torch $want, $py has $have; pack again" >&2; exit 1; }
torch_lib="$("$py" -c 'import torch, os; print(os.path.dirname(torch.__file__))')/lib"
export LD_LIBRARY_PATH="$PWD/.gpubin/lib:$torch_lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LUKA_SOURCE_DIR="$PWD" LUKA_QWEN3_TOKENIZER="$PWD/.gpubin/qwen3-tokenizer"
export LUKA_TEST_WORK="${LUKA_TEST_WORK:-$stash/test-work}"
[ -f "$stash/model.gguf" ] && export LUKA_TEST_MODEL="$stash/model.gguf"
device="${LUKA_GPU_RUN_DEVICE:-cuda}"
luka=.gpubin/bin/luka
logs="${LOG_DIR:-.gpubin/logs}"
mkdir -p "$logs" "$LUKA_TEST_WORK"
status=0
gpu_name="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
gpu_present=yes
[ -n "$gpu_name" ] || { gpu_name="no GPU (device $device)"; gpu_present=no; }
echo "gpu_run: $gpu_name; .gpubin $(cat .gpubin/REVISION) for $(cat .gpubin/ARCH), torch $have"

budget="${GPU_RUN_BUDGET_S:-420}"
# wanted STAGE: true when this call runs STAGE (ordered: only while under the time budget).
wanted() {
  if [ "$what" = ordered ]; then
    if [ "$SECONDS" -ge "$budget" ]; then
      echo "gpu_run: $1 skipped: ${SECONDS} s of the ${budget} s budget used"
      return 1
    fi
    return 0
  fi
  [ "$what" = "$1" ] || [ "$what" = all ]
}

kernel_tests=(test_cuda_device test_cuda_decode_attention test_cuda_luka_decode test_cuda_model test_cuda_graph)
product_tests=(test_device test_device_gpu test_run_controller)

run_tests() {
  for t in "$@"; do
    LUKA_TEST_DEVICE="$device" .gpubin/tests/$t --gtest_brief=1 > "$logs/$t.log" 2>&1
    rc=$?
    echo "$t: $(grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$logs/$t.log" | tr -s ' \n' ' ')(exit $rc)"
    [ $rc -eq 0 ] || status=1
    # On a GPU machine a test that skips for want of the plugin or the GPU checked nothing.
    if [ "$gpu_present" = yes ] && grep -qE 'no CUDA plugin|no GPU for the CUDA plugin' "$logs/$t.log"; then
      echo "$t: skipped tests on a GPU machine: $(grep -m1 -oE '(no CUDA plugin|no GPU for the CUDA plugin)[^(]*' "$logs/$t.log")"
      status=1
    fi
    # Nor does one that skips for want of the model the call joined.
    if [ -n "${LUKA_TEST_MODEL:-}" ] && grep -q 'no model at' "$logs/$t.log"; then
      echo "$t: skipped tests beside the joined model: $(grep -m1 -o 'no model at [^ ]*' "$logs/$t.log")"
      status=1
    fi
  done
}
if [ "$what" = tests ] || [ "$what" = all ]; then run_tests "${kernel_tests[@]}" "${product_tests[@]}"; fi
if [ "$what" = kernels ]; then run_tests "${kernel_tests[@]}"; fi

run_sanitize() {  # [kernels|capture]: only the test binaries, or only the GPU capture (default both)
  local part="${1:-both}"
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  if [ ! -x "$cs" ]; then
    echo "gpu_run: compute-sanitizer not found" >&2
    status=1
  else
    # memcheck over each binary, racecheck over each kernel test (slow: one process per test).
    jobs=()
    local binaries=(test_cuda_decode_attention test_cuda_luka_decode test_cuda_model test_device_gpu)
    local racy=(test_cuda_decode_attention test_cuda_luka_decode)
    [ "$part" = capture ] && binaries=() racy=()
    # GPU_RUN_RACECHECK=0: memcheck only (racecheck runs one process per kernel test, and on one
    # GPU beside the memchecks it does not finish in a 200 s call; skip it when the CUDA sources
    # have not changed since a run where it passed, as git log -- '*.cu' shows).
    [ "${GPU_RUN_RACECHECK:-1}" = 0 ] && racy=()
    for t in "${binaries[@]}"; do
      "$cs" --tool memcheck --error-exitcode 9 .gpubin/tests/$t --gtest_brief=1 > "$logs/memcheck-$t.log" 2>&1 &
      jobs+=("$!:memcheck $t")
    done
    for t in "${racy[@]}"; do
      for name in $(.gpubin/tests/$t --gtest_list_tests | awk '/^[^ ]/ {suite=$1} /^  / {print suite $1}'); do
        "$cs" --tool racecheck --error-exitcode 9 .gpubin/tests/$t --gtest_filter="$name" > "$logs/racecheck-$name.log" 2>&1 &
        jobs+=("$!:racecheck $name")
      done
    done
    # The capture path: a short GPU capture of the default model, every part recorded.
    if [ "$part" = kernels ]; then
      :
    elif [ -f "$stash/model.gguf" ]; then
      "$cs" --tool memcheck --error-exitcode 9 "$luka" capture --device "$device" --model "$stash/model.gguf" \
        --prompt "The tide rises twice a day." --preset "mixed(2,2)" --set "page_size=2,tail=2,interval=1,dense_shadow=true" \
        --max-new-tokens 8 --out "$stash/memcheck.h5" --quiet > "$logs/memcheck-capture.log" 2>&1 &
      jobs+=("$!:memcheck capture")
    else
      echo "memcheck capture: skipped (no default model: run model with .gpucarry-b carried first)"
    fi
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
}

# The recorded decode step against the eager one (see the header): on the default model, plain
# attention, LuKA clustered layers, and clustered with a mid-run switch to lined (re-recorded),
# fp32 and bf16; then the Qwen3-0.6B shape in bf16 at 4K and 32K, the issue's targets.
graph_pair() {  # graph_pair LABEL strict|report GENERATE-OPTIONS...: --graph against --no-graph
  local label=$1 mode=$2
  shift 2
  local gen=("$luka" generate --device "$device" --ignore-eos --json "$@")
  local tag=${label//[^a-zA-Z0-9]/-}
  if ! LUKA_SYNC_DEBUG=error "${gen[@]}" --graph --verbose > "$logs/graph-on-$tag.json" 2> "$logs/graph-on-$tag.err"; then
    echo "graph ($label): luka generate --graph failed: $(tail -1 "$logs/graph-on-$tag.err")"
    status=1
    return
  fi
  if ! "${gen[@]}" --no-graph --verbose > "$logs/graph-off-$tag.json" 2> "$logs/graph-off-$tag.err"; then
    echo "graph ($label): luka generate --no-graph failed: $(tail -1 "$logs/graph-off-$tag.err")"
    status=1
    return
  fi
  local nodes changes
  nodes="$(grep -m1 -oE '[0-9]+ kernel nodes' "$logs/graph-on-$tag.err" || echo "? kernel nodes")"
  changes="$(grep -m1 -oE 'config changes: .*' "$logs/graph-on-$tag.err" | head -c 300)"
  [ -z "$changes" ] || echo "graph ($label): $changes"
  "$py" - "$logs/graph-on-$tag.json" "$logs/graph-off-$tag.json" "$nodes" "$gpu_name" "$label" "$mode" <<'PY' || status=1
import json, sys
on, off = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
same = on["ids"] == off["ids"]
first = next((i for i, (a, b) in enumerate(zip(on["ids"], off["ids"])) if a != b), None)
ids = f"{len(on['ids'])} greedy ids " + ("identical" if same else f"differ from id {first}")
rate = lambda r: r["decode_steps"] / r["decode_seconds"] if r["decode_seconds"] > 0 else 0.0
print(f"graph ({sys.argv[5]}): {ids}; {sys.argv[3]}; "
      f"{rate(on):.1f} tokens/s with the graph, {rate(off):.1f} eager ({rate(on) / max(rate(off), 1e-9):.2f}x)")
with open("bench/results/cuda-graph.md", "a") as f:
    f.write(f"| {sys.argv[4]} | {sys.argv[5]} | {sys.argv[3]} | {rate(off):.1f} | {rate(on):.1f} | {ids} |\n")
sys.exit(0 if same or sys.argv[6] != "strict" else 1)
PY
}
# A capture through the recorded step (issue 44's capture target): `luka capture --graph` against
# the eager GPU capture of the same run (the same tokens, modes, covers and pages; rows within one
# half-precision step), and the recording's cost per decode step against --record none, both with
# the graph.
capture_pair() {  # capture_pair LABEL CAPTURE-OPTIONS...
  local label=$1
  shift
  local cap=("$luka" capture --device "$device" --ignore-eos --quiet "$@")
  local tag=${label//[^a-zA-Z0-9]/-} ok=1
  LUKA_SYNC_DEBUG=warn "${cap[@]}" --graph --out "$logs/cap-graph-$tag.h5" > /dev/null 2> "$logs/cap-graph-$tag.err" || ok=0
  "${cap[@]}" --no-graph --out "$logs/cap-eager-$tag.h5" > /dev/null 2> "$logs/cap-eager-$tag.err" || ok=0
  "${cap[@]}" --graph --record none > /dev/null 2> "$logs/cap-none-$tag.err" || ok=0
  if [ $ok = 0 ]; then
    echo "capture ($label): a run failed: $(tail -qn1 "$logs"/cap-*-"$tag".err | head -3 | tr '\n' ' ')"
    status=1
    return
  fi
  "$py" - "$logs/cap-graph-$tag.h5" "$logs/cap-eager-$tag.h5" "$logs/cap-graph-$tag.err" "$logs/cap-none-$tag.err" \
    "$gpu_name" "$label" <<'PY' || status=1
import re, sys
import h5py, numpy as np
g, e = (h5py.File(p, "r") for p in sys.argv[1:3])
bad = []
for name in ("tokens/id", "decode/mode", "decode/cover", "decode/page_state", "decode/cover_size", "pages/start", "pages/end"):
    if name in g and name in e and not np.array_equal(g[name][()], e[name][()]):
        bad.append(name)
for name in ("decode/effective", "decode/summary_mass"):
    if name in g and name in e:
        a, b = g[name][()].astype(np.float64), e[name][()].astype(np.float64)
        if a.shape != b.shape or (a.size and np.nanmax(np.abs(a - b)) > 1 / 2048):
            bad.append(name)
ms = lambda p: float(re.search(r"([0-9.]+) ms per step", open(p).read()).group(1))
rec, none = ms(sys.argv[3]), ms(sys.argv[4])
print(f"capture ({sys.argv[6]}): graph capture {'equals' if not bad else 'differs from'} the eager one"
      f"{' in ' + ', '.join(bad) if bad else ''}; {rec:.3f} ms per step recording all, {none:.3f} without "
      f"(overhead {100 * (rec / none - 1):.1f}%)")
with open("bench/results/cuda-graph.md", "a") as f:
    f.write(f"| {sys.argv[5]} | capture: {sys.argv[6]} | {'equal to eager' if not bad else 'DIFFERS: ' + ', '.join(bad)} "
            f"| {none:.3f} ms/step (--record none) | {rec:.3f} ms/step (all) | overhead {100 * (rec / none - 1):.1f}% |\n")
sys.exit(1 if bad else 0)
PY
}
run_graph() {
  run_tests test_cuda_graph test_graphed_step_cuda
  printf '\n## %s, %s (scripts/gpu_run.sh graph)\n\n| GPU | run | recorded step | eager tokens/s | graph tokens/s | ids |\n|---|---|---|---:|---:|---|\n' \
    "$(date -u +%F)" "$gpu_name" >> bench/results/cuda-graph.md
  if [ -f "$stash/model.gguf" ]; then
    local m=(--model "$stash/model.gguf" --prompt "Explain how the tides work." --chat --max-new-tokens 64
             --weights dequantized)
    graph_pair "default model, fp32" strict "${m[@]}" --dtype fp32
    graph_pair "default model, fp32, clustered" strict "${m[@]}" --dtype fp32 --preset clustered
    graph_pair "default model, fp32, clustered, lined from step 16" strict "${m[@]}" --dtype fp32 --preset clustered \
      --schedule "step=16:layers=all:mode=lined"
    # bf16 logits round to ties that two summation orders break apart: reported, not required.
    graph_pair "default model, bf16" report "${m[@]}" --dtype bf16
    capture_pair "default model, fp32, clustered" --model "$stash/model.gguf" --prompt-file assets/prompts/demo.json \
      --max-new-tokens 64 --weights dequantized --dtype fp32 --preset clustered
  else
    echo "graph: the default model's checks skipped (no default model: run model with .gpucarry-b carried first)"
  fi
  # The flash-class prefill on the GPU's SDPA kernels against the formula, then the Qwen3-0.6B
  # shape in bf16: eager against graph decode for plain, LuKA dense and clustered at 4K and 32K,
  # and the LuKA prefill in both forms with peak memory (the issue's targets).
  run_tests test_tiled_prefill_cuda
  local ckpt="$stash/qwen3-0.6b-shape"
  [ -e "$ckpt" ] || "$py" bench/make_qwen3_0p6b_shape.py "$ckpt" 0.6b 40960 > "$logs/make-ckpt.log" 2>&1 || {
    echo "graph: cannot write $ckpt"; status=1; return; }
  local cmd=(.gpubin/bench/bench_cuda_model "$ckpt" --presets dense,clustered --tokens 4096,32768 --steps 64 --graph
             --tiled-prefill)
  if "${cmd[@]}" > "$logs/graph-bench.md" 2> "$logs/graph-bench.err"; then
    { printf '\nQwen3-0.6B shape, bf16, batch 1 (`%s`):\n\n' "${cmd[*]}"; cat "$logs/graph-bench.md"; } >> bench/results/cuda-graph.md
    grep -E '^\| (4096|32768) \| (plain ATen|dense|clustered) ' "$logs/graph-bench.md" | head -6
  else
    echo "graph: bench_cuda_model failed: $(tail -1 "$logs/graph-bench.err")"
    status=1
  fi
  # The Qwen3-4B shape too with GRAPH_4B=1 (writing its 8 GB checkpoint takes a minute or two).
  if [ "${GRAPH_4B:-0}" = 1 ]; then
    local big="$stash/qwen3-4b-shape"
    [ -e "$big" ] || "$py" bench/make_qwen3_0p6b_shape.py "$big" 4b 40960 > "$logs/make-ckpt-4b.log" 2>&1
    cmd=(.gpubin/bench/bench_cuda_model "$big" --presets dense,clustered --tokens 4096,32768 --steps 32 --graph)
    if "${cmd[@]}" > "$logs/graph-bench-4b.md" 2> "$logs/graph-bench-4b.err"; then
      { printf '\nQwen3-4B shape, bf16, batch 1 (`%s`):\n\n' "${cmd[*]}"; cat "$logs/graph-bench-4b.md"; } >> bench/results/cuda-graph.md
    else
      echo "graph: bench_cuda_model (4B) failed: $(tail -1 "$logs/graph-bench-4b.err")"
      status=1
    fi
  fi
}
run_bench() { PYTHON="$py" bench/run_cuda_bench.sh .gpubin || status=1; }
run_product() {
  PYTHON="$py" LUKA="$luka" DEVICE="$device" STASH="$stash" GPU_NAME="$gpu_name" LOGS="$logs" bench/run_cuda_product.sh || status=1
}
if [ "$what" = kernels ]; then
  run_sanitize kernels
elif [ "$what" = graph ]; then
  run_graph
elif [ "$what" = ordered ]; then
  # The recorded step first: issue 44's checks and the graph's tokens/s are what a session most needs.
  if wanted graph; then run_graph; fi
  if wanted tests; then run_tests "${product_tests[@]}"; fi
  for stage in product sanitize bench; do
    if wanted "$stage"; then if [ "$stage" = sanitize ]; then run_sanitize capture; else "run_$stage"; fi; fi
  done
else
  if wanted graph; then run_graph; fi
  if wanted sanitize; then run_sanitize; fi
  if wanted bench; then run_bench; fi
  if wanted product; then run_product; fi
fi
# The v2 kernels (issue 45): parity with the CPU, then memcheck and racecheck over the same binary.
run_v2() {
  run_tests test_cuda_luka_v2
  local cs
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for tool in memcheck racecheck; do
    LUKA_V2_SHORT=$([ "$tool" = racecheck ] && echo 1 || echo 0) \
      "$cs" --tool "$tool" --error-exitcode 9 .gpubin/tests/test_cuda_luka_v2 --gtest_brief=1 \
      > "$logs/$tool-test_cuda_luka_v2.log" 2>&1
    rc=$?
    echo "$tool test_cuda_luka_v2: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
}
if [ "$what" = v2 ]; then run_v2; fi
# The fused per-layer kernels (issue 44): parity with their CPU twins, then memcheck and racecheck.
run_fused() {
  run_tests test_cuda_fused test_step_kernels_cuda
  # On a GPU machine a skipped case checked nothing.
  for t in test_cuda_fused test_step_kernels_cuda; do
    if [ "$gpu_present" = yes ] && grep -q '^\[  SKIPPED \]' "$logs/$t.log"; then
      echo "$t: cases skipped on a GPU machine"
      status=1
    fi
  done
  local cs
  cs="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  for tool in memcheck racecheck; do
    # racecheck over the kernels that share memory (the norms' block sums) only: it is the slow one.
    "$cs" --tool "$tool" --error-exitcode 9 .gpubin/tests/test_cuda_fused --gtest_brief=1 \
      $([ "$tool" = racecheck ] && echo "--gtest_filter=*RmsNorm*:*QkvNormRope*") \
      > "$logs/$tool-test_cuda_fused.log" 2>&1
    rc=$?
    echo "$tool test_cuda_fused: exit $rc"
    [ $rc -eq 0 ] || status=1
  done
}
if [ "$what" = fused ] || [ "$what" = all ]; then run_fused; fi
exit $status
