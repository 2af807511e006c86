"""Writes a randomly initialised checkpoint with the shapes of Qwen3-0.6B (28 layers, hidden 1024,
16 query / 8 key-value heads, head_dim 128, intermediate 3072, vocab 151,936, tied embeddings),
stored in bf16; or, with SHAPE 4b, of Qwen3-4B (36 layers, hidden 2560, 32 / 8 heads, head_dim
128, intermediate 9728). Throughput depends on shapes, not on the values. MAX_POSITIONS raises
max_position_embeddings (default 40960) for long-context benchmarks.

usage: make_qwen3_0p6b_shape.py OUT_DIR [0.6b|4b] [MAX_POSITIONS]
"""
import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main() -> int:
    if len(sys.argv) not in (2, 3, 4) or (len(sys.argv) > 2 and sys.argv[2] not in ("0.6b", "4b")):
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    shape = sys.argv[2] if len(sys.argv) > 2 else "0.6b"
    max_pos = int(sys.argv[3]) if len(sys.argv) > 3 else 40960
    if (out / "config.json").exists():
        print(f"{out}: already there")
        return 0
    torch.manual_seed(0)
    dims = dict(hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16)
    if shape == "4b":
        dims = dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32)
    config = Qwen3Config(
        vocab_size=151936, num_key_value_heads=8, head_dim=128, max_position_embeddings=max_pos,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, torch_dtype="bfloat16", **dims)
    with torch.device("cpu"):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print(f"{out}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
