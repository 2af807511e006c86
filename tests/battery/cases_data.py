"""The battery's cases for eval data, captures, outputs and faults, and the command line."""
import json
import os
import subprocess

from inputs import write, write_json


def eval_data(ctx, out, Family, fifo, CPU):
    f = Family("eval data", out)
    model = ctx.model
    work = ctx.path("eval", "out")
    example = {"example_id": 0,
               "prompt": "# Segment 1: Cats\n\nA cat.\n\n# Segment 2: Dogs\n\nA dog.",
               "questions": [{"question": "Cat?", "answers": {"text": ["a cat"]}, "topic": "A"}]}

    def salad(name, value):
        return write(ctx.path("eval", name.replace(" ", "-") + ".json"), value if isinstance(value, str) else json.dumps(value))

    def ev(path, *extra):
        return ["eval", "wikisalad", "--model", model, "--file", path, "--examples", "1", "--max-new-tokens", "1",
                "--presets", "dense", "--out", work + "-" + os.path.basename(path), "--restart", "--quiet"] + CPU + list(extra)

    good = salad("good", [example])
    f.accept("wikisalad", "one example with two questions", ev(good), "prompt and questions as WikiSalad has them")

    def broken(label, edit, named):
        e = json.loads(json.dumps(example))
        value = edit(e)
        path = salad("ws-" + label, value if value is not None else [e])
        f.refuse("wikisalad " + label, "a WikiSalad example with " + label, ev(path), 1, path, named)

    broken("no prompt", lambda e: e.pop("prompt") and None, "prompt")
    broken("prompt a number", lambda e: e.__setitem__("prompt", 3), "prompt")
    broken("no questions", lambda e: e.pop("questions") and None, "questions")
    broken("questions an object", lambda e: e.__setitem__("questions", {}), "questions")
    broken("a question a number", lambda e: e["questions"][0].__setitem__("question", 5), "question")
    broken("answers a number", lambda e: e["questions"][0].__setitem__("answers", 5), "answers")
    broken("an answer a number", lambda e: e["questions"][0].__setitem__("answers", {"text": [5]}), "answer")
    f.accept("wikisalad no segment header", "a prompt without '# Segment' headers",
             ev(salad("ws-no-header", [dict(example, prompt="just text")])),
             "exact match reads the prompt and the answers; segment headers matter to the topic views only")
    broken("an object, not a list", lambda e: e, "list")
    broken("an empty list", lambda e: [], "examples")
    path = salad("ws-notjson", "[{")
    f.refuse("wikisalad not JSON", "a WikiSalad file that is not JSON", ev(path), 1, path)
    f.refuse("wikisalad missing", "--file names nothing", ev(ctx.path("eval", "absent.json")), 1, "absent.json")
    f.refuse("wikisalad FIFO", "--file is a named pipe", ev(fifo(ctx.path("eval", "fifo.json"))), 1, "fifo.json",
             "not a regular file")
    f.refuse("wikisalad --first past the examples", "--first 5 of a one-example file", ev(good, "--first", "5"), 1,
             "good.json", "out of range")
    empty_dir = ctx.path("eval", "empty-dir", "x")
    os.makedirs(os.path.dirname(empty_dir), exist_ok=True)
    f.refuse("wikisalad --data empty", "--data names a folder with no .json files",
             ["eval", "wikisalad", "--model", model, "--data", os.path.dirname(empty_dir), "--out", work + "-empty"] + CPU, 1,
             "empty-dir")
    f.refuse("wikisalad --data missing", "--data names nothing",
             ["eval", "wikisalad", "--model", model, "--data", ctx.path("eval", "no-dir"), "--out", work + "-nodir"] + CPU, 1,
             "no-dir")

    # Calibration files attached to a capture (luka capture --calibration), read whole.
    cal = {"calibration": 1, "source": "s", "model": "m", "tokens": 10, "prompt_tokens": 5, "decode_steps": 5,
           "num_layers": 2, "num_heads": 4, "topics": False, "candidates": [{"name": "lined"}], "layers": []}
    for l in range(2):
        cal["layers"].append({
            "layer": l, "dense_entries": 10.0,
            "heads": [{"head": h, "sink": 0.1, "entropy": 1.0, "locality": 0.5, "cross_topic": None} for h in range(4)],
            "candidates": [{"heads": [{"kl": 0.1, "recall": 0.9, "rel_l2": 0.1, "entries": 4.0} for _ in range(4)]}]})

    def cap(path):
        return ["capture", "--model", model, "--prompt", "hi there", "--max-new-tokens", "2", "--out",
                ctx.path("eval", "cal-capture.h5"), "--quiet", "--calibration", path] + CPU

    f.accept("calibration", "a calibration of the two-layer, four-head model", cap(write_json(ctx.path("eval", "cal.json"), cal)),
             "every field present and in range")

    def bad_cal(label, edit, named):
        c = json.loads(json.dumps(cal))
        edit(c)
        path = write_json(ctx.path("eval", "cal-" + label.replace(" ", "-") + ".json"), c)
        f.refuse("calibration " + label, "a calibration with " + label, cap(path), 1, path, named)

    bad_cal("negative entries", lambda c: c["layers"][0]["candidates"][0]["heads"][1].__setitem__("entries", -3), "entries")
    bad_cal("negative dense entries", lambda c: c["layers"][1].__setitem__("dense_entries", -1), "dense_entries")
    bad_cal("no num_heads", lambda c: c.pop("num_heads"), "num_heads")
    bad_cal("three layers listed for two", lambda c: c.__setitem__("num_layers", 3), "layers")
    bad_cal("a sink a string", lambda c: c["layers"][0]["heads"][0].__setitem__("sink", "high"), "sink")
    bad_cal("version 2", lambda c: c.__setitem__("calibration", 2), "calibration")
    bad_cal("heads out of order", lambda c: c["layers"][0]["heads"][1].__setitem__("head", 0), "head")
    bad_cal("prompt_tokens past tokens", lambda c: c.__setitem__("prompt_tokens", 50), "prompt_tokens")
    bad_cal("another model's heads", lambda c: c.__setitem__("num_heads", 2) or [l.__setitem__("heads", l["heads"][:2]) or
                                                                               l["candidates"][0].__setitem__("heads", l["candidates"][0]["heads"][:2])
                                                                               for l in c["layers"]], "heads")
    path = write(ctx.path("eval", "cal-notjson.json"), "{")
    f.refuse("calibration not JSON", "a calibration that is not JSON", cap(path), 1, path)

    help_text = subprocess.run([ctx.luka, "eval", "--help"], capture_output=True, text=True).stdout
    for name in ("niah", "ruler"):
        if "  " + name not in help_text:
            continue
        base = ["eval", name, "--model", model, "--out", work + "-" + name, "--quiet"] + CPU
        for label, value in (("x", "x"), ("negative", "-4")):
            f.refuse("%s --examples %s" % (name, label), "luka eval %s --examples %s" % (name, value),
                     base + ["--examples", value], 2, "--examples")


