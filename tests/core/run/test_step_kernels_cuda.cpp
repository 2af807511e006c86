// The decode step's per-layer seam on the GPU (core/run/step_kernels_cuda.cpp: the fused kernels
// between cuBLAS GEMMs over concatenated weights) against the CPU ops (the static step's ATen ops)
// on one random layer, fp32 and bf16, at a small shape and Qwen3-0.6B's: the RoPE tables, the
// norm, q|k|v with q/k norm, RoPE and the KV append, the output projection with the residual and
// post-attention norm, SwiGLU and the down projection with the next norm. Two steps, the position
// advanced in device memory in between.
//
// Tolerances: the GEMMs sum in another order on the GPU (cuBLAS) than on the CPU, and that
// difference passes through the norms: fp32 within 1e-4 of each tensor's largest magnitude; bf16,
// where such a difference can move a value by a bf16 step and the next op carries it on, within
// 3e-2. Skips without a CUDA device (scripts/gpu_run.sh fused runs it on a GPU machine).
#include <ATen/ATen.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "core/run/step_kernels.h"

namespace luka {
namespace {

bool have_gpu() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

StepLayer random_layer(const ModelShape& m, std::int64_t context, at::ScalarType dt, std::uint64_t seed) {
  at::manual_seed(seed);
  const std::int64_t H = m.heads, KV = m.kv_heads, D = m.head_dim, I = m.intermediate, E = m.hidden;
  const auto w = [&](std::int64_t out, std::int64_t in) { return (at::randn({out, in}) / std::sqrt(in)).to(dt); };
  const auto norm = [&](std::int64_t n) { return (1.0 + 0.1 * at::randn({n})).to(dt); };
  StepLayer s;
  s.input_norm = norm(E);
  s.post_norm = norm(E);
  s.q_norm = norm(D);
  s.k_norm = norm(D);
  s.q = w(H * D, E), s.k = w(KV * D, E), s.v = w(KV * D, E), s.o = w(E, H * D);
  s.gate = w(I, E), s.up = w(I, E), s.down = w(E, I);
  s.k_cache = at::randn({KV, context, D}).to(dt);
  s.v_cache = at::randn({KV, context, D}).to(dt);
  return s;
}

StepLayer to_device(const StepLayer& s, at::Device device) {
  StepLayer d;
  const auto mv = [&](const at::Tensor& t) { return t.defined() ? t.to(device) : t; };
  d.input_norm = mv(s.input_norm), d.post_norm = mv(s.post_norm), d.q_norm = mv(s.q_norm), d.k_norm = mv(s.k_norm);
  d.q = mv(s.q), d.k = mv(s.k), d.v = mv(s.v), d.o = mv(s.o), d.gate = mv(s.gate), d.up = mv(s.up), d.down = mv(s.down);
  d.k_cache = mv(s.k_cache).clone(), d.v_cache = mv(s.v_cache).clone();
  prepare_step_layer(d);
  return d;
}

// A copy on the CPU in fp32 (a CPU fp32 tensor's to() would be the buffer itself, rewritten later).
at::Tensor snap(const at::Tensor& t) { return t.to(at::kCPU, at::kFloat, /*non_blocking=*/false, /*copy=*/true); }

// The layer's ops as a step calls them, with the attention replaced by q itself (its shape), at
// positions `position` and `position + 1`. Returns the tensors to compare, on the CPU in fp32.
std::vector<at::Tensor> run_layer(StepKernels& k, StepTensors& t, StepLayer& s, const at::Tensor& x0,
                                  std::int64_t position) {
  std::vector<at::Tensor> out;
  t.position.fill_(position);
  t.x.copy_(x0);
  for (int step = 0; step < 2; ++step) {
    k.rope_tables();
    k.norm(s.input_norm);
    out.push_back(snap(t.h));
    const at::Tensor q = k.qkv(s);
    out.push_back(snap(q));
    k.residual_projection_norm(q.reshape({1, -1}), s.o, s.o_b, s.post_norm);
    out.push_back(snap(t.x));
    out.push_back(snap(t.h));
    const at::Tensor a = k.mlp_activation(s);
    out.push_back(snap(a));
    k.residual_projection_norm(a, s.down, s.down_b, s.input_norm);
    out.push_back(snap(t.x));
    out.push_back(snap(t.h));
    t.position.add_(1);
  }
  out.push_back(snap(s.k_cache));
  out.push_back(snap(s.v_cache));
  return out;
}

const char* const kNames[] = {"h (input norm)", "q",          "x (+ o)",      "h (post norm)",
                              "SwiGLU",         "x (+ down)", "h (next norm)"};

void expect_close(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const std::string name = i < 14 ? std::string(kNames[i % 7]) + " at step " + std::to_string(i / 7)
                                    : i == 14 ? "key cache" : "value cache";
    const double scale = std::max(1e-30, want[i].abs().max().item<double>());
    EXPECT_LE((got[i] - want[i]).abs().max().item<double>() / scale, tol) << name << ", " << what;
  }
}

// The layer through the ops on `device` in `dt`, from the same random weights and x.
std::vector<at::Tensor> layer_on(const ModelShape& m, at::ScalarType dt, at::Device device) {
  const std::int64_t context = 40, position = 17;
  const at::Tensor inv_freq = at::pow(1e6, -at::arange(0, m.head_dim, 2, at::kDouble) / m.head_dim).to(at::kFloat);
  const StepLayer layer = random_layer(m, context, dt, 7);
  at::manual_seed(8);
  const at::Tensor x0 = at::randn({1, m.hidden}).to(dt).to(device);
  StepTensors t = reserve_step_tensors(m, 1e-6, inv_freq, at::TensorOptions(dt).device(device));
  StepLayer l = to_device(layer, device);
  const std::unique_ptr<StepKernels> k = device.is_cuda() ? make_cuda_step_kernels(t) : make_cpu_step_kernels(t);
  std::vector<at::Tensor> out = run_layer(*k, t, l, x0, position);
  if (device.is_cuda()) EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  return out;
}

ModelShape small_shape() {
  ModelShape m;
  m.layers = 1, m.heads = 4, m.kv_heads = 2, m.head_dim = 64, m.hidden = 256, m.intermediate = 512, m.vocab = 16;
  return m;
}
ModelShape qwen3_small_shape() {  // Qwen3-0.6B's layer
  ModelShape m;
  m.layers = 1, m.heads = 16, m.kv_heads = 8, m.head_dim = 128, m.hidden = 1024, m.intermediate = 3072, m.vocab = 16;
  return m;
}

// The CPU side of the comparison below, in bf16, against itself in fp32: the ops run in both
// dtypes and bf16 stays within bf16's error of fp32 (needs no GPU).
TEST(StepKernelsCpuOps, Bf16TracksFp32) {
  expect_close(layer_on(small_shape(), at::kBFloat16, at::kCPU), layer_on(small_shape(), at::kFloat, at::kCPU), 5e-2,
               "bf16 against fp32");
}

class StepKernelsCuda : public ::testing::TestWithParam<at::ScalarType> {
 protected:
  void SetUp() override {
    if (!have_gpu()) GTEST_SKIP() << "no CUDA device on this machine";
  }
};

TEST_P(StepKernelsCuda, ALayerOfFusedKernelsEqualsTheCpuOps) {
  const at::ScalarType dt = GetParam();
  const double tol = dt == at::kFloat ? 1e-4 : 3e-2;
  for (const ModelShape& m : {small_shape(), qwen3_small_shape()})
    expect_close(layer_on(m, dt, at::kCUDA), layer_on(m, dt, at::kCPU), tol,
                 std::string(c10::toString(dt)) + ", hidden " + std::to_string(m.hidden));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, StepKernelsCuda, ::testing::Values(at::kFloat, at::kBFloat16),
                         [](const auto& info) { return info.param == at::kFloat ? "f32" : "bf16"; });

}  // namespace
}  // namespace luka
