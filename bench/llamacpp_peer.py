#!/usr/bin/env python3
"""luka against llama.cpp (through llama-cpp-python) on the same GGUF file, threads and prompts.

Each measurement runs both sides as separate processes, in alternating order, --reps times; a
side's peak resident memory is its process's (os.wait4), so llama.cpp's includes the Python
interpreter (about 10 MB). Reported per measurement: the median of each side and the median of
the per-repetition ratios luka / llama.cpp.

  decode   an 18-token prompt, then greedy decode steps (tokens/s)
  prefill  a 512-token prompt as one batch (tokens/s)
  ctx2k    a 2,048-token prompt, then 64 decode steps: decode tokens/s at a 2K context and the
           peak RSS of the whole run; luka dense and luka --preset lined

The prompts are the text's first N tokens (llama.cpp's tokenizer, detokenized back to text); both
sides tokenize that text with the file's vocabulary, and the counts are printed beside the
results. Both sides decode the same number of steps: as many as luka's greedy run takes before
an end-of-sequence token or the limit (llama.cpp runs that many, without stopping).

  llamacpp_peer.py --luka build/luka --model models/default --llama-python bench/.venv-llama/bin/python
                   [--threads 2] [--reps 5] [--text ../shared/data/texts/emma.txt] [--out FILE.md]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

LLAMA_SIDE = r'''
import json, sys, time
import numpy as np
import llama_cpp
model, threads, text_path, n_new = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
text = open(text_path, encoding="utf-8").read()
llm = llama_cpp.Llama(model_path=model, n_threads=threads, n_threads_batch=threads, n_ctx=4096, n_batch=2048,
                      n_ubatch=2048, verbose=False)
toks = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
t0 = time.perf_counter()
llm.eval(toks)
t1 = time.perf_counter()
for _ in range(n_new):
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm.ctx, -1), shape=(llm.n_vocab(),))
    llm.eval([int(np.argmax(logits))])
t2 = time.perf_counter()
print(json.dumps({"prompt_tokens": len(toks), "prefill_seconds": t1 - t0, "decode_steps": n_new, "decode_seconds": t2 - t1}))
'''

PROMPT_TEXT = r'''
import sys
import llama_cpp
model, text_path, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
llm = llama_cpp.Llama(model_path=model, n_ctx=16, vocab_only=True, verbose=False)
toks = llm.tokenize(open(text_path, encoding="utf-8").read().encode("utf-8"), add_bos=False, special=False)[:n]
open(out, "wb").write(llm.detokenize(toks))
'''


def run(cmd):
    """Runs cmd; returns (its JSON output, its peak RSS in MB)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = p.communicate()
    code = p.returncode
    if code != 0:
        sys.exit(f"llamacpp_peer: {' '.join(cmd[:2])} failed ({code}):\n{err.decode(errors='replace')[-2000:]}")
    return out.decode(), None


def run_measured(cmd):
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(p.pid, 0)
    out = p.stdout.read().decode()
    err = p.stderr.read().decode(errors="replace")
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        sys.exit(f"llamacpp_peer: {' '.join(cmd[:2])} failed ({code}):\n{err[-2000:]}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 1024.0


def luka_cmd(args, prompt_file, n_new, preset):
    with open(prompt_file, encoding="utf-8") as f:
        text = f.read()
    return [args.luka, "generate", "--model", args.model, "--device", "cpu", "--threads", str(args.threads), "--prompt", text,
            "--max-new-tokens", str(n_new), "--preset", preset, "--json"] + args.luka_option


def llama_cmd(args, prompt_file, n_new):
    return [args.llama_python, "-c", LLAMA_SIDE, args.model, str(args.threads), prompt_file, str(n_new)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--luka", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--llama-python", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--text", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "data",
                                                   "texts", "emma.txt"))
    ap.add_argument("--decode-steps", type=int, default=128)
    ap.add_argument("--luka-option", action="append", default=[], help="an extra luka generate argument (repeatable)")
    ap.add_argument("--only", help="comma-separated measurements (decode,prefill,ctx2k)")
    args = ap.parse_args()
    model = os.path.realpath(args.model)
    args.model = model
    work = tempfile.mkdtemp(prefix="llamacpp-peer-")
    prompts = {}
    for n in (18, 512, 2048):
        path = os.path.join(work, f"prompt-{n}.txt")
        run([args.llama_python, "-c", PROMPT_TEXT, model, args.text, str(n), path])
        prompts[n] = path

    # name, prompt tokens, decode steps asked of luka, luka preset, rows reported
    plans = [("decode", 18, args.decode_steps, "dense"), ("prefill", 512, 1, "dense"), ("ctx2k", 2048, 64, "dense"),
             ("ctx2k", 2048, 64, "lined")]
    if args.only:
        wanted = set(args.only.split(","))
        plans = [p for p in plans if p[0] in wanted]
    rows = []
    for name, n_prompt, n_new, preset in plans:
        # The steps both sides take: luka's greedy run's own count.
        pilot, _ = run_measured(luka_cmd(args, prompts[n_prompt], n_new, preset))
        steps = max(1, int(pilot["decode_steps"]))
        luka_runs, llama_runs = [], []
        for r in range(args.reps):
            order = [("luka", luka_cmd(args, prompts[n_prompt], steps, preset)), ("llama", llama_cmd(args, prompts[n_prompt], steps))]
            if r % 2:
                order.reverse()
            for side, cmd in order:
                res, rss = run_measured(cmd)
                res["rss_mb"] = rss
                (luka_runs if side == "luka" else llama_runs).append(res)
        rows.append((name, n_prompt, preset, steps, luka_runs, llama_runs))

    def rate(res, what):
        if what == "prefill":
            return res["prompt_tokens"] / res["prefill_seconds"]
        return res["decode_steps"] / res["decode_seconds"] if res["decode_seconds"] > 0 else float("nan")

    print(f"model {os.path.basename(model)}, {args.threads} threads, {args.reps} alternating repetitions per row; "
          f"luka options: {' '.join(args.luka_option) or '(defaults)'}")
    print()
    print("| measurement | prompt tokens (luka / llama.cpp) | luka | llama.cpp | luka ÷ llama.cpp (median of ratios) "
          "| peak RSS MB luka / llama.cpp |")
    print("|---|---|---:|---:|---:|---|")
    for name, n_prompt, preset, steps, lk, ll in rows:
        what = "prefill" if name == "prefill" else "decode"
        a = [rate(x, what) for x in lk]
        b = [rate(x, what) for x in ll]
        ratios = [x / y for x, y in zip(a, b)]
        label = {"decode": f"decode, {steps} steps after a short prompt", "prefill": "prefill",
                 "ctx2k": f"decode at a 2K context, {steps} steps"}[name] + (f" ({preset})" if preset != "dense" else "")
        print(f"| {label} | {lk[0]['prompt_tokens']} / {ll[0]['prompt_tokens']} | {statistics.median(a):.1f} tok/s "
              f"| {statistics.median(b):.1f} tok/s | {statistics.median(ratios):.2f}× "
              f"| {statistics.median(x['rss_mb'] for x in lk):.0f} / {statistics.median(x['rss_mb'] for x in ll):.0f} |")


if __name__ == "__main__":
    main()
