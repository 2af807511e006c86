// The interface between `luka` and its CUDA plugin (libluka_cuda.so): one exported C function that
// checks the host's ABI string against the plugin's own and hands back the plugin object. Both
// sides are built from the same tree in the same build, so C++ types cross the boundary; the ABI
// string (plugin_abi()) makes a stale or foreign plugin a clear error instead of a crash.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "core/device/device.h"

namespace luka {

class CudaPlugin {
 public:
  virtual ~CudaPlugin() = default;
  // The GPUs the driver shows; empty with the reason in *why_none.
  virtual std::vector<GpuInfo> gpus(std::string* why_none) const = 0;
  // A backend on GPU `index` (made current). Throws luka::Error when there is no such GPU.
  virtual std::shared_ptr<const Backend> open(int index) const = 0;
};

}  // namespace luka

// The plugin's entry point: its CudaPlugin when `host_abi` equals its own plugin_abi(), else null
// with the reason written to `error` (at most error_size bytes, NUL-terminated).
extern "C" luka::CudaPlugin* luka_cuda_plugin(const char* host_abi, char* error, std::size_t error_size);
constexpr const char* kCudaPluginEntry = "luka_cuda_plugin";
