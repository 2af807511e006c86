"""The battery's cases, by family. Each case makes its input under ctx.inputs and states what must
happen: refused with exit 1 (a bad file or data) or 2 (a bad command line), in one line naming the
file or option (`names`), or accepted for a stated reason."""
import json
import os
import struct

import cases_more
from inputs import (GGUF_ARRAY, GGUF_F32, GGUF_I32, GGUF_STRING, GGUF_U32, GGUF_U64, copy_model, gguf_bytes, gguf_model,
                    read_safetensors, replace_kv, safetensors_bytes, tokenizer_json, write, write_json)


class Context:
    def __init__(self, luka, model, inputs, python):
        self.luka, self.model, self.inputs, self.python = luka, model, inputs, python

    def path(self, *parts):
        p = os.path.join(self.inputs, *parts)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p


class Case:
    def __init__(self, family, name, what, args, expect, names=(), reason="", env=None, stdin=None, stdout=None):
        self.family, self.name, self.what, self.args = family, name, what, list(args)
        self.expect, self.names, self.reason = expect, tuple(names), reason
        self.env, self.stdin, self.stdout = env or {}, stdin, stdout


class Family:
    """Collects one family's cases."""

    def __init__(self, name, out):
        self.name, self.out = name, out

    def refuse(self, name, what, args, code, *names, **kw):
        self.out.append(Case(self.name, name, what, args, code, names, **kw))

    def accept(self, name, what, args, reason, **kw):
        self.out.append(Case(self.name, name, what, args, 0, reason=reason, **kw))


