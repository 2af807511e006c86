"""The battery's cases for LuKA configs, prompts, eval data, captures, outputs and faults, and the
command line (cases.py has model folders and GGUF)."""
import json
import os
import shutil
import subprocess

from inputs import write, write_json

# Damages copies of a capture with h5py: argv = good capture, then a JSON list of
# [copy, dataset path, index, value] edits (index None: an attribute of the root, value None: delete).
EDIT_CAPTURE = r"""
import h5py, json, shutil, sys
good, edits = sys.argv[1], json.loads(sys.argv[2])
for copy, path, index, value in edits:
    shutil.copy(good, copy)
    with h5py.File(copy, "r+") as f:
        if index is None and value is None:
            del f[path]
        elif index is None:
            f.attrs[path] = value
        else:
            f[path][index] = value
"""


def luka_configs(ctx, out, Family, fifo, CPU):
    f = Family("LuKA configs", out)
    model = ctx.model

    def with_file(name, value):
        path = ctx.path("configs", name.replace(" ", "-") + ".json")
        write(path, value if isinstance(value, str) else json.dumps(value))
        return ["info", "--model", model, "--config", "--layers-config", path], path

    args, _ = with_file("good", {"preset": "mixed(1,1)", "layers": {"1": {"top_k": 3}}})
    f.accept("good", "a preset with one layer changed", args, "a valid layers-config")
    args, _ = with_file("overlap agreeing", {"layers": {"0-1": {"mode": "lined", "rho": "1/8"}, "1": {"rho": 0.125}}})
    f.accept("overlapping ranges that agree", "'0-1' and '1' set rho 1/8 and 0.125", args,
             "overlaps may set the same value (docs/luka-config.md#layers-config-files)")
    args, path = with_file("overlap disagreeing", {"layers": {"0-1": {"mode": "lined"}, "0": {"mode": "clustered"}}})
    f.refuse("overlapping ranges that disagree", "'0-1' lined and '0' clustered", args, 1, path, "'0'", "'0-1'")
    bad_values = [
        ("mode", "bogus"), ("mode", 3), ("window", -1), ("window", "x"), ("window_frac", 2.0), ("window_frac", -0.5),
        ("rho", 0), ("rho", -1), ("rho", 2), ("rho", "1/0"), ("top_k", -3), ("top_k", 1.5),
        ("page_size", 0), ("page_size", -8), ("tail", -1), ("interval", 0), ("max_pages", -1), ("tau", -0.5),
        ("tau", "x"), ("compressor", "zip"), ("bias", "always"), ("bias_entropy", "x"), ("lined_rounding", "up"),
        ("lined_selection", "token"), ("importance_source", "x"), ("page_schedule", "x"), ("segmenter", "x"),
        ("delimiters", "period|nope"), ("delimiter_match", "x"), ("gsc_tau", 2.0), ("sparse_prefill_window", "x"),
        ("dense_shadow", "maybe"), ("seed", "x"), ("decay", "x"), ("rule", "x"), ("top_frac", 2.0), ("top_p", 0),
        ("heavy_late", "x"), ("page_bypass", "x"), ("zero_v", "x"), ("page_counter_start", -1), ("no_such_key", 1),
    ]
    for key, value in bad_values:
        args, path = with_file("key-%s-%s" % (key, str(value).replace("/", "_").replace("|", "_")),
                               {"layers": {"all": {key: value}}})
        f.refuse("%s = %s" % (key, json.dumps(value)), "a layer's %s set to %s" % (key, json.dumps(value)), args, 1,
                 path, key)
    args, _ = with_file("top_k 0", {"layers": {"all": {"mode": "clustered", "top_k": 0}}})
    f.accept("top_k = 0", "clustered layers that refine no page", args, "nothing refined is SemantiCache's setting")
    shapes = {
        "not JSON": ("{\"layers\": ", ""),
        "a list": ("[]", ""),
        "unknown preset": ({"preset": "nonsense"}, "nonsense"),
        "unknown top-level key": ({"preset": "dense", "extra": 1}, "extra"),
        "layers a list": ({"layers": [1]}, "layers"),
        "range past the layers": ({"layers": {"0-9": {"mode": "lined"}}}, "0-9"),
        "range reversed": ({"layers": {"1-0": {"mode": "lined"}}}, "1-0"),
        "range not a number": ({"layers": {"x": {"mode": "lined"}}}, "x"),
        "range negative": ({"layers": {"-1": {"mode": "lined"}}}, "-1"),
        "a range's value not an object": ({"layers": {"0": "lined"}}, "0"),
        "default not an object": ({"default": 3}, "default"),
        "empty file": ("", ""),
    }
    for label, (value, named) in shapes.items():
        args, path = with_file("shape-" + label, value)
        f.refuse(label, "the layers-config is " + label, args, 1, path, named)
    args, _ = with_file("dummy", {})
    fifo_path = fifo(ctx.path("configs", "fifo.json"))
    f.refuse("a FIFO", "the layers-config is a named pipe", args[:-1] + [fifo_path], 1, fifo_path, "not a regular file")
    f.refuse("missing", "the layers-config is not there", args[:-1] + [ctx.path("configs", "absent.json")], 1, "absent.json")
    f.refuse("a folder", "the layers-config is a folder", args[:-1] + [ctx.path("configs")], 1, "configs")

    base = ["info", "--model", model, "--config"]
    sets = ["mode=bogus", "layer=9,mode=lined", "layers=0-9,mode=lined", "nokey=1", "rho", "rho=", "=3", "layer=x,rho=0.5",
            "top_k=-1", "mode=lined,rho=7", "layers=1-0,mode=dense", "page_size=0"]
    for spec in sets:
        f.refuse("--set " + spec, "--set " + spec, base + ["--set", spec], 2, "--set")
    presets = ["nonsense", "mixed(x,1)", "mixed(1)", "mixed(-1,2)", "auto:", "dense,lined", "MIXED(1,1)"]
    for p in presets:
        f.refuse("--preset " + p, "--preset " + p, base + ["--preset", p], 2, "--preset")
    f.accept("--preset mixed(1,1)", "a mixed preset", base + ["--preset", "mixed(1,1)"], "a preset for two layers")
    f.refuse("--preset and --layers-config", "both choose a base config", base + ["--preset", "dense", "--layers-config",
                                                                                   with_file("dummy", {})[1]], 2, "--preset")
    # auto:FILE: the calibration file is data (exit 1), the spec's options the command line's (exit 2).
    cal = {"calibration": 1, "num_layers": 2, "num_heads": 4,
           "candidates": [{"name": "lined", "config": {"mode": "lined"}}],
           "layers": [{"layer": l, "dense_entries": 100.0, "candidates": [{"kl": 0.1, "rel_l2": 0.2, "entries": 20.0}]}
                      for l in range(2)]}
    good = write_json(ctx.path("configs", "cal.json"), cal)
    f.accept("auto good", "auto: with a calibration of the model", base + ["--preset", "auto:%s,budget=0.5" % good],
             "a calibration of a two-layer model")
    negative = json.loads(json.dumps(cal))
    negative["layers"][1]["candidates"][0]["entries"] = -5
    path = write_json(ctx.path("configs", "cal-negative.json"), negative)
    f.refuse("auto negative entries", "a calibration with entries -5", base + ["--preset", "auto:" + path], 1, path,
             "layers[1].candidates[0].entries")
    negative = json.loads(json.dumps(cal))
    negative["layers"][0]["dense_entries"] = -1
    path = write_json(ctx.path("configs", "cal-negative-dense.json"), negative)
    f.refuse("auto negative dense entries", "a calibration with dense_entries -1", base + ["--preset", "auto:" + path], 1,
             path, "dense_entries")
    other = json.loads(json.dumps(cal))
    other["num_layers"] = 5
    path = write_json(ctx.path("configs", "cal-other.json"), other)
    f.refuse("auto another model's", "a calibration of a 5-layer model", base + ["--preset", "auto:" + path], 1, path, "5")
    f.refuse("auto missing file", "auto: names no file", base + ["--preset", "auto:" + ctx.path("configs", "nocal.json")], 1,
             "nocal.json")
    f.refuse("auto budget 2", "auto:...,budget=2", base + ["--preset", "auto:%s,budget=2" % good], 2, "--preset", "budget")
    f.refuse("auto loss mse", "auto:...,loss=mse", base + ["--preset", "auto:%s,loss=mse" % good], 2, "--preset", "loss")


