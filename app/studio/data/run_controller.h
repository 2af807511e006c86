// The Studio's data model (no UI code): the task manager's "model" lane (one thread) owns the
// model and runs loads, prefill and decode steps and opens captures, one job at a time in the order
// they were asked for; a capture pipeline (I/O thread) fills a LiveCapture that the UI reads; saves
// run on the "io" lane. The UI thread only posts requests and reads snapshots, so it never waits
// on the model or the disk.
#pragma once

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "app/studio/data/tasks.h"
#include "captures/capture.h"
#include "core/device/device.h"
#include "core/luka/config.h"
#include "core/generate/sampler.h"
#include "core/model/model.h"
#include "core/prompt/interwoven_prompt.h"

namespace luka {
class RunLoop;
}

namespace luka::studio {

// The lanes of the task manager the RunController's jobs run on: the model's own thread, and saves.
inline constexpr char kModelLane[] = "model";
inline constexpr char kIoLane[] = "io";

enum class RunState { kNoModel, kLoading, kReady, kRunning, kPaused, kError };
const char* to_string(RunState s);

struct Status {
  RunState state = RunState::kNoModel;
  std::string message;        // what is happening, or the last error
  std::string error;          // the last error a load or run ended in: shown as one while it is `message`
  std::string model_summary;  // "llama, 30 layers, 9/3 heads, fp32" once loaded
  std::string device;         // "cpu", "cuda:0, NVIDIA H100 ..." once loaded
  std::string source;         // the model path, or the capture file being replayed
  bool replay = false;        // a capture file is open (no model needed)
  std::string capture;        // replay: the capture file shown (kept while a model loads)
  // Saving the current view to a capture file (save_capture), in the background.
  bool saving = false;
  double save_progress = 0;   // 0..1 while saving
  bool save_failed = false;   // the last save failed (save_message says why)
  std::string save_message;   // "saving FILE", "saved FILE (...)", or the error
  std::string saved_path;     // the file the last successful save wrote
  std::int64_t steps_done = 0, steps_total = 0;
  std::int64_t prompt_tokens = 0;
  double prefill_fraction = -1;  // the live run's prefill, 0..1 (-1: none running)
  bool prefill_held = false;     // the prefill waits for release_prefill() (hold_prefill)
  bool refused_for_resources = false;  // the last run was refused: `message` says what it needs
  // The second run of the compare canvas (run_compare): the view's tokens again under another config.
  struct Compare {
    bool running = false;
    std::int64_t steps_done = 0, steps_total = 0;
    std::string label;    // the config B runs: a preset's name, or "layers panel"
    std::string message;  // progress, the outcome, or why it was refused
    bool failed = false;
  } compare;
};

struct RunRequest {
  InterwovenPrompt prompt;    // segments (may be one plain segment) and question
  bool chat = false;
  int max_new_tokens = 32;
  bool start_paused = false;  // prefill, then wait for step()/resume()
  bool ignore_stop_tokens = false;  // generate all max_new_tokens, past end-of-sequence tokens
  SamplingParams sampling;    // greedy by default
  std::optional<std::string> free_text;  // set: this plain text is the prompt (no segments); empty is an error
  std::string record;  // what the live capture records (a --record SPEC); "": every layer and head, maps up to 4096 rows
  bool force = false;  // run even when the estimate says it will not fit (run_budget.h)
  // Query-agnostic (kvpress's evaluation): the segments (the context) are prefilled before the
  // question, so a press layer compresses the context alone and the question attends to what it
  // kept. Needs an interwoven prompt with a question.
  bool query_agnostic = false;
  // A `luka calibrate` file's JSON for the capture's manifest (core/eval/calibration.h); kept only
  // when it is a calibration of the loaded model's layers and heads.
  std::string calibration;
};

// How a live run issues its decode steps (luka studio --graph / --static-step): the decoder's
// own step, the static step on the CPU, or the static step recorded as a CUDA graph on a GPU.
// The last two choose greedily: a run that samples takes the decoder's step, and says so.
enum class StepEngine { kDecoder, kStatic, kGraph };
const char* to_string(StepEngine e);  // "decoder", "static step", "CUDA graph"

class RunController {
 public:
  // Jobs run on `tasks` (the Studio's); without one, on a task manager of its own (headless use).
  explicit RunController(TaskManager& tasks);
  RunController();
  // Stops a run, cancels what is queued and waits for the model's job and a save to return.
  ~RunController();
  RunController(const RunController&) = delete;
  RunController& operator=(const RunController&) = delete;

