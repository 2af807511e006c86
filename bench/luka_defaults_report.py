#!/usr/bin/env python3
"""Writes bench/results/luka-defaults.md from the folders bench/run_luka_defaults.sh fills.

usage: luka_defaults_report.py OUT_DIR RESULTS_DIR COMMIT

Each sweep folder (OUT_DIR/<part>/results.json, from `luka sweep`) becomes a table of its runs
with the perplexity and its ratio to the sweep's dense baseline; OUT_DIR/presets/*.json (from
`luka perplexity --json`) the presets table. Figures are copied to RESULTS_DIR/figures/.
"""
import datetime
import json
import os
import platform
import shutil
import sys

PARTS = [
    ("options", "Clustered options at pages 16, top_k 3 (tau 1)",
     "Compressor, summary bias and refinement math. Mean summaries with mass-preserving refinement "
     "(the old default) are far from dense; attention-weighted summaries with exact refinement are best. "
     "Run when tau's default was 1 (the grid has no tau); the script's part pins tau=1 to repeat it."),
    ("tau", "Temperature of the attention-weighted compressor (exact refinement)",
     "Smaller tau puts a page's summary closer to its most important token; the bias adds nothing "
     "once refinement is exact."),
    ("heldout", "A second text: old and new clustered defaults",
     "The choice made on the first text holds on a text it was not chosen on."),
    ("fig4", "Fig. 4's structure: perplexity against the refined fraction of pages, per compressor",
     "rule top_frac; 0 refines nothing, 1 refines every page (exact refinement of every page is dense)."),
    ("fig5", "Fig. 5's structure: refinement rule and mixed layers",
     "Each rule at its default parameter (threshold 0.01, top_k 3, top_frac 0.125, top_p 0.5); "
     "mixed(a,b) keeps the first a and last b layers lined."),
]
PRESETS = ["dense", "lined", "clustered", "mixed(8,8)", "paper", "authors_eval", "auto", "auto-kl"]


def settings_text(item):
    return ", ".join(f"{k}={v}" for k, v in item["settings"] if k != "preset" or v != "clustered") or "clustered"


def sweep_table(folder, fallback_base=None):
    with open(os.path.join(folder, "results.json")) as f:
        res = json.load(f)
    with open(os.path.join(folder, "manifest.json")) as f:
        manifest = json.load(f)
    items = [r for r in res["results"] if r.get("value") is not None]
    base = next((r["value"] for r in items if r.get("baseline")), fallback_base)
    lines = ["| run | perplexity | × dense |", "|---|---:|---:|"]
    for r in items:
        label = "dense (baseline)" if r.get("baseline") else settings_text(r)
        ratio = f"{r['value'] / base:.3f}" if base else "—"
        lines.append(f"| {label} | {r['value']:.3f} | {ratio} |")
    command = "luka sweep --metric perplexity --grid \"" + manifest["grid"] + "\" ... -- " + " ".join(
        a if "/" not in a else os.path.join("…", os.path.basename(a)) for a in manifest["base_args"])
    return lines, command, base


def main():
    out_dir, results_dir, commit = sys.argv[1:4]
    figures = os.path.join(results_dir, "figures")
    os.makedirs(figures, exist_ok=True)
    md = [
        "# LuKA defaults, presets and the paper's Figs. 4-5 (perplexity)",
        "",
        f"Written {datetime.date.today()} by `bench/run_luka_defaults.sh` (commit {commit}; "
        f"{platform.processor() or platform.machine()}). Default model (SmolLM2-135M-Instruct, GGUF), fp32 "
        "on the CPU. Perplexity of a text's tokens 1025-2048 scored through the decode path after "
        "the first 1024 are prefilled (`--max-tokens 2048 --prompt-tokens 1024`); the texts are "
        "emma.txt and, for the held-out check and auto's calibration, prideprejudice.txt "
        "(../shared/data/texts). Every number is deterministic: a rerun gives the same digits.",
        "",
    ]
    for name, title, note in PARTS:
        # A part's folder, and folders <part>-<suffix> holding more runs of it (each its own table).
        found = sorted(d for d in os.listdir(out_dir)
                       if (d == name or d.startswith(name + "-")) and os.path.exists(os.path.join(out_dir, d, "results.json")))
        if not found:
            continue
        md += [f"## {title}", "", note, ""]
        base = None  # a folder without a dense baseline takes the part's first one
        for d in found:
            folder = os.path.join(out_dir, d)
            lines, command, base = sweep_table(folder, base)
            md += [f"`{command}`", ""] + lines + [""]
            for ext in ("png", "svg"):
                src = os.path.join(folder, "plot." + ext)
                if os.path.exists(src):
                    shutil.copyfile(src, os.path.join(figures, f"luka-defaults-{d}.{ext}"))
            if os.path.exists(os.path.join(folder, "plot.png")):
                md += [f"![{title}](figures/luka-defaults-{d}.png)", ""]
    presets = os.path.join(out_dir, "presets")
    rows = []
    for p in PRESETS:
        path = os.path.join(presets, p + ".json")
        if os.path.exists(path):
            with open(path) as f:
                rows.append((p, json.load(f)))
    if rows:
        dense = next((d["perplexity"] for p, d in rows if p == "dense"), None)
        budget = ""
        if os.path.exists(os.path.join(presets, "budget.txt")):
            with open(os.path.join(presets, "budget.txt")) as f:
                budget = f.read().strip()
        md += ["## Presets", "",
               "`bench/run_luka_defaults.sh presets`: `luka perplexity --text-file emma.txt --max-tokens 2048 "
               "--prompt-tokens 1024 --preset P --json` per preset. `auto` is `auto:calibration.json,budget=B` "
               "with the calibration (`luka calibrate`) on prideprejudice.txt and B paper's budget: "
               "the entries per step paper's layers attend, over dense's, from the same calibration "
               f"({budget or 'budget.txt missing'}).", "",
               "| preset | perplexity | × dense | attention |", "|---|---:|---:|---|"]
        for p, d in rows:
            ratio = f"{d['perplexity'] / dense:.3f}" if dense else "—"
            attention = d.get("attention", "").replace("|", "\\|")  # a markdown cell
            md.append(f"| {p} | {d['perplexity']:.3f} | {ratio} | {attention} |")
        md.append("")
    with open(os.path.join(results_dir, "luka-defaults.md"), "w") as f:
        f.write("\n".join(md))
    print("wrote", os.path.join(results_dir, "luka-defaults.md"))


if __name__ == "__main__":
    main()
