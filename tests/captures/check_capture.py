#!/usr/bin/env python3
"""Checks a capture file with h5py alone, as a user without the tool would read it.

    check_capture.py FILE [--hf-model PATH] [--expect-steps N] [--expect-finished 0|1]

- runs the h5py example of docs/capture-format.md on it;
- checks the documented datasets, attributes and dtypes (maps and rows IEEE float16);
- pyramid: every stored level equals the 2x2 max-pool of the level below it, computed here with
  numpy (levels must be consecutive); level 0 rows are distributions over keys <= query;
- per decode step: effective rows sum to 1, covers agree with the page table, page states and
  the layer's mode (kascade, press and quest: the attended keys raw, the rest dropped, as many raw
  as cover_size);
- with --hf-model (a GGUF file or HF folder): the prefill map at level 0 and the effective rows of
  dense steps equal transformers' eager attention probabilities (output_attentions) on the same
  tokens, within 2e-3 (float16 storage); in an all-dense run, each generated token's recorded
  probability equals transformers' softmax at that position, within 1e-3.
Exits non-zero with a message on the first failure.
"""
import argparse
import os
import re
import sys

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


MODES = {0: "dense", 1: "lined", 2: "clustered", 3: "kascade", 4: "press", 5: "quest"}


def fail(msg):
    print("check_capture: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def doc_example():
    text = open(os.path.join(ROOT, "docs", "capture-format.md"), encoding="utf-8").read()
    m = re.search(r"```python\n(.*?)```", text, re.S)
    check(m is not None, "docs/capture-format.md has no python example")
    scope = {}
    exec(compile(m.group(1), "docs/capture-format.md", "exec"), scope)
    return scope["read_capture"]


class LayerRows:
    """One recorded layer's slice of the /decode arrays ([S, L, ...]): rows["effective"][s, :, :T]
    reads /decode/effective[s, li, :, :T]."""

    def __init__(self, decode, li):
        self.decode, self.li = decode, li

    def __contains__(self, part):
        return part in self.decode

    def __getitem__(self, part):
        return LayerRows.Part(self.decode[part], self.li)

    class Part:
        def __init__(self, ds, li):
            self.ds, self.li, self.dtype = ds, li, ds.dtype

        def __getitem__(self, index):
            index = index if isinstance(index, tuple) else (index,)
            return self.ds[(index[0], self.li) + index[1:]]


def maxpool(a):
    h, r, c = a.shape
    pad = np.zeros((h, r + r % 2, c + c % 2), dtype=a.dtype)
    pad[:, :r, :c] = a
    return pad.reshape(h, pad.shape[1] // 2, 2, pad.shape[2] // 2, 2).max(axis=(2, 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--hf-model")
    ap.add_argument("--expect-steps", type=int)
    ap.add_argument("--expect-finished", type=int)
    a = ap.parse_args()

    window, cover, row, refined, text = doc_example()(a.file)
    check(cover.dtype == np.uint8 and row.dtype == np.float16, "documented example: wrong dtypes")
    check(abs(float(row.astype(np.float64).sum()) - 1) < 2e-3, "documented example: effective row does not sum to 1")
    check(len(text) > 0, "documented example: no text")

    f = h5py.File(a.file, "r", swmr=True)
    check(f.attrs["format"] == "luka-capture" and int(f.attrs["version"]) == 2, "format/version attributes")
    finished = int(f.attrs.get("finished", 0))
    if a.expect_finished is not None:
        check(finished == a.expect_finished, "finished = %d, expected %d" % (finished, a.expect_finished))
    for key in ["model_path", "architecture", "model_config", "weights_hash", "tokenizer_hash", "luka_config",
                "generation", "seed", "device", "dtype", "tool_version", "git_revision", "created", "record"]:
        check(key in f["manifest"].attrs, "manifest attribute %s missing" % key)
    check(len(f["manifest"].attrs["weights_hash"]) == 64, "weights_hash is not a sha256")
    lay = f["layout"].attrs
    layers, heads = [int(x) for x in lay["layers"]], [int(x) for x in lay["heads"]]
    levels = [] if isinstance(lay["levels"], h5py.Empty) else [int(x) for x in lay["levels"]]
    n = int(lay["prompt_tokens"])
    steps = int(f["complete_steps"][0])
    if a.expect_steps is not None:
        check(steps == a.expect_steps, "complete_steps = %d, expected %d" % (steps, a.expect_steps))
    ids = f["tokens/id"][:]
    check(ids.dtype == np.int32 and len(ids) >= n + steps, "tokens/id too short")
    # While a run is written, token lists are allocated ahead: only prompt + complete steps are valid.
    ntok = len(ids) if finished else n + steps
    ids = ids[:ntok]
    gen = f["tokens/generated"][:ntok]
    check(not gen[:n].any() and gen[n:n + steps].all(), "tokens/generated flags")
    prob = f["tokens/prob"][:ntok]
    check(prob.dtype == np.float32 and np.isnan(prob[:n]).all(), "tokens/prob: prompt tokens must be NaN")
    check(np.all((prob[n:] > 0) & (prob[n:] <= 1)), "tokens/prob: generated tokens need a probability in (0, 1]")
    seg = f["tokens/segment"][:ntok]
    for i, (b, e) in enumerate(zip(f["segments/begin"][:], f["segments/end"][:])):
        check(0 <= b <= e <= n and (seg[b:e] == i).sum() > 0 if e > b else True, "segment %d span" % i)
    step_T = f["decode/tokens"][:steps]
    check(list(step_T) == [n + s + 1 for s in range(steps)], "decode/tokens is not prompt + step")

    dec = f["decode"]
    L, H = len(layers), len(heads)
    for part, rank in (("mode", 2), ("paged_end", 2), ("seconds", 2), ("cover_size", 3), ("fidelity", 4),
                       ("effective", 4), ("dense", 4), ("cover", 4), ("page_state", 4), ("summary_mass", 4)):
        if part in dec:
            d = dec[part]
            check(len(d.shape) == rank and d.shape[0] >= steps and d.shape[1] == L and (rank == 2 or d.shape[2] == H),
                  "decode/%s shape %s: want [steps, %d layers, %d heads, ...]" % (part, d.shape, L, H))
    for li, layer in enumerate(layers):
        lg = "layer_%02d" % layer
        prev = None
        for k in levels:
            d = f["prefill/%s/level_%d" % (lg, k)]
            check(d.dtype == np.float16, "%s level %d dtype %s" % (lg, k, d.dtype))
            size = -(-n // (1 << k))
            check(d.shape == (len(heads), size, size), "%s level %d shape %s" % (lg, k, d.shape))
            m = d[:]
            if k == 0:
                check(np.all(np.triu(m.astype(np.float32), 1) == 0), "%s: prefill map has mass above the diagonal" % lg)
                check(np.allclose(m.astype(np.float64).sum(-1), 1, atol=2e-3), "%s: prefill rows do not sum to 1" % lg)
            if prev is not None and prev[0] == k - 1:
                check(np.array_equal(maxpool(prev[1]), m), "%s: level %d is not the max-pool of level %d" % (lg, k, k - 1))
            prev = (k, m)
        dd = LayerRows(dec, li)
        mode = dd["mode"][:steps]
        paged_end = dd["paged_end"][:steps]
        check(dd["fidelity"].dtype == np.float32 and dd["cover_size"].dtype == np.int32, "%s metric dtypes" % lg)
        start, end, created = (f["pages/%s/%s" % (lg, x)][:] for x in ("start", "end", "created_step"))
        check(np.all(end > start), "%s: empty pages" % lg)
        # Each page's positions (version 2 lists those of SemantiCache's clusters); every position
        # below the last page's span lies in exactly one page.
        raw = f["pages/%s/raw" % lg][:] if "pages/%s/raw" % lg in f else np.zeros(len(start), dtype=np.uint8)
        member_end = f["pages/%s/member_end" % lg][:] if "pages/%s/member_end" % lg in f else np.zeros(len(start), dtype=np.int64)
        members = f["pages/%s/members" % lg][:] if "pages/%s/members" % lg in f else np.zeros(0, dtype=np.int64)
        begin = np.concatenate([[0], member_end[:-1]]).astype(np.int64)
        positions = [members[b:e] if e > b else np.arange(a, z) for a, z, b, e in zip(start, end, begin, member_end)]
        check(all(int(pos[0]) == a and int(pos[-1]) == z - 1 for pos, a, z in zip(positions, start, end)), "%s: members outside their span" % lg)
        check(all(len(pos) == 1 for pos, r in zip(positions, raw) if r), "%s: a raw page of more than one token" % lg)
        if len(positions):
            every = np.sort(np.concatenate(positions))
            check(np.array_equal(every, np.arange(len(every))), "%s: pages do not tile" % lg)
        for s in range(steps):
            T = step_T[s]
            P = int(np.sum(created < s + 1))
            if "effective" in dd:
                check(dd["effective"].dtype == np.float16, "effective dtype")
                r = dd["effective"][s, :, :T].astype(np.float64)
                check(np.allclose(r.sum(-1), 1, atol=2e-3), "%s step %d: rows do not sum to 1" % (lg, s + 1))
            fid = dd["fidelity"][s]  # [H, 4]
            if "dense" in dd and not np.isnan(fid[:, 0]).all():
                check(dd["dense"].dtype == np.float16, "dense dtype")
                dn = dd["dense"][s, :, :T].astype(np.float64)
                check(np.allclose(dn.sum(-1), 1, atol=2e-3), "%s step %d: dense rows do not sum to 1" % (lg, s + 1))
                if mode[s] == 0 and "effective" in dd:  # a dense step: the shadow is the attention the step used
                    check(np.abs(dn - dd["effective"][s, :, :T]).max() < 2e-3, "%s step %d: dense shadow != effective" % (lg, s + 1))
            if "cover" not in dd:
                continue
            cov = dd["cover"][s, :, :T]
            ps = dd["page_state"][s, :, :P]
            check(dd["summary_mass"].dtype == np.float16, "summary_mass dtype")
            if mode[s] == 0:
                check(np.all(cov == 3), "%s step %d: dense cover is not all raw" % (lg, s + 1))
            elif mode[s] == 1:
                check(np.all(np.isin(cov, [3, 4, 5])), "%s step %d: lined cover codes" % (lg, s + 1))
                for hcov in cov:  # the raw window is a suffix
                    raw = np.nonzero(hcov == 3)[0]
                    check(len(raw) > 0 and raw[-1] == T - 1 and np.all(np.diff(raw) == 1), "%s step %d: window" % (lg, s + 1))
            elif mode[s] in (3, 4, 5):
                # kascade, press, quest: the keys each head attended are raw, the rest dropped;
                # the step's own token is always attended, and cover_size counts the raw ones.
                check(np.all(np.isin(cov, [3, 5])), "%s step %d: %s cover codes" % (lg, s + 1, MODES[int(mode[s])]))
                check(np.all(cov[:, T - 1] == 3), "%s step %d: the query's own token is not attended" % (lg, s + 1))
                check(np.array_equal((cov == 3).sum(-1), dd["cover_size"][s]), "%s step %d: cover_size != raw tokens" % (lg, s + 1))
            else:
                pe = int(paged_end[s])
                check(P == 0 or max(int(z) for z in end[:P]) == pe, "%s step %d: paged_end %d != end of the pages" % (lg, s + 1, pe))
                check(np.all(cov[:, pe:] == 3), "%s step %d: raw tail" % (lg, s + 1))
                for h in range(len(heads)):
                    for p in range(P):
                        want = 3 if raw[p] else 2 if ps[h, p] == 2 else 1
                        check(ps[h, p] in (1, 2), "%s step %d: page state %d" % (lg, s + 1, ps[h, p]))
                        check(np.all(cov[h, positions[p]] == want), "%s step %d head %d page %d: cover codes" % (lg, s + 1, h, p))

    if a.hf_model:
        compare_hf(f, a.hf_model, layers, heads, levels, n, steps, ids, prob)
    print("check_capture: OK (%d layers, %d heads, %d steps, levels %s)" % (len(layers), len(heads), steps, levels))


def pool_to_level(m, k):
    """[H, n, n] max-pooled by 2^k over rows and columns, padding with zeros (probabilities)."""
    p = 1 << k
    h, n = m.shape[0], m.shape[1]
    size = -(-n // p)
    padded = np.zeros((h, size * p, size * p), dtype=m.dtype)
    padded[:, :n, :n] = m
    return padded.reshape(h, size, p, size, p).max(axis=(2, 4))


def compare_hf(f, model_path, layers, heads, levels, n, steps, ids, prob):
    import torch
    from transformers import AutoModelForCausalLM
    if os.path.isfile(model_path):
        model = AutoModelForCausalLM.from_pretrained(os.path.dirname(model_path), gguf_file=os.path.basename(model_path),
                                                     dtype=torch.float32, attn_implementation="eager")
    else:
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32, attn_implementation="eager")
    model.eval()
    total = n + steps
    with torch.no_grad():
        out = model(torch.tensor(ids[:total], dtype=torch.long)[None], output_attentions=True)
    worst = 0.0
    for li, layer in enumerate(layers):
        lg = "layer_%02d" % layer
        att = out.attentions[layer][0].numpy()  # [heads, total, total]
        if levels:
            # The finest stored level: level 0 itself, or transformers' map max-pooled to it here
            # (cells of 2^k x 2^k, a cut last cell taking the max of what exists).
            k = min(levels)
            mine = f["prefill/%s/level_%d" % (lg, k)][:].astype(np.float32)
            ref = pool_to_level(att[heads, :n, :n], k)
            err = float(np.abs(mine - ref).max())
            worst = max(worst, err)
            check(err < 2e-3, "%s: prefill map (level %d) differs from transformers by %.2e" % (lg, k, err))
        dd = LayerRows(f["decode"], li)
        if "effective" not in dd:
            continue
        mode = dd["mode"][:steps]
        for s in range(steps):
            if mode[s] != 0:
                continue
            T = n + s + 1
            mine = dd["effective"][s, :, :T].astype(np.float32)
            ref = att[heads, T - 1, :T]
            err = float(np.abs(mine - ref).max())
            worst = max(worst, err)
            check(err < 2e-3, "%s step %d: effective row differs from transformers by %.2e" % (lg, s + 1, err))
    # Token probabilities: only a run whose every layer is dense computes what transformers does.
    import json as _json
    cfg = _json.loads(f["manifest"].attrs["luka_config"])
    if all(v["mode"] == "dense" for v in cfg["layers"].values()):
        p = torch.softmax(out.logits[0].double(), -1).numpy()
        total_tokens = n + steps
        mine = prob[n:total_tokens]
        ref = np.array([p[i - 1, ids[i]] for i in range(n, total_tokens)])
        err = float(np.abs(mine - ref).max())
        check(err < 1e-3, "generated tokens' probabilities differ from transformers by %.2e" % err)
        print("check_capture: token probabilities match transformers (max abs diff %.2e)" % err)
    print("check_capture: transformers attention matches (max abs diff %.2e)" % worst)


if __name__ == "__main__":
    main()