def fifo(path):
    if os.path.lexists(path):
        os.remove(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mkfifo(path)
    return path


CPU = ["--device", "cpu", "--threads", "1"]


def model_folders(ctx, out):
    f = Family("model folders", out)
    config = json.load(open(os.path.join(ctx.model, "config.json")))

    def info(folder):
        return ["info", "--model", folder]

    f.accept("good", "the tiny random qwen3 checkpoint", info(ctx.model), "a complete checkpoint")

    def with_config(name, edit, raw=None):
        d = copy_model(ctx.model, ctx.path("models", name), skip=("config.json",))
        if raw is not None:
            write(os.path.join(d, "config.json"), raw)
        else:
            c = json.loads(json.dumps(config))
            edit(c)
            write_json(os.path.join(d, "config.json"), c)
        return d

    ints = ["hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
            "vocab_size", "max_position_embeddings", "head_dim"]
    for field in ints:
        for label, value in (("zero", 0), ("negative", -4), ("string", "64"), ("fraction", 2.5), ("huge", 1e30)):
            d = with_config("%s-%s" % (field, label), lambda c, k=field, v=value: c.__setitem__(k, v))
            f.refuse("%s %s" % (field, label), "config.json %s = %s" % (field, json.dumps(value)), info(d), 1,
                     "config.json", field)
    for label, value in (("zero", 0), ("negative", -1e-6), ("string", "1e-6")):
        d = with_config("eps-" + label, lambda c, v=value: c.__setitem__("rms_norm_eps", v))
        f.refuse("rms_norm_eps " + label, "config.json rms_norm_eps = %s" % json.dumps(value), info(d), 1,
                 "config.json", "rms_norm_eps")
    for label, value in (("zero", 0), ("negative", -1.0), ("string", "1e6"), ("infinite", 1e999)):
        d = with_config("theta-" + label, lambda c, v=value: c.__setitem__("rope_theta", v))
        f.refuse("rope_theta " + label, "config.json rope_theta = %s" % label, info(d), 1, "config.json", "rope_theta")
    scalings = {
        "linear without factor": ({"rope_type": "linear"}, "rope_scaling.factor"),
        "llama3 without low_freq_factor": ({"rope_type": "llama3", "factor": 8.0, "high_freq_factor": 4.0,
                                            "original_max_position_embeddings": 64}, "low_freq_factor"),
        "llama3 without high_freq_factor": ({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                             "original_max_position_embeddings": 64}, "high_freq_factor"),
        "llama3 without original_max_position_embeddings": (
            {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0},
            "original_max_position_embeddings"),
        "llama3 without factor": ({"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                   "original_max_position_embeddings": 64}, "rope_scaling.factor"),
        "unknown rope type": ({"rope_type": "warp", "factor": 2.0}, "warp"),
        "rope_scaling a list": ([1, 2], "rope_scaling"),
    }
    for label, (value, field) in scalings.items():
        d = with_config("scaling-" + label.replace(" ", "-"), lambda c, v=value: c.__setitem__("rope_scaling", v))
        f.refuse("rope_scaling " + label, "config.json rope_scaling = %s" % json.dumps(value), info(d), 1,
                 "config.json", field)
    d = with_config("scaling-linear", lambda c: c.__setitem__("rope_scaling", {"rope_type": "linear", "factor": 2.0}))
    f.accept("rope_scaling linear", "linear scaling with its factor", info(d), "transformers' required fields are there")
    d = with_config("kv-heads-not-dividing", lambda c: c.__setitem__("num_key_value_heads", 3))
    f.refuse("kv heads not dividing", "4 query heads, 3 key/value heads", info(d), 1, "config.json",
             "num_key_value_heads")
    d = with_config("model-type", lambda c: c.__setitem__("model_type", "gpt5"))
    f.refuse("unknown model_type", "model_type gpt5", info(d), 1, "config.json", "gpt5")
    d = with_config("no-model-type", lambda c: c.pop("model_type"))
    f.refuse("no model_type", "model_type missing", info(d), 1, "config.json", "model_type")
    for field in ("hidden_size", "num_hidden_layers", "vocab_size", "num_attention_heads"):
        d = with_config("missing-" + field, lambda c, k=field: c.pop(k))
        f.refuse("missing " + field, "config.json without " + field, info(d), 1, "config.json", field)
    for label, raw in (("empty", ""), ("not json", "{hidden_size: 64"), ("a list", "[1, 2]"), ("a number", "7"),
                       ("nested 100000 deep", "[" * 100000 + "]" * 100000), ("binary", b"\x00\xff\xfe" * 10)):
        d = with_config("raw-" + label.replace(" ", "-"), None, raw=raw)
        f.refuse("config " + label, "config.json is " + label, info(d), 1, "config.json")
    d = copy_model(ctx.model, ctx.path("models", "no-config"), skip=("config.json",))
    f.refuse("no config.json", "a folder without config.json", info(d), 1, "config.json")
    d = copy_model(ctx.model, ctx.path("models", "config-fifo"), skip=("config.json",))
    fifo(os.path.join(d, "config.json"))
    f.refuse("config.json a FIFO", "config.json is a named pipe", info(d), 1, "config.json", "not a regular file")
    d = copy_model(ctx.model, ctx.path("models", "config-dir"), skip=("config.json",))
    os.makedirs(os.path.join(d, "config.json"), exist_ok=True)
    f.refuse("config.json a folder", "config.json is a folder", info(d), 1, "config.json", "folder")

    # The weights.
    header, data = read_safetensors(os.path.join(ctx.model, "model.safetensors"))
    names = [k for k in header if k != "__metadata__"]

    def with_weights(name, blob):
        d = copy_model(ctx.model, ctx.path("models", name), skip=("model.safetensors",))
        write(os.path.join(d, "model.safetensors"), blob)
        return d

    def edited(edit):
        h = json.loads(json.dumps(header))
        edit(h)
        return safetensors_bytes(h, data)

    first, second = names[0], names[1]
    weights = {
        "empty file": (b"", "model.safetensors"),
        "4 bytes": (b"\x01\x02\x03\x04", "model.safetensors"),
        "header length past the end": (struct.pack("<Q", 1 << 40) + b"{}", "model.safetensors"),
        "header not JSON": (struct.pack("<Q", 8) + b"{nope!!}", "model.safetensors"),
        "header a list": (struct.pack("<Q", 8) + b"[1,2,3] ", "model.safetensors"),
        "truncated data": (safetensors_bytes(header, data)[:-1000], "model.safetensors"),
        "tensor missing": (edited(lambda h: h.pop(first)), ("weights-tensor-missing", first)),
        "shape wrong": (edited(lambda h: h[first].__setitem__("shape", [3, 3])), first),
        "dtype F64": (edited(lambda h: h[first].__setitem__("dtype", "F64")), first),
        "dtype unknown": (edited(lambda h: h[first].__setitem__("dtype", "Q9")), first),
        "offsets reversed": (edited(lambda h: h[first].__setitem__("data_offsets", h[first]["data_offsets"][::-1])), first),
        "offsets past the end": (edited(lambda h: h[first].__setitem__("data_offsets", [0, 1 << 40])), first),
        "tensors overlapping": (edited(lambda h: h[second].__setitem__("data_offsets", h[first]["data_offsets"])
                                       if h[first]["shape"] == h[second]["shape"] else
                                       h[second].__setitem__("data_offsets", [h[first]["data_offsets"][0],
                                                                              h[first]["data_offsets"][0] + h[second]["data_offsets"][1] - h[second]["data_offsets"][0]])),
                                "overlap"),
        "offsets not numbers": (edited(lambda h: h[first].__setitem__("data_offsets", ["a", "b"])), first),
    }
    for label, (blob, named) in weights.items():
        d = with_weights("weights-" + label.replace(" ", "-"), blob)
        # A tensor the folder lacks is named with the folder (it may be in any shard).
        names_ = named if isinstance(named, tuple) else ("model.safetensors", named)
        f.refuse("weights " + label, "model.safetensors: " + label, info(d), 1, *names_)
    d = copy_model(ctx.model, ctx.path("models", "no-weights"), skip=("model.safetensors",))
    f.refuse("no weights", "no model.safetensors or shard index", info(d), 1, "model.safetensors")
    d = copy_model(ctx.model, ctx.path("models", "weights-fifo"), skip=("model.safetensors",))
    fifo(os.path.join(d, "model.safetensors"))
    f.refuse("weights a FIFO", "model.safetensors is a named pipe (open() would block)", info(d), 1,
             "model.safetensors", "not a regular file (a FIFO)")
    d = copy_model(ctx.model, ctx.path("models", "weights-dir"), skip=("model.safetensors",))
    os.makedirs(os.path.join(d, "model.safetensors"), exist_ok=True)
    f.refuse("weights a folder", "model.safetensors is a folder", info(d), 1, "model.safetensors", "folder")
    d = copy_model(ctx.model, ctx.path("models", "weights-devnull"), skip=("model.safetensors",))
    os.symlink("/dev/null", os.path.join(d, "model.safetensors"))
    f.refuse("weights /dev/null", "model.safetensors links to /dev/null", info(d), 1, "model.safetensors",
             "not a regular file")

    # Shards.
    index = {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names}}

    def sharded(name, idx, shard=True, keep_single=False):
        d = copy_model(ctx.model, ctx.path("models", name), skip=() if keep_single else ("model.safetensors",))
        if shard:
            os.link(os.path.join(ctx.model, "model.safetensors"), os.path.join(d, "model-00001-of-00001.safetensors"))
        write(os.path.join(d, "model.safetensors.index.json"), idx if isinstance(idx, str) else json.dumps(idx))
        return d

    f.accept("one shard", "a shard index naming one shard", info(sharded("shards-good", index)),
             "a sharded checkpoint as transformers writes it")
    f.refuse("single file and shard index", "model.safetensors beside a shard index (transformers loads the single file)",
             info(sharded("shards-and-single", index, keep_single=True)), 1, "model.safetensors.index.json",
             "holds both")
    f.refuse("shard missing", "the index names a shard that is not there", info(sharded("shards-missing", index, shard=False)),
             1, "model-00001-of-00001.safetensors")
    out_of_folder = {"metadata": {}, "weight_map": {n: "../../model.safetensors" for n in names}}
    f.refuse("shard outside the folder", "the index names ../../model.safetensors",
             info(sharded("shards-outside", out_of_folder)), 1, "../../model.safetensors")
    f.refuse("index not JSON", "model.safetensors.index.json is not JSON", info(sharded("shards-notjson", "{")), 1,
             "model.safetensors.index.json")
    f.refuse("index without weight_map", "the index has no weight_map", info(sharded("shards-nomap", {"metadata": {}})),
             1, "model.safetensors.index.json", "weight_map")
    partial = {"metadata": {}, "weight_map": {n: "model-00001-of-00001.safetensors" for n in names[1:]}}
    f.refuse("index missing a tensor", "the index lacks one tensor", info(sharded("shards-partial", partial)), 1, names[0])

    # The tokenizer (read by commands that encode text).
    def gen(folder):
        return ["generate", "--model", folder, "--prompt", "hi", "--max-new-tokens", "1"] + CPU

    f.accept("tokenizer good", "the byte-level tokenizer", gen(ctx.model), "256 byte tokens and unique added tokens")

    def with_tokenizer(name, value, file="tokenizer.json"):
        d = copy_model(ctx.model, ctx.path("models", name), skip=(file,))
        write(os.path.join(d, file), value if isinstance(value, (str, bytes)) else json.dumps(value))
        return d

    dup_id = tokenizer_json(added=[{"id": 256, "content": "<|a|>", "special": True, "normalized": False},
                                   {"id": 256, "content": "<|b|>", "special": True, "normalized": False}])
    dup_text = tokenizer_json(added=[{"id": 256, "content": "<|a|>", "special": True, "normalized": False},
                                     {"id": 257, "content": "<|a|>", "special": True, "normalized": False}])
    empty_vocab = tokenizer_json(drop_bytes=range(256))
    no_byte = tokenizer_json(drop_bytes=[0xE9])
    bad_merge = tokenizer_json()
    bad_merge["model"]["merges"] = ["a"]
    wordpiece = tokenizer_json()
    wordpiece["model"]["type"] = "WordPiece"
    huge_id = tokenizer_json(vocab_extra={"zz": 1 << 30})
    neg_id = tokenizer_json(vocab_extra={"zz": -3})
    tokenizers = {
        "added tokens sharing an id": (dup_id, "share id 256"),
        "one added token twice": (dup_text, "appears twice"),
        "empty vocabulary": (empty_vocab, "256 byte tokens"),
        "a byte token missing": (no_byte, "byte 0xE9"),
        "a malformed merge": (bad_merge, "merge"),
        "model WordPiece": (wordpiece, "WordPiece"),
        "an id of 2^30": (huge_id, "1073741824"),
        "a negative id": (neg_id, "-3"),
        "not JSON": ("{\"model\": ", "tokenizer.json"),
        "a list": ("[]", "tokenizer.json"),
        "no model": ({"version": "1.0"}, "model"),
    }
    for label, (value, named) in tokenizers.items():
        d = with_tokenizer("tok-" + label.replace(" ", "-").replace("^", ""), value)
        f.refuse("tokenizer " + label, "tokenizer.json: " + label, gen(d), 1, "tokenizer.json", named)
    d = copy_model(ctx.model, ctx.path("models", "tok-missing"), skip=("tokenizer.json",))
    f.refuse("tokenizer missing", "no tokenizer.json", gen(d), 1, "tokenizer.json")
    d = copy_model(ctx.model, ctx.path("models", "tok-fifo"), skip=("tokenizer.json",))
    fifo(os.path.join(d, "tokenizer.json"))
    f.refuse("tokenizer a FIFO", "tokenizer.json is a named pipe", gen(d), 1, "tokenizer.json", "not a regular file")
    d = with_tokenizer("tokcfg-notjson", "{", file="tokenizer_config.json")
    f.refuse("tokenizer_config not JSON", "tokenizer_config.json is not JSON", gen(d), 1, "tokenizer_config.json")
    f.refuse("model path missing", "--model names nothing", info(ctx.path("models", "absent")), 1, "absent")
    f.refuse("model path a text file", "--model names a text file", info(write(ctx.path("models", "a.txt"), "hi")), 1,
             "a.txt")


def gguf_files(ctx, out):
    f = Family("GGUF", out)
    kvs, tensors = gguf_model(ctx.model)

    def info(path):
        return ["info", "--model", path]

    def gguf(name, blob):
        return write(ctx.path("gguf", name.replace(" ", "-") + ".gguf"), blob)

    good = gguf("good", gguf_bytes(kvs, tensors))
    f.accept("good", "the tiny model as a qwen3 GGUF (F32)", info(good), "a complete GGUF")
    f.accept("generate", "the tiny GGUF generates", ["generate", "--model", good, "--prompt", "hi",
                                                     "--max-new-tokens", "1"] + CPU, "its tokenizer is complete")
    a = "qwen3."
    metadata = {
        "rope.freq_base NaN": (replace_kv(kvs, a + "rope.freq_base", GGUF_F32, float("nan")), "rope.freq_base"),
        "rope.freq_base -1": (replace_kv(kvs, a + "rope.freq_base", GGUF_F32, -1.0), "rope.freq_base"),
        "rope.freq_base 0": (replace_kv(kvs, a + "rope.freq_base", GGUF_F32, 0.0), "rope.freq_base"),
        "rope.freq_base infinite": (replace_kv(kvs, a + "rope.freq_base", GGUF_F32, float("inf")), "rope.freq_base"),
        "rms epsilon 0": (replace_kv(kvs, a + "attention.layer_norm_rms_epsilon", GGUF_F32, 0.0), "layer_norm_rms_epsilon"),
        "rms epsilon NaN": (replace_kv(kvs, a + "attention.layer_norm_rms_epsilon", GGUF_F32, float("nan")),
                            "layer_norm_rms_epsilon"),
        "block_count 0": (replace_kv(kvs, a + "block_count", GGUF_U32, 0), "block_count"),
        "block_count 5": (replace_kv(kvs, a + "block_count", GGUF_U32, 5), "block_count"),
        "head_count 0": (replace_kv(kvs, a + "attention.head_count", GGUF_U32, 0), "head_count"),
        "head_count_kv 3": (replace_kv(kvs, a + "attention.head_count_kv", GGUF_U32, 3), "head_count"),
        "embedding_length missing": (replace_kv(kvs, a + "embedding_length", drop=True), "embedding_length"),
        "context_length missing": (replace_kv(kvs, a + "context_length", drop=True), "context_length"),
        "embedding_length a string": (replace_kv(kvs, a + "embedding_length", GGUF_STRING, "64"), "embedding_length"),
        "architecture gpt5": (replace_kv(kvs, "general.architecture", GGUF_STRING, "gpt5"), "gpt5"),
        "architecture missing": (replace_kv(kvs, "general.architecture", drop=True), "general.architecture"),
        "rope scaling yarn": (replace_kv(kvs, a + "rope.scaling.type", GGUF_STRING, "yarn"), "yarn"),
        "rope scaling linear without factor": (replace_kv(kvs, a + "rope.scaling.type", GGUF_STRING, "linear"),
                                               "rope.scaling.factor"),
        "tokenizer model bert": (replace_kv(kvs, "tokenizer.ggml.model", GGUF_STRING, "bert"), "bert"),
        "tokens missing": (replace_kv(kvs, "tokenizer.ggml.tokens", drop=True), "tokenizer.ggml.tokens"),
        "merges missing": (replace_kv(kvs, "tokenizer.ggml.merges", drop=True), "tokenizer.ggml.merges"),
        "token_type short": (replace_kv(kvs, "tokenizer.ggml.token_type", GGUF_ARRAY, (GGUF_I32, [1, 1])), "token_type"),
        "eos id outside": (replace_kv(kvs, "tokenizer.ggml.eos_token_id", GGUF_U32, 99999), "99999"),
        "merge malformed": (replace_kv(kvs, "tokenizer.ggml.merges", GGUF_ARRAY, (GGUF_STRING, ["ab"])), "merge"),
        "alignment 0": (replace_kv(kvs, "general.alignment", GGUF_U32, 0), "alignment"),
        "alignment 3": (replace_kv(kvs, "general.alignment", GGUF_U32, 3), "alignment"),
    }
    for label, (changed, named) in metadata.items():
        cmd = info(gguf(label, gguf_bytes(changed, tensors)))
        if label.startswith(("tokens", "merges", "token_type", "eos", "merge", "tokenizer")):
            cmd = ["generate", "--model", cmd[2], "--prompt", "hi", "--max-new-tokens", "1"] + CPU
        f.refuse(label, "metadata " + label, cmd, 1, ".gguf", named)
    blob = gguf_bytes(kvs, tensors)
    raw = {
        "empty file": (b"", ".gguf"),
        "magic only": (b"GGUF", ".gguf"),
        "version 1": (b"GGUF" + struct.pack("<I", 1) + blob[8:], "version"),
        "version 99": (b"GGUF" + struct.pack("<I", 99) + blob[8:], "version"),
        "tensor count 2^60": (blob[:8] + struct.pack("<Q", 1 << 60) + blob[16:], ".gguf"),
        "kv count 2^60": (blob[:16] + struct.pack("<Q", 1 << 60) + blob[24:], ".gguf"),
        "first key 2^62 bytes long": (blob[:24] + struct.pack("<Q", 1 << 62) + blob[32:], ".gguf"),
        "truncated to half": (blob[:len(blob) // 2], ".gguf"),
        "truncated in the header": (blob[:200], ".gguf"),
        "random bytes after the magic": (b"GGUF" + bytes((i * 37 + 11) % 256 for i in range(4000)), ".gguf"),
    }
    for label, (data, named) in raw.items():
        f.refuse(label, label, info(gguf(label, data)), 1, ".gguf", named)
    # Tensor tables.
    names = [t[0] for t in tensors]
    q = names.index("blk.0.attn_q.weight")
    k = names.index("blk.0.attn_k.weight")
    at = []
    pos = 0
    for _, _, data in tensors:
        pos += -pos % 32
        at.append(pos)
        pos += len(data)
    overlap = list(at)
    overlap[k] = at[q]
    f.refuse("tensors overlapping", "attn_k placed on attn_q's bytes", info(gguf("overlap", gguf_bytes(kvs, tensors, offsets=overlap))),
             1, ".gguf", "overlap")
    misaligned = list(at)
    misaligned[1] += 4
    f.refuse("tensor misaligned", "a tensor offset not a multiple of the alignment",
             info(gguf("misaligned", gguf_bytes(kvs, tensors, offsets=misaligned))), 1, ".gguf")
    past = list(at)
    past[-1] = 1 << 40
    f.refuse("tensor past the end", "a tensor's data beyond the file", info(gguf("past", gguf_bytes(kvs, tensors, offsets=past))),
             1, ".gguf")
    dropped = [t for t in tensors if t[0] != "blk.1.ffn_down.weight"]
    f.refuse("tensor missing", "blk.1.ffn_down.weight absent", info(gguf("missing-tensor", gguf_bytes(kvs, dropped))), 1,
             ".gguf", "blk.1.ffn_down.weight")
    twice = tensors + [tensors[0]]
    f.refuse("tensor named twice", "token_embd.weight twice", info(gguf("twice", gguf_bytes(kvs, twice))), 1, ".gguf",
             tensors[0][0])
    wrong = [(n, [d[0] + 1] + d[1:], b + b"\0" * (4 * (len(b) // 4 // d[0]))) if n == "blk.0.attn_v.weight" else (n, d, b)
             for n, d, b in tensors]
    f.refuse("tensor shape wrong", "attn_v one row wider", info(gguf("shape", gguf_bytes(kvs, wrong))), 1, ".gguf",
             "attn_v")
    zero = [(n, [0] + d[1:], b"") if n == "blk.0.attn_norm.weight" else (n, d, b) for n, d, b in tensors]
    f.refuse("tensor with a zero dimension", "attn_norm of shape 0", info(gguf("zero-dim", gguf_bytes(kvs, zero))), 1,
             ".gguf")
    fifo_path = fifo(ctx.path("gguf", "fifo.gguf"))
    f.refuse("a FIFO", "the GGUF path is a named pipe", info(fifo_path), 1, "fifo.gguf", "not a regular file")
    f.refuse("u64 kv type", "block_count stored as u64", info(gguf("u64", gguf_bytes(replace_kv(kvs, a + "block_count",
                                                                                                 GGUF_U64, 1 << 40),
                                                                                      tensors))),
             1, ".gguf", "block_count")


def build(ctx):
    out = []
    model_folders(ctx, out)
    gguf_files(ctx, out)
    cases_more.add_all(ctx, out, Family, fifo, CPU)
    return out