def prompts(ctx, out, Family, fifo, CPU):
    f = Family("prompts", out)
    model = ctx.model

    def gen(*extra):
        return ["generate", "--model", model, "--max-new-tokens", "1"] + CPU + list(extra)

    text = write(ctx.path("prompts", "text.txt"), "The cat sat on the mat. The dog sat on the log.\n")

    def run(*extra):  # the prompt options of capture, calibrate and the Studio (generate has --prompt only)
        return ["capture", "--model", model, "--max-new-tokens", "1", "--record", "none", "--quiet"] + CPU + list(extra)

    f.accept("prompt file", "a text prompt file", run("--prompt-file", text), "plain UTF-8 text")
    f.refuse("prompt file missing", "--prompt-file names nothing", run("--prompt-file", ctx.path("prompts", "absent.txt")), 1,
             "absent.txt")
    f.refuse("prompt file a FIFO", "--prompt-file is a named pipe", run("--prompt-file", fifo(ctx.path("prompts", "fifo.txt"))),
             1, "fifo.txt", "not a regular file")
    f.refuse("prompt file a folder", "--prompt-file is a folder", run("--prompt-file", ctx.path("prompts")), 1, "prompts")
    f.refuse("prompt file /dev/zero", "--prompt-file is an endless device", run("--prompt-file", "/dev/zero"), 1, "/dev/zero",
             "not a regular file")
    empty = write(ctx.path("prompts", "empty.txt"), "")
    f.refuse("prompt file empty", "an empty prompt file", run("--prompt-file", empty), 1, "empty.txt", "empty")
    f.refuse("prompt empty", "--prompt ''", gen("--prompt", ""), 2, "prompt")
    f.refuse("prompt and prompt file", "--prompt with --prompt-file", run("--prompt", "x", "--prompt-file", text), 2, "--prompt")
    f.refuse("no prompt", "generate without a prompt", gen(), 2, "--prompt")
    bad_utf8 = write(ctx.path("prompts", "latin1.txt"), b"caf\xe9 au lait\n")
    f.accept("prompt file not UTF-8", "a Latin-1 byte in a plain prompt file", run("--prompt-file", bad_utf8),
             "a byte-level BPE encodes any bytes: the prompt is the file's bytes")
    interwoven = {"title": "t", "pattern": "AB", "separator": "\n\n",
                  "topics": {"A": {"label": "Cats", "colour": "#0072b2"}, "B": {"label": "Dogs", "colour": "#e69f00"}},
                  "segments": [{"topic": "A", "text": "The cat sat on the mat and purred all day long."},
                               {"topic": "B", "text": "The dog sat on the log and barked all night long."}]}
    good = write_json(ctx.path("prompts", "interwoven.json"), interwoven)
    f.accept("interwoven", "an interwoven prompt .json", run("--prompt-file", good), "topics and segments agree")
    no_label = dict(interwoven, topics={"A": {"colour": "#0072b2"}, "B": {"label": "Dogs", "colour": "#e69f00"}})
    f.accept("interwoven a topic without label", "an interwoven prompt whose topic A has no label",
             run("--prompt-file", write_json(ctx.path("prompts", "iw-nolabel.json"), no_label)),
             "a topic's label is optional: \"Topic A\" stands in")

    def broken(name, edit):
        p = json.loads(json.dumps(interwoven))
        edit(p)
        return write_json(ctx.path("prompts", "iw-" + name + ".json"), p)

    edits = {
        "an undefined topic": (lambda p: p["segments"][0].__setitem__("topic", "Z"), "Z"),
        "a bad colour": (lambda p: p["topics"]["A"].__setitem__("colour", "#zzzzzz"), "colour"),
        "no segments": (lambda p: p.__setitem__("segments", []), "segments"),
        "segments not a list": (lambda p: p.__setitem__("segments", {"a": 1}), "segments"),
        "a segment without text": (lambda p: p["segments"][0].pop("text"), "text"),
        "a segment's text a number": (lambda p: p["segments"][0].__setitem__("text", 5), "text"),
        "topics a list": (lambda p: p.__setitem__("topics", []), "topics"),
        "separator a number": (lambda p: p.__setitem__("separator", 3), "separator"),
    }
    for label, (edit, named) in edits.items():
        path = broken(label.replace(" ", "-").replace("'", ""), edit)
        f.refuse("interwoven " + label, "interwoven prompt with " + label, run("--prompt-file", path), 1, path, named)
    path = write(ctx.path("prompts", "iw-notjson.json"), "{\"segments\": [")
    f.refuse("interwoven not JSON", "a .json prompt that is not JSON", run("--prompt-file", path), 1, path)

    # Segment tables (--segments) for a plain prompt of 48 bytes.
    plain = "The cat sat on the mat. The dog sat on the log."

    def seg(name, value):
        return write(ctx.path("prompts", "seg-" + name + ".json"), value if isinstance(value, str) else json.dumps(value))

    ok = [{"label": "cat", "colour": "#0072b2", "begin": 0, "end": 24}, {"label": "dog", "colour": "#e69f00", "begin": 24, "end": 47}]
    f.accept("segments", "a segment table", run("--prompt", plain, "--segments", seg("good", ok)), "spans inside the prompt")
    table = {
        "reversed": ([{"label": "a", "colour": "#000000", "begin": 10, "end": 5}], "reversed"),
        "past the prompt": ([{"label": "a", "colour": "#000000", "begin": 0, "end": 400}], "past the prompt"),
        "overlapping": ([{"label": "a", "colour": "#000000", "begin": 0, "end": 20},
                         {"label": "b", "colour": "#000000", "begin": 10, "end": 30}], "overlaps"),
        "empty label": ([{"label": "", "colour": "#000000", "begin": 0, "end": 5}], "label"),
        "not a list": ({"label": "a"}, "list"),
        "empty list": ([], "list"),
        "an entry a string": (["a"], "object"),
        "begin negative": ([{"label": "a", "colour": "#000000", "begin": -1, "end": 5}], "begin"),
        "not JSON": ("[{", ""),
    }
    for label, (value, named) in table.items():
        path = seg(label.replace(" ", "-"), value)
        f.refuse("segments " + label, "a segment table " + label, run("--prompt", plain, "--segments", path), 1, path, named)
    utf8 = "caf\u00e9 au lait"
    path = seg("cuts-utf8", [{"label": "a", "colour": "#000000", "begin": 0, "end": 4}])
    f.refuse("segments cut a character", "a span ends inside the two bytes of an accented letter",
             run("--prompt", utf8, "--segments", path), 1, path, "UTF-8")

    # Perplexity's text file and tokenize's JSON lines.
    def ppl(path):
        return ["perplexity", "--model", model, "--text-file", path] + CPU

    f.accept("perplexity text", "a text file of 48 tokens", ppl(text), "at least two tokens")
    one = write(ctx.path("prompts", "one.txt"), "x")
    f.refuse("perplexity one token", "a text of one token", ppl(one), 1, "one.txt", "token")
    f.refuse("perplexity empty", "an empty text file", ppl(empty), 1, "empty.txt")
    f.refuse("perplexity missing", "--text-file names nothing", ppl(ctx.path("prompts", "absent.txt")), 1, "absent.txt")
    f.refuse("perplexity FIFO", "--text-file is a named pipe", ppl(fifo(ctx.path("prompts", "fifo2.txt"))), 1, "fifo2.txt",
             "not a regular file")

    def tok(path):
        return ["tokenize", "--model", model, "--jsonl", path]

    lines = {
        "good": ('{"text": "hello"}\n{"text": "world"}\n', None),
        "not JSON": ('{"text": \n', ".jsonl:1"),
        "no text": ('{"txt": "hello"}\n', "text"),
        "text a number": ('{"text": 5}\n', "text"),
        "second line bad": ('{"text": "a"}\nnope\n', ".jsonl:2"),
        "a list": ('["hello"]\n', ".jsonl:1"),
    }
    for label, (value, named) in lines.items():
        path = write(ctx.path("prompts", "lines-" + label.replace(" ", "-") + ".jsonl"), value)
        if named is None:
            f.accept("jsonl " + label, "two JSON lines", tok(path), "each line an object with a text")
        else:
            f.refuse("jsonl " + label, "JSON lines: " + label, tok(path), 1, path, named)
    f.accept("jsonl empty", "an empty JSON lines file", tok(empty), "no lines, nothing to encode")
    f.refuse("jsonl FIFO", "--jsonl is a named pipe", tok(fifo(ctx.path("prompts", "fifo.jsonl"))), 1, "fifo.jsonl",
             "not a regular file")


def add_all(ctx, out, Family, fifo, CPU):
    luka_configs(ctx, out, Family, fifo, CPU)
    prompts(ctx, out, Family, fifo, CPU)
    import cases_data
    cases_data.add_all(ctx, out, Family, fifo, CPU, EDIT_CAPTURE)
