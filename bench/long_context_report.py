#!/usr/bin/env python3
"""Markdown tables from `luka eval niah` and `luka eval ruler` result folders (their results.jsonl),
for bench/results/long-context.md.

  bench/long_context_report.py niah DIR [DIR...]    one row per preset (the folders' presets in order;
                                                    a preset in two folders is one row when their
                                                    samples differ, else the second is named after
                                                    its folder),
                                                    the mean score per length and overall
  bench/long_context_report.py depths DIR [DIR...]  one row per preset and depth, per length
  bench/long_context_report.py digits DIR [DIR...]  one row per preset: of the needle grid's answers,
                                                    the mean number of the value's leading digits that
                                                    the answer's first number gets right (7 of 7 when
                                                    exact), per length and overall: partial retrieval,
                                                    which exact match counts as a miss
  bench/long_context_report.py ruler DIR [DIR...]   one row per task, one column per preset, the
                                                    mean per task and the average as RULER reports it
Scores are percentages of the samples' scores (string_match_all or _part, as each task scores).
"""
import json
import os
import sys
from collections import OrderedDict


def records(folder):
    with open(os.path.join(folder, "results.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def key(r):
    return (r["task"], r["length"], r.get("depth"), r["sample"])


def named(folders):
    """(column name, records) per preset of each folder, in order. A preset seen before joins it
    when their samples differ (e.g. Quest's pages set per length in folders of their own), else it
    is named after its folder too."""
    out = OrderedDict()
    for folder in folders:
        by = OrderedDict()
        for r in records(folder):
            by.setdefault(r["preset"], []).append(r)
        for preset, rs in by.items():
            if preset in out and not {key(r) for r in rs} & {key(r) for r in out[preset]}:
                out[preset] += rs
                continue
            name = preset if preset not in out else "%s (%s)" % (preset, os.path.basename(os.path.normpath(folder)))
            out[name] = rs
    return out


def mean(xs):
    return 100.0 * sum(xs) / len(xs) if xs else float("nan")


def per_length(folders, value, fmt):
    """One row per preset: the mean of value(record) per length and over all."""
    columns = named(folders)
    lengths = sorted({r["length"] for rs in columns.values() for r in rs})
    print("| preset | " + " | ".join("%d" % n for n in lengths) + " | all |")
    print("|---|" + "---:|" * (len(lengths) + 1))
    for name, rs in columns.items():
        cells = []
        for n in lengths:
            xs = [value(r) for r in rs if r["length"] == n]
            cells.append(fmt % (sum(xs) / len(xs)) if xs else "-")
        xs = [value(r) for r in rs]
        print("| %s | %s | %s |" % (name, " | ".join(cells), fmt % (sum(xs) / len(xs))))


def niah(folders):
    per_length(folders, lambda r: 100.0 * r["score"], "%.0f")


def depths(folders):
    columns = named(folders)
    lengths = sorted({r["length"] for rs in columns.values() for r in rs})
    print("| preset | depth % | " + " | ".join("%d" % n for n in lengths) + " |")
    print("|---|---:|" + "---:|" * len(lengths))
    for name, rs in columns.items():
        for d in sorted({r["depth"] for r in rs}):
            cells = []
            for n in lengths:
                xs = [r["score"] for r in rs if r["length"] == n and r["depth"] == d]
                cells.append("%.0f" % mean(xs) if xs else "-")
            print("| %s | %g | %s |" % (name, d, " | ".join(cells)))


def leading_digits(r):
    first = ""
    for ch in r["prediction"]:
        if ch.isdigit():
            first += ch
        elif first:
            break
    value = r["answers"][0]
    n = 0
    while n < min(len(first), len(value)) and first[n] == value[n]:
        n += 1
    return n


def digits(folders):
    per_length(folders, leading_digits, "%.1f")


def ruler(folders):
    columns = named(folders)
    tasks = []
    for rs in columns.values():
        for r in rs:
            if r["task"] not in tasks:
                tasks.append(r["task"])
    print("| task | " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * len(columns))
    per_task = {name: {t: mean([r["score"] for r in rs if r["task"] == t]) for t in tasks} for name, rs in columns.items()}
    for t in tasks:
        print("| %s | %s |" % (t, " | ".join("%.1f" % per_task[name][t] for name in columns)))
    print("| **average** | %s |" % " | ".join("**%.1f**" % (sum(per_task[name].values()) / len(tasks)) for name in columns))


if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in ("niah", "depths", "digits", "ruler"):
        sys.exit(__doc__)
    {"niah": niah, "depths": depths, "digits": digits, "ruler": ruler}[sys.argv[1]](sys.argv[2:])
