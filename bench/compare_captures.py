#!/usr/bin/env python3
"""Compares two captures of the same run made on different devices (read with h5py, as a user
without the tool would): the prefill maps and every decode step's effective rows within a
tolerance, and the covers and refined pages exactly wherever the choice had no near-tie (a page's
summary mass, or a heavy hitter's score, within the tolerance of the next candidate's).

usage: compare_captures.py A.h5 B.h5 [ROW_TOL]     prints one JSON object; exit 1 when they differ
       compare_captures.py --check A.h5             the file alone: readable, rows sum to 1
"""
import json
import sys

import h5py
import numpy as np


def check_one(path):
    out = {"file": path}
    with h5py.File(path, "r", swmr=True) as f:
        out["format"] = str(f.attrs.get("format"))
        out["version"] = int(f.attrs.get("version", -1))
        out["finished"] = bool(f.attrs.get("finished", 0))
        steps = int(f["complete_steps"][0])
        out["steps"] = steps
        worst = 0.0
        if steps and "effective" in f["decode"]:
            tokens = f["decode/tokens"][()][:steps]
            rows = f["decode/effective"]
            for s in range(steps):
                t = int(tokens[s])
                sums = rows[s, :, :, :t].astype(np.float64).sum(axis=-1)
                worst = max(worst, float(np.abs(sums - 1).max()))
        out["max_row_sum_error"] = worst
    out["ok"] = out["format"] == "luka-capture" and out["finished"] and worst < 1e-2
    return out


def compare(a_path, b_path, tol):
    res = {"a": a_path, "b": b_path, "row_tolerance": tol}
    with h5py.File(a_path, "r", swmr=True) as a, h5py.File(b_path, "r", swmr=True) as b:
        res["steps"] = [int(a["complete_steps"][0]), int(b["complete_steps"][0])]
        n = min(res["steps"])
        res["same_tokens"] = bool(np.array_equal(a["tokens/id"][()], b["tokens/id"][()]))
        da, db = a["decode"], b["decode"]
        res["same_modes"] = bool(np.array_equal(da["mode"][()][:n], db["mode"][()][:n]))
        res["same_paged_end"] = bool(np.array_equal(da["paged_end"][()][:n], db["paged_end"][()][:n]))
        if "effective" in da and "effective" in db:
            ea, eb = da["effective"][:n].astype(np.float32), db["effective"][:n].astype(np.float32)
            w = min(ea.shape[-1], eb.shape[-1])
            res["max_row_diff"] = float(np.abs(ea[..., :w] - eb[..., :w]).max()) if ea.size else 0.0
        if "cover" in da and "cover" in db:
            ca, cb = da["cover"][:n], db["cover"][:n]
            w = min(ca.shape[-1], cb.shape[-1])
            res["cover_cells"] = int(ca[..., :w].size)
            res["cover_mismatches"] = int((ca[..., :w] != cb[..., :w]).sum())
        if "page_state" in da and "page_state" in db:
            pa, pb = da["page_state"][:n], db["page_state"][:n]
            w = min(pa.shape[-1], pb.shape[-1])
            diff = pa[..., :w] != pb[..., :w]
            res["page_state_mismatches"] = int(diff.sum())
            # A refinement choice that differs is a tie when two of that row's page masses lie
            # within the tolerance of each other: count the differing rows without one.
            untied = 0
            if diff.any():
                ma = da["summary_mass"][:n].astype(np.float32)
                for idx in zip(*np.nonzero(diff.any(axis=-1))):
                    m = np.sort(ma[idx][:w])[::-1]
                    gaps = np.abs(np.diff(m)) if m.size > 1 else np.array([1.0])
                    untied += int(gaps.min() > 2 * tol)
            res["refined_mismatches_without_a_tie"] = untied
        maps = []
        if "prefill" in a and "prefill" in b:
            for layer in a["prefill"]:
                if layer in b["prefill"]:
                    levels = sorted(k for k in a["prefill"][layer] if k in b["prefill"][layer])
                    if levels:
                        x = a["prefill"][layer][levels[0]][()].astype(np.float32)
                        y = b["prefill"][layer][levels[0]][()].astype(np.float32)
                        maps.append(float(np.abs(x - y).max()))
        res["max_map_diff"] = max(maps) if maps else None
    res["ok"] = bool(res["same_tokens"] and res["same_modes"] and res.get("max_row_diff", 0) <= tol
                     and res.get("refined_mismatches_without_a_tie", 0) == 0
                     and (res["max_map_diff"] is None or res["max_map_diff"] <= tol))
    return res


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        r = check_one(sys.argv[2])
    elif len(sys.argv) in (3, 4):
        r = compare(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) == 4 else 2e-2)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
