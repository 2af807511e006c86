"""Writers for the battery's inputs: a tiny model folder (the random qwen3-tied checkpoint with a
byte-level tokenizer), safetensors and GGUF files built from its weights, and small helpers to
write files. Standard library only."""
import json
import os
import shutil
import struct


def write(path, data):
    """Writes text or bytes, making the folder."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)
    return path


def write_json(path, value):
    return write(path, json.dumps(value))


def byte_alphabet():
    """GPT-2's byte-level alphabet: the printable bytes stand for themselves, the rest are shifted
    past 255 (what tokenizers' ByteLevel pre-tokenizer writes)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def tokenizer_json(drop_bytes=(), added=None, vocab_extra=None):
    alphabet = byte_alphabet()
    vocab = {alphabet[b]: b for b in range(256) if b not in drop_bytes}
    # Ids 259..511 as two-letter pieces (no merge makes them), so every id the random model may
    # generate decodes: the checkpoint's vocabulary has 512.
    letters = [alphabet[b] for b in range(ord("a"), ord("z") + 1)]
    fill = [x + y for x in letters for y in letters]
    for i in range(259, 512):
        vocab[fill[i - 259]] = i
    vocab.update(vocab_extra or {})
    added = added if added is not None else [
        {"id": 256, "content": "<|endoftext|>", "special": True, "normalized": False},
        {"id": 257, "content": "<|im_start|>", "special": True, "normalized": False},
        {"id": 258, "content": "<|im_end|>", "special": True, "normalized": False}]
    return {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
    }


def read_safetensors(path):
    """(header dict, data bytes) of a safetensors file."""
    with open(path, "rb") as f:
        blob = f.read()
    n = struct.unpack("<Q", blob[:8])[0]
    return json.loads(blob[8:8 + n]), blob[8 + n:]


def safetensors_bytes(header, data, pad=True):
    text = json.dumps(header).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def make_model(checkpoint, out):
    """The tiny model folder: the checkpoint's config and weights, a byte-level tokenizer."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for name in ("config.json", "generation_config.json", "model.safetensors"):
        shutil.copy(os.path.join(checkpoint, name), os.path.join(out, name))
    write_json(os.path.join(out, "tokenizer.json"), tokenizer_json())
    write_json(os.path.join(out, "tokenizer_config.json"), {"eos_token": "<|im_end|>", "bos_token": None})
    return out


def copy_model(model, out, skip=()):
    """A copy of the model folder to damage (the weights hard-linked where the file system allows)."""
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    for name in os.listdir(model):
        if name in skip:
            continue
        src, dst = os.path.join(model, name), os.path.join(out, name)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy(src, dst)
    return out


# --- GGUF (version 3, little-endian), as llama.cpp lays it out ---------------------------------

GGUF_U32, GGUF_I32, GGUF_F32, GGUF_BOOL, GGUF_STRING, GGUF_ARRAY, GGUF_U64 = 4, 5, 6, 7, 8, 9, 10
GGML_F32 = 0


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf_value(kind, value):
    if kind == GGUF_U32:
        return struct.pack("<I", value)
    if kind == GGUF_I32:
        return struct.pack("<i", value)
    if kind == GGUF_F32:
        return struct.pack("<f", value)
    if kind == GGUF_BOOL:
        return struct.pack("<?", value)
    if kind == GGUF_U64:
        return struct.pack("<Q", value)
    if kind == GGUF_STRING:
        return gguf_string(value)
    if kind == GGUF_ARRAY:
        item_kind, items = value
        return struct.pack("<IQ", item_kind, len(items)) + b"".join(gguf_value(item_kind, v) for v in items)
    raise ValueError(kind)


def gguf_bytes(kvs, tensors, version=3, alignment=32, offsets=None):
    """kvs: [(key, kind, value)]; tensors: [(name, dims (GGUF order: fastest first), bytes)].
    offsets: the tensors' data offsets, when not one after another."""
    out = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for key, kind, value in kvs:
        out += gguf_string(key) + struct.pack("<I", kind) + gguf_value(kind, value)
    data, at = b"", []
    for _, _, blob in tensors:
        data += b"\0" * (-len(data) % alignment)
        at.append(len(data))
        data += blob
    offsets = offsets or at
    for (name, dims, _), offset in zip(tensors, offsets):
        out += gguf_string(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        out += struct.pack("<IQ", GGML_F32, offset)
    out += b"\0" * (-len(out) % alignment)
    return out + data


def gguf_model(model):
    """(kvs, tensors) of a qwen3 GGUF holding the tiny model's weights and tokenizer."""
    config = json.load(open(os.path.join(model, "config.json")))
    header, data = read_safetensors(os.path.join(model, "model.safetensors"))
    a = "qwen3."
    kvs = [("general.architecture", GGUF_STRING, "qwen3"),
           (a + "block_count", GGUF_U32, config["num_hidden_layers"]),
           (a + "context_length", GGUF_U32, config["max_position_embeddings"]),
           (a + "embedding_length", GGUF_U32, config["hidden_size"]),
           (a + "feed_forward_length", GGUF_U32, config["intermediate_size"]),
           (a + "attention.head_count", GGUF_U32, config["num_attention_heads"]),
           (a + "attention.head_count_kv", GGUF_U32, config["num_key_value_heads"]),
           (a + "attention.key_length", GGUF_U32, config["head_dim"]),
           (a + "attention.value_length", GGUF_U32, config["head_dim"]),
           (a + "rope.freq_base", GGUF_F32, config["rope_theta"]),
           (a + "attention.layer_norm_rms_epsilon", GGUF_F32, config["rms_norm_eps"]),
           ("tokenizer.ggml.model", GGUF_STRING, "gpt2"),
           ("tokenizer.ggml.pre", GGUF_STRING, "qwen2")]
    alphabet = byte_alphabet()
    tokens = [alphabet[b] for b in range(256)] + ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tokens += ["<|unused%d|>" % i for i in range(config["vocab_size"] - len(tokens))]
    kvs += [("tokenizer.ggml.tokens", GGUF_ARRAY, (GGUF_STRING, tokens)),
            ("tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, [])),
            ("tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [1] * 256 + [3] * (len(tokens) - 256))),
            ("tokenizer.ggml.eos_token_id", GGUF_U32, 258)]
    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight"}
    per_layer = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
                 "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate",
                 "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if name in names:
            g = names[name]
        else:
            parts = name.split(".")  # model.layers.I.<module>.weight
            g = "blk.%s.%s.weight" % (parts[2], per_layer[".".join(parts[3:-1])])
        begin, end = info["data_offsets"]
        # Qwen3's q and k are not permuted in GGUF (llama.cpp permutes llama's only).
        tensors.append((g, list(reversed(info["shape"])), data[begin:end]))
    tensors.sort(key=lambda t: t[0])
    return kvs, tensors


def replace_kv(kvs, key, kind=None, value=None, drop=False):
    out = [kv for kv in kvs if kv[0] != key]
    if not drop:
        out.append((key, kind, value))
    return out
