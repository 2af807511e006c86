// Where a model runs: the CPU, or a GPU through the CUDA plugin (libluka_cuda.so), a shared
// library loaded at run time only when a GPU is asked for (--device cuda, cuda:N) or found by
// --device auto. A CPU-only run never loads it, so the same `luka` binary runs on a machine
// without a GPU, a driver or CUDA libraries; each way the GPU can be missing is a one-line error.
//
// A Backend tells the rest of the program what differs by device: where the weights go, which
// LuKA layers run the attention, and which token sampler reads the logits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/device/decode_engine.h"
#include "core/generate/sampler.h"

namespace luka {

struct LoadOptions;
struct LukaConfig;
class Decoder;
class LukaLayer;

struct DeviceRequest {
  enum class Kind { kAuto, kCpu, kCuda };
  Kind kind = Kind::kAuto;
  int index = 0;  // cuda:N
};
// "auto", "cpu", "cuda" (GPU 0) or "cuda:N"; anything else is a luka::Error naming the value.
DeviceRequest parse_device(const std::string& text);
std::string to_string(const DeviceRequest& request);

struct GpuInfo {
  int index = 0;
  std::string name;
  std::uint64_t free_bytes = 0, total_bytes = 0;
  int compute_major = 0, compute_minor = 0;
};
// "cuda:0, NVIDIA H100 80GB HBM3 (sm_90), 79.1 of 79.6 GB free"
std::string describe(const GpuInfo& gpu);

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;         // "cpu", "cuda:0"
  virtual std::string description() const = 0;  // what it is, for messages and the Studio
  virtual bool is_cuda() const = 0;
  // Where Model::load puts the weights.
  virtual void place(LoadOptions& options) const = 0;
  // "" when every layer's config runs here, else why not (the first layer that cannot).
  virtual std::string supports(const LukaConfig& config) const = 0;
  // One LuKA layer per decoder layer, installed in the decoder.
  virtual std::vector<std::shared_ptr<LukaLayer>> install_luka(Decoder& decoder, const LukaConfig& config) const = 0;
  virtual std::unique_ptr<TokenSampler> sampler(const SamplingParams& params) const = 0;
  // The GPU's memory (0 on the CPU).
  virtual GpuInfo gpu() const { return {}; }
  // The decode step recorded once as a CUDA graph and replayed (core/device/decode_engine.h): the
  // CUDA plugin's factory, or an empty one with the reason in *why (the CPU records no graph).
  virtual DecodeEngineFactory graph_engine(std::string* why) const {
    if (why) *why = "only a CUDA device records a decode step as a graph";
    return {};
  }
};

std::shared_ptr<const Backend> cpu_backend();

// The backend a request names. cpu: the CPU. cuda / cuda:N: the plugin's GPU N, or luka::Error
// (the plugin is missing, of another version or cannot load, no GPU is visible, no GPU N).
// auto: the GPU when the plugin loads and sees one, else the CPU. `note` (when not null) gets one
// line saying which device runs and, for auto on the CPU, why.
std::shared_ptr<const Backend> open_backend(const DeviceRequest& request, std::string* note = nullptr);

// The GPUs the CUDA plugin sees; empty with the reason in *why_none (no plugin, no driver, none
// visible). Loads the plugin.
std::vector<GpuInfo> list_gpus(std::string* why_none);
// Whether `auto` considers a GPU at all: a plugin named by LUKA_CUDA_PLUGIN, or an NVIDIA driver
// that could be there (its control device, or WSL's GPU device). Where not, it takes the CPU
// without loading the CUDA plugin.
bool auto_considers_gpu();

// The plugin file `luka` would load, and every place it looked (for messages and `luka info`).
struct PluginSearch {
  std::string found;                // empty: none
  std::vector<std::string> looked;  // in order
};
PluginSearch find_cuda_plugin();

// What the host and the plugin must agree on to work together (version, revision, LibTorch).
std::string plugin_abi();

}  // namespace luka
