// Device choice and the CUDA plugin loader (core/device): the --device grammar, the CPU backend,
// `auto` falling back to the CPU with the reason, `cuda` refused with one line when no GPU is
// visible, and the plugin's entry point refusing a host of another version. On a machine with a
// GPU the same tests check the other branch (a CUDA backend opens).
#include <gtest/gtest.h>

#include <dlfcn.h>

#include <cmath>

#include <ATen/ATen.h>

#include "core/device/cuda_plugin_api.h"
#include "core/device/device.h"
#include "core/generate/sampler.h"
#include "core/luka/config.h"
#include "core/model/model.h"
#include "core/util/error.h"

namespace luka {
namespace {

TEST(Device, ParsesTheDeviceGrammar) {
  EXPECT_EQ(parse_device("auto").kind, DeviceRequest::Kind::kAuto);
  EXPECT_EQ(parse_device("cpu").kind, DeviceRequest::Kind::kCpu);
  EXPECT_EQ(parse_device("cuda").kind, DeviceRequest::Kind::kCuda);
  EXPECT_EQ(parse_device("cuda").index, 0);
  EXPECT_EQ(parse_device("cuda:3").index, 3);
  EXPECT_EQ(to_string(parse_device("cuda:12")), "cuda:12");
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:1x", "CUDA", "cuda:123456789", " cpu"}) {
    try {
      parse_device(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown device"), std::string::npos) << e.what();
    }
  }
}

TEST(Device, CpuBackendPlacesOnTheCpuAndSamplesThere) {
  const auto cpu = open_backend(parse_device("cpu"));
  EXPECT_EQ(cpu->name(), "cpu");
  EXPECT_FALSE(cpu->is_cuda());
  LoadOptions o;
  o.cuda = true;
  cpu->place(o);
  EXPECT_FALSE(o.cuda);
  EXPECT_EQ(cpu->supports(LukaConfig::preset("authors_eval", 4)), "");
  const at::Tensor logits = at::tensor({0.5f, 2.0f, 2.0f, -1.0f});
  double p = 0;
  EXPECT_EQ(cpu->sampler(SamplingParams{})->sample(logits, &p), 1);  // ties to the lower id
  EXPECT_NEAR(p, std::exp(2.0) / (std::exp(0.5) + 2 * std::exp(2.0) + std::exp(-1.0)), 1e-12);
}

TEST(Device, AutoFallsBackToTheCpuAndCudaIsRefusedWithoutAGpu) {
  std::string why;
  const std::vector<GpuInfo> gpus = list_gpus(&why);
  std::string note;
  const auto dev = open_backend(parse_device("auto"), &note);
  if (!gpus.empty()) {  // a GPU machine: auto takes GPU 0
    EXPECT_TRUE(dev->is_cuda());
    EXPECT_EQ(note, "device: " + dev->description());
    return;
  }
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(dev->is_cuda());
  EXPECT_EQ(note.rfind("device: cpu (auto: ", 0), 0u) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos);
  for (const char* request : {"cuda", "cuda:1"}) {
    try {
      open_backend(parse_device(request));
      ADD_FAILURE() << request << " opened without a GPU";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_NE(what.find("device cuda:"), std::string::npos) << what;
      EXPECT_NE(what.find(why.substr(0, 20)), std::string::npos) << what;
    }
  }
}

// The plugin's one entry point refuses a host built from anything else, and otherwise lists the
// GPUs (none here, with the reason) and opens them.
TEST(Device, PluginRefusesAnotherVersion) {
  const PluginSearch search = find_cuda_plugin();
  if (search.found.empty()) GTEST_SKIP() << "this build has no CUDA plugin (LUKA_CUDA off or LibTorch without CUDA)";
  void* handle = dlopen(search.found.c_str(), RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(handle, nullptr) << dlerror();
  using Entry = CudaPlugin* (*)(const char*, char*, std::size_t);
  const auto entry = reinterpret_cast<Entry>(dlsym(handle, kCudaPluginEntry));
  ASSERT_NE(entry, nullptr);
  char error[512] = {0};
  EXPECT_EQ(entry("luka-cuda-plugin/0 0.0.0 elsewhere", error, sizeof error), nullptr);
  EXPECT_NE(std::string(error).find("of another version"), std::string::npos) << error;
  EXPECT_NE(std::string(error).find(plugin_abi()), std::string::npos) << error;
  CudaPlugin* plugin = entry(plugin_abi().c_str(), error, sizeof error);
  ASSERT_NE(plugin, nullptr) << error;
  std::string why;
  const auto gpus = plugin->gpus(&why);
  if (gpus.empty()) {
    EXPECT_NE(why.find("no GPU visible"), std::string::npos) << why;
    EXPECT_THROW(plugin->open(0), Error);
  } else {
    EXPECT_FALSE(gpus[0].name.empty());
    EXPECT_GT(gpus[0].total_bytes, 0u);
    EXPECT_THROW(plugin->open(static_cast<int>(gpus.size())), Error);
  }
}

}  // namespace
}  // namespace luka
