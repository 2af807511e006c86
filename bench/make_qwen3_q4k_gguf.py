"""Writes a GGUF file with the shapes of Qwen3-0.6B (28 layers, hidden 1024, 16 query / 8 key-value
heads, head_dim 128, intermediate 3072, vocab 151,936, tied embeddings) whose linear weights are
random Q4_K blocks, with the tied embedding in Q6_K and the norms in F32, laid out as llama.cpp's
converter names them. Decode throughput depends on the shapes and the block types, not on the
values; the blocks' fp16 scales are kept small and finite so that the activations stay finite.
No tokenizer is stored: bench/bench_luka feeds token ids.

usage: make_qwen3_q4k_gguf.py OUT.gguf [MAX_POSITIONS]
"""
import sys
from pathlib import Path

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 28, 1024, 16, 8, 128, 3072, 151936


def blocks(rng, qtype, rows, cols):
    """rows x cols weights of qtype as raw bytes ([rows, bytes per row]), with small fp16 scales."""
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    n = rows * cols // block
    raw = rng.integers(0, 256, (n, size), dtype=np.uint8)
    halves = lambda lo, hi: rng.uniform(lo, hi, n).astype(np.float16).view(np.uint8).reshape(n, 2)
    if qtype == Q.Q4_K:  # d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of 4-bit quants
        raw[:, 0:2] = halves(0.0005, 0.002)
        raw[:, 2:4] = halves(0.0, 0.001)
    elif qtype == Q.Q6_K:  # 128 + 64 bytes of quants, 16 int8 scales, then d
        raw[:, 208:210] = halves(0.0002, 0.001)
    else:
        raise ValueError(qtype)
    return raw.reshape(rows, cols // block * size)


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    max_pos = int(sys.argv[2]) if len(sys.argv) > 2 else 40960
    if out.exists():
        print(f"{out}: already there")
        return 0
    rng = np.random.default_rng(0)
    out.parent.mkdir(parents=True, exist_ok=True)
    w = gguf.GGUFWriter(str(out) + ".partial", "qwen3")
    w.add_block_count(LAYERS)
    w.add_context_length(max_pos)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(HEAD_DIM)
    w.add_value_length(HEAD_DIM)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(VOCAB)
    w.add_bos_token_id(151643)
    w.add_eos_token_id(151645)

    def matrix(name, qtype, rows, cols):
        w.add_tensor(name, blocks(rng, qtype, rows, cols), raw_dtype=qtype)

    def norm(name, n):
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(n)).astype(np.float32))

    matrix("token_embd.weight", Q.Q6_K, VOCAB, HIDDEN)
    norm("output_norm.weight", HIDDEN)
    for i in range(LAYERS):
        p = f"blk.{i}."
        norm(p + "attn_norm.weight", HIDDEN)
        norm(p + "ffn_norm.weight", HIDDEN)
        norm(p + "attn_q_norm.weight", HEAD_DIM)
        norm(p + "attn_k_norm.weight", HEAD_DIM)
        matrix(p + "attn_q.weight", Q.Q4_K, HEADS * HEAD_DIM, HIDDEN)
        matrix(p + "attn_k.weight", Q.Q4_K, KV_HEADS * HEAD_DIM, HIDDEN)
        matrix(p + "attn_v.weight", Q.Q4_K, KV_HEADS * HEAD_DIM, HIDDEN)
        matrix(p + "attn_output.weight", Q.Q4_K, HIDDEN, HEADS * HEAD_DIM)
        matrix(p + "ffn_gate.weight", Q.Q4_K, FFN, HIDDEN)
        matrix(p + "ffn_up.weight", Q.Q4_K, FFN, HIDDEN)
        matrix(p + "ffn_down.weight", Q.Q4_K, HIDDEN, FFN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    Path(str(out) + ".partial").rename(out)
    print(f"wrote {out} ({out.stat().st_size / 1e6:.0f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
