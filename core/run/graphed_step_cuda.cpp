// The CUDA side of core/run/graphed_step.h: the static step over the fused CUDA kernels, its
// device work recorded with at::cuda::CUDAGraph (a private pool, capture on a side stream in
// cudaStreamCaptureModeGlobal, so a capture-unsafe call anywhere fails the capture) and replayed
// on the current stream. Built only with LUKA_CUDA (library luka_graphed_step_cuda).
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/run/graphed_step.h"
#include "core/run/static_step.h"
#include "core/run/step_kernels.h"
#include "core/util/error.h"
#include "kernels/cuda/graph.h"

namespace luka {

namespace {

// LUKA_SYNC_DEBUG=warn|error: LibTorch's CUDA sync-debug mode while a step's device work is issued,
// recorded or replayed (not while the token is read back after it), so any host synchronisation
// inside the step warns or fails (scripts/gpu_run.sh graph sets error).
c10::cuda::SyncDebugMode step_sync_debug() {
  const char* v = std::getenv("LUKA_SYNC_DEBUG");
  const std::string mode = v ? v : "";
  if (mode.empty() || mode == "off") return c10::cuda::SyncDebugMode::L_DISABLED;
  if (mode == "warn") return c10::cuda::SyncDebugMode::L_WARN;
  if (mode == "error") return c10::cuda::SyncDebugMode::L_ERROR;
  fail("LUKA_SYNC_DEBUG", "'" + mode + "' is not off, warn or error");
}

class SyncDebugScope {
 public:
  explicit SyncDebugScope(c10::cuda::SyncDebugMode mode) : old_(c10::cuda::warning_state().get_sync_debug_mode()) {
    c10::cuda::warning_state().set_sync_debug_mode(mode);
  }
  ~SyncDebugScope() { c10::cuda::warning_state().set_sync_debug_mode(old_); }
  SyncDebugScope(const SyncDebugScope&) = delete;
  SyncDebugScope& operator=(const SyncDebugScope&) = delete;

 private:
  c10::cuda::SyncDebugMode old_;
};

class GraphedStepEngine final : public DecodeEngine {
 public:
  GraphedStepEngine(const Decoder& decoder, const RunLength& run, const std::vector<LayerConfig>& layers, int warmup)
      : decoder_(decoder),
        step_(std::make_unique<StaticDecodeStep>(decoder, run, layers, kernels())),
        schedule_(warmup),
        sync_debug_(step_sync_debug()) {
    refuse_eager_layers();
  }

  void start(Decoder& decoder, const std::vector<std::int32_t>& prompt, std::int32_t first) override {
    step_->start(decoder, prompt, first);
  }

  std::int32_t step() override {
    step_->check_next_step();
    const std::vector<std::int64_t> due = step_->pages_due();
    const bool pages = std::any_of(due.begin(), due.end(), [](std::int64_t n) { return n > 0; });
    switch (schedule_.next(due)) {
      case StepIssue::kEager: {
        SyncDebugScope debug(sync_debug_);
        step_->enqueue_step();
        if (pages) step_->enqueue_pages();
        ++eager_;
        break;
      }
      case StepIssue::kRecord:
        record(due, pages);
        replay(due);
        break;
      case StepIssue::kReplay:
        replay(due);
        break;
    }
    {
      SyncDebugScope debug(sync_debug_);
      step_->end_step(/*pages_enqueued=*/true);
    }
    step_->publish_records();  // a capture's records: read from the device, outside the sync check
    return step_->token();
  }

  at::Tensor logits() const override { return step_->logits(); }

  // The step made anew for the new configs (its state carried over), and recorded again before
  // the next step unless the change leaves the step as it was.
  void change(std::int64_t step, const std::vector<LayerConfig>& layers) override {
    at::cuda::device_synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    EngineChange c;
    c.step = step;
    const StepChange kind = step_change(step_->plan(), layers);
    c.kind = to_string(kind);
    if (kind != StepChange::kNone) {
      graphs_.clear();  // before the buffers they recorded may go
      step_ = std::make_unique<StaticDecodeStep>(decoder_, *step_, layers, kernels());
      refuse_eager_layers();
      schedule_.invalidate();
      at::cuda::device_synchronize();
    }
    c.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    changes_.push_back(c);
  }

