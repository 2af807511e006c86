#!/usr/bin/env python3
"""The bad-input battery: several hundred malformed inputs and faults across every file and option
`luka` reads (model folders, GGUF, LuKA configs, prompts, eval data, captures, outputs and faults,
the command line), each stating what must happen:

  refused: exit 1 (bad file or data) or 2 (bad command line), with one error line that starts with
           "luka", holds ": error: " and names the file or option and the problem;
  accepted: exit 0, for a stated reason.

The inputs are made once per run under WORK/inputs from the random qwen3-tied checkpoint (the
`checkpoints` fixture); the cases run JOBS at a time. --table FILE rewrites the table of cases and
outcomes between the battery markers of FILE (docs/reliability.md).

  run_battery.py --luka build/luka --checkpoints build/test-work/checkpoints --work build/test-work/battery
"""
import argparse
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cases as battery_cases  # noqa: E402
from inputs import make_model  # noqa: E402

BEGIN, END = "<!-- battery:begin -->", "<!-- battery:end -->"


def run_case(luka, case, work, timeout):
    env = dict(os.environ)
    env.pop("LUKA_MODEL", None)
    env.update(case.env)
    stdin = open(case.stdin, "rb") if case.stdin else subprocess.DEVNULL
    stdout = open(case.stdout, "wb") if case.stdout else subprocess.PIPE
    start = time.monotonic()
    try:
        p = subprocess.run([luka] + case.args, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=env,
                           cwd=work, timeout=timeout)
        code, err = p.returncode, p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        code, err = "hang", ""
    finally:
        for f in (stdin, stdout):
            if hasattr(f, "close"):
                f.close()
    return code, err, time.monotonic() - start


