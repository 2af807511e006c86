#!/usr/bin/env python3
"""Register, stack and spill check of every CUDA kernel, from ptxas itself (no GPU needed).

Compiles each source given for one architecture with `nvcc --resource-usage` and reads ptxas's
report per entry point: registers, stack frame, spill stores/loads, static shared memory. Fails
(exit 1) when a kernel spills, keeps a stack frame, uses more registers than --max-registers or
more static shared memory than --max-smem, and prints one line per kernel (demangled where
c++filt is on PATH) with the worst first.

  ptxas_resources.py --nvcc NVCC --arch 90 [--baseline FILE [--slack 8]] [--max-smem 49152]
                     [--include DIR ...] [--table FILE] SOURCE.cu ...

Why these limits: a spill or a stack frame puts per-thread state in local memory (DRAM behind L1),
which the decode kernels cannot afford at 32K contexts; static shared memory above 48 KiB needs an
opt-in the launches do not make. Registers are each kernel's own choice (the dense split kernel's
widest tile holds 244 on purpose), so they are held to a baseline instead (--baseline: lines
"REGISTERS STACK SPILL_STORES SHORT_NAME", as --write-baseline writes them): a kernel fails when it
needs more than --slack registers over its line, any stack or spill its line does not grant, or
is not named there, so a change in occupancy or local memory is always a deliberate edit of the
baseline. Without --baseline, any stack frame or spill fails.
"""
import argparse
import re
import shutil
import subprocess
import sys
import tempfile

FUNC = re.compile(r"ptxas info\s*: Function properties for (\S+)")
PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
COMPILING = re.compile(r"ptxas info\s*: Compiling entry function '(\S+)' for '(sm_\d+)'")
USED = re.compile(r"ptxas info\s*: Used (\d+) registers(?:, used \d+ barriers)?(?:, (\d+) bytes smem)?")


def parse(report):
    """Entry points of one ptxas report: {name: {registers, stack, spill_stores, spill_loads, smem}}.

    ptxas reports each entry point as 'Compiling entry function NAME', then 'Function properties
    for NAME' with its stack and spills on the next line, then 'Used N registers ... M bytes smem'.
    """
    kernels, current, props_for, props = {}, None, None, {}
    for line in report.splitlines():
        m = COMPILING.search(line)
        if m:
            current = m.group(1)
            continue
        m = FUNC.search(line)
        if m:
            props_for = m.group(1)
            continue
        m = PROPS.search(line)
        if m and props_for:
            props[props_for] = tuple(int(x) for x in m.groups())
            props_for = None
            continue
        m = USED.search(line)
        if m and current:
            stack, stores, loads = props.get(current, (0, 0, 0))
            kernels[current] = {
                "registers": int(m.group(1)),
                "smem": int(m.group(2) or 0),
                "stack": stack,
                "spill_stores": stores,
                "spill_loads": loads,
            }
            current = None
    return kernels


SAMPLE = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1av' for 'sm_90'
ptxas info    : Function properties for _Z1av
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 4112 bytes smem
ptxas info    : Compile time = 1.0 ms
ptxas info    : Function properties for _Z6helperv
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z1bv' for 'sm_90'
ptxas info    : Function properties for _Z1bv
    32 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers
