// The Studio window (docs/design.md §7): what `luka studio` opens once its options are read
// (app/cli/cmd_studio.cpp).
#pragma once

#include <chrono>
#include <filesystem>
#include <string>

#include "app/studio/data/run_controller.h"
#include "core/model/model.h"
#include "core/prompt/interwoven_prompt.h"

namespace luka::studio {

struct WindowOptions {
  std::filesystem::path model;    // loaded at start (unless a script or a capture is given)
  std::filesystem::path capture;  // replayed instead of loading a model (opened and checked already)
  std::filesystem::path script;   // scripted UI actions; the window closes when it ends
  InterwovenPrompt prompt;        // the prompt panel's start
  std::string device = "auto";    // --device value for loading
  WeightFormat weights = WeightFormat::kAuto;  // --weights
  std::filesystem::path calibration;  // a `luka calibrate` file attached to the runs' captures (checked already)
  StepEngine step_engine = StepEngine::kDecoder;  // --graph / --static-step
  int width = 1280, height = 800;
  // Restore the last session (app/studio/views/session_state.h) at start; what the command line names
  // explicitly (model, prompt, capture) wins over what the session remembers. Save it at exit.
  bool restore = false;
  bool save = false;
  bool model_given = false, prompt_given = false, device_given = false, weights_given = false;
  std::chrono::steady_clock::time_point launched = std::chrono::steady_clock::now();
};

// Runs the window until it is closed or the script ends; returns the exit code. Throws
// luka::Error when no window can be opened (no display) or the script is unreadable.
int run_window(const WindowOptions& options);

}  // namespace luka::studio
