// luka studio: reads the options and opens the Studio window (app/studio).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "app/cli/args.h"
#include "app/cli/commands.h"
#include "app/cli/luka_options.h"
#include "app/studio/views/studio.h"
#include "captures/reader.h"
#include "core/eval/calibration.h"
#include "core/device/device.h"
#include "core/prompt/prompt_file.h"
#include "core/util/error.h"

namespace luka::cli {

int run_studio(int argc, char** argv) {
  studio::WindowOptions o;
  o.launched = std::chrono::steady_clock::now();
  ArgParser args("studio", "[--model PATH] [--capture FILE] [--prompt-file F] [--script FILE] [--device D]",
                 "Opens the LuKA Studio window: run a prompt with per-layer dense / lined / clustered attention,\n"
                 "switch a layer's mode live, and explore attention maps, covers and costs; or replay a capture\n"
                 "file without a model. With no argument it loads the default model and the demo prompt the first\n"
                 "time, and after that the last session's model, prompt, LuKA config and view\n"
                 "(--fresh: the defaults).\n"
                 "The session is saved at exit, --fresh or not, unless --no-save is given. A --script window neither\n"
                 "reads nor saves it, unless --fresh asks it to save.");
  args.option("model", "PATH", kModelOptionHelp)
      .option("capture", "FILE", "open a capture for replay (no model is loaded)")
      .option("prompt-file", "F", "an interwoven prompt .json", Default::described_text("assets/prompts/demo.json"))
      .option("script", "FILE", "run scripted UI actions (tests, demos); exits when it ends")
      .option("size", "WxH", "window size", "1280x800")
      .option("calibration", "FILE", "a luka calibrate file of the model: attached to every run's capture, and shown\n"
              "in the Head scores tab (source: calibration)")
      .flag("fresh", "start from the defaults instead of the last session (model, prompt, LuKA config,\n"
            "selection, view, panel sizes); the session is still saved at exit")
      .flag("no-save", "do not save the session at exit (the next start restores the one before)");
  add_device_option(args);
  add_static_step_option(args);
  add_weights_option(args);
  args.epilog("example:\n  luka studio\n  luka studio --capture demo.h5\n  luka studio --device cuda\n\n" + std::string(kEnvironmentHelp));
  if (!args.parse(argc, argv, 2)) return 0;
  {
    // WxH in pixels. Past 16384 (the largest framebuffer OpenGL 3.3 drivers commonly allow) the
    // window could not be made, and GLFW's error named neither the option nor the size.
    const std::string size = args.get("size");
    char* end = nullptr;
    errno = 0;
    const long w = std::strtol(size.c_str(), &end, 10);
    bool ok = end != size.c_str() && *end == 'x';
    long h = 0;
    if (ok) {
      const char* at = end + 1;
      h = std::strtol(at, &end, 10);
      ok = end != at && *end == '\0' && errno == 0;
    }
    if (!ok || w < 320 || h < 240 || w > 16384 || h > 16384)
      throw UsageError("--size " + size + ": expected WxH in pixels, from 320x240 to 16384x16384");
    o.width = static_cast<int>(w);
    o.height = static_cast<int>(h);
  }
  o.device = args.get("device");
  try {
    parse_device(o.device);
  } catch (const Error& e) {
    throw UsageError(std::string("--") + e.what());
  }
  // How runs issue their decode steps (greedy runs; one that samples takes the decoder's step).
  const bool graph = graph_option(args) == DecodeIssue::kGraph, static_step = args.get_flag("static-step");
  if (graph && static_step) throw UsageError("--graph and --static-step: give one (--graph is the static step recorded on a GPU)");
  if (graph && o.device == "cpu")
    throw UsageError("--graph records CUDA graphs: it needs --device cuda (drop it, or use --static-step, on the CPU)");
  o.step_engine = graph ? studio::StepEngine::kGraph : static_step ? studio::StepEngine::kStatic : studio::StepEngine::kDecoder;
  if (args.has("script")) o.script = args.get("script");
  if (args.has("calibration")) {
    o.calibration = args.get("calibration");
    eval::read_calibration(o.calibration);  // a bad file fails here, not in the window
  }
  // The last session comes back unless a script drives the window (tests need the defaults) or
  // --fresh says otherwise; options given here win over it.
  o.restore = !args.has("script") && !args.get_flag("fresh");
  o.save = !args.get_flag("no-save") && (!args.has("script") || args.get_flag("fresh"));
  o.model_given = args.has("model") || std::getenv("LUKA_MODEL") != nullptr;
  o.prompt_given = args.has("prompt-file");
  o.device_given = args.has("device");
  o.weights_given = args.has("weights");
  o.weights = load_options(args).weights;  // a bad value is a usage error here
  const std::filesystem::path prompt_file =
      args.has("prompt-file") ? std::filesystem::path(args.get("prompt-file"))
                              : std::filesystem::path(LUKA_SOURCE_DIR) / "assets" / "prompts" / "demo.json";
  o.prompt = load_prompt_file(prompt_file);
  if (args.has("capture")) {
    o.capture = args.get("capture");
    capture::CaptureFile::open(o.capture);  // a capture named on the command line must open: say so now, not in a window
  } else {
    o.model = resolve_model_path(args);
  }
  return studio::run_window(o);
}

}  // namespace luka::cli
