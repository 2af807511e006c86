#include <cuda_runtime.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/graph.h"

namespace luka::cuda {

namespace {

std::string error_text(const char* what, cudaError_t e) {
  return std::string(what) + ": " + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
}

}  // namespace

GraphNodes count_nodes(void* graph) {
  GraphNodes n;
  if (graph == nullptr) return n;
  const auto g = static_cast<cudaGraph_t>(graph);
  std::size_t count = 0;
  if (cudaGraphGetNodes(g, nullptr, &count) != cudaSuccess) return n;
  std::vector<cudaGraphNode_t> nodes(count);
  if (count > 0 && cudaGraphGetNodes(g, nodes.data(), &count) != cudaSuccess) return n;
  n.total = static_cast<std::int64_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    cudaGraphNodeType type{};
    if (cudaGraphNodeGetType(nodes[i], &type) != cudaSuccess) continue;
    if (type == cudaGraphNodeTypeKernel) {
      ++n.kernels;
    } else if (type == cudaGraphNodeTypeMemcpy) {
      ++n.memcpy;
    } else if (type == cudaGraphNodeTypeMemset) {
      ++n.memset;
    } else {
      ++n.other;
    }
  }
  return n;
}

StepGraph::~StepGraph() { clear(); }

StepGraph::StepGraph(StepGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)), nodes_(other.nodes_) {}

StepGraph& StepGraph::operator=(StepGraph&& other) noexcept {
  if (this != &other) {
    clear();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
    nodes_ = other.nodes_;
  }
  return *this;
}

void StepGraph::clear() {
  if (exec_ != nullptr) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = graph_ = nullptr;
  nodes_ = GraphNodes{};
}

std::string StepGraph::capture(void* stream, const std::function<std::string()>& work, double* seconds) {
  const auto t0 = std::chrono::steady_clock::now();
  clear();
  int devices = 0;
  if (const cudaError_t e = cudaGetDeviceCount(&devices); e != cudaSuccess || devices == 0) {
    cudaGetLastError();  // the sticky "no driver" error
    return e != cudaSuccess ? error_text("CUDA graph capture: no usable GPU", e) : "CUDA graph capture: no GPU";
  }
  if (stream == nullptr) return "CUDA graph capture: the legacy default stream cannot be captured; pass a stream";
  const auto s = static_cast<cudaStream_t>(stream);
  if (const cudaError_t e = cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal); e != cudaSuccess)
    return error_text("cudaStreamBeginCapture", e);
  const std::string work_error = work();
  cudaGraph_t graph = nullptr;
  // Always ends the capture, so the stream is usable again whatever went wrong inside it.
  const cudaError_t end = cudaStreamEndCapture(s, &graph);
  if (!work_error.empty() || end != cudaSuccess) {
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    return !work_error.empty() ? "CUDA graph capture: " + work_error
                               : error_text("cudaStreamEndCapture (a capture-unsafe call in the step?)", end);
  }
  cudaGraphExec_t exec = nullptr;
  if (const cudaError_t e = cudaGraphInstantiateWithFlags(&exec, graph, 0); e != cudaSuccess) {
    cudaGraphDestroy(graph);
    return error_text("cudaGraphInstantiate", e);
  }
  graph_ = graph;
  exec_ = exec;
  nodes_ = count_nodes(graph_);
  if (seconds != nullptr) *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return "";
}

std::string StepGraph::replay(void* stream) const {
  if (exec_ == nullptr) return "CUDA graph replay: nothing recorded";
  if (const cudaError_t e = cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), static_cast<cudaStream_t>(stream));
      e != cudaSuccess)
    return error_text("cudaGraphLaunch", e);
  return "";
}

}  // namespace luka::cuda