  // Loads on `device` (auto: the GPU when the CUDA plugin sees one, else the CPU).
  void load_model(const std::filesystem::path& path, const LoadOptions& options, const DeviceRequest& device = {});
  // Gives the UI back at once: a load in progress finishes in the background and is discarded.
  void cancel_load();
  // Replays a capture file (stops a run in progress first); the run and mode controls stay off
  // until leave_replay().
  void open_capture(const std::filesystem::path& path);
  // Back from replay to an empty view: the prompt editor and run controls again.
  void leave_replay();
  // Writes the current view (a run paused or finished, or the capture replayed) to `path` as a
  // capture file, on the "io" lane; Status's save_* fields report progress and outcome.
  // Refused (save_failed, with a message) while a run computes, without a view, or while another
  // save runs.
  void save_capture(const std::filesystem::path& path);
  void cancel_save();
  void run(const RunRequest& request);
  void pause();
  void resume();
  void step();  // one decode step while paused
  void stop();  // ends the run after the current step
  // Holds a run's prefill at its first progress report at or past `fraction` (0..1) until
  // release_prefill() or stop(), so that the map's "computing" overlay stays up to be looked at
  // (scripts: hold_prefill). Status::prefill_held says when it waits.
  void hold_prefill(double fraction);
  void release_prefill();
  // Holds the next model load where it reads the files, as a load blocked in the file system
  // would be (a FIFO, a hung network mount): it waits for release_load() alone, not for quit or
  // cancel. Scripts (hold_load) use it to check that quitting does not wait for such a load.
  void hold_load();
  void release_load();
  // A load started and not returned: quitting leaves it behind (the process ends without it;
  // nothing can interrupt a read blocked in the kernel), and the destructor must not be run.
  bool load_pending() const;

  // The config every layer runs; a change takes effect at the next decode step (live). During a
  // replay the config is the capture's, and changes are ignored.
  LukaConfig config() const;
  // A Kascade layer left without a Kascade anchor to reuse (its anchor switched away) becomes an
  // anchor itself.
  void set_layer_mode(int layer, AttentionMode mode);
  void set_config(const LukaConfig& config);
  // The engine the next runs' decode steps take (live mode changes reach it before the next step,
  // as they reach the decoder). A run it cannot take fails with its reason: the graph off a GPU,
  // the static step on one, or a GGUF model held as blocks (load it with dequantized weights).
  void set_step_engine(StepEngine engine);
  StepEngine step_engine() const;

  // Runs the view's tokens again under `config` for the compare canvas: the same prompt, then each
  // generated token fed as it was (teacher forcing), so that both runs attend from the same
  // queries and differ by their attention alone. It records the view's layers and heads into a
  // second live capture, which compare_view() returns from the start. The view is a run that is
  // over, or a capture of the loaded model (same tokenizer, layers and heads). Refused, with
  // Status::compare saying why, without a model or a view, or while a run computes. stop() ends it.
  void run_compare(const LukaConfig& config, const std::string& label);
  std::shared_ptr<const capture::CaptureView> compare_view() const;  // the last run_compare's; may be null

  Status status() const;
  std::shared_ptr<const capture::CaptureView> view() const;  // live run or file; may be null
  std::string output() const;                                 // generated text so far
  bool busy() const;  // loading or running

 private:
  // Queues `job` on the model lane; an exception it throws becomes the status line.
  Task post(std::string name, std::function<void(TaskContext&)> job, bool listed = false);
  void run_job(RunRequest request, TaskContext& ctx);
  void compare_job(const LukaConfig& config, TaskContext& ctx);
  void set_status(const std::function<void(Status&)>& f);

  std::unique_ptr<TaskManager> own_tasks_;  // when constructed without one
  TaskManager& tasks_;
  struct Impl;
  std::unique_ptr<Impl> impl_;  // the model lane's alone
  struct LiveRun;               // run_job's observer of the run loop (run_controller.cpp)
  std::string use_step_engine(RunLoop& loop, const Backend& device, double temperature);
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Task> model_tasks_;  // posted to the model lane and maybe not finished
  Task load_task_, save_task_;
  bool quit_ = false;
  bool paused_ = false;
  std::int64_t step_credit_ = 0;
  std::atomic<bool> stop_{false};
  bool config_dirty_ = false;
  double hold_prefill_at_ = -1;  // hold_prefill's fraction (-1: none)
  bool hold_load_ = false;       // hold_load()
  LukaConfig config_;
  StepEngine step_engine_ = StepEngine::kDecoder;
  Status status_;
  std::shared_ptr<const capture::CaptureView> view_;
  std::shared_ptr<const capture::CaptureView> compare_view_;
  std::string output_;
};

}  // namespace luka::studio
