"""The battery's cases for outputs and faults, and for the command line."""
import os

from inputs import write


def outputs(ctx, out, Family, fifo, CPU):
    f = Family("outputs and faults", out)
    model, capture = ctx.model, ctx.path("captures", "good.h5")
    full = {"stdout": "/dev/full"}
    # Standard output that cannot be written (a full disk): every command checks its writes.
    for label, args in (("--version", ["--version"]), ("--help", ["--help"]), ("info --help", ["info", "--help"]),
                        ("info", ["info", "--model", model]), ("tokenize", ["tokenize", "--model", model, "--text", "hi"]),
                        ("generate", ["generate", "--model", model, "--prompt", "hi", "--max-new-tokens", "2"] + CPU),
                        ("inspect", ["inspect", capture]), ("inspect --json", ["inspect", capture, "--json"]),
                        ("perplexity", ["perplexity", "--model", model, "--text-file", ctx.path("prompts", "text.txt")] + CPU),
                        ("eval --help", ["eval", "--help"])):
        f.refuse("stdout full: " + label, "luka %s > /dev/full" % label, args, 1, "standard output", **full)
    missing_dir = ctx.path("outputs", "no", "such", "folder")
    targets = (
        ("forward", ["forward", "--model", model, "--ids", "1,2"] + CPU + ["--out"], "o.npy"),
        ("capture", ["capture", "--model", model, "--prompt", "hi", "--max-new-tokens", "2", "--quiet"] + CPU + ["--out"], "c.h5"),
        ("export", ["export", "--capture", capture, "--layer", "0", "--head", "0", "--out"], "f.png"),
        ("calibrate", ["calibrate", "--model", model, "--prompt", "hello there world", "--max-tokens", "8", "--quiet"] + CPU +
         ["--out"], "cal.json"),
    )
    folder = ctx.path("outputs", "a-folder", "x")
    os.makedirs(os.path.dirname(folder), exist_ok=True)
    for label, args, name in targets:
        f.refuse(label + " into a missing folder", "--out in a folder that is not there", args + [os.path.join(missing_dir, name)],
                 1, "no/such/folder")
        os.makedirs(os.path.join(os.path.dirname(folder), name), exist_ok=True)
        f.refuse(label + " onto a folder", "--out names an existing folder", args + [os.path.join(os.path.dirname(folder), name)],
                 1, name)
    good_out = ctx.path("outputs", "forward.npy")
    f.accept("forward writes", "forward --out a new file", ["forward", "--model", model, "--ids", "1,2"] + CPU + ["--out", good_out],
             "a new file in an existing folder")
    f.accept("stdin closed", "tokenize reading JSON lines from /dev/null", ["tokenize", "--model", model],
             "no lines on standard input, nothing to encode", stdin="/dev/null")


