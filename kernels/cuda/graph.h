// A decode step recorded once as a CUDA graph and replayed (issue 44): stream capture of whatever
// the caller enqueues, instantiation, replay on a stream, and the node counts read back through
// cudaGraphGetNodes (no profiler). Plain CUDA C++ like the rest of kernels/cuda; errors come back as
// text ("" on success), so a machine without a GPU gets one clear line, never a crash.
//
// The step it records must be capture-safe: no allocation outside the graph (every buffer reserved
// before, core/run/step_plan.h), no host synchronisation and no pageable copy. Capture runs in
// cudaStreamCaptureModeGlobal, so a capture-unsafe call from any thread (cudaMalloc, a synchronise,
// a pageable copy) fails the capture instead of slipping out of the graph; LibTorch's own
// sync-debug mode (set to error by the GPU stage, scripts/gpu_run.sh) catches its ops' syncs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace luka::cuda {

struct GraphNodes {
  std::int64_t total = 0;    // every node of the graph
  std::int64_t kernels = 0;  // cudaGraphNodeTypeKernel: the launches a replay saves
  std::int64_t memcpy = 0, memset = 0, other = 0;
};

class StepGraph {
 public:
  StepGraph() = default;
  ~StepGraph();
  StepGraph(StepGraph&& other) noexcept;
  StepGraph& operator=(StepGraph&& other) noexcept;
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  // Records what `work` enqueues on `stream` (a cudaStream_t; not the legacy default stream, which
  // cannot be captured) and instantiates it, replacing any graph held before. Returns "" or why it
  // failed: no GPU, a capture-unsafe call inside `work`, or `work`'s own error text (it returns ""
  // when it enqueued everything). `seconds` (when not null): the time capture and instantiation took.
  std::string capture(void* stream, const std::function<std::string()>& work, double* seconds = nullptr);
  // One replay on `stream`, ordered after the work already enqueued there.
  std::string replay(void* stream) const;
  bool recorded() const { return exec_ != nullptr; }
  const GraphNodes& nodes() const { return nodes_; }
  void clear();

 private:
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
  GraphNodes nodes_;
};

// The nodes of a graph (a cudaGraph_t), by type.
GraphNodes count_nodes(void* graph);

}  // namespace luka::cuda
