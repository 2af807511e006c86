#!/usr/bin/env python3
"""The layering of docs/design.md §2, checked on every #include (docs/architecture.md, "Layers").

    scripts/check_layers.py [ROOT]        (ROOT: the source tree, default the checkout)

Every `#include` in app/, captures/, viz/, core/, kernels/ and tests/ is checked against the
table below: a quoted include must name a module the including file's module may use, and a
system include must not be one its module is kept free of (LibTorch, the GUI libraries, anything
but the standard library). Prints one line per violation, `file:line: what: why`, and exits 1
when there is any; ctest runs it as the test `layering` (and so does CI).

Python 3, standard library only: it runs on the GPU machines' build too.
"""
import os
import re
import sys

# Folders scanned, and what a file in them is (the longest rule key that matches its path).
SCANNED = ("app", "captures", "viz", "core", "kernels", "tests")
SOURCE_EXTENSIONS = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".inl")

# System headers a module is kept free of.
TORCH = ("ATen/", "torch/", "c10/", "caffe2/")
GUI = ("imgui", "backends/imgui", "GLFW/", "GL/", "glad/", "GLES")

# The C++17 standard library and the C headers it includes; kernels/common may use nothing else.
STD_HEADERS = set("""
algorithm any array atomic bitset cassert cctype cerrno cfenv cfloat charconv chrono cinttypes climits
clocale cmath codecvt complex condition_variable csetjmp csignal cstdarg cstddef cstdint cstdio cstdlib
cstring ctime cuchar cwchar cwctype deque exception execution filesystem forward_list fstream functional
future initializer_list iomanip ios iosfwd iostream istream iterator limits list locale map memory
memory_resource mutex new numeric optional ostream queue random ratio regex scoped_allocator set
shared_mutex sstream stack stdexcept streambuf string string_view system_error thread tuple type_traits
typeindex typeinfo unordered_map unordered_set utility valarray variant vector
assert.h ctype.h errno.h fenv.h float.h inttypes.h limits.h locale.h math.h setjmp.h signal.h stdarg.h
stddef.h stdint.h stdio.h stdlib.h string.h time.h uchar.h wchar.h wctype.h
""".split())

ANY = None  # tests may include anything

# module -> (modules its files may include, system headers banned, why). Modules are path
# prefixes; a key also matches a file stem ("captures/recorder" is recorder.h and recorder.cpp).
# docs/design.md §2: app → viz, captures, core → kernels; core never includes ImGui, GLFW or OpenGL;
# kernels/cuda never includes LibTorch. docs/architecture.md adds the finer rules.
BELOW_APP = ("viz", "captures", "core", "kernels")
RULES = {
    "app": (("app",) + BELOW_APP, (), "app is the top: it may use every module"),
    "app/figures": (("app/figures",) + BELOW_APP, (),
                    "app/figures is drawn by both the CLI and the Studio, so it uses neither"),
    "app/studio": (("app/studio", "app/figures") + BELOW_APP, (),
                   "the Studio includes nothing from app/cli (docs/architecture.md)"),
    "app/studio/data": (("app/studio/data", "app/figures") + BELOW_APP, GUI,
                        "the Studio's data model runs headless: no GUI, nothing from its views (docs/architecture.md)"),
    "viz": (("viz", "core", "kernels"), GUI + TORCH, "viz sits beside captures, below app, above core; no GUI, no LibTorch"),
    "captures": (("captures", "core", "kernels"), GUI + TORCH,
                 "captures sits beside viz, below app, above core; replay needs no LibTorch and no GUI"),
    # The recorder is the LibTorch side of captures (luka_capture_record).
    "captures/recorder": (("captures", "core", "kernels"), GUI, "captures sits below app, above core; no GUI"),
    "core": (("core", "kernels"), GUI, "core sits below app, captures and viz, above kernels; no GUI"),
    "core/util": (("core/util", "kernels/common"), GUI + TORCH,
                  "core/util is the base every other module links: it uses no other part of core"),
    "kernels": (("kernels",), GUI, "kernels are the bottom layer: they include no other module"),
    "kernels/cpu": (("kernels/cpu", "kernels/common"), GUI,
                    "kernels are the bottom layer: they include no other module"),
    "kernels/cuda": (("kernels/cuda", "kernels/common"), GUI + TORCH,
                     "kernels/cuda is plain CUDA C++ that compiles alone: no LibTorch, no other module"),
    "kernels/common": (("kernels/common",), "std-only",
                       "kernels/common is code both the CPU and the CUDA kernels compile: the standard library and itself only"),
    "tests": (ANY, (), "tests may include anything"),
}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def matches(key, path):
    return path == key or path.startswith(key + "/") or path.startswith(key + ".")


