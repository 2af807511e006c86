#!/usr/bin/env python3
"""Compares two captures of the same run made on different devices (read with h5py, as a user
without the tool would): the prefill maps and every decode step's effective rows within a
tolerance, and the covers and refined pages exactly wherever the choice had no near-tie (a page's
summary mass, or a heavy hitter's score, within the tolerance of the next candidate's).

usage: compare_captures.py A.h5 B.h5 [ROW_TOL [COVER_FRACTION]]
                                                    prints one JSON object; exit 1 when they differ
       compare_captures.py --check A.h5             the file alone: readable, rows sum to 1
       compare_captures.py --reference REF.h5 A.h5 B.h5 [FACTOR]
                                                    A as close to REF as B is (within FACTOR, 2)

Rows are compared where both captures chose the same cover (heavy hitters, refined pages); the
rows whose covers differ are counted, and more than COVER_FRACTION of them (1%) fails it.
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


def compare(a_path, b_path, tol, cover_frac=1e-2):
    res = {"a": a_path, "b": b_path, "row_tolerance": tol, "cover_fraction": cover_frac}
    with h5py.File(a_path, "r", swmr=True) as a, h5py.File(b_path, "r", swmr=True) as b:
        res["steps"] = [int(a["complete_steps"][0]), int(b["complete_steps"][0])]
        n = min(res["steps"])
        res["same_tokens"] = bool(np.array_equal(a["tokens/id"][()], b["tokens/id"][()]))
        da, db = a["decode"], b["decode"]
        res["same_modes"] = bool(np.array_equal(da["mode"][()][:n], db["mode"][()][:n]))
        res["same_paged_end"] = bool(np.array_equal(da["paged_end"][()][:n], db["paged_end"][()][:n]))
        same_cover = None  # [steps, layers, heads]: the row's cover is the same in both
        if "cover" in da and "cover" in db:
            ca, cb = da["cover"][:n], db["cover"][:n]
            w = min(ca.shape[-1], cb.shape[-1])
            res["cover_cells"] = int(ca[..., :w].size)
            res["cover_mismatches"] = int((ca[..., :w] != cb[..., :w]).sum())
            same_cover = (ca[..., :w] == cb[..., :w]).all(axis=-1)
            res["rows"] = int(same_cover.size)
            res["rows_with_another_cover"] = int((~same_cover).sum())
        if "effective" in da and "effective" in db:
            ea, eb = da["effective"][:n].astype(np.float32), db["effective"][:n].astype(np.float32)
            w = min(ea.shape[-1], eb.shape[-1])
            diff = np.abs(ea[..., :w] - eb[..., :w]).max(axis=-1) if ea.size else np.zeros((0,))
            res["max_row_diff"] = float(diff.max()) if diff.size else 0.0
            # A row whose cover differs (a heavy hitter or page chosen otherwise near a tie) differs
            # by the weight that moved; the tolerance is for rows that chose alike.
            if same_cover is not None and diff.size:
                res["max_row_diff_same_cover"] = float(diff[same_cover].max()) if same_cover.any() else 0.0
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
    row_diff = res.get("max_row_diff_same_cover", res.get("max_row_diff", 0))
    other = res.get("rows_with_another_cover", 0) / max(res.get("rows", 1), 1)
    res["ok"] = bool(res["same_tokens"] and res["same_modes"] and row_diff <= tol and other <= cover_frac
                     and res.get("refined_mismatches_without_a_tie", 0) == 0
                     and (res["max_map_diff"] is None or res["max_map_diff"] <= tol))
    return res


def against_reference(ref_path, a_path, b_path, factor):
    """How far A and B each lie from a reference capture of the same run (fp32 on one device):
    A passes when its prefill maps and its rows on covers chosen alike are at most `factor` times
    B's distance (plus 1e-3), i.e. A is as close to fp32 as B (the other device in bf16) is."""
    ra, rb = compare(a_path, ref_path, 1.0, 1.0), compare(b_path, ref_path, 1.0, 1.0)
    res = {"reference": ref_path, "a": a_path, "b": b_path, "factor": factor}
    ok = True
    for key in ("max_map_diff", "max_row_diff_same_cover"):
        x, y = ra.get(key), rb.get(key)
        res[key] = [x, y]
        if x is not None and y is not None:
            ok = ok and x <= factor * y + 1e-3
    res["rows_with_another_cover"] = [ra.get("rows_with_another_cover"), rb.get("rows_with_another_cover")]
    if None not in res["rows_with_another_cover"]:  # choices that moved: as few as B's, within the factor
        ok = ok and res["rows_with_another_cover"][0] <= factor * res["rows_with_another_cover"][1] + 0.001 * ra.get("rows", 0)
    res["ok"] = bool(ok and ra["same_tokens"] and rb["same_tokens"])
    return res


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        r = check_one(sys.argv[2])
    elif len(sys.argv) in (5, 6) and sys.argv[1] == "--reference":
        r = against_reference(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5]) if len(sys.argv) == 6 else 2.0)
    elif len(sys.argv) in (3, 4, 5):
        r = compare(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) >= 4 else 2e-2,
                    float(sys.argv[4]) if len(sys.argv) == 5 else 1e-2)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print(json.dumps(r))
    return 0 if r["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
