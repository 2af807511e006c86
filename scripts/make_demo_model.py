"""Writes the demo checkpoint that `luka` uses when no model is given.

A small Qwen3-shaped model with random weights and the real Qwen3 tokenizer: it exercises the
whole pipeline (tokenizer, chat format, prefill, decode, sampling) but its text is noise. Real
trained weights become the default with GGUF support.

usage: make_demo_model.py TOKENIZER_DIR OUT_DIR
"""
import shutil
import sys
from pathlib import Path

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    tokenizer_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=151936, hidden_size=128, intermediate_size=384, num_hidden_layers=4,
        num_attention_heads=4, num_key_value_heads=2, head_dim=64, max_position_embeddings=32768,
        rope_theta=1e6, rms_norm_eps=1e-6, tie_word_embeddings=True, initializer_range=0.05,
        bos_token_id=151643, eos_token_id=151645, torch_dtype="bfloat16")
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer_dir / name, tmp / name)
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
