"""Writes a randomly initialised checkpoint with the shapes of Qwen3-0.6B (28 layers, hidden 1024,
16 query / 8 key-value heads, head_dim 128, intermediate 3072, vocab 151,936, tied embeddings),
stored in bf16. Throughput depends on shapes, not on the values.

usage: make_qwen3_0p6b_shape.py OUT_DIR
"""
import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(sys.argv[1])
    if (out / "config.json").exists():
        print(f"{out}: already there")
        return 0
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, max_position_embeddings=40960,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, torch_dtype="bfloat16")
    with torch.device("cpu"):
        model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)
    print(f"{out}: written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
