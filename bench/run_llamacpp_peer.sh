#!/usr/bin/env bash
# luka against llama.cpp at its best on this CPU: llama.cpp's own C++ llama-bench, built from the
# llama.cpp that llama-cpp-python vendors (bench/build_llama_bench.sh: Release, -march=native, its
# AMX kernels where the CPU has AMX; NOAMX=1 adds a second build without them), on the same GGUF
# file. Rows: decode of 128 tokens after a short prompt, prefill of 512, decode of 64 at a 2K
# context (llama-bench -d 2048, -fa 0), each at 1 and 2 threads. Every repetition runs both sides
# as separate processes, alternating which goes first; reported: each side's median, the median
# (min-max) of the per-pair ratios luka / llama.cpp, and each side's peak RSS (wait4).
# llama-bench feeds random token ids; luka a passage of ../shared/data/texts/emma.txt cut to the
# same token count (luka tokenize), with --ignore-eos so it decodes exactly as many tokens.
# Appends a dated section to bench/results/llamacpp-peer.md naming the llama.cpp commit, its build
# flags and the machine's load. The earlier comparison through llama-cpp-python (Python bindings,
# its default build) stays available as bench/llamacpp_peer.py.
#
#   bench/run_llamacpp_peer.sh [BUILD_DIR]     REPS (default 5), THREADS (default "1 2"),
#                                              MODEL (default models/default), NOAMX=1, ONLY=decode,prefill,ctx2k
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build}
luka=${LUKA:-$build/luka}
model=$(readlink -f "${MODEL:-$root/models/default}")
[[ -x $luka ]] || { echo "run_llamacpp_peer: no $luka (build first)" >&2; exit 1; }
[[ -f $model ]] || { echo "run_llamacpp_peer: no model at ${MODEL:-models/default} (scripts/setup.sh)" >&2; exit 1; }
bench_amx=$("$root/bench/build_llama_bench.sh" | tail -1)
benches=("native=$bench_amx")
if [[ ${NOAMX:-0} == 1 ]]; then
  benches+=("native-noamx=$(NOAMX=1 "$root/bench/build_llama_bench.sh" | tail -1)")