  std::string describe() const override {
    char line[320];
    std::snprintf(line, sizeof line,
                  "CUDA graph: %lld kernel nodes (%lld nodes in all), recorded in %.3f s; %lld replays, %lld eager steps",
                  static_cast<long long>(nodes_.kernels), static_cast<long long>(nodes_.total), record_seconds_,
                  static_cast<long long>(schedule_.replays() + schedule_.records()), static_cast<long long>(eager_));
    std::string s = line;
    if (page_nodes_.total > 0) {
      std::snprintf(line, sizeof line, "; the page variant %lld kernel nodes; %lld recordings",
                    static_cast<long long>(page_nodes_.kernels), static_cast<long long>(schedule_.records()));
      s += line;
    }
    if (!changes_.empty()) s += "; config changes: " + describe_changes(changes_);
    return s;
  }

 private:
  static StepKernelsFactory kernels() {
    return [](const StepTensors& t) { return make_cuda_step_kernels(t); };
  }

  void refuse_eager_layers() const {
    if (!step_->eager_layers().empty())
      fail("graph", std::to_string(step_->eager_layers().size()) +
                        " layers run through their own attention, which reads the length on the host: no graph "
                        "records such a step (run without --graph)");
  }

  // Records the step (with its page work when `pages`) as the graph of variant `due`.
  void record(const std::vector<std::int64_t>& due, bool pages) {
    // The work so far done before the capture begins; the capture on a side stream of the pool.
    at::cuda::device_synchronize();
    const auto t0 = std::chrono::steady_clock::now();
    auto graph = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
    const c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool();
    try {
      c10::cuda::CUDAStreamGuard guard(side);
      graph->capture_begin();
      {
        SyncDebugScope debug(sync_debug_);
        step_->enqueue_step();
        if (pages) step_->enqueue_pages();
      }
      graph->capture_end();
      const cuda::GraphNodes nodes = cuda::count_nodes(graph->raw_cuda_graph());
      (pages ? page_nodes_ : nodes_) = nodes;
      graph->instantiate();
    } catch (const c10::Error& e) {
      fail("graph", std::string("recording the decode step failed: ") + e.what_without_backtrace());
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    record_seconds_ += seconds;
    // A recording after a config change is that change's cost too.
    if (!changes_.empty() && changes_.back().kind != "none")
      changes_.back().record_seconds = std::max(changes_.back().record_seconds, 0.0) + seconds;
    graphs_.emplace_back(due, std::move(graph));
  }

  void replay(const std::vector<std::int64_t>& due) {
    for (auto& [variant, graph] : graphs_) {
      if (variant != due) continue;
      try {
        SyncDebugScope debug(sync_debug_);
        graph->replay();
      } catch (const c10::Error& e) {
        fail("graph", std::string("replaying the decode step failed: ") + e.what_without_backtrace());
      }
      return;
    }
    fail("graph", "no recorded graph for this step's variant");
  }

  const Decoder& decoder_;
  std::unique_ptr<StaticDecodeStep> step_;
  GraphSchedule schedule_;
  std::vector<EngineChange> changes_;
  std::vector<std::pair<std::vector<std::int64_t>, std::unique_ptr<at::cuda::CUDAGraph>>> graphs_;  // by variant
  cuda::GraphNodes nodes_, page_nodes_;  // the plain step's and the last page variant's
  double record_seconds_ = 0;  // every recording so far
  std::int64_t eager_ = 0;
  c10::cuda::SyncDebugMode sync_debug_;
};

}  // namespace

DecodeEngineFactory graphed_step_engine(int warmup) {
  return [warmup](const Decoder& decoder, std::int64_t prompt_tokens, std::int64_t max_new_tokens,
                  const std::vector<LayerConfig>& layers) -> std::unique_ptr<DecodeEngine> {
    return std::make_unique<GraphedStepEngine>(decoder, RunLength{prompt_tokens, max_new_tokens}, layers, warmup);
  };
}

}  // namespace luka
