// What the run controller's files share (run_controller.cpp: loading, replay, saving and the run;
// run_compare.cpp: Run B): the model lane's state, and a run's capture pipeline. Not for other files.
#pragma once

#include <filesystem>
#include <memory>
#include <string>

#include "app/studio/data/run_controller.h"
#include "captures/live.h"
#include "captures/pipeline.h"
#include "core/device/device.h"
#include "core/model/model.h"
#include "core/tokenizer/tokenizer.h"

namespace luka::studio {

// The model lane's state: only jobs on that lane touch it.
struct RunController::Impl {
  std::shared_ptr<const Model> model;
  std::unique_ptr<Tokenizer> tokenizer;
  std::shared_ptr<const Backend> device;
  std::string model_path;
};

// A run's capture pipeline into `live`, with its work on the model's threads; on the GPU the
// steps are compressed off the host thread, which bounds a step there (it launches every kernel).
std::unique_ptr<capture::CapturePipeline> live_pipeline(capture::LiveCapture& live, const Backend& device);

}  // namespace luka::studio