def batch_supported(luka):
    """Whether this luka runs many command lines itself (--run-cases), forked after its start-up."""
    try:
        return subprocess.run([luka, "--run-cases", os.devnull, "1", "1"], capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def run_batch(luka, cases, work, jobs, timeout):
    """Every case through one `luka --run-cases`: [(exit code or "hang", stderr, seconds)]."""
    d = os.path.join(work, "run")
    os.makedirs(d, exist_ok=True)
    listing = os.path.join(d, "cases.jsonl")
    with open(listing, "w") as f:
        for i, c in enumerate(cases):
            entry = {"args": c.args, "stdout": c.stdout or os.path.join(d, "%d.out" % i),
                     "stderr": os.path.join(d, "%d.err" % i), "cwd": work, "env": c.env}
            if c.stdin:
                entry["stdin"] = c.stdin
            f.write(json.dumps(entry) + "\n")
    p = subprocess.run([luka, "--run-cases", listing, str(jobs), str(int(timeout))], capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("battery: luka --run-cases failed: " + p.stderr)
    codes = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        codes[r["case"]] = r["exit"] if "exit" in r else ("hang" if r["signal"] == 14 else "signal %d" % r["signal"])
    out = []
    for i in range(len(cases)):
        with open(os.path.join(d, "%d.err" % i), "rb") as f:
            out.append((codes.get(i, "not run"), f.read().decode(errors="replace"), 0.0))
    return out


def judge(case, code, err):
    """'' when the outcome is the case's, else what differs."""
    # Progress and notes ("device: cpu", "attention: ...") may come before it; errors are one line.
    lines = [l for l in err.splitlines() if ": error: " in l or l.startswith("luka")]
    if code != case.expect:
        return "exit %s, expected %s: %s" % (code, case.expect, " | ".join(err.splitlines())[-300:])
    if case.expect == 0:
        return ""
    if len(lines) != 1:
        return "%d error lines, expected 1: %s" % (len(lines), " | ".join(lines)[:300])
    line = lines[0]
    if not line.startswith("luka") or ": error: " not in line:
        return "not a 'luka ...: error: ...' line: " + line
    missing = [n for n in case.names if n not in line]
    if missing:
        return "the line does not name %s: %s" % (", ".join(repr(m) for m in missing), line)
    return ""


def write_table(path, results, work):
    by_family = {}
    for case, code, err, _ in results:
        by_family.setdefault(case.family, []).append((case, code, err))
    rows = ["| family | cases | refused, exit 1 | refused, exit 2 | accepted |", "|---|---:|---:|---:|---:|"]
    for family, items in by_family.items():
        rows.append("| %s | %d | %d | %d | %d |" % (family, len(items), sum(c.expect == 1 for c, _, _ in items),
                                                   sum(c.expect == 2 for c, _, _ in items), sum(c.expect == 0 for c, _, _ in items)))
    rows.append("| **all** | **%d** | | | |" % len(results))
    ran = any(code is not None for _, code, _, _ in results)
    table = ["Generated by `tests/battery/run_battery.py --table docs/reliability.md` (do not edit by hand)%s." %
             ("" if ran else " from the cases alone (`--inputs-only`): what each must do, without a run's error lines"), ""]
    table += rows + [""]
    for family, items in by_family.items():
        table += ["### %s" % family, ""]
        table += ["| case | input | expected | outcome |", "|---|---|---|---|"] if ran else ["| case | input | expected |", "|---|---|---|"]
        for case, code, err in items:
            lines = [l for l in err.splitlines() if ": error: " in l]
            shown = lines[0] if (case.expect != 0 and lines) else ""
            shown = shown.replace(work + "/", "").replace(work, ".")
            named = ", ".join("`%s`" % n.replace(work + "/", "") for n in case.names if n)
            expected = ("exit %d" % case.expect + (", naming " + named if named else "")) if case.expect else \
                "accepted: " + case.reason
            outcome = "exit %s: `%s`" % (code, shown.replace("|", "\\|").replace("`", "'")) if shown else "exit %s" % code
            what = case.what.replace("|", "\\|")
            cells = [case.name, what, expected.replace("|", "\\|")] + ([outcome] if ran else [])
            table.append("| " + " | ".join(cells) + " |")
        table.append("")
    text = open(path).read() if os.path.exists(path) else ""
    if BEGIN in text and END in text:
        text = text[:text.index(BEGIN) + len(BEGIN)] + "\n" + "\n".join(table) + text[text.index(END):]
    else:
        text += "\n" + BEGIN + "\n" + "\n".join(table) + END + "\n"
    with open(path, "w") as f:
        f.write(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--luka", required=True)
    ap.add_argument("--checkpoints", required=True, help="the checkpoints fixture's folder")
    ap.add_argument("--work", required=True)
    ap.add_argument("--python", default=sys.executable, help="a Python with h5py, for damaged captures")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", default="", help="run the cases whose family/name matches this regular expression")
    ap.add_argument("--inputs-only", action="store_true", help="make the inputs (WORK/inputs) and stop")
    ap.add_argument("--table", default="", help="rewrite the battery's table in this Markdown file")
    args = ap.parse_args()

    checkpoint = os.path.join(args.checkpoints, "qwen3-tied")
    if not os.path.exists(os.path.join(checkpoint, "model.safetensors")):
        print("battery: no checkpoint at %s (the checkpoints fixture)" % checkpoint, file=sys.stderr)
        return 1
    work = os.path.abspath(args.work)
    inputs = os.path.join(work, "inputs")
    os.makedirs(inputs, exist_ok=True)
    model = make_model(checkpoint, os.path.join(inputs, "model"))
    started = time.monotonic()
    all_cases = battery_cases.build(battery_cases.Context(luka=os.path.abspath(args.luka), model=model, inputs=inputs,
                                                          python=args.python))
    names = set()
    for c in all_cases:
        key = c.family + "/" + c.name
        if key in names:
            print("battery: two cases named " + key, file=sys.stderr)
            return 1
        names.add(key)
    if args.inputs_only:
        if args.table:  # the cases and what each must do, without a run's error lines
            write_table(args.table, [(c, None, "", 0.0) for c in all_cases], work)
        print("battery: inputs for %d cases made in %s" % (len(all_cases), inputs))
        return 0
    if args.only:
        all_cases = [c for c in all_cases if re.search(args.only, c.family + "/" + c.name)]
    made = time.monotonic() - started

    luka = os.path.abspath(args.luka)
    if batch_supported(luka):
        results = [(c,) + r for c, r in zip(all_cases, run_batch(luka, all_cases, work, args.jobs, args.timeout))]
    else:  # one process a case: some 0.4 s of LibTorch start-up each
        with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_case, luka, c, work, args.timeout) for c in all_cases]
            results = [(c,) + f.result() for c, f in zip(all_cases, futures)]
    failures = []
    for case, code, err, _ in results:
        problem = judge(case, code, err)
        if problem:
            failures.append("%s/%s: %s\n    luka %s" % (case.family, case.name, problem, " ".join(case.args)))
    counts = {}
    for c in all_cases:
        counts[c.family] = counts.get(c.family, 0) + 1
    print("battery: %d cases (%s); inputs made in %.1f s, run in %.1f s" %
          (len(all_cases), ", ".join("%s %d" % kv for kv in counts.items()), made, time.monotonic() - started - made))
    for f in failures:
        print("FAILED " + f)
    if args.table and not args.only:
        write_table(args.table, results, work)
    print("battery: %d of %d as stated" % (len(results) - len(failures), len(results)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
