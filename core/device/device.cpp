#include "core/device/device.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/version.h>

#include "core/device/cuda_plugin_api.h"
#include "core/luka/luka_attention.h"
#include "core/model/model.h"
#include "core/util/error.h"
#include "core/util/version.h"

namespace luka {

namespace fs = std::filesystem;

DeviceRequest parse_device(const std::string& text) {
  DeviceRequest r;
  if (text == "auto") return r;
  if (text == "cpu") {
    r.kind = DeviceRequest::Kind::kCpu;
    return r;
  }
  if (text == "cuda") {
    r.kind = DeviceRequest::Kind::kCuda;
    return r;
  }
  if (text.rfind("cuda:", 0) == 0 && text.size() > 5 && text.size() <= 8 &&
      text.find_first_not_of("0123456789", 5) == std::string::npos) {
    r.kind = DeviceRequest::Kind::kCuda;
    r.index = std::stoi(text.substr(5));
    return r;
  }
  fail("device", "unknown device '" + text + "' (expected auto, cpu, cuda or cuda:N)");
}

std::string to_string(const DeviceRequest& r) {
  switch (r.kind) {
    case DeviceRequest::Kind::kAuto: return "auto";
    case DeviceRequest::Kind::kCpu: return "cpu";
    case DeviceRequest::Kind::kCuda: return "cuda:" + std::to_string(r.index);
  }
  return "?";
}

std::string describe(const GpuInfo& g) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "cuda:%d, %s (sm_%d%d), %.1f of %.1f GB free", g.index, g.name.c_str(), g.compute_major,
                g.compute_minor, static_cast<double>(g.free_bytes) / 1e9, static_cast<double>(g.total_bytes) / 1e9);
  return buf;
}

std::string plugin_abi() {
  return std::string("luka-cuda-plugin/1 ") + LUKA_VERSION + " " + git_revision() + " torch " + TORCH_VERSION;
}

namespace {

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  std::string description() const override {
    const int n = at::get_num_threads();
    return "cpu (" + std::to_string(n) + (n == 1 ? " thread)" : " threads)");
  }
  bool is_cuda() const override { return false; }
  void place(LoadOptions& options) const override { options.cuda = false; }
  std::string supports(const LukaConfig&) const override { return {}; }
  std::vector<std::shared_ptr<LukaLayer>> install_luka(Decoder& decoder, const LukaConfig& config) const override {
    return luka::install_luka(decoder, config);
  }
  std::unique_ptr<TokenSampler> sampler(const SamplingParams& params) const override { return make_cpu_sampler(params); }
};

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

// The plugin, loaded once per process; a failure is remembered with its reason.
struct LoadedPlugin {
  CudaPlugin* plugin = nullptr;
  std::string error;
};

const LoadedPlugin& loaded_plugin() {
  static const LoadedPlugin loaded = [] {
    LoadedPlugin l;
    const PluginSearch search = find_cuda_plugin();
    if (search.found.empty()) {
      std::string where;
      for (const std::string& p : search.looked) where += (where.empty() ? "" : ", ") + p;
      l.error = "this luka has no CUDA plugin (libluka_cuda.so; looked in " + where +
                "): build it with the CUDA toolkit (scripts/setup.sh does when nvcc is installed)";
      return l;
    }
    // RTLD_LOCAL: the plugin's symbols stay its own; libtorch_cuda, which it loads, registers the
    // CUDA backend with the LibTorch already in this process.
    void* handle = dlopen(search.found.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
      const char* why = dlerror();
      l.error = "cannot load the CUDA plugin " + search.found + ": " + (why ? why : "unknown error");
      return l;
    }
    using Entry = CudaPlugin* (*)(const char*, char*, std::size_t);
    const auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaPluginEntry));
    if (!entry) {
      l.error = "the CUDA plugin " + search.found + " has no entry point " + kCudaPluginEntry + ": not a luka plugin";
      return l;
    }
    char error[512] = {0};
    l.plugin = entry(plugin_abi().c_str(), error, sizeof error);
    if (!l.plugin) l.error = "the CUDA plugin " + search.found + ": " + error;
    return l;
  }();
  return loaded;
}

}  // namespace

std::shared_ptr<const Backend> cpu_backend() {
  static const auto cpu = std::make_shared<const CpuBackend>();
  return cpu;
}

PluginSearch find_cuda_plugin() {
  PluginSearch s;
  const auto consider = [&](const fs::path& p) {
    if (p.empty()) return;
    s.looked.push_back(p.string());
    std::error_code ec;
    if (s.found.empty() && fs::is_regular_file(p, ec)) s.found = p.string();
  };
  if (const char* env = std::getenv("LUKA_CUDA_PLUGIN"); env && *env) {
    consider(env);
    return s;  // an explicit choice: nothing else is tried
  }
  const fs::path dir = executable_dir();
  if (!dir.empty()) {
    consider(dir / "libluka_cuda.so");
    consider(dir / ".." / "lib" / "libluka_cuda.so");
  }
#ifdef LUKA_CUDA_PLUGIN_BUILD
  consider(LUKA_CUDA_PLUGIN_BUILD);  // the build tree's, for the tests' executables
#endif
  return s;
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  const LoadedPlugin& l = loaded_plugin();
  if (!l.plugin) {
    if (why_none) *why_none = l.error;
    return {};
  }
  return l.plugin->gpus(why_none);
}

// Whether an NVIDIA driver could be there at all: its control device (Linux, containers) or the
// WSL GPU device. auto checks this before loading the plugin, which maps LibTorch's CUDA
// libraries and initializes the CUDA runtime: about 260 MB of resident memory for nothing on a
// machine without one (measured with the default model: 515 MB against 253 MB for a short run).
namespace {
std::string no_nvidia_driver() {
  std::error_code ec;
  for (const char* dev : {"/dev/nvidiactl", "/dev/nvidia0", "/dev/dxg"})
    if (fs::exists(dev, ec)) return "";
  return "no NVIDIA driver (no /dev/nvidiactl)";
}
}  // namespace

bool auto_considers_gpu() {
  const char* explicit_plugin = std::getenv("LUKA_CUDA_PLUGIN");
  return (explicit_plugin && *explicit_plugin) || no_nvidia_driver().empty();
}

std::shared_ptr<const Backend> open_backend(const DeviceRequest& request, std::string* note) {
  if (request.kind == DeviceRequest::Kind::kCpu) {
    if (note) *note = "device: cpu";
    return cpu_backend();
  }
  // An explicit plugin (LUKA_CUDA_PLUGIN) is always tried: it is how a test points at one.
  if (request.kind == DeviceRequest::Kind::kAuto && !auto_considers_gpu()) {
    if (note) *note = "device: cpu (auto: " + no_nvidia_driver() + ")";
    return cpu_backend();
  }
  const LoadedPlugin& l = loaded_plugin();
  std::string why;
  if (l.plugin) {
    if (l.plugin->gpus(&why).empty()) {
      if (request.kind == DeviceRequest::Kind::kCuda) fail("device " + to_string(request), why);
    } else {
      std::shared_ptr<const Backend> gpu = l.plugin->open(request.index);
      if (note) *note = "device: " + gpu->description();
      return gpu;
    }
  } else {
    why = l.error;
    if (request.kind == DeviceRequest::Kind::kCuda) fail("device " + to_string(request), why);
  }
  if (note) *note = "device: cpu (auto: " + why.substr(0, why.find(" (")) + ")";
  return cpu_backend();
}

}  // namespace luka