def captures(ctx, out, Family, fifo, CPU, edit_script):
    f = Family("captures", out)
    good = ctx.path("captures", "good.h5")
    prompt = write_json(ctx.path("captures", "prompt.json"), {
        "title": "t", "pattern": "AB", "separator": "\n\n",
        "topics": {"A": {"label": "Cats", "colour": "#0072b2"}, "B": {"label": "Dogs", "colour": "#e69f00"}},
        "segments": [{"topic": "A", "text": "The cat sat on the mat and purred all day."},
                     {"topic": "B", "text": "The dog sat on the log and barked all night."}]})
    made = subprocess.run([ctx.luka, "capture", "--model", ctx.model, "--prompt-file", prompt, "--out", good,
                           "--max-new-tokens", "4", "--ignore-eos", "--preset", "clustered", "--set", "page_size=8", "--quiet"]
                          + CPU, capture_output=True, text=True)
    if made.returncode != 0:
        raise RuntimeError("battery: the capture to damage was not made: " + made.stderr)
    # The walk of tests/cli/test_exit_codes.cpp reads it too.
    with open(good, "rb") as src, open(os.path.join(ctx.inputs, "capture.h5"), "wb") as dst:
        dst.write(src.read())

    def inspect(path, *extra):
        return ["inspect", path] + list(extra)

    f.accept("good", "a finished capture", inspect(good), "as luka capture wrote it")
    f.accept("topics", "attention by topic", inspect(good, "--topics"), "segments inside the tokens")
    blob = open(good, "rb").read()
    raw = {
        "empty file": b"",
        "a text file": b"hello\n",
        "HDF5 signature only": blob[:8],
        "truncated to 1 KB": blob[:1024],
        "truncated to half": blob[:len(blob) // 2],
        "truncated by 1 byte": blob[:-1],
        "a superblock of noise": blob[:8] + bytes((i * 131 + 7) % 256 for i in range(2048)),
    }
    for label, data in raw.items():
        path = write(ctx.path("captures", label.replace(" ", "-") + ".h5"), data)
        f.refuse(label, "the capture is " + label, inspect(path), 1, path)
    f.refuse("missing", "inspect names nothing", inspect(ctx.path("captures", "absent.h5")), 1, "absent.h5")
    f.refuse("a folder", "inspect names a folder", inspect(ctx.path("captures")), 1, "captures")
    f.refuse("a FIFO", "the capture is a named pipe", inspect(fifo(ctx.path("captures", "fifo.h5"))), 1, "fifo.h5",
             "not a regular file")
    edits = {
        "segment begins after it ends": ("segments/begin", 1, 10 ** 4, "segment 1"),
        "segment ends past the tokens": ("segments/end", 1, 10 ** 6, "segment 1"),
        "segment begins before 0": ("segments/begin", 0, -3, "segment 0"),
        "decode step attends past the tokens": ("decode/tokens", 0, 10 ** 6, "decode step"),
        "decode step attends -1 tokens": ("decode/tokens", 1, -1, "decode step"),

        "no segments group": ("segments", None, None, "segments"),
        "no tokens group": ("tokens", None, None, "tokens"),
        "no layout group": ("layout", None, None, "layout"),
        "format attribute wrong": ("format", None, "luka-capture-v0", "format"),
        "version 99": ("version", None, 99, "version"),
    }
    def copy_of(label):
        return ctx.path("captures", "edit-" + label.replace(" ", "-") + ".h5")

    batch = []
    for label, (path, index, value, named) in edits.items():
        copy = ctx.path("captures", "edit-" + label.replace(" ", "-") + ".h5")
        if index is None and value is None:
            batch.append([copy, path, None, None])
        elif index is None:
            batch.append([copy, path, None, value])
        else:
            batch.append([copy, path, index, value])
        f.refuse(label, "a capture whose " + label, inspect(copy, "--topics") if "segment" in label else inspect(copy), 1,
                 copy, named)
    accepted = {
        "token id outside the vocabulary": ([copy_of("token-id"), "tokens/id", 0, 10 ** 6],
                                            "a capture holds no vocabulary: its tokens are shown by their stored pieces"),
        "complete steps past the run": ([copy_of("complete-steps"), "complete_steps", 0, 10 ** 6],
                                        "read as at most the decode rows the file holds (a run cut off writes rows ahead)"),
    }
    for label, (edit, reason) in accepted.items():
        batch.append(edit)
        f.accept(label, "a capture whose " + label, inspect(edit[0]), reason)
    done = subprocess.run([ctx.python, "-c", edit_script, good, json.dumps(batch)], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError("battery: damaging captures failed: " + done.stderr)

    # Export and inspect options against a good capture (bad values of the command line).
    png = ctx.path("captures", "out.png")
    export = ["export", "--capture", good, "--layer", "0", "--head", "0", "--out", png]
    f.accept("export", "the prefill map of layer 0, head 0", export, "a recorded layer and head")
    for label, extra, named in (("layer 9", ["--layer", "9"], "--layer"), ("head 9", ["--head", "9"], "--head"),
                                ("level 40", ["--level", "40"], "--level"), ("step 999", ["--step", "999"], "--step"),
                                ("view sideways", ["--view", "sideways"], "--view"), ("scale cubic", ["--scale", "cubic"], "--scale"),
                                ("grid rows", ["--grid", "rows"], "--grid"), ("view dense without step", ["--view", "dense"], "--view")):
        f.refuse("export " + label, "luka export --" + label.replace(" ", " "), export + extra, 2, named)
    f.refuse("export out .bmp", "a figure named .bmp", export[:-1] + [ctx.path("captures", "f.bmp")], 2, "--out")
    f.refuse("export capture missing", "--capture names nothing",
             ["export", "--capture", ctx.path("captures", "none.h5"), "--layer", "0", "--head", "0", "--out", png], 1, "none.h5")
    for label, extra, named in (("track x-y", ["--track", "x-y"], "--track"), ("track past", ["--track", "99999"], "--track"),
                                ("layer 9 with heads", ["--heads", "--layer", "9"], "--layer"),
                                ("decode-topic Z", ["--topics", "--decode-topic", "Z"], "--decode-topic"),
                                ("head without layer", ["--track", "0", "--head", "1"], "--head")):
        f.refuse("inspect " + label, "luka inspect --" + label, inspect(good, *extra), 2, named)
    f.refuse("inspect calibration absent", "--calibration on a capture without one", inspect(good, "--calibration"), 1,
             "good.h5", "calibration")


def add_all(ctx, out, Family, fifo, CPU, edit_script):
    eval_data(ctx, out, Family, fifo, CPU)
    captures(ctx, out, Family, fifo, CPU, edit_script)
    import cases_cli
    cases_cli.add_all(ctx, out, Family, fifo, CPU)
