#!/usr/bin/env python3
"""Recomputes `luka inspect --topics --json` and `--heads --json` from a capture's HDF5 datasets with
h5py and numpy alone, following the definitions of docs/capture-analysis.md (the reference for
tests/captures/test_analysis_cli.cpp).

    capture_analysis.py CAPTURE OUT.json

OUT holds {"topics": {...}, "heads": {...}} in the layout of the two JSON reports, with the
numbers only: every layer and head recorded, every decode step.
"""
import json
import sys

import h5py
import numpy as np


def strings(ds):
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in ds[:]]


def main(path, out):
    with h5py.File(path, "r", swmr=True) as f:
        lay = f["layout"].attrs
        layers = [int(v) for v in lay["layers"]]
        heads = [int(v) for v in lay["heads"]]
        n = int(lay["prompt_tokens"])
        levels = [int(v) for v in lay["levels"]]
        steps = int(f["complete_steps"][0])
        finished = int(f.attrs.get("finished", 0))
        n_tok = len(f["tokens/id"]) if finished else n + steps
        ids = f["tokens/id"][:n_tok].astype(np.int64)
        seg_of = f["tokens/segment"][:n_tok].astype(np.int64)
        labels = strings(f["segments/label"])
        S = len(labels)
        begins = f["segments/begin"][:]

        # Topics: distinct labels in the order of their first segment.
        topic_labels = []
        seg_topic = []
        for lab in labels:
            if lab not in topic_labels:
                topic_labels.append(lab)
            seg_topic.append(topic_labels.index(lab))
        K = len(topic_labels)
        seg_topic = np.array(seg_topic, dtype=np.int64)
        tok_topic = np.where(seg_of >= 0, seg_topic[np.maximum(seg_of, 0)], -1) if S else np.full(n_tok, -1)
        decode_topic = int(seg_topic[int(np.argmax(begins))]) if S else -1
        # The topic the prompt's question asks about, when its file named one (generation.question_topic).
        generation = f["manifest"].attrs["generation"]
        asked = json.loads(generation.decode() if isinstance(generation, bytes) else generation).get("question_topic")
        if asked in topic_labels:
            decode_topic = topic_labels.index(asked)
        column = np.where(seg_of >= 0, seg_of, S)  # matrix column of each token; S: outside every segment

        topics_heads, score_heads = [], []
        for li, layer in enumerate(layers):
            # Page topics: the topic with most tokens in the page, ties to the one met first.
            start = f["pages/layer_%02d/start" % layer][:]
            end = f["pages/layer_%02d/end" % layer][:]
            created = f["pages/layer_%02d/created_step" % layer][:]
            page_topic = []
            for a, b in zip(start, end):
                t = [int(x) if x >= 0 else K for x in tok_topic[a:b]]
                counts = {c: t.count(c) for c in t}
                best = max(counts.values()) if counts else 0
                page_topic.append(next((c for c in t if counts[c] == best), K))

            for hi, head in enumerate(heads):
                th = {"layer": layer, "head": head}
                sh = {"layer": layer, "head": head}
                if 0 in levels:
                    A = f["prefill/layer_%02d/level_0" % layer][hi].astype(np.float64)  # [n, n], zero right of the diagonal
                    q = np.arange(n)
                    onehot = np.zeros((n, S + 1))
                    onehot[np.arange(n), column[:n]] = 1
                    by_col = A @ onehot  # [q, j]: mass of row q on segment j
                    matrix = np.zeros((S + 1, S + 1))
                    queries = np.zeros(S + 1, dtype=np.int64)
                    for i in range(S + 1):
                        rows = column[:n] == i
                        queries[i] = rows.sum()
                        if queries[i]:
                            matrix[i] = by_col[rows].mean(axis=0)
                    # Cross-topic: per query row in a segment, the mass on keys of other topics.
                    kt = tok_topic[:n]
                    other = (kt[None, :] >= 0) & (kt[None, :] != kt[:, None])
                    cross_rows = kt >= 0
                    cross = (A * other).sum(axis=1)[cross_rows]
                    th["prefill"] = {"matrix": matrix.tolist(), "queries": queries.tolist(),
                                     "leakage": float(cross.mean()) if cross.size else None}
                    logs = np.where(A > 0, A * np.log(np.where(A > 0, A, 1)), 0)
                    dist = q[:, None] - q[None, :]
                    prev = A[q[1:], q[1:] - 1]
                    induction = []
                    for qq in range(n):
                        keys = [k for k in range(1, qq) if ids[k - 1] == ids[qq]]
                        if keys:
                            induction.append(A[qq, keys].sum())
                    sh["prefill"] = scores(A[:, 0], -logs.sum(axis=1), (A * np.maximum(dist, 0)).sum(axis=1), prev, induction,
                                           cross if S else [])
                # Decode steps: the effective rows.
                dec_steps, leak, leak_by_topic = [], [], []
                refined_sum, heavy_sum = np.zeros(K + 1, dtype=np.int64), np.zeros(K + 1, dtype=np.int64)
                sink, ent, loc, prv, ind, crs = [], [], [], [], [], []
                kls = []
                for s in range(steps):
                    T = int(f["decode/tokens"][s])
                    row = f["decode/effective"][s, li, hi, :T].astype(np.float64)
                    seg_mass = np.bincount(column[:T], weights=row, minlength=S + 1)
                    topic_mass = np.zeros(K + 1)
                    for i in range(S):
                        topic_mass[seg_topic[i]] += seg_mass[i]
                    topic_mass[K] = seg_mass[S]
                    kt = tok_topic[:T]
                    lk = float(row[(kt >= 0) & (kt != decode_topic)].sum())
                    leak.append(lk)
                    leak_by_topic.append([float(row[(kt >= 0) & (kt != k)].sum()) for k in range(K)])
                    P = int(np.sum(created < s + 1))
                    state = f["decode/page_state"][s, li, hi, :P]
                    refined = np.zeros(K + 1, dtype=np.int64)
                    for p in np.nonzero(state == 2)[0]:
                        refined[page_topic[p]] += 1
                    cover = f["decode/cover"][s, li, hi, :T]
                    heavy = np.zeros(K + 1, dtype=np.int64)
                    for k in np.nonzero(cover == 4)[0]:
                        heavy[kt[k] if kt[k] >= 0 else K] += 1
                    refined_sum += refined
                    heavy_sum += heavy
                    dec_steps.append({"step": s + 1, "segments": seg_mass.tolist(), "topics": topic_mass.tolist(),
                                      "generated": float(row[n:].sum()), "leakage": lk,
                                      "refined_pages": refined.tolist(), "heavy_hitters": heavy.tolist()})
                    qq = T - 1
                    sink.append(row[0])
                    ent.append(-float(np.sum(row[row > 0] * np.log(row[row > 0]))))
                    loc.append(float(np.sum(row * (qq - np.arange(T)))))
                    prv.append(row[qq - 1])
                    keys = [k for k in range(1, qq) if ids[k - 1] == ids[qq]]
                    if keys:
                        ind.append(row[keys].sum())
                    if S:
                        crs.append(lk)
                    kl = float(f["decode/fidelity"][s, li, hi, 0])
                    if not np.isnan(kl):
                        kls.append(kl)
                if steps:
                    by_topic = np.mean(np.array(leak_by_topic), axis=0)
                    th["decode"] = {"leakage": float(np.mean(leak)),
                                    "leakage_by_topic": {chr(ord("A") + k): float(by_topic[k]) for k in range(K)},
                                    "refined_pages": refined_sum.tolist(),
                                    "heavy_hitters": heavy_sum.tolist(), "steps": dec_steps}
                    sh["decode"] = scores(sink, ent, loc, prv, ind, crs)
                sh["kl"] = float(np.mean(kls)) if kls else None
                sh["kl_steps"] = len(kls)
                topics_heads.append(th)
                score_heads.append(sh)

    letters = [chr(ord("A") + k) for k in range(K)]
    result = {
        "topics": {"prompt_tokens": n, "steps": steps, "decode_topic": letters[decode_topic] if S else None,
                   "topics": [{"letter": letters[k], "label": topic_labels[k]} for k in range(K)], "heads": topics_heads},
        "heads": {"prompt_tokens": n, "steps": steps, "heads": score_heads},
    }
    with open(out, "w", encoding="utf-8") as o:
        json.dump(result, o)


def scores(sink, entropy, locality, prev, induction, cross):
    mean = lambda v: float(np.mean(v)) if len(v) else None
    return {"sink": mean(sink), "entropy": mean(entropy), "locality": mean(locality), "previous_token": mean(prev),
            "induction": mean(induction), "cross_topic": mean(cross), "rows": len(sink), "previous_rows": len(prev),
            "induction_rows": len(induction), "cross_rows": len(cross)}


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