"""


def self_test():
    """The parser on a report of known content (an entry point, a device function, a spilling one)."""
    got = parse(SAMPLE)
    want = {"_Z1av": {"registers": 40, "smem": 4112, "stack": 0, "spill_stores": 0, "spill_loads": 0},
            "_Z1bv": {"registers": 255, "smem": 0, "stack": 32, "spill_stores": 8, "spill_loads": 4}}
    if got != want:
        print(f"ptxas_resources self-test: parsed {got}, expected {want}", file=sys.stderr)
        return 1
    print("ptxas_resources self-test: passed")
    return 0


def demangle(names):
    if not names or not shutil.which("c++filt"):
        return {n: n for n in names}
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    return dict(zip(names, out)) if len(out) == len(names) else {n: n for n in names}


def short(name):
    """The kernel's own name and template arguments, without namespaces and parameters."""
    name = re.sub(r"\(anonymous namespace\)::", "", name)
    name = re.sub(r"luka::cuda::", "", name)
    return name.split("(")[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--arch", default="90")
    ap.add_argument("--baseline")
    ap.add_argument("--slack", type=int, default=8)
    ap.add_argument("--write-baseline", help="write the registers measured now as a baseline file")
    ap.add_argument("--max-smem", type=int, default=48 * 1024)
    ap.add_argument("--include", action="append", default=[])
    ap.add_argument("--table", help="also write the table (markdown) here")
    ap.add_argument("--self-test", action="store_true", help="check the report parser and exit")
    ap.add_argument("sources", nargs="*")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.sources:
        ap.error("no sources")

    kernels = {}
    for src in args.sources:
        with tempfile.NamedTemporaryFile(suffix=".o") as obj:
            cmd = [args.nvcc, "-std=c++17", f"-arch=sm_{args.arch}", "--resource-usage", "-c", src, "-o", obj.name]
            for inc in args.include:
                cmd += ["-I", inc]
            r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"ptxas_resources: {src} does not compile for sm_{args.arch}:\n{r.stderr}", file=sys.stderr)
            return 1
        found = parse(r.stdout + r.stderr)
        if not found:
            print(f"ptxas_resources: no entry points reported for {src}", file=sys.stderr)
            return 1
        for name, k in found.items():
            kernels[name] = dict(k, source=src.split("/")[-1])

    names = demangle(sorted(kernels))
    baseline = {}
    if args.baseline:
        with open(args.baseline) as f:
            for line in f:
                line = line.strip()
                if line and not line.startswith("#"):
                    regs, stack, spill, name = line.split(" ", 3)
                    baseline[name] = (int(regs), int(stack), int(spill))
    failures = []
    rows = []
    for mangled, k in sorted(kernels.items(), key=lambda kv: -kv[1]["registers"]):
        why = []
        label = short(names[mangled])
        regs0, stack0, spill0 = baseline.get(label, (None, 0, 0))
        if args.baseline and regs0 is None:
            why.append(f"not in the baseline {args.baseline} ({k['registers']} registers)")
        elif args.baseline and k["registers"] > regs0 + args.slack:
            why.append(f"{k['registers']} registers, baseline {regs0} + {args.slack}")
        if max(k["spill_stores"], k["spill_loads"]) > spill0:
            why.append(f"spills {k['spill_stores']}/{k['spill_loads']} bytes" + (f" (baseline {spill0})" if spill0 else ""))
        if k["stack"] > stack0:
            why.append(f"{k['stack']}-byte stack frame" + (f" (baseline {stack0})" if stack0 else ""))
        if k["smem"] > args.max_smem:
            why.append(f"{k['smem']} bytes of static shared memory > {args.max_smem}")
        rows.append(f"| {k['source']} | `{label}` | {k['registers']} | {k['stack']} | {k['spill_stores']}/{k['spill_loads']} | {k['smem']} |")
        if why:
            failures.append(f"{k['source']}: {label}: " + "; ".join(why))

    table = [f"sm_{args.arch}: {len(kernels)} kernels; no stack or spills, static shared memory at most {args.max_smem} bytes"
             + (f", registers within {args.slack} of {args.baseline}" if args.baseline else ""), "",
             "| source | kernel | registers | stack | spill st/ld | smem bytes |", "|---|---|---:|---:|---:|---:|"] + rows
    print("\n".join(table))
    if args.table:
        with open(args.table, "w") as f:
            f.write("\n".join(table) + "\n")
    if args.write_baseline:
        with open(args.write_baseline, "w") as f:
            f.write(f"# registers stack spill-bytes kernel, sm_{args.arch} (tests/kernels/cuda/ptxas_resources.py --write-baseline)\n")
            for mangled, k in sorted(kernels.items(), key=lambda kv: short(names[kv[0]])):
                f.write(f"{k['registers']} {k['stack']} {max(k['spill_stores'], k['spill_loads'])} {short(names[mangled])}\n")
    for f in failures:
        print("FAIL " + f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