def command_line(ctx, out, Family, fifo, CPU):
    f = Family("command line", out)
    model = ctx.model
    f.refuse("no command", "luka alone", [], 2, "no command")
    f.refuse("unknown command", "luka frobnicate", ["frobnicate"], 2, "frobnicate")
    for cmd in ("info", "tokenize", "forward", "generate", "perplexity", "calibrate", "capture", "inspect", "export", "sweep"):
        f.refuse(cmd + " unknown option", "luka %s --frobnicate" % cmd, [cmd, "--frobnicate"], 2, "--frobnicate")
    f.refuse("eval unknown evaluation", "luka eval nope", ["eval", "nope"], 2, "nope")
    f.refuse("missing value", "--model with no value", ["info", "--model"], 2, "--model")
    f.refuse("model empty", "--model ''", ["info", "--model", ""], 2, "--model")
    gen = ["generate", "--model", model, "--prompt", "hi"] + CPU
    numbers = [("max-new-tokens", "x"), ("max-new-tokens", "-5"), ("max-new-tokens", "1e99"), ("temperature", "-1"),
               ("temperature", "nan"), ("temperature", "x"), ("top-k", "-1"), ("top-p", "2"), ("top-p", "0"), ("top-p", "-0.5"),
               ("seed", "x"), ("seed", "1.5"), ("threads", "-1"), ("threads", "x"), ("max-new-tokens", "99999999999999999999")]
    for option, value in numbers:
        f.refuse("generate --%s %s" % (option, value), "--%s %s" % (option, value), gen + ["--" + option, value], 2, "--" + option)
    for option, value in (("dtype", "fp64"), ("dtype", "int8"), ("device", "tpu"), ("device", "cuda:x"), ("weights", "half"),
                          ("schedule", "step=x"), ("schedule", "step=1:layers=9:mode=lined"), ("schedule", "step=2:mode=bogus"),
                          ("preset", "nonsense"), ("set", "mode=bogus")):
        f.refuse("generate --%s %s" % (option, value), "--%s %s" % (option, value), gen + ["--" + option, value], 2, "--" + option)
    fwd = ["forward", "--model", model, "--out", ctx.path("cli", "o.npy")] + CPU
    for label, extra, named in (("ids x", ["--ids", "1,x"], "--ids"), ("ids empty", ["--ids", ""], "--ids"),
                                ("ids negative", ["--ids", "1,-2"], "--ids"), ("ids past the vocabulary", ["--ids", "1,99999"], "99999"),
                                ("prefill past the ids", ["--ids", "1,2", "--prefill", "5"], "--prefill"),
                                ("ids and text", ["--ids", "1", "--text", "a"], "--text"), ("no ids", [], "--ids")):
        f.refuse("forward " + label, "luka forward --" + label, fwd + extra, 2, named)
    f.accept("forward prefill 0", "luka forward --ids 1,2 --prefill 0", fwd + ["--ids", "1,2", "--prefill", "0"],
             "every token through the decode path, one at a time")
    ppl = ["perplexity", "--model", model, "--text-file", ctx.path("prompts", "text.txt")] + CPU
    for label, extra in (("max-tokens 1", ["--max-tokens", "1"]), ("max-tokens x", ["--max-tokens", "x"]),
                         ("prompt-tokens -1", ["--prompt-tokens", "-1"]), ("prompt-tokens past max-tokens", ["--prompt-tokens", "9999"])):
        f.refuse("perplexity " + label, "luka perplexity --" + label, ppl + extra, 2, extra[0])
    cap = ["capture", "--model", model, "--prompt", "hi", "--out", ctx.path("cli", "c.h5"), "--quiet"] + CPU
    for label, extra in (("record bogus", ["--record", "bogus"]), ("record layers=9", ["--record", "layers=9"]),
                         ("record heads=9", ["--record", "heads=9"]), ("record deflate=-1", ["--record", "deflate=-1"]),
                         ("deflate -1", ["--deflate", "-1"]), ("deflate 10", ["--deflate", "10"]), ("deflate fast", ["--deflate", "fast"]),
                         ("max-prompt-tokens 0", ["--max-prompt-tokens", "0"]), ("example -1", ["--example", "-1"])):
        f.refuse("capture " + label, "luka capture --" + label, cap + extra, 2, extra[0])
    f.refuse("capture without out", "luka capture with no --out", cap[:5] + cap[7:], 2, "--out")
    sweep = ["sweep", "--out", ctx.path("cli", "sweep"), "--plan", "--quiet"]
    tail = ["--", "--model", model, "--text-file", ctx.path("prompts", "text.txt")]
    for label, extra in (("grid nokey", ["--metric", "perplexity", "--grid", "nokey"]),
                         ("grid empty values", ["--metric", "perplexity", "--grid", "rho="]),
                         ("metric speed", ["--grid", "rho=0.25", "--metric", "speed"]),
                         ("x nokey", ["--grid", "rho=0.25", "--metric", "perplexity", "--x", "nokey"]),
                         ("baseline two values", ["--grid", "rho=0.25", "--metric", "perplexity", "--baseline", "rho=0.1,0.2"]),
                         ("slurm-time soon", ["--grid", "rho=0.25", "--metric", "perplexity", "--slurm-time", "soon"]),
                         ("slurm-cpus 0", ["--grid", "rho=0.25", "--metric", "perplexity", "--slurm-cpus", "0"]),
                         ("no grid", ["--metric", "perplexity"]), ("no metric", ["--grid", "rho=0.25"])):
        named = [e for e in extra if e.startswith("--")][-1] if label not in ("no grid", "no metric") else \
            ("--grid" if label == "no grid" else "--metric")
        f.refuse("sweep " + label, "luka sweep --" + label, sweep + extra + tail, 2, named)
    cal = ["calibrate", "--model", model, "--prompt", "hello there world", "--out", ctx.path("cli", "cal.json"), "--quiet"] + CPU
    for label, extra in (("candidates bogus", ["--candidates", "bogus"]), ("candidates bad key", ["--candidates", "lined:nokey=1"]),
                         ("budget 2", ["--config-out", ctx.path("cli", "c.json"), "--budget", "2"]),
                         ("budget 0", ["--config-out", ctx.path("cli", "c.json"), "--budget", "0"]),
                         ("kascade-heads sideways", ["--kascade", "1", "--kascade-heads", "sideways"]),
                         ("max-tokens x", ["--max-tokens", "x"]), ("kascade -1", ["--kascade", "-1"])):
        named = [e for e in extra if e.startswith("--")][-1]
        f.refuse("calibrate " + label, "luka calibrate --" + label, cal + extra, 2, named)
    f.refuse("info dtype fp16", "luka info --dtype fp16 (the GPU's dtype)", ["info", "--model", model, "--dtype", "fp16"], 2, "--dtype")
    f.refuse("generate fp16 on the CPU", "--dtype fp16 --device cpu", gen + ["--dtype", "fp16"], 2, "--dtype")
    f.refuse("tokenize text and jsonl", "--text with --jsonl", ["tokenize", "--model", model, "--text", "a", "--jsonl",
                                                                   ctx.path("prompts", "text.txt")], 2, "--text")
    f.refuse("info context 0", "--context 0", ["info", "--model", model, "--device", "cpu", "--context", "0"], 2, "--context")


def add_all(ctx, out, Family, fifo, CPU):
    outputs(ctx, out, Family, fifo, CPU)
    command_line(ctx, out, Family, fifo, CPU)
