#!/usr/bin/env python3
"""scripts/check_layers.py on small fake trees: a clean tree passes, and each kind of include
against the layering fails with one `file:line: ...` line naming it. ctest: layering_checker."""
import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "check_layers.py")
_spec = importlib.util.spec_from_file_location("check_layers", CHECKER)
check_layers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(check_layers)

# A tree that keeps every rule: each file with the includes its module may have.
CLEAN = {
    "core/util/error.h": '#include <string>\n#include "kernels/common/ggml_type.h"\n',
    "core/gguf/gguf.h": '#include "core/util/error.h"\n#include "kernels/common/ggml_type.h"\n',
    "core/model/model.h": '#include <ATen/ATen.h>\n#include "core/gguf/gguf.h"\n#include "kernels/cpu/gemv.h"\n',
    "kernels/common/ggml_type.h": "#include <cstdint>\n#include <cmath>\n",
    "kernels/cpu/gemv.h": '#include <ATen/ATen.h>\n#include "kernels/common/ggml_type.h"\n',
    "kernels/cuda/step.cu": '#include <cuda_runtime.h>\n#include "step.h"\n#include "kernels/common/ggml_type.h"\n',
    "kernels/cuda/step.h": "#include <cstddef>\n",
    "captures/writer.cpp": '#include "core/util/error.h"\n#include "captures/writer.h"\n',
    "captures/writer.h": "#include <string>\n",
    "captures/recorder.cpp": '#include <ATen/ATen.h>\n#include "core/model/model.h"\n',
    "viz/figure.cpp": '#include <cairo.h>\n#include "core/util/error.h"\n',
    "app/cli/main.cpp": '#include "app/studio/views/studio.h"\n#include "captures/writer.h"\n#include "viz/figure.h"\n',
    "app/studio/views/studio.h": '#include <imgui.h>\n#include "app/figures/figure.h"\n',
    "tests/core/test_x.cpp": '#include "app/cli/args.h"\n#include <imgui.h>\n',
    # An include in a block comment is no include.
    "core/util/commented.h": '/*\n#include "app/cli/args.h"\n*/\n',
}

# One include against the layering each: (file, its text, what the line must say).
VIOLATIONS = [
    ("kernels/cpu/quant.h", '#include <cstdint>\n#include "core/gguf/ggml_types.h"\n',
     'kernels/cpu/quant.h:2: includes "core/gguf/ggml_types.h" (core/gguf): kernels/cpu may include kernels/cpu, kernels/common only'),
    ("core/luka/config.cpp", '#include "app/cli/args.h"\n', 'core/luka/config.cpp:1: includes "app/cli/args.h" (app/cli): core may include core, kernels only'),
    ("core/util/half.h", '#include "core/gguf/gguf.h"\n', 'core/util/half.h:1: includes "core/gguf/gguf.h" (core/gguf): core/util may include'),
    ("core/luka/panel.cpp", "#include <imgui.h>\n", "core/luka/panel.cpp:1: includes <imgui.h> (the GUI (ImGui, GLFW, OpenGL))"),
    ("viz/gl.cpp", "#include <GL/gl.h>\n", "viz/gl.cpp:1: includes <GL/gl.h> (the GUI"),
    ("captures/reader.cpp", "#include <ATen/ATen.h>\n", "captures/reader.cpp:1: includes <ATen/ATen.h> (LibTorch)"),
    ("captures/live.cpp", '#include "viz/heatmap.h"\n', 'captures/live.cpp:1: includes "viz/heatmap.h" (viz): captures may include'),
    ("kernels/cuda/luka.cu", "#include <c10/cuda/CUDAStream.h>\n", "kernels/cuda/luka.cu:1: includes <c10/cuda/CUDAStream.h> (LibTorch)"),
    ("kernels/cuda/luka2.cu", '#include "kernels/cpu/gemv.h"\n', 'kernels/cuda/luka2.cu:1: includes "kernels/cpu/gemv.h"'),
    ("kernels/common/rules.h", "#include <cmath>\n#include <cuda_fp16.h>\n",
     "kernels/common/rules.h:2: includes <cuda_fp16.h>, which is not the standard library"),
    ("app/studio/panel.cpp", '#include "app/cli/args.h"\n', 'app/studio/panel.cpp:1: includes "app/cli/args.h" (app/cli): app/studio may include'),
    ("app/studio/data/model.cpp", '#include "app/studio/views/ui_state.h"\n',
     'app/studio/data/model.cpp:1: includes "app/studio/views/ui_state.h" (app/studio): app/studio/data may include'),
    ("app/studio/data/draw.cpp", "#include <imgui.h>\n", "app/studio/data/draw.cpp:1: includes <imgui.h> (the GUI"),
    ("core/model/x.cpp", '#  include "../../app/cli/args.h"\n', 'core/model/x.cpp:1: includes "app/cli/args.h"'),
    ("core/model/y.cpp", '#include "tests/process_util.h"\n', 'core/model/y.cpp:1: includes "tests/process_util.h" (tests)'),
]


def write_tree(root, files):
    for path, text in files.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as f:
            f.write(text)


def run(root):
    """As CI runs it: the script's exit code and its lines."""
    r = subprocess.run([sys.executable, CHECKER, root], capture_output=True, text=True, timeout=60)
    return r.returncode, r.stdout.splitlines()


class CheckLayers(unittest.TestCase):
    def test_clean_tree_passes(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, CLEAN)
            code, lines = run(root)
            self.assertEqual(lines, [])
            self.assertEqual(code, 0)

    def test_a_violation_fails_the_script(self):
        with tempfile.TemporaryDirectory() as root:
            path, text, expected = VIOLATIONS[0]
            write_tree(root, dict(CLEAN, **{path: text}))
            code, lines = run(root)
            self.assertEqual(code, 1, lines)
            self.assertEqual(len(lines), 1, lines)
            self.assertTrue(lines[0].startswith(expected), f"{lines[0]!r} does not start with {expected!r}")

    def test_each_violation_is_one_line_naming_it(self):
        for path, text, expected in VIOLATIONS:
            with self.subTest(path=path), tempfile.TemporaryDirectory() as root:
                write_tree(root, dict(CLEAN, **{path: text}))
                write_tree(root, {"app/cli/args.h": "", "viz/heatmap.h": "", "tests/process_util.h": ""})
                lines = check_layers.scan(root)
                self.assertEqual(len(lines), 1, lines)
                self.assertTrue(lines[0].startswith(expected), f"{lines[0]!r} does not start with {expected!r}")

    def test_not_a_source_tree_is_an_error(self):
        with tempfile.TemporaryDirectory() as root:
            code, _ = run(root)
            self.assertEqual(code, 2)


if __name__ == "__main__":
    unittest.main()
