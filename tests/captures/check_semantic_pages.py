#!/usr/bin/env python3
"""Checks a capture's SemantiCache pages against the tokenizer, independently of the tool: with the
Hugging Face tokenizers library decoding each token id, every raw page is one token whose text is
a delimiter, no other page holds a delimiter, and the pages of each layer tile [0, paged_end).

    check_semantic_pages.py CAPTURE TOKENIZER_JSON
"""
import sys

import h5py
import numpy as np
from tokenizers import Tokenizer

DELIMITERS = {".", ",", "?", "!", ";", ":", " ", "\t", "\n"}


def main():
    path, tokenizer_json = sys.argv[1:3]
    tok = Tokenizer.from_file(tokenizer_json)
    with h5py.File(path, "r") as f:
        assert int(f.attrs["version"]) == 2, "format version %d" % int(f.attrs["version"])
        ids = f["tokens/id"][:]
        text = [tok.decode([int(i)], skip_special_tokens=False) for i in ids]
        layers = [int(x) for x in f["layout"].attrs["layers"]]
        raw_total, scattered_total = 0, 0
        for layer in layers:
            lg = "pages/layer_%02d/" % layer
            start, end, raw = f[lg + "start"][:], f[lg + "end"][:], f[lg + "raw"][:]
            member_end, members = f[lg + "member_end"][:], f[lg + "members"][:]
            begin = np.concatenate([[0], member_end[:-1]]).astype(np.int64)
            covered = []
            for p in range(len(start)):
                pos = members[begin[p]:member_end[p]] if member_end[p] > begin[p] else np.arange(start[p], end[p])
                scattered_total += int(member_end[p] > begin[p])
                covered += [int(t) for t in pos]
                if raw[p]:
                    raw_total += 1
                    assert len(pos) == 1, "layer %d page %d: raw with %d tokens" % (layer, p, len(pos))
                    # A raw page is a delimiter, or a cluster of one word.
                    continue
                for t in pos:
                    assert text[t] not in DELIMITERS, "layer %d page %d: delimiter %r at %d inside a cluster" % (layer, p, text[t], t)
            assert sorted(covered) == list(range(len(covered))), "layer %d: pages do not tile" % layer
            # Every delimiter token in the paged region is a raw page of its own.
            raw_positions = {int(start[p]) for p in range(len(start)) if raw[p]}
            for t in range(len(covered)):
                if text[t] in DELIMITERS:
                    assert t in raw_positions, "layer %d: delimiter %r at %d is not raw" % (layer, text[t], t)
        print("check_semantic_pages: OK (%d raw pages, %d listed clusters)" % (raw_total, scattered_total))


if __name__ == "__main__":
    main()