fi
python=${PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || python=python3
load_before=$(cut -d' ' -f1-3 /proc/loadavg)
table=$(cd "$root" && "$python" - "$luka" "$model" "${REPS:-5}" "${THREADS:-1 2}" "${ONLY:-decode,prefill,ctx2k}" "${benches[@]}" <<'PY'
import json, os, statistics, subprocess, sys, threading

luka, model, reps, threads, only = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(t) for t in sys.argv[4].split()], sys.argv[5]
benches = [a.split("=", 1) for a in sys.argv[6:]]
here = os.getcwd()
for cand in (os.environ.get("PEER_TEXT", ""), os.path.join(here, "..", "shared", "data", "texts", "emma.txt")):
    if os.path.exists(cand):
        text_path = cand
        break
else:
    sys.exit("run_llamacpp_peer: no ../shared/data/texts/emma.txt")
words = open(text_path, encoding="utf-8").read().split(" ")


def prompt_of(n):
    """The shortest word prefix of the text that luka's tokenizer makes n tokens or more (exactly n where one does)."""
    lo, hi = 1, min(len(words), 4 * n + 8)
    def count(k):
        out = subprocess.run([luka, "tokenize", "--model", model, "--text", " ".join(words[:k])], capture_output=True, text=True,
                             check=True).stdout
        return len(json.loads(out.strip().splitlines()[-1])["ids"])
    while lo < hi:
        mid = (lo + hi) // 2
        if count(mid) >= n:
            hi = mid
        else:
            lo = mid + 1
    return " ".join(words[:lo])


def run_rss(cmd):
    """(return code, stdout, stderr, peak RSS in MB) of one process."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    chunks = {"out": [], "err": []}
    def pump(stream, key):
        chunks[key].append(stream.read())
    ts = [threading.Thread(target=pump, args=(p.stdout, "out")), threading.Thread(target=pump, args=(p.stderr, "err"))]
    for t in ts:
        t.start()
    _, status, usage = os.wait4(p.pid, 0)
    for t in ts:
        t.join()
    return (os.waitstatus_to_exitcode(status), b"".join(chunks["out"]).decode(), b"".join(chunks["err"]).decode(errors="replace"),
            usage.ru_maxrss / 1024.0)


# name, prompt tokens, new tokens
plans = [p for p in [("decode", 18, 128), ("prefill", 512, 1), ("ctx2k", 2048, 64)] if p[0] in only.split(",")]
prompts = {n: prompt_of(n) for _, n, _ in plans}


def luka_side(n_prompt, n_new, t):
    cmd = [luka, "generate", "--model", model, "--device", "cpu", "--threads", str(t), "--prompt", prompts[n_prompt],
           "--max-new-tokens", str(n_new), "--ignore-eos", "--json"]
    code, out, err, rss = run_rss(cmd)
    if code != 0:
        sys.exit(f"run_llamacpp_peer: luka generate failed ({code}): {err[-1500:]}")
    r = json.loads(out.strip().splitlines()[-1])
    rate = r["prompt_tokens"] / r["prefill_seconds"] if n_new == 1 else r["decode_steps"] / r["decode_seconds"]
    return rate, rss, r["prompt_tokens"]


def llama_side(bench, name, n_prompt, n_new, t):
    if name == "prefill":
        args = ["-p", str(n_prompt), "-n", "0"]
    elif name == "decode":
        args = ["-p", "0", "-n", str(n_new)]
    else:
        args = ["-p", "0", "-n", str(n_new), "-d", str(n_prompt), "-fa", "0"]
    cmd = [bench, "-m", model, "-t", str(t), "-r", "1", "-o", "json"] + args
    code, out, err, rss = run_rss(cmd)
    if code != 0:
        return None, rss, f"exit {code}" + (" (SIGILL)" if code == -4 else "")
    return json.loads(out)[0]["avg_ts"], rss, None


rows = []
for name, n_prompt, n_new in plans:
    for t in threads:
        for variant, bench in benches:
            lk, ll, ratios, rss_l, rss_b, failure, ptoks = [], [], [], [], [], None, None
            for r in range(reps):
                order = ["luka", "llama"] if r % 2 == 0 else ["llama", "luka"]
                res = {}
                for side in order:
                    res[side] = luka_side(n_prompt, n_new, t) if side == "luka" else llama_side(bench, name, n_prompt, n_new, t)
                a, ra, ptoks = res["luka"]
                b, rb, failure = res["llama"]
                lk.append(a); rss_l.append(ra); rss_b.append(rb)
                if b is not None:
                    ll.append(b); ratios.append(a / b)
            rows.append((name, n_prompt, n_new, t, variant, ptoks, lk, ll, ratios, rss_l, rss_b, failure))

label = {"decode": "decode, {n} tokens after a {p}-token prompt", "prefill": "prefill of {p}",
         "ctx2k": "decode, {n} tokens at a {p}-token context (llama.cpp -fa 0)"}
print(f"model {os.path.basename(model)}, {reps} alternating pairs per row; luka: generate --ignore-eos (defaults: "
      "--weights auto, dense); llama.cpp: llama-bench -r 1 per pair")
print()
print("| row | threads | llama.cpp build | luka tok/s | llama.cpp tok/s | luka ÷ llama.cpp: median (min–max) of pairs "
      "| peak RSS MB luka / llama.cpp |")
print("|---|---:|---|---:|---:|---|---|")
for name, p, n, t, variant, ptoks, lk, ll, ratios, rss_l, rss_b, failure in rows:
    med_b = f"{statistics.median(ll):.1f}" if ll else (failure or "—")
    ratio = f"**{statistics.median(ratios):.2f}×** ({min(ratios):.2f}–{max(ratios):.2f})" if ratios else "—"
    print(f"| {label[name].format(n=n, p=p)} (luka prompt {ptoks}) | {t} | {variant} | {statistics.median(lk):.1f} | {med_b} "
          f"| {ratio} | {statistics.median(rss_l):.0f} / {statistics.median(rss_b):.0f} |")
PY
)
{
  echo
  echo "## $(date -u '+%Y-%m-%d %H:%M') UTC — llama-bench (C++), $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
  echo
  echo "Command: \`REPS=${REPS:-5} THREADS=\"${THREADS:-1 2}\" NOAMX=${NOAMX:-0} bench/run_llamacpp_peer.sh\` at commit" \
       "$(git -C "$root" rev-parse --short HEAD); luka's quantized products: $(LUKA_MODEL="$model" "$luka" info 2>/dev/null |
       sed -n 's/^ *quant path *//p' | head -1). Load average before $load_before, after $(cut -d' ' -f1-3 /proc/loadavg)."
  for b in "${benches[@]}"; do
    echo
    sed 's/^/    /' "$(dirname "${b#*=}")/../build-info.txt"
  done
  echo
  echo "$table"
} | tee -a "$root/bench/results/llamacpp-peer.md"