def rule_key(path):
    keys = [k for k in RULES if matches(k, path)]
    return max(keys, key=len) if keys else None


def module_of(path):
    """The module an include target belongs to, for messages: core/gguf, app/cli, viz..."""
    parts = path.split("/")
    return "/".join(parts[:2]) if parts[0] in ("app", "core", "kernels") and len(parts) > 2 else parts[0]


def resolve_quoted(root, including, target):
    """A quoted include as a path from the root: root-relative (how the tree writes them), else
    relative to the including file's folder."""
    if os.path.exists(os.path.join(root, target)):
        return os.path.normpath(target).replace(os.sep, "/")
    local = os.path.normpath(os.path.join(os.path.dirname(including), target)).replace(os.sep, "/")
    if os.path.exists(os.path.join(root, local)):
        return local
    return os.path.normpath(target).replace(os.sep, "/")


def check_file(root, path):
    key = rule_key(path)
    if key is None:
        return []
    allowed, banned, why = RULES[key]
    problems = []
    with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
        in_comment = False
        for number, line in enumerate(f, 1):
            # Skip includes inside /* */ comments (a line-start include in one is rare, but cheap to skip).
            if in_comment:
                if "*/" in line:
                    in_comment = False
                continue
            stripped = line.lstrip()
            if stripped.startswith("/*") and "*/" not in stripped:
                in_comment = True
                continue
            m = INCLUDE.match(line)
            if not m:
                continue
            quote, target = m.group(1), m.group(2).strip()
            where = f"{path}:{number}"
            if quote == '"':
                target = resolve_quoted(root, path, target)
                if allowed is not ANY and target.split("/")[0] in RULES.keys() | set(SCANNED) | {"bench"}:
                    if not any(matches(a, target) for a in allowed):
                        problems.append(f'{where}: includes "{target}" ({module_of(target)}): {key} may include '
                                        f"{', '.join(allowed)} only; {why}")
                    continue
            # A system header (or a quoted one that is no module of ours, such as "imgui.h").
            if banned == "std-only":
                if target not in STD_HEADERS:
                    problems.append(f"{where}: includes <{target}>, which is not the standard library: {why}")
            else:
                for prefix in banned:
                    if target.startswith(prefix):
                        what = "LibTorch" if prefix in TORCH else "the GUI (ImGui, GLFW, OpenGL)"
                        problems.append(f"{where}: includes <{target}> ({what}): {why}")
                        break
    return problems


def scan(root):
    problems = []
    for top in SCANNED:
        for folder, dirs, files in os.walk(os.path.join(root, top)):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(SOURCE_EXTENSIONS):
                    path = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                    problems += check_file(root, path)
    return problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    if not os.path.isdir(os.path.join(root, "core")):
        print(f"check_layers: {root} is not the source tree (no core/)", file=sys.stderr)
        return 2
    problems = scan(root)
    for p in problems:
        print(p)
    if problems:
        print(f"check_layers: {len(problems)} include(s) against the layering "
              "(docs/design.md §2, docs/architecture.md)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
